package engine

// prefetch starts loading the cache line holding *p and returns at once
// (PREFETCHT0): unlike a load, it does not hold up the instructions after it.
//
//go:noescape
func prefetch(p *uint64)
