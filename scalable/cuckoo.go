package scalable

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/bits"
	"sync"

	"github.com/bfserver/bfserver/engine"
)

// Sizes RedisBloom reports for its structs (sizeof CuckooFilter, SubCF).
const (
	cuckooStructSize = 40
	subStructSize    = 16
	// CuckooHeaderSize is the length of a Cuckoo SCANDUMP header.
	CuckooHeaderSize = 38
)

// InsertResult is the outcome of a Cuckoo insert.
type InsertResult int

const (
	Inserted InsertResult = iota // stored
	Exists                       // NX insert found the fingerprint
	NoSpace                      // full and not allowed to grow
	NoMemory                     // growing would pass the byte cap
)

// Cuckoo is a Cuckoo filter with its sub-filters (RedisBloom's CuckooFilter).
// Writers take the lock exclusively; a kick-out moves fingerprints, so readers
// take it shared and never observe an item in flight.
type Cuckoo struct {
	mu            sync.RWMutex
	numBuckets    uint64 // of the first sub-filter
	numItems      uint64
	numDeletes    uint64
	bucketSize    uint16
	maxIterations uint16
	expansion     uint16
	filters       []*engine.CuckooTable
	// nbytes is the sum of the sub-filters' sizes, kept as they come and
	// go: a filter of many thousand sub-filters must not sum them on
	// every growth.
	nbytes uint64
}

// CuckooParams are the settings of a new Cuckoo filter (CF.RESERVE).
type CuckooParams struct {
	Capacity      uint64
	BucketSize    uint16
	MaxIterations uint16
	Expansion     uint16
}

// nextPow2 is getNextN2: 0 stays 0.
func nextPow2(n uint64) uint64 {
	if n == 0 {
		return 0
	}
	return 1 << bits.Len64(n-1)
}

// CuckooBytes is the memory the first sub-filter of a new filter takes.
func CuckooBytes(p CuckooParams) uint64 {
	nb := nextPow2(p.Capacity / uint64(p.BucketSize))
	if nb == 0 {
		nb = 1
	}
	return nb * uint64(p.BucketSize)
}

// NewCuckoo creates a filter as CuckooFilter_Init does. The caller has
// checked capacity ≥ 2×bucket size and the byte cap.
func NewCuckoo(p CuckooParams, maxBytes uint64) (*Cuckoo, error) {
	c := &Cuckoo{
		expansion:     uint16(nextPow2(uint64(p.Expansion))),
		bucketSize:    p.BucketSize,
		maxIterations: p.MaxIterations,
		numBuckets:    nextPow2(p.Capacity / uint64(p.BucketSize)),
	}
	if c.numBuckets == 0 {
		c.numBuckets = 1
	}
	if !c.grow(maxBytes) {
		return nil, ErrTooLarge
	}
	return c, nil
}

// subBuckets is the bucket count of sub-filter i: n0 × expansion^i, or 0 if
// it does not fit the 32 bits RedisBloom stores it in.
func (c *Cuckoo) subBuckets(i int) uint64 {
	n, _ := c.bucketsBelow(i, 1<<32)
	return n
}

// bucketsBelow is numBuckets × expansion^i, or 0 and false unless it is
// below limit.
func (c *Cuckoo) bucketsBelow(i int, limit uint64) (uint64, bool) {
	g := math.Pow(float64(c.expansion), float64(i))
	if g >= float64(limit) {
		return 0, false
	}
	hi, lo := bits.Mul64(c.numBuckets, uint64(g))
	if hi != 0 || lo >= limit {
		return 0, false
	}
	return lo, true
}

func (c *Cuckoo) bytes() uint64 { return c.nbytes }

func (c *Cuckoo) grow(maxBytes uint64) bool {
	nb := c.subBuckets(len(c.filters))
	if nb == 0 || len(c.filters) >= math.MaxUint16 {
		return false
	}
	need := nb * uint64(c.bucketSize)
	if need > maxBytes || c.bytes() > maxBytes-need {
		return false
	}
	c.filters = append(c.filters, engine.NewCuckooTable(uint32(nb), uint8(c.bucketSize)))
	c.nbytes += need
	return true
}

