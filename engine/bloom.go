package engine

import (
	"encoding/binary"
	"math"
	"math/bits"
	"runtime"
	"sync"
	"sync/atomic"
	"unsafe"
	"weak"

	"github.com/bfserver/bfserver/internal/release"
)

// ln2 and ln2² exactly as RedisBloom writes them: sizing must round the same way.
const (
	ln2        = 0.693147180559945
	ln2Squared = 0.480453013918201
)

// BloomParams describes one Bloom filter ("link" in a chain) as RedisBloom's
// struct bloom and its dump header do. Entries is the link's capacity.
type BloomParams struct {
	Entries uint64
	Error   float64
	BPE     float64 // bits per entry
	Bits    uint64
	Bytes   uint64
	Hashes  uint32
	N2      uint8 // non-zero only in legacy power-of-two links
}

// BitsPerEntry is −ln(error)/ln²2, as calc_bpe computes it.
func BitsPerEntry(errRate float64) float64 {
	bpe := -(Log(errRate) / ln2Squared)
	if bpe < 0 {
		bpe = -bpe
	}
	return bpe
}

// HashCount is ceil(ln2 × bpe).
func HashCount(bpe float64) float64 { return math.Ceil(ln2 * bpe) }

// SizeBloom computes the layout RedisBloom's bloom_init gives a new filter
// (NOROUND: bits = floor(entries×bpe), at least 1, rounded up to a multiple of
// 64). ok is false for the inputs bloom_init refuses. It allocates nothing, so
// callers can check a memory cap first.
func SizeBloom(entries uint64, errRate float64) (p BloomParams, ok bool) {
	if entries < 1 || !(errRate > 0) || errRate >= 1 {
		return p, false
	}
	p.Entries = entries
	p.Error = errRate
	p.BPE = BitsPerEntry(errRate)
	fbits := float64(entries) * p.BPE
	if fbits >= math.MaxUint64/2 {
		return p, false
	}
	bits := uint64(fbits)
	if bits == 0 {
		bits = 1
	}
	if bits%64 != 0 {
		p.Bytes = (bits/64 + 1) * 8
	} else {
		p.Bytes = bits / 8
	}
	p.Bits = p.Bytes * 8
	p.Hashes = uint32(HashCount(p.BPE))
	return p, true
}

// Validate applies RedisBloom 8.8's bloom_validate_integrity to parameters
// read from a dump header: error ≤ 0 or ≥ 1 is refused but NaN passes, as
// it does there (such a link answers like any other and cannot grow), and
// so does a bits-per-entry that gives 0 hashes. Beyond C it refuses a NaN
// or infinite bits-per-entry and more than MaxHashes hashes, which
// RedisBloom takes (a NaN bpe matches 2^31 hashes there), so that a hostile
// header cannot make every lookup loop for seconds.
func (p *BloomParams) Validate() bool {
	if p.Error <= 0 || p.Error >= 1 || p.N2 > 63 || p.Bits == 0 {
		return false
	}
	if p.N2 != 0 && p.Bits < uint64(1)<<p.N2 {
		return false
	}
	if p.Bytes > math.MaxUint64/8 || p.Bits != p.Bytes*8 {
		return false
	}
	if math.IsNaN(p.BPE) || math.IsInf(p.BPE, 0) {
		return false
	}
	h := HashCount(p.BPE)
	if h < 0 || h > MaxHashes || float64(p.Hashes) != h {
		return false
	}
	return true
}

// MaxHashes bounds the hash count a loaded header may carry. The smallest
// positive error rate a command accepts (about 5e-324) gives 1,075 hashes, so
// no filter RedisBloom can create exceeds it.
const MaxHashes = 1100

// Bloom is one Bloom filter bit array. Bits live in little-endian 64-bit words
// so that bit x is byte x>>3, mask 1<<(x&7) in the dump, as in RedisBloom.
// One writer and any number of readers may use it at once: readers load words
// atomically and the writer sets bits with release.Or64, and a bit once set
// is never cleared outside LoadChunk. A second writer would lose bits
// (release.Or64 takes no lock on amd64), and the race detector could not
// tell, since race builds take the atomic: the state machine's one apply
// goroutine is the writer.
type Bloom struct {
	*shape
	// w is the first of the shape's nwords words (words() is the slice):
	// a pointer, not a slice, since the length is the shape's, so that a
	// small filter's chain fits a smaller size class (docs/STORAGE.md).
	w *uint64
	Dirty
}

