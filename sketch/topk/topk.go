// Package topk is RedisBloom's Top-K (TOPK.*): HeavyKeeper, depth rows of
// width buckets (a 32-bit fingerprint and a 32-bit count), with a min-heap
// of the k heaviest items, bit for bit as RedisBloom 8.8 keeps them: the
// same MurmurHash2 seeds (row i hashes with seed i, the fingerprint with
// 1919), the same decay rule, heap order and ties.
//
// RedisBloom draws its decay coin with the C library's rand(), seeded by
// each server's own clock, so two servers given the same commands can hold
// different sketches. Here the coin is a pure function of the log: each
// sketch carries a SplitMix64 generator, seeded with a constant when the
// sketch is made (TOPK.RESERVE, RESTORE), advanced only by its own adds and
// kept in its state (Marshal, so the image and the replica digest cover
// it). Replicas that apply the same log draw the same coins. The draw is
// RedisBloom's: a 31-bit number over 2^31-1, compared with decay^count.
//
// The decay table is computed by exactly rounded multiplications rather
// than the C library's pow: the same bits on every architecture (it may
// differ from RedisBloom's table in the last place, which moves a draw's
// outcome with a probability of about 2^-52).
//
// The package does no I/O and reads no clock or outside randomness.
package topk

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"sort"

	"github.com/bfserver/bfserver/engine"
)

// RedisBloom's constants.
const (
	fpSeed      = 1919 // GA: the fingerprint's hash seed
	decayTable  = 256  // TOPK_DECAY_LOOKUP_TABLE
	randMax     = 1<<31 - 1
	seed        = 0x5eed_70bc_0000_0001
	StructBytes = 2088 // sizeof(TopK): k, width, depth, decay, two pointers, the table
	BucketBytes = 8    // sizeof(Bucket)
	HeapBytes   = 24   // sizeof(HeapBucket)
	// MaxIncrement bounds TOPK.INCRBY's increment.
	MaxIncrement = 100000
)

// Bucket is one counter of a row.
type Bucket struct{ FP, Count uint32 }

// HeapEntry is one slot of the heap. An empty slot has a zero count and
// fingerprint and a nil Item; a slot RESTOREd from a dump whose item was
// the empty string has a nil Item too but a count (RedisBloom loads a
// one-byte item as NULL): it still matches the empty item, and is
// listed as a null.
type HeapEntry struct {
	FP, ItemLen uint32
	Item        []byte
	Count       uint32
}

// TopK is one sketch.
type TopK struct {
	K, Width, Depth uint32
	Decay           float64
	Buckets         []Bucket
	Heap            []HeapEntry
	// Rand is the decay coin's generator state (SplitMix64).
	Rand  uint64
	table [decayTable]float64
	// dirty records which 64 KiB chunks of Buckets, as the image lays
	// them out (Array), changed since the image last took them; every
	// change marks the bucket (8 bytes, inside one 64-byte line) before it
	// writes it, so that an image write holding the array (engine.Freeze)
	// can copy the line first.
	dirty engine.Dirty
}

// Bytes is the memory of a sketch of these dimensions as RedisBloom counts
// it (TopKMemUsage), false when it does not fit in 64 bits.
func Bytes(k, width, depth uint64) (uint64, bool) {
	if k == 0 || width == 0 || depth == 0 || k > math.MaxUint32 || width > math.MaxUint32 || depth > math.MaxUint32 ||
		width*depth > (math.MaxUint64-StructBytes-k*HeapBytes)/BucketBytes {
		return 0, false
	}
	return StructBytes + width*depth*BucketBytes + k*HeapBytes, true
}

// New is an empty sketch; the caller checked Bytes against its cap and
// decay in (0, 1].
func New(k, width, depth uint32, decay float64) *TopK {
	t := &TopK{K: k, Width: width, Depth: depth, Decay: decay, Rand: seed}
	t.alloc()
	return t
}

// alloc gives a sketch of checked dimensions its zeroed buckets and heap,
// its change record and its decay table.
func (t *TopK) alloc() {
	n := uint64(t.Width) * uint64(t.Depth)
	t.Buckets, t.Heap = make([]Bucket, n), make([]HeapEntry, t.K)
	t.dirty = engine.NewDirty(n * BucketBytes)
	t.fillTable()
}

func (t *TopK) fillTable() {
	t.table[0] = 1
	for i := 1; i < decayTable; i++ {
		t.table[i] = float64(t.table[i-1] * t.Decay)
	}
}

// MemUsage is RedisBloom's mem_usage of the sketch.
func (t *TopK) MemUsage() uint64 {
	n, _ := Bytes(uint64(t.K), uint64(t.Width), uint64(t.Depth))
	return n
}