func (c *Cuckoo) containsLocked(l engine.Lookup) bool {
	for _, t := range c.filters {
		if t.Contains(l) {
			return true
		}
	}
	return false
}

// Exists reports whether the item's fingerprint is in any sub-filter.
func (c *Cuckoo) Exists(item []byte) bool {
	l := engine.NewLookup(engine.CuckooHash(item))
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.containsLocked(l)
}

// Prefetch starts loading the buckets Exists would look at, in every
// sub-filter (engine.CuckooTable.Prefetch). It changes nothing.
func (c *Cuckoo) Prefetch(item []byte) {
	l := engine.NewLookup(engine.CuckooHash(item))
	c.mu.RLock()
	defer c.mu.RUnlock()
	for _, t := range c.filters {
		t.Prefetch(l)
	}
}

// Count is CF.COUNT.
func (c *Cuckoo) Count(item []byte) uint64 {
	l := engine.NewLookup(engine.CuckooHash(item))
	c.mu.RLock()
	defer c.mu.RUnlock()
	var n uint64
	for _, t := range c.filters {
		n += t.Count(l)
	}
	return n
}

// Insert adds the item; with nx it first refuses an item already present.
// maxBytes caps the filter's total bytes when it grows.
func (c *Cuckoo) Insert(item []byte, nx bool, maxBytes uint64) InsertResult {
	l := engine.NewLookup(engine.CuckooHash(item))
	c.mu.Lock()
	defer c.mu.Unlock()
	if nx && c.containsLocked(l) {
		return Exists
	}
	for {
		for i := len(c.filters) - 1; i >= 0; i-- {
			if s := c.filters[i].FreeSlot(l); s >= 0 {
				c.filters[i].Set(s, l.FP)
				c.numItems++
				return Inserted
			}
		}
		if c.filters[len(c.filters)-1].KickInsert(l, c.maxIterations) {
			c.numItems++
			return Inserted
		}
		if c.expansion == 0 {
			return NoSpace
		}
		if !c.grow(maxBytes) {
			return NoMemory
		}
	}
}

// Delete removes one copy of the item's fingerprint, newest sub-filter
// first, and compacts when deletes pass a tenth of the items.
func (c *Cuckoo) Delete(item []byte) bool {
	l := engine.NewLookup(engine.CuckooHash(item))
	c.mu.Lock()
	defer c.mu.Unlock()
	for i := len(c.filters) - 1; i >= 0; i-- {
		if c.filters[i].Delete(l) {
			c.numItems--
			c.numDeletes++
			if len(c.filters) > 1 && float64(c.numDeletes) > float64(c.numItems)*0.10 {
				c.compactLocked(false)
			}
			return true
		}
	}
	return false
}

// Compact is CF.COMPACT: move fingerprints into older sub-filters and drop
// emptied newest ones, trying every sub-filter.
func (c *Cuckoo) Compact() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.compactLocked(true)
}

func (c *Cuckoo) compactLocked(cont bool) {
	for i := len(c.filters); i > 1; i-- {
		if !c.compactSingle(i-1) && !cont {
			break
		}
	}
	c.numDeletes = 0
}

// compactSingle is CuckooFilter_CompactSingle: each fingerprint of
// sub-filter fi moves to the first older sub-filter with room in bucket
// b mod m (b the bucket it sits in) or its partner there. Only what keeps
// it in one of its item's buckets is done (engine.CuckooTable.Regular):
// nothing moves out of a table whose index wraps (an empty one is still
// dropped), and into a table whose
// bucket count is not a power of two only by b.
func (c *Cuckoo) compactSingle(fi int) bool {
	t := c.filters[fi]
	movable := t.CanRelocateFrom()
	ok := true
	bs := uint64(t.BucketSize)
	for b := uint64(0); b < uint64(t.NumBuckets); b++ {
		for s := uint64(0); s < bs; s++ {
			fp := t.Data[b*bs+s]
			if fp == 0 {
				continue
			}
			if !movable {
				ok = false
				continue
			}
			l := engine.Lookup{H1: b, H2: engine.AltHash(fp, b), FP: fp}
			moved := false
			for j := 0; j < fi; j++ {
				lj := l
				if !c.filters[j].PartnerKnown() {
					lj.H2 = b
				}
				if slot := c.filters[j].FreeSlot(lj); slot >= 0 {
					c.filters[j].Set(slot, fp)
					t.Set(int(b*bs+s), 0)
					moved = true
					break
				}
			}
			if !moved {
				ok = false
			}
		}
	}
	if ok && fi == len(c.filters)-1 {
		c.nbytes -= uint64(len(t.Data))
		c.filters[fi] = nil
		c.filters = c.filters[:fi]
	}
	return ok
}