// words is the bit array.
func (b *Bloom) words() []uint64 { return unsafe.Slice(b.w, b.nwords) }

// shape is what a Bloom filter's parameters determine. Filters of the same
// parameters share one (shapeOf): a server may hold hundreds of thousands
// of small filters auto-created with the same defaults, and their shape
// would otherwise be most of what each costs beyond its bits.
type shape struct {
	BloomParams
	key   shapeKey // what shapes interns it by
	mod   uint64
	recip uint64 // floor((2^64−1)/mod), for division-free remainders
	wrap  uint64 // 2^64 mod mod: what a wrap-around of a + i·b subtracts
	// nwords is the bit array's length in words, (Bytes+7)/8.
	nwords uint64
}

// NewBloom allocates a zeroed filter with the given parameters.
func NewBloom(p BloomParams) *Bloom {
	b := new(Bloom)
	b.Init(p)
	return b
}

// Init makes b a zeroed filter with the given parameters, in place, for a
// Bloom embedded in a larger struct (one allocation instead of two). A
// Bloom must not be copied once initialised.
func (b *Bloom) Init(p BloomParams) { b.InitIn(p, nil) }

// InitIn is Init with the bit array in buf when it is long enough (zeroed,
// and as long-lived as b: the caller's struct that embeds b, so that a
// small filter is one object for the collector to mark, not two).
func (b *Bloom) InitIn(p BloomParams, buf []uint64) {
	n := (p.Bytes + 7) / 8
	words := buf[:min(uint64(len(buf)), n)]
	if uint64(len(words)) < n {
		words = make([]uint64, n)
		adviseHuge(words)
	}
	*b = Bloom{shape: shapeOf(p), Dirty: newDirty(p.Bytes)}
	if len(words) > 0 {
		b.w = &words[0]
	}
}

// shapes interns shapes by their parameters. An entry goes when no filter
// holds its shape any more, so hostile parameters cannot grow it.
//
// recent holds the shapes found or made last, strongly, and is looked at
// first. A weak pointer's Value parks its caller while the collector ends
// its marking: the state machine, creating a filter in the default shape,
// waited 161 ms there once (an execution trace of bench/stall's creation
// of a million filters), and every write with it. The default shapes of
// auto-created filters and of a chain's first links are then found
// without one.
var shapes struct {
	mu     sync.Mutex
	m      map[shapeKey]weak.Pointer[shape]
	recent [recentShapes]*shape
	next   int // the slot the next shape remembered takes
	hit    int // the slot of the shape found or made last
}

// recentShapes is how many shapes shapes.recent holds.
const recentShapes = 8

// shapeKey is BloomParams with its floats as bit patterns: as float keys,
// −0 would find the shape of 0 (and a dump would not load back byte for
// byte), and a NaN would never be found or deleted.
type shapeKey struct {
	BloomParams
	err, bpe uint64
}

func keyOf(p BloomParams) shapeKey {
	k := shapeKey{BloomParams: p, err: math.Float64bits(p.Error), bpe: math.Float64bits(p.BPE)}
	k.Error, k.BPE = 0, 0
	return k
}

// shapeOf is the shared shape of filters with parameters p.
func shapeOf(p BloomParams) *shape {
	k := keyOf(p)
	shapes.mu.Lock()
	defer shapes.mu.Unlock()
	if s := shapes.recent[shapes.hit]; s != nil && s.key == k {
		return s // the one found last: a run of filters of one shape
	}
	for i, s := range shapes.recent {
		if s != nil && s.key == k {
			shapes.hit = i
			return s
		}
	}
	if s := shapes.m[k].Value(); s != nil {
		rememberShape(s)
		return s
	}
	s := &shape{BloomParams: p, key: k, mod: p.Bits, nwords: (p.Bytes + 7) / 8}
	if p.N2 > 0 {
		s.mod = uint64(1) << p.N2
	}
	s.recip = math.MaxUint64 / s.mod
	s.wrap = (math.MaxUint64%s.mod + 1) % s.mod
	if shapes.m == nil {
		shapes.m = map[shapeKey]weak.Pointer[shape]{}
	}
	w := weak.Make(s)
	shapes.m[k] = w
	runtime.AddCleanup(s, func(k shapeKey) {
		shapes.mu.Lock()
		defer shapes.mu.Unlock()
		if shapes.m[k] == w {
			delete(shapes.m, k)
		}
	}, k)
	rememberShape(s)
	return s
}

