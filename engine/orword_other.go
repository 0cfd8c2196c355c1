//go:build !amd64 || race

package engine

import "sync/atomic"

// orWord sets mask's bits in *w for the array's one writer; see
// orword_amd64.go for why amd64 does without the atomic.
func orWord(w *uint64, mask uint64) { atomic.OrUint64(w, mask) }