// Tables returns the sub-filters, oldest first, for persisting their bytes.
// The caller must exclude writers.
func (c *Cuckoo) Tables() []*engine.CuckooTable { return c.filters }

// CuckooInfo is what CF.INFO and CF.DEBUG report.
type CuckooInfo struct {
	Size, NumBuckets, NumFilters, NumItems, NumDeletes uint64
	BucketSize, MaxIterations, Expansion               uint16
	// Slots is the number of fingerprint slots across sub-filters.
	Slots uint64
}

// Info is a consistent snapshot of the filter's counters.
func (c *Cuckoo) Info() CuckooInfo {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return CuckooInfo{
		Size:       cuckooStructSize + subStructSize*uint64(len(c.filters)) + c.bytes(),
		NumBuckets: c.numBuckets, NumFilters: uint64(len(c.filters)),
		NumItems: c.numItems, NumDeletes: c.numDeletes,
		BucketSize: c.bucketSize, MaxIterations: c.maxIterations, Expansion: c.expansion,
		Slots: c.bytes(),
	}
}

// Debug renders CF.DEBUG's string.
func (c *Cuckoo) Debug() string {
	i := c.Info()
	return fmt.Sprintf("bktsize:%d buckets:%d items:%d deletes:%d filters:%d max_iterations:%d expansion:%d",
		i.BucketSize, i.NumBuckets, i.NumItems, i.NumDeletes, i.NumFilters, i.MaxIterations, i.Expansion)
}

// Items is the number of items inserted and not deleted.
func (c *Cuckoo) Items() uint64 {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.numItems
}

// Header encodes the 38-byte SCANDUMP header.
func (c *Cuckoo) Header() []byte {
	c.mu.RLock()
	defer c.mu.RUnlock()
	b := make([]byte, CuckooHeaderSize)
	binary.LittleEndian.PutUint64(b[0:], c.numItems)
	binary.LittleEndian.PutUint64(b[8:], c.numBuckets)
	binary.LittleEndian.PutUint64(b[16:], c.numDeletes)
	binary.LittleEndian.PutUint64(b[24:], uint64(len(c.filters)))
	binary.LittleEndian.PutUint16(b[32:], c.bucketSize)
	binary.LittleEndian.PutUint16(b[34:], c.maxIterations)
	binary.LittleEndian.PutUint16(b[36:], c.expansion)
	return b
}

// Chunk returns the dump chunk at 1-based position pos (CF_GetEncodedChunk):
// a sub-filter of at most MaxChunk bytes is returned whole, whatever the
// offset inside it. ok is false past the end.
func (c *Cuckoo) Chunk(pos int64) (next int64, data []byte, ok bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	off := pos - 1
	for _, t := range c.filters {
		size := int64(len(t.Data))
		if off >= size {
			off -= size
			continue
		}
		if size <= MaxChunk {
			return pos + size, append([]byte(nil), t.Data...), true
		}
		n := size - off
		if n > MaxChunk {
			n = MaxChunk
		}
		return pos + n, append([]byte(nil), t.Data[off:off+n]...), true
	}
	return 0, nil, false
}

