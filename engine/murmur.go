package engine

import "encoding/binary"

// MurmurHash64A is Austin Appleby's 64-bit MurmurHash2 variant as RedisBloom
// compiles it (MurmurHash64A_Bloom): 8-byte little-endian words, then the tail.
// Bloom and Cuckoo positions depend on every bit of it, so it is kept exact.
func MurmurHash64A(key []byte, seed uint64) uint64 {
	const m = 0xc6a4a7935bd1e995
	const r = 47
	n := len(key)
	h := seed ^ (uint64(n) * m)
	for len(key) >= 8 {
		k := binary.LittleEndian.Uint64(key)
		k *= m
		k ^= k >> r
		k *= m
		h ^= k
		h *= m
		key = key[8:]
	}
	switch len(key) {
	case 7:
		h ^= uint64(key[6]) << 48
		fallthrough
	case 6:
		h ^= uint64(key[5]) << 40
		fallthrough
	case 5:
		h ^= uint64(key[4]) << 32
		fallthrough
	case 4:
		h ^= uint64(key[3]) << 24
		fallthrough
	case 3:
		h ^= uint64(key[2]) << 16
		fallthrough
	case 2:
		h ^= uint64(key[1]) << 8
		fallthrough
	case 1:
		h ^= uint64(key[0])
		h *= m
	}
	h ^= h >> r
	h *= m
	h ^= h >> r
	return h
}

// MurmurHash2 is the 32-bit MurmurHash2. Only legacy Bloom filters (dumps
// whose options lack FORCE64) hash with it; new filters never do.
func MurmurHash2(key []byte, seed uint32) uint32 {
	const m = 0x5bd1e995
	const r = 24
	h := seed ^ uint32(len(key))
	for len(key) >= 4 {
		k := binary.LittleEndian.Uint32(key)
		k *= m
		k ^= k >> r
		k *= m
		h *= m
		h ^= k
		key = key[4:]
	}
	switch len(key) {
	case 3:
		h ^= uint32(key[2]) << 16
		fallthrough
	case 2:
		h ^= uint32(key[1]) << 8
		fallthrough
	case 1:
		h ^= uint32(key[0])
		h *= m
	}
	h ^= h >> 13
	h *= m
	h ^= h >> 15
	return h
}

// Hash is the pair (a, b) from which a Bloom filter derives its k positions
// as (a + i*b) mod bits. Computing it once per item lets a chain test every
// link without hashing again.
type Hash struct{ A, B uint64 }

// BloomHash64 is RedisBloom's hash for filters created by commands.
func BloomHash64(item []byte) Hash {
	a := MurmurHash64A(item, 0xc6a4a7935bd1e995)
	return Hash{a, MurmurHash64A(item, a)}
}

// BloomHash32 is the legacy hash selected by a dump header without FORCE64.
func BloomHash32(item []byte) Hash {
	a := MurmurHash2(item, 0x9747b28c)
	return Hash{uint64(a), uint64(MurmurHash2(item, a))}
}
