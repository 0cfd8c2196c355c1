// Package engine holds one Bloom filter and one Cuckoo sub-filter exactly as
// RedisBloom lays them out: MurmurHash64A, the (a + i·b) mod m bit positions
// in little-endian words, one-byte fingerprints in contiguous buckets, the
// deterministic kick-out with rollback.
//
// Flows: Bloom.Add/Test take a precomputed Hash; CuckooTable offers the slot
// operations a Cuckoo filter is built from.
//
// State and locks: none owned. Readers load Bloom words atomically and the
// one writer sets bits with a plain OR on amd64 (internal/release), so one
// writer and many readers may share a filter; a Cuckoo table relies on its
// owner's lock. Each array records which 64 KiB chunks changed (Dirty),
// marked by the single writer and taken by whoever excludes it.
//
// Trade-offs: positions use two Barrett remainders per item instead of a
// division per hash; sizing uses a correctly rounded log so headers match
// glibc's to the bit. A filter larger than L2 misses on nearly every bit:
// Bloom.Prefetch lets a caller with many items start those loads a few items
// early; Bloom.FirstBits lets a chain read the first bits of its older links
// before it looks at any, where testing them in turn waited on each link's
// miss and mispredicted each one's answer; and arrays of 4 MiB or more ask
// the kernel for transparent huge pages (fewer TLB misses; the array's
// memory is then taken 2 MiB at a time as bits are first set). No I/O, no
// clock, no randomness.
package engine
