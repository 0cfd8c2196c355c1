package engine

import "unsafe"

// CuckooHash is RedisBloom's item hash for Cuckoo filters.
func CuckooHash(item []byte) uint64 { return MurmurHash64A(item, 0) }

// Lookup holds what RedisBloom derives from an item hash: the 8-bit
// fingerprint (1..255; 0 marks an empty slot) and the two candidate hashes.
type Lookup struct {
	H1, H2 uint64
	FP     uint8
}

// NewLookup derives fingerprint and alternate hash from h.
func NewLookup(h uint64) Lookup {
	fp := uint8(h%255 + 1)
	return Lookup{H1: h, H2: AltHash(fp, h), FP: fp}
}

// AltHash is the partner index of a fingerprint: index XOR fp×0x5bd1e995.
func AltHash(fp uint8, index uint64) uint64 { return index ^ uint64(fp)*0x5bd1e995 }

// CuckooTable is one Cuckoo sub-filter: NumBuckets buckets of BucketSize
// one-byte slots, contiguous. It holds no lock; its owner serialises writers
// against readers.
type CuckooTable struct {
	NumBuckets uint32
	BucketSize uint8
	Data       []byte // read freely; write only through Set and Write
	Dirty
}

// NewCuckooTable allocates an empty sub-filter.
func NewCuckooTable(numBuckets uint32, bucketSize uint8) *CuckooTable {
	n := int(numBuckets) * int(bucketSize)
	t := &CuckooTable{NumBuckets: numBuckets, BucketSize: bucketSize,
		Data: make([]byte, n), Dirty: newDirty(uint64(n))}
	adviseHuge(t.Data)
	return t
}

// Regular reports whether a fingerprint's place in this table tells its
// bucket and its partner bucket: the bucket count is a power of two, so
// AltHash(fp, h mod n) mod n is the other candidate of every item there,
// and every bucket starts where index puts it, without the wrap of
// RedisBloom's 32-bit index (n × bucket size ≤ 2^32).
//
// Every table RedisBloom creates below 4 GiB is regular. A crafted dump
// header can make others (a Cuckoo expansion of 3 gives sub-filters of
// 3·2^k buckets), and so can a reserve of 4 GiB or more; RedisBloom's
// kick-out there moves fingerprints into buckets their items are never
// looked up in, and acknowledged adds go missing. Such a table here takes
// fingerprints only in an item's own two buckets: no kick-out
// (KickInsert), and a compaction moves none out of it and into it only
// by the bucket it came from (CanRelocateFrom, PartnerKnown).
func (t *CuckooTable) Regular() bool {
	n := uint64(t.NumBuckets)
	return n&(n-1) == 0 && n*uint64(t.BucketSize) <= 1<<32
}

// CanRelocateFrom reports whether slot b·BucketSize+s of this table is a
// slot of bucket b for the item whose fingerprint sits there, so that a
// compaction may move it by the bucket b: true unless the 32-bit index
// wraps (n × bucket size > 2^32), where buckets overlap and alias.
func (t *CuckooTable) CanRelocateFrom() bool {
	return uint64(t.NumBuckets)*uint64(t.BucketSize) <= 1<<32
}

// PartnerKnown reports whether AltHash(fp, b) mod n, for any b congruent
// to one of an item's hashes modulo n, is the item's other bucket here:
// only for a power-of-two bucket count, where XOR and the remainder
// commute.
func (t *CuckooTable) PartnerKnown() bool {
	n := uint64(t.NumBuckets)
	return n&(n-1) == 0
}

// Set stores fingerprint fp (0 clears) in slot i.
func (t *CuckooTable) Set(i int, fp uint8) {
	t.mark(uint64(i))
	t.Data[i] = fp
}

// Write copies src into the slots from off (LOADCHUNK, RESTORE, loading).
func (t *CuckooTable) Write(off int, src []byte) {
	t.markRange(uint64(off), uint64(len(src)))
	copy(t.Data[off:], src)
}