// coin is RedisBloom's rand() / (double)RAND_MAX, from the sketch's own
// generator.
func (t *TopK) coin() float64 {
	t.Rand += 0x9e3779b97f4a7c15
	z := t.Rand
	z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
	z = (z ^ z>>27) * 0x94d049bb133111eb
	z ^= z >> 31
	return float64(z>>33) / randMax
}

// decayAt is the chance that a count of n decays by one.
func (t *TopK) decayAt(n uint32) float64 {
	if n < decayTable {
		return t.table[n]
	}
	const last = decayTable - 1
	p := powInt(t.table[last], n/last)
	return float64(p * t.table[n%last])
}

// powInt is x^n by squaring, each product rounded.
func powInt(x float64, n uint32) float64 {
	r := 1.0
	for n > 0 {
		if n&1 == 1 {
			r = float64(r * x)
		}
		x = float64(x * x)
		n >>= 1
	}
	return r
}

func (t *TopK) find(item []byte, fp uint32) int {
	for i := range t.Heap {
		h := &t.Heap[i]
		if h.FP == fp && h.ItemLen == uint32(len(item)) && bytes.Equal(h.Item, item) {
			return i
		}
	}
	return -1
}

// Add adds item increment times (TOPK.ADD: 1) and returns the item it
// expelled from the heap, if it took one's place: expelled is nil and ok
// false when the heap did not change that way (an empty slot taken is
// expelled nil, ok true: RedisBloom answers null for both).
func (t *TopK) Add(item []byte, increment uint32) (expelled []byte, ok bool) {
	fp := engine.MurmurHash2(item, fpSeed)
	heapMin := t.Heap[0].Count
	var maxCount uint32
	for i := uint32(0); i < t.Depth; i++ {
		j := uint64(i)*uint64(t.Width) + uint64(engine.MurmurHash2(item, i)%t.Width)
		b := &t.Buckets[j]
		switch {
		case b.Count == 0:
			t.dirty.Mark(j * BucketBytes)
			b.FP, b.Count = fp, increment
			maxCount = max(maxCount, b.Count)
		case b.FP == fp:
			t.dirty.Mark(j * BucketBytes)
			b.Count += increment
			maxCount = max(maxCount, b.Count)
		default:
			for local := increment; local > 0; local-- {
				if t.coin() < t.decayAt(b.Count) {
					t.dirty.Mark(j * BucketBytes)
					b.Count--
					if b.Count == 0 {
						b.FP, b.Count = fp, local
						maxCount = max(maxCount, b.Count)
						break
					}
				}
			}
		}
	}
	if maxCount < heapMin {
		return nil, false
	}
	if i := t.find(item, fp); i >= 0 {
		t.Heap[i].Count = maxCount // not the max of the two: it may have decayed
		t.heapifyDown(i)
		return nil, false
	}
	out := t.Heap[0].Item
	t.Heap[0] = HeapEntry{FP: fp, ItemLen: uint32(len(item)), Item: append([]byte{}, item...), Count: maxCount}
	t.heapifyDown(0)
	return out, true
}

// heapifyDown is RedisBloom's sift-down of a min-heap by count, ties
// broken as it breaks them.
func (t *TopK) heapifyDown(start int) {
	a, n := t.Heap, len(t.Heap)
	if n < 2 || (n-2)/2 < start {
		return
	}
	child := 2*start + 1
	if child+1 < n && a[child].Count > a[child+1].Count {
		child++
	}
	if a[child].Count > a[start].Count {
		return
	}
	top := a[start]
	for {
		a[start] = a[child]
		start = child
		if (n-2)/2 < child {
			break
		}
		child = 2*child + 1
		if child+1 < n && a[child].Count > a[child+1].Count {
			child++
		}
		if !(a[child].Count < top.Count) {
			break
		}
	}
	a[start] = top
}

// Query reports whether item is in the heap.
func (t *TopK) Query(item []byte) bool {
	return t.find(item, engine.MurmurHash2(item, fpSeed)) >= 0
}

// Count is item's estimated count, as RedisBloom's TopK_Count reads it.
func (t *TopK) Count(item []byte) uint32 {
	fp := engine.MurmurHash2(item, fpSeed)
	heapMin := t.Heap[0].Count
	inHeap := t.find(item, fp) >= 0
	var res uint32
	for i := uint32(0); i < t.Depth; i++ {
		b := t.Buckets[uint64(i)*uint64(t.Width)+uint64(engine.MurmurHash2(item, i)%t.Width)]
		if b.FP == fp && (!inHeap || b.Count >= heapMin) {
			res = max(res, b.Count)
		}
	}
	return res
}

// List is the heap by count, largest first (a stable sort of the heap
// array, as glibc's qsort sorts it), up to the first empty count.
func (t *TopK) List() []HeapEntry {
	l := append([]HeapEntry(nil), t.Heap...)
	sort.SliceStable(l, func(i, j int) bool { return l[i].Count > l[j].Count })
	for i, h := range l {
		if h.Count == 0 {
			return l[:i]
		}
	}
	return l
}

