//go:build !amd64 || race || !gc

package release

import (
	"sync/atomic"
	"unsafe"
)

// Or64 sets mask's bits in *p.
func Or64(p *uint64, mask uint64) { atomic.OrUint64(p, mask) }

// Store64 stores v in *p.
func Store64(p *uint64, v uint64) { atomic.StoreUint64(p, v) }

// StorePointer stores v in *p.
func StorePointer(p *unsafe.Pointer, v unsafe.Pointer) { atomic.StorePointer(p, v) }