// rememberShape puts s in shapes.recent, in place of the oldest; the
// caller holds shapes.mu.
func rememberShape(s *shape) {
	shapes.recent[shapes.next] = s
	shapes.hit = shapes.next
	shapes.next = (shapes.next + 1) % recentShapes
}

// rem is x mod b.mod without a 64-bit division (Barrett reduction): with
// recip = ⌊(2⁶⁴−1)/m⌋ ≥ (2⁶⁴−m)/m, the estimate x·recip/2⁶⁴ exceeds
// x/m − 1, so the quotient it gives is the true one or one short, and one
// correction makes it exact. It is masked in, not branched on: whether it
// is due depends on the hash, a coin flip a branch would often miss.
func (b *Bloom) rem(x uint64) uint64 {
	q, _ := bits.Mul64(x, b.recip)
	r, borrow := bits.Sub64(x-q*b.mod, b.mod, 0)
	return r + b.mod&-borrow
}

// probe walks the k bit positions (a + i·b) mod m, computed in uint64 with
// wrap-around as RedisBloom does, using two divisions per item instead of
// one per position: position i+1 is position i plus b mod m, corrected by
// 2^64 mod m whenever a + i·b wraps. The results are identical.
type probe struct {
	v, r, bm uint64
}

func (b *Bloom) start(h Hash) probe {
	return probe{v: h.A, r: b.rem(h.A), bm: b.rem(h.B)}
}

// next returns the probe at the following position. It has no branches:
// whether a sum passes m is a coin flip per position that a branch
// predictor would miss half the time, so the corrections are masked in.
func (b *Bloom) next(p probe, h Hash) probe {
	nv, carry := bits.Add64(p.v, h.B, 0)
	r, borrow := bits.Sub64(p.r+p.bm, b.mod, 0)
	r += b.mod & -borrow
	// A wrap of a + i·b past 2^64 subtracts 2^64 mod m.
	r, borrow = bits.Sub64(r, b.wrap&-carry, 0)
	r += b.mod & -borrow
	return probe{v: nv, r: r, bm: p.bm}
}

// Test reports whether every one of the item's bits is set.
//
// A filter that fits in cache is tested bit by bit, stopping at the first
// clear one (a negative usually costs two probes). A larger one is
// memory-bound: with up to 32 hashes its words are loaded before any is
// looked at (testStaged), so the cache misses overlap instead of waiting
// on each other.
func (b *Bloom) Test(h Hash) bool {
	if b.Bytes > cacheResident && b.Hashes <= 32 {
		return b.testStaged(h)
	}
	return b.testFrom(b.start(h), h, 0)
}

// testFrom tests the item's bits from bit i on, p at bit i, one at a time.
func (b *Bloom) testFrom(p probe, h Hash, i uint32) bool {
	words := b.words()
	for ; i < b.Hashes; i++ {
		x := p.r
		if atomic.LoadUint64(&words[x>>6])&(1<<(x&63)) == 0 {
			return false
		}
		p = b.next(p, h)
	}
	return true
}

// FirstBits is 1 when the item's first two bits are set (its one bit, for
// a filter of one hash), else 0, found without branching on either bit.
// A chain asks it of its older links, up to 64 at a time, before it looks
// at any answer (an add's test of them, and a lookup's after the newest
// link: scalable's inAny), so that the links' cache misses overlap and
// each link's answer, a coin flip in a half-full filter, is not a
// mispredicted branch; TestAfterFirst finishes the test of the links that
// pass.
func (b *Bloom) FirstBits(h Hash) uint64 {
	if b.Hashes == 0 {
		return 1 // a loaded header may give none: Test holds every item
	}
	words := b.words()
	p := b.start(h)
	x := p.r
	bit := atomic.LoadUint64(&words[x>>6]) >> (x & 63)
	if b.Hashes > 1 {
		p = b.next(p, h)
		y := p.r
		bit &= atomic.LoadUint64(&words[y>>6]) >> (y & 63)
	}
	return bit & 1
}

// TestAfterFirst is Test for an item whose FirstBits is 1: it tests the
// bits after the first two.
func (b *Bloom) TestAfterFirst(h Hash) bool {
	if b.Hashes <= 2 {
		return true
	}
	return b.testFrom(b.next(b.next(b.start(h), h), h), h, 2)
}

// PrefetchFirstBits starts loading the words FirstBits reads, for a
// filter past prefetchFrom.
func (b *Bloom) PrefetchFirstBits(h Hash) {
	if b.Bytes > prefetchFrom {
		b.prefetchFirst(h, min(2, b.Hashes))
	}
}