// index is SubCF_GetIndex, including its truncation to 32 bits; the
// bucket's slots follow it in 64-bit arithmetic, as RedisBloom's pointer
// does (a table of 2^31 buckets of 2 has its last bucket at 2^32 − 2).
func (t *CuckooTable) index(h uint64) uint64 {
	return uint64(uint32(h%uint64(t.NumBuckets)) * uint32(t.BucketSize))
}

func (t *CuckooTable) bucket(h uint64) []byte {
	i := t.index(h)
	return t.Data[i : i+uint64(t.BucketSize)]
}

// Contains reports whether the fingerprint sits in either candidate bucket.
func (t *CuckooTable) Contains(l Lookup) bool {
	for _, s := range t.bucket(l.H1) {
		if s == l.FP {
			return true
		}
	}
	for _, s := range t.bucket(l.H2) {
		if s == l.FP {
			return true
		}
	}
	return false
}

// Prefetch starts loading both candidate buckets and returns at once: a
// session calls it a command ahead of a lookup in a pipeline, as
// Bloom.Prefetch. A table the cache holds anyway is left alone.
func (t *CuckooTable) Prefetch(l Lookup) {
	if len(t.Data) <= cacheResident {
		return
	}
	PrefetchLine(unsafe.Pointer(&t.Data[t.index(l.H1)]))
	PrefetchLine(unsafe.Pointer(&t.Data[t.index(l.H2)]))
}

// Count counts the fingerprint in both candidate buckets; a bucket that is
// both candidates is counted twice, as RedisBloom does.
func (t *CuckooTable) Count(l Lookup) uint64 {
	n := uint64(0)
	for _, h := range [2]uint64{l.H1, l.H2} {
		for _, s := range t.bucket(h) {
			if s == l.FP {
				n++
			}
		}
	}
	return n
}

// Delete clears the first matching slot, bucket H1 first.
func (t *CuckooTable) Delete(l Lookup) bool {
	for _, h := range [2]uint64{l.H1, l.H2} {
		base := t.index(h)
		for i := uint64(0); i < uint64(t.BucketSize); i++ {
			if t.Data[base+i] == l.FP {
				t.Set(int(base+i), 0)
				return true
			}
		}
	}
	return false
}

// FreeSlot returns the index in Data of the first empty slot of bucket H1,
// else of bucket H2, else -1.
func (t *CuckooTable) FreeSlot(l Lookup) int {
	for _, h := range [2]uint64{l.H1, l.H2} {
		base := t.index(h)
		for i := uint64(0); i < uint64(t.BucketSize); i++ {
			if t.Data[base+i] == 0 {
				return int(base + i)
			}
		}
	}
	return -1
}

// KickInsert is RedisBloom's Filter_KOInsert: starting at bucket H1 mod n
// with victim slot 0, swap the fingerprint in, move the evicted one to its
// alternate bucket, and stop at the first empty slot; after maxIterations
// every swap is undone in reverse, leaving the table as it was. A table
// that is not Regular takes no kick-out: it answers false at once.
func (t *CuckooTable) KickInsert(l Lookup, maxIterations uint16) bool {
	if !t.Regular() {
		return false
	}
	n := uint64(t.NumBuckets)
	bs := uint64(t.BucketSize)
	fp := l.FP
	victim := uint64(0)
	ii := l.H1 % n
	swap := func(i uint64) {
		old := t.Data[i]
		t.Set(int(i), fp)
		fp = old
	}
	for c := uint16(0); c < maxIterations; c++ {
		swap(ii*bs + victim)
		ii = AltHash(fp, ii) % n
		for j := ii * bs; j < ii*bs+bs; j++ {
			if t.Data[j] == 0 {
				t.Set(int(j), fp)
				return true
			}
		}
		victim = (victim + 1) % bs
	}
	for c := uint16(0); c < maxIterations; c++ {
		victim = (victim + bs - 1) % bs
		ii = AltHash(fp, ii) % n
		swap(ii*bs + victim)
	}
	return false
}
