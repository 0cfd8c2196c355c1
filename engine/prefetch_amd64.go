package engine

import "unsafe"

// PrefetchLine starts loading the cache line holding p and returns at once
// (PREFETCHT0): unlike a load, it does not hold up the instructions after
// it. The filters load their bits ahead with it, and the key table its
// groups.
//
//go:noescape
func PrefetchLine(p unsafe.Pointer)