// firstStage is how many of a large filter's words testStaged loads
// before it looks at any, for a filter of more than stagedHashes hashes;
// one of fewer loads all its words at once (two rounds cost a present
// item about 10% more with 7 hashes, and an absent one saves nothing).
const (
	firstStage   = 4
	stagedHashes = 8
)

// testStaged is Test for a filter larger than the cache: its misses
// overlap. With many hashes it loads in two rounds: firstStage words
// together, which answers most absent items (in a half-full filter all
// four bits are set for one in sixteen), and only then the rest. Loading
// all k at once cost an absent item k misses of memory traffic where it
// needs about two: with 22 hashes (a chain's later link, its error halved
// at each) that was most of a bulk load's time in its older links.
func (b *Bloom) testStaged(h Hash) bool {
	k, first := int(b.Hashes), int(b.Hashes)
	if k > stagedHashes {
		first = firstStage
	}
	words := b.words()
	p := b.start(h)
	var xs, ws [32]uint64
	for from, to := 0, first; from < k; from, to = to, k {
		for i := from; i < to; i++ {
			xs[i] = p.r
			p = b.next(p, h)
		}
		for i := from; i < to; i++ {
			ws[i] = atomic.LoadUint64(&words[xs[i]>>6])
		}
		for i := from; i < to; i++ {
			if ws[i]&(1<<(xs[i]&63)) == 0 {
				return false
			}
		}
	}
	return true
}

// cacheResident is the bit-array size up to which Test and Add probe one
// bit at a time: at 1M items (1.2 MiB) that is 10–20% faster than loading
// all k words first, and at 100M items (120 MiB) slower or no faster.
const cacheResident = 8 << 20

// prefetchFrom is the bit-array size past which Prefetch and
// PrefetchFirstBits start loading words: about half a core's L2 cache. A
// scalable chain of a few million items has links of 0.3–6 MiB, under
// cacheResident yet well past L2, whose tests (an add's, of the older links)
// waited on one miss at a time: prefetched, 1,000 adds into a chain of 1M
// items took 0.90–0.94 ms instead of 1.04–1.09 (BenchmarkChainAdd/1M;
// docs/BENCHMARKS.md, The bulk load again). Below it the words are most
// likely cached already, and computing their positions twice is all a
// prefetch would add.
const prefetchFrom = 256 << 10

// manyHashesResident is the bit-array size up to which Add probes one
// bit at a time when the filter has more than stagedHashes hashes (a
// chain's later link): about a core's L2 cache. Past it the misses of so
// many probes are worth overlapping well below cacheResident: a chain
// growing from 1M to 3M items, whose newest link is 1–8 MiB with 20 and
// more hashes, added faster in 14 of 17 alternating pairs (scalable's
// BenchmarkChainAdd/1M; docs/BENCHMARKS.md).
const manyHashesResident = 1 << 20

// Add sets the item's bits and reports whether any of them was clear.
//
// For a filter larger than cacheResident (manyHashesResident with many
// hashes) with up to 32 hashes it reads every word first and sets bits
// after: the reads are independent, so their cache misses overlap,
// whereas a set between them (a locked OR where release.Or64 is atomic)
// would wait for each miss in turn. A bit already set is never ORed again.
func (b *Bloom) Add(h Hash) bool {
	if b.Hashes <= 32 && (b.Bytes > cacheResident || b.Hashes > stagedHashes && b.Bytes > manyHashesResident) {
		return b.addBatched(h)
	}
	flipped := false
	words := b.words()
	p := b.start(h)
	for i := uint32(0); i < b.Hashes; i++ {
		x := p.r
		p = b.next(p, h)
		w := &words[x>>6]
		mask := uint64(1) << (x & 63)
		if atomic.LoadUint64(w)&mask == 0 {
			b.mark(x >> 3)
			release.Or64(w, mask)
			flipped = true
		}
	}
	return flipped
}

// probe fills xs with the item's positions and ws with the words holding
// them, every load issued before any is used; it returns k (at most 32).
func (b *Bloom) probe(h Hash, xs, ws *[32]uint64) int {
	k := int(b.Hashes)
	p := b.start(h)
	for i := 0; i < k; i++ {
		xs[i] = p.r
		p = b.next(p, h)
	}
	words := b.words()
	for i := 0; i < k; i++ {
		ws[i] = atomic.LoadUint64(&words[xs[i]>>6])
	}
	return k
}