// CString is an item as RedisBloom replies with it: a C string, cut at
// its first NUL byte.
func CString(item []byte) []byte {
	if i := bytes.IndexByte(item, 0); i >= 0 {
		return item[:i]
	}
	return item
}

// Errors of decoding.
var (
	ErrFormat   = errors.New("topk: bad data format")
	ErrTooLarge = errors.New("topk: sketch larger than the cap")
)

// Marshal is the sketch's full state: k, width, depth (4 bytes each), the
// decay's bits and the generator (8 each), the buckets, then per heap slot
// its fingerprint, length, count (4 each), a presence byte and the item.
func (t *TopK) Marshal() []byte {
	b := t.appendFields(make([]byte, 0, 28+8*len(t.Buckets)+13*len(t.Heap)))
	for _, k := range t.Buckets {
		b = binary.LittleEndian.AppendUint32(b, k.FP)
		b = binary.LittleEndian.AppendUint32(b, k.Count)
	}
	return t.appendHeap(b)
}

func (t *TopK) appendFields(b []byte) []byte {
	b = binary.LittleEndian.AppendUint32(b, t.K)
	b = binary.LittleEndian.AppendUint32(b, t.Width)
	b = binary.LittleEndian.AppendUint32(b, t.Depth)
	b = binary.LittleEndian.AppendUint64(b, math.Float64bits(t.Decay))
	return binary.LittleEndian.AppendUint64(b, t.Rand)
}

func (t *TopK) appendHeap(b []byte) []byte {
	for _, h := range t.Heap {
		b = binary.LittleEndian.AppendUint32(b, h.FP)
		b = binary.LittleEndian.AppendUint32(b, h.ItemLen)
		b = binary.LittleEndian.AppendUint32(b, h.Count)
		if h.Item == nil {
			b = append(b, 0)
			continue
		}
		b = append(b, 1)
		b = binary.LittleEndian.AppendUint32(b, uint32(len(h.Item)))
		b = append(b, h.Item...)
	}
	return b
}

// Unmarshal reads Marshal's bytes, refusing a sketch over maxBytes.
func Unmarshal(b []byte, maxBytes uint64) (*TopK, error) {
	t, b, err := parseFields(b, maxBytes)
	if err != nil {
		return nil, err
	}
	nb := uint64(t.Width) * uint64(t.Depth)
	if uint64(len(b)) < nb*8+uint64(t.K)*13 {
		return nil, ErrFormat
	}
	t.alloc()
	for i := range t.Buckets {
		t.Buckets[i] = Bucket{binary.LittleEndian.Uint32(b[8*i:]), binary.LittleEndian.Uint32(b[8*i+4:])}
	}
	if err := t.parseHeap(b[nb*8:]); err != nil {
		return nil, err
	}
	return t, nil
}

// parseFields reads Marshal's fixed fields (k, width, depth, decay,
// generator), checked against maxBytes, and returns a sketch of them,
// not yet allocated, and the bytes after them.
func parseFields(b []byte, maxBytes uint64) (*TopK, []byte, error) {
	if len(b) < 28 {
		return nil, nil, ErrFormat
	}
	t := &TopK{K: binary.LittleEndian.Uint32(b), Width: binary.LittleEndian.Uint32(b[4:]), Depth: binary.LittleEndian.Uint32(b[8:]),
		Decay: math.Float64frombits(binary.LittleEndian.Uint64(b[12:])), Rand: binary.LittleEndian.Uint64(b[20:])}
	size, ok := Bytes(uint64(t.K), uint64(t.Width), uint64(t.Depth))
	if !ok {
		return nil, nil, ErrFormat
	}
	if size > maxBytes {
		return nil, nil, ErrTooLarge
	}
	return t, b[28:], nil
}

// parseHeap reads Marshal's heap slots, which must end b.
func (t *TopK) parseHeap(b []byte) error {
	for i := range t.Heap {
		if len(b) < 13 {
			return ErrFormat
		}
		h := &t.Heap[i]
		h.FP, h.ItemLen, h.Count = binary.LittleEndian.Uint32(b), binary.LittleEndian.Uint32(b[4:]), binary.LittleEndian.Uint32(b[8:])
		present := b[12]
		b = b[13:]
		switch present {
		case 0:
		case 1:
			if len(b) < 4 || uint64(binary.LittleEndian.Uint32(b)) > uint64(len(b)-4) {
				return ErrFormat
			}
			n := binary.LittleEndian.Uint32(b)
			h.Item = append([]byte{}, b[4:4+n]...)
			b = b[4+n:]
		default:
			return ErrFormat
		}
	}
	if len(b) != 0 {
		return ErrFormat
	}
	return nil
}
