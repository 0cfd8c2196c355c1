package engine

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

// Set stores fingerprint fp (0 clears) in slot i.
func (t *CuckooTable) Set(i int, fp uint8) {
	t.Data[i] = fp
	t.mark(uint64(i))
}

// Write copies src into the slots from off (LOADCHUNK, RESTORE, loading).
func (t *CuckooTable) Write(off int, src []byte) {
	copy(t.Data[off:], src)
	t.markRange(uint64(off), uint64(len(src)))
}

// index is SubCF_GetIndex, including its truncation to 32 bits.
func (t *CuckooTable) index(h uint64) uint32 {
	return uint32(h%uint64(t.NumBuckets)) * uint32(t.BucketSize)
}

func (t *CuckooTable) bucket(h uint64) []byte {
	i := t.index(h)
	return t.Data[i : i+uint32(t.BucketSize)]
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
		for i := uint32(0); i < uint32(t.BucketSize); i++ {
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
		for i := uint32(0); i < uint32(t.BucketSize); i++ {
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
// every swap is undone in reverse, leaving the table as it was.
func (t *CuckooTable) KickInsert(l Lookup, maxIterations uint16) bool {
	n := uint64(t.NumBuckets)
	bs := uint32(t.BucketSize)
	fp := l.FP
	victim := uint32(0)
	ii := uint32(l.H1 % n)
	swap := func(i uint32) {
		old := t.Data[i]
		t.Set(int(i), fp)
		fp = old
	}
	for c := uint16(0); c < maxIterations; c++ {
		swap(ii*bs + victim)
		ii = uint32(AltHash(fp, uint64(ii)) % n)
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
		ii = uint32(AltHash(fp, uint64(ii)) % n)
		swap(ii*bs + victim)
	}
	return false
}