// decodeCuckooHeader reads a 38-byte header's fields and applies the
// checks CF.LOADCHUNK makes (CuckooFilter_ValidateIntegrity): bucket size
// in [1, 255], at least one sub-filter once numFilters is truncated to the
// 16 bits RedisBloom keeps (2^64−1 is 65535, 65537 is 1, 65536 is none),
// max iterations ≥ 1, expansion ≤ 32768 and 0 only with one sub-filter,
// and a power-of-two bucket count below 2^56.
func decodeCuckooHeader(b []byte) (*Cuckoo, int, error) {
	if len(b) != CuckooHeaderSize {
		return nil, 0, ErrBadHeader
	}
	c := &Cuckoo{
		numItems:      binary.LittleEndian.Uint64(b[0:]),
		numBuckets:    binary.LittleEndian.Uint64(b[8:]),
		numDeletes:    binary.LittleEndian.Uint64(b[16:]),
		bucketSize:    binary.LittleEndian.Uint16(b[32:]),
		maxIterations: binary.LittleEndian.Uint16(b[34:]),
		expansion:     binary.LittleEndian.Uint16(b[36:]),
	}
	nf := int(uint16(binary.LittleEndian.Uint64(b[24:])))
	if c.bucketSize < 1 || c.bucketSize > 255 || nf < 1 || c.maxIterations < 1 ||
		c.expansion > 32768 || (c.expansion == 0 && nf != 1) ||
		c.numBuckets == 0 || c.numBuckets&(c.numBuckets-1) != 0 || c.numBuckets >= 1<<56 {
		return nil, 0, ErrBadHeader
	}
	return c, nf, nil
}

// wideBuckets is the bucket count RedisBloom gives sub-filter i of a
// loaded header, numBuckets × expansion^i in its 56-bit field; ok is false
// past 2^56.
func (c *Cuckoo) wideBuckets(i int) (uint64, bool) { return c.bucketsBelow(i, 1<<56) }

// CuckooHeaderBytes validates a CF dump header as CF.LOADCHUNK does and
// returns the bytes its sub-filters would take, allocating nothing. Sub-
// filters of Unallocatable bytes or more, which RedisBloom cannot calloc,
// make it ErrBadHeader as well.
func CuckooHeaderBytes(b []byte) (uint64, error) {
	c, nf, err := decodeCuckooHeader(b)
	if err != nil {
		return 0, err
	}
	var total uint64
	for i := 0; i < nf; i++ {
		nb, ok := c.wideBuckets(i)
		if !ok {
			return 0, ErrBadHeader
		}
		total += nb * uint64(c.bucketSize) // below 2^47 + 255·2^56: no wrap
		if total >= Unallocatable {
			return 0, ErrBadHeader
		}
	}
	return total, nil
}

// ParseCuckooHeader validates a 38-byte header (see decodeCuckooHeader)
// and allocates the filter. A valid header whose sub-filters would take
// more than maxBytes, or one of which has more buckets than the 32 bits a
// table here indexes, is refused with ErrTooLarge before any allocation.
func ParseCuckooHeader(b []byte, maxBytes uint64) (*Cuckoo, error) {
	total, err := CuckooHeaderBytes(b)
	if err != nil {
		return nil, err
	}
	if total > maxBytes {
		return nil, ErrTooLarge
	}
	c, nf, _ := decodeCuckooHeader(b)
	for i := 0; i < nf; i++ {
		if c.subBuckets(i) == 0 {
			return nil, ErrTooLarge
		}
	}
	c.filters = make([]*engine.CuckooTable, nf)
	for i := range c.filters {
		c.filters[i] = engine.NewCuckooTable(uint32(c.subBuckets(i)), uint8(c.bucketSize))
	}
	c.nbytes = total
	return c, nil
}

// LoadChunk writes a chunk that SCANDUMP returned with iterator pos: it
// starts at pos − len(data) − 1 and must lie inside one sub-filter.
func (c *Cuckoo) LoadChunk(pos int64, data []byte) error {
	return c.LoadPart(pos, data, int64(len(data)))
}

// LoadPart writes data, as LoadChunk(pos, data) would, if LoadChunk would
// accept a chunk of rest bytes (at least len(data)) starting where data
// does (command.CFLoadPart).
func (c *Cuckoo) LoadPart(pos int64, data []byte, rest int64) error {
	if len(data) == 0 || pos < 1 || rest < int64(len(data)) {
		return ErrBadCuckooChunk
	}
	off := pos - int64(len(data)) - 1
	if off < 0 {
		return ErrBadCuckooChunk
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, t := range c.filters {
		size := int64(len(t.Data))
		if off >= size {
			off -= size
			continue
		}
		if rest > size-off {
			return ErrBadCuckooChunk
		}
		t.Write(int(off), data)
		return nil
	}
	return ErrBadCuckooChunk
}