// Prefetch starts loading the words that hold the item's bits and returns
// at once. The state machine calls it a few items ahead of Add or Test, so
// that the cache misses of a filter larger than L2 (one per bit, about 100
// ns each from memory) overlap across items instead of adding up.
func (b *Bloom) Prefetch(h Hash) {
	if b.Bytes > prefetchFrom {
		b.prefetchFirst(h, b.Hashes)
	}
}

// prefetchFirst starts loading the words of the item's first n bits.
func (b *Bloom) prefetchFirst(h Hash, n uint32) {
	words := b.words()
	p := b.start(h)
	for range n {
		PrefetchLine(unsafe.Pointer(&words[p.r>>6]))
		p = b.next(p, h)
	}
}

func (b *Bloom) addBatched(h Hash) bool {
	var xs, ws [32]uint64
	k := b.probe(h, &xs, &ws)
	flipped := false
	words := b.words()
	for i := 0; i < k; i++ {
		x := xs[i]
		mask := uint64(1) << (x & 63)
		if ws[i]&mask == 0 {
			// ws may predate an OR of this call to the same word; setting a
			// bit twice is harmless, and the first time it was clear.
			b.mark(x >> 3)
			release.Or64(&words[x>>6], mask)
			flipped = true
		}
	}
	return flipped
}

// ReadBytes copies len(dst) bytes of the bit array starting at byte offset
// off. The whole words between the ends are copied in a loop of their
// own: a chunk (64 KiB) read a word at a time, each with the checks of the
// ends, took 15-20 µs, and an image write reads every chunk it writes.
// It reads no byte outside [off, off+len(dst)): a Freeze reads the lines
// of a chunk the writer has not changed while the writer may be changing
// the others.
func (b *Bloom) ReadBytes(dst []byte, off uint64) {
	words := b.words()
	byteAt := func(pos uint64) byte { return byte(atomic.LoadUint64(&words[pos>>3]) >> ((pos & 7) * 8)) }
	i := 0
	for ; i < len(dst) && (off+uint64(i))&7 != 0; i++ {
		dst[i] = byteAt(off + uint64(i))
	}
	if n := (len(dst) - i) / 8; n > 0 {
		from := (off + uint64(i)) >> 3
		ws, d := words[from:from+uint64(n)], dst[i:i+8*n]
		for j := range ws {
			binary.LittleEndian.PutUint64(d[8*j:8*j+8], atomic.LoadUint64(&ws[j]))
		}
		i += 8 * n
	}
	for ; i < len(dst); i++ {
		dst[i] = byteAt(off + uint64(i))
	}
}

// LoadBytes fills the bit array at byte offset off from a stored image,
// at memory speed: the filter must not be visible to anyone else yet (a
// keyspace being loaded), so plain stores suffice. It records no change.
// The caller has checked the range.
func (b *Bloom) LoadBytes(src []byte, off uint64) {
	if !littleEndian || b.w == nil {
		b.WriteBytes(src, off)
		return
	}
	// On a little-endian host byte i of the array is byte i%8 of word i/8
	// in memory too.
	all := unsafe.Slice((*byte)(unsafe.Pointer(b.w)), b.nwords*8)
	copy(all[off:off+uint64(len(src))], src)
}

// LoadTarget is the bit array's bytes in memory, for a loader to read a
// stored image straight into (as LoadBytes would copy it), or nil on a
// big-endian host, where memory's byte order is not the image's. The
// filter must not be visible to anyone else yet.
func (b *Bloom) LoadTarget() []byte {
	if !littleEndian || b.w == nil {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(b.w)), b.nwords*8)
}

var littleEndian = func() bool { x := uint16(1); return *(*byte)(unsafe.Pointer(&x)) == 1 }()

// WriteBytes overwrites the bit array at byte offset off (LOADCHUNK). The
// caller has checked the range.
func (b *Bloom) WriteBytes(src []byte, off uint64) {
	b.markRange(off, uint64(len(src)))
	words := b.words()
	i := 0
	for i < len(src) {
		pos := off + uint64(i)
		if pos&7 == 0 && len(src)-i >= 8 {
			atomic.StoreUint64(&words[pos>>3], binary.LittleEndian.Uint64(src[i:]))
			i += 8
			continue
		}
		w := &words[pos>>3]
		shift := (pos & 7) * 8
		old := atomic.LoadUint64(w)
		atomic.StoreUint64(w, old&^(0xff<<shift)|uint64(src[i])<<shift)
		i++
	}
}
