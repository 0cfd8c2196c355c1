//go:build !race && gc

package release

import "unsafe"

// Or64 sets mask's bits in *p.
func Or64(p *uint64, mask uint64) { *p |= mask }

// Store64 stores v in *p.
func Store64(p *uint64, v uint64) { *p = v }

// StorePointer stores v in *p (with the collector's write barrier, as
// any pointer store).
func StorePointer(p *unsafe.Pointer, v unsafe.Pointer) { *p = v }
