package engine

// prefetch starts loading the cache line holding *p and returns at once
// (PREFETCHT0): unlike a load, it does not hold up the instructions after it.
//
//go:noescape
func prefetch(p *uint64)

// prefetchByte is prefetch for the line holding a byte (a Cuckoo bucket).
//
//go:noescape
func prefetchByte(p *byte)
