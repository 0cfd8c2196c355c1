package window

import (
	"errors"
	"math"
	"math/bits"

	"github.com/bfserver/bfserver/engine"
)

// Errors. New and the decoders return one of these (the decoders wrap
// ErrCorrupt or ErrTooLarge with what was wrong); a caller maps them to
// its own replies.
var (
	ErrErrorRate = errors.New("window: error rate must be between 1e-12 and 0.5")
	ErrWindow    = errors.New("window: window must be 1 to 2^40 inserts, or 1 to 2^53 ms with a capacity of 1 to 2^40 inserts")
	ErrKind      = errors.New("window: unknown window kind")
	ErrOverflow  = errors.New("window: unknown overflow policy, or one given for a count window")
	ErrTooLarge  = errors.New("window: filter larger than the memory cap")
	ErrCorrupt   = errors.New("window: corrupt dump")
	ErrCursor    = errors.New("window: chunk out of range")
	ErrShape     = errors.New("window: shape out of range or not covering the window")
)

// Kind is what a window counts.
type Kind uint8

const (
	// Count windows keep the last N inserts.
	Count Kind = 1
	// Time windows keep the inserts of the last T milliseconds.
	Time Kind = 2
)

func (k Kind) String() string {
	switch k {
	case Count:
		return "count"
	case Time:
		return "time"
	}
	return "unknown"
}

// Overflow is what a time window does when a generation receives more
// inserts than its share of the capacity.
type Overflow uint8

const (
	// KeepTime (the default) keeps every item for the whole window; while
	// the rate exceeds the capacity the slices overfill and the
	// false-positive rate rises above the target (Info reports it).
	KeepTime Overflow = 0
	// KeepRate starts a generation early once the current one holds its
	// share, so the false-positive rate stays at or under the target at
	// any rate; while the rate exceeds the capacity items may be forgotten
	// before T: an item is kept for l shifts, and a shift comes at every
	// generation boundary and after every g inserts within a generation.
	KeepRate Overflow = 1
)

func (o Overflow) String() string {
	switch o {
	case KeepTime:
		return "keeptime"
	case KeepRate:
		return "keeprate"
	}
	return "unknown"
}

// Options describe a new filter.
type Options struct {
	ErrorRate float64
	Kind      Kind
	// Count is a count window's N.
	Count uint64
	// WindowMs and Capacity describe a time window: T milliseconds, and
	// the inserts expected in any T (the rate the sizing provisions for).
	WindowMs int64
	Capacity uint64
	Overflow Overflow
	// Now is the creation time (unix ms, from the caller).
	Now int64
	// MaxBytes caps the bit array; 0 means DefaultMaxBytes.
	MaxBytes uint64
	// Shape, when set, is used instead of sizing (checked as a dump
	// header is: within MaxK, MaxL, and l·g covering the window). A
	// proposer sizes once and logs the shape, so replicas do not depend on
	// every platform's floating point agreeing on Size.
	Shape *Shape
}

// Filter is an age-partitioned Bloom filter over a sliding window. It is
// not safe for concurrent use: its owner serialises operations (Exists
// and Info never modify it, so readers may share it while no Add runs).
type Filter struct {
	kind     Kind
	overflow Overflow
	errRate  float64
	window   uint64 // N inserts, or T ms
	capacity uint64 // inserts per window (N for count windows)
	shape    Shape
	genMs    int64 // a time window's generation length d; 0 for counts

	bits    []uint64 // S slices of shape.Words words, physical order
	head    uint32   // physical index of the youngest slice
	gen     uint64   // shifts so far
	inGen   uint64   // inserts since the last shift
	inserts uint64   // inserts ever
	last    int64    // latest time seen

	// ones counts the set bits of each physical slice (derived: not in
	// the dump), so that Info's fills cost O(k+l) rather than a pass over
	// the bits: BFX.WINFO and /metrics read them beside Apply's adds.
	ones []uint64
	// dirty records which 64 KiB chunks of bits changed since the image
	// last took them, so that a flush writes only those, and lets an
	// image write hold the array and have changes copy the 64-byte lines
	// they change first (engine.Freeze). Every change marks the word (or
	// the range) before it writes.
	dirty engine.Dirty
}

// alloc gives a filter of a checked shape its (zeroed) arrays.
func (f *Filter) alloc() {
	f.bits = make([]uint64, f.shape.Bytes()/8)
	f.ones = make([]uint64, f.shape.Slices())
	f.dirty = engine.NewDirty(f.shape.Bytes())
}

// New validates opts and makes an empty filter.
func New(o Options) (*Filter, error) {
	if !(o.ErrorRate >= MinErrorRate && o.ErrorRate <= MaxErrorRate) {
		return nil, ErrErrorRate
	}
	f := &Filter{kind: o.Kind, overflow: o.Overflow, errRate: o.ErrorRate, last: o.Now}
	switch o.Kind {
	case Count:
		if o.Overflow != KeepTime {
			return nil, ErrOverflow
		}
		if o.Count < 1 || o.Count > MaxItems {
			return nil, ErrWindow
		}
		f.window, f.capacity = o.Count, o.Count
	case Time:
		if o.Overflow != KeepTime && o.Overflow != KeepRate {
			return nil, ErrOverflow
		}
		if o.WindowMs < 1 || o.WindowMs > MaxWindowMs || o.Capacity < 1 || o.Capacity > MaxItems {
			return nil, ErrWindow
		}
		f.window, f.capacity = uint64(o.WindowMs), o.Capacity
	default:
		return nil, ErrKind
	}
	var s Shape
	if o.Shape != nil {
		s = *o.Shape
		if s.K < 1 || s.K > MaxK || s.L < 1 || s.L > MaxL || s.Words < 1 || s.Words > MaxItems ||
			s.Gen < 1 || s.Gen > f.capacity || uint64(s.L)*s.Gen < f.capacity {
			return nil, ErrShape
		}
	} else {
		var err error
		if s, err = Size(o.ErrorRate, f.capacity); err != nil {
			return nil, err
		}
	}
	f.shape = s
	if f.kind == Time {
		f.genMs = int64(ceilDiv(f.window, uint64(s.L)))
	}
	maxBytes := o.MaxBytes
	if maxBytes == 0 {
		maxBytes = DefaultMaxBytes
	}
	if s.Bytes() > maxBytes {
		return nil, ErrTooLarge
	}
	f.alloc()
	return f, nil
}

// floorDiv is ⌊a/b⌋ for b > 0, also for negative a.
func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b < 0 {
		q--
	}
	return q
}

// elapsed is how many generation boundaries a time window has crossed
// between its last time and now (0 for a count window, or when now is not
// later). A now earlier than the last time counts as the last time.
func (f *Filter) elapsed(now int64) uint64 {
	if f.kind != Time || now <= f.last {
		return 0
	}
	// now > last, so the difference of the floors lies in [0, 2^64).
	return uint64(floorDiv(now, f.genMs) - floorDiv(f.last, f.genMs))
}

// slice is the words of physical slice p.
func (f *Filter) slice(p int) []uint64 {
	w := f.shape.Words
	return f.bits[uint64(p)*w : uint64(p+1)*w]
}

// phys is the physical index of the slice at age i (0 youngest).
func (f *Filter) phys(i int) int {
	p := int(f.head) + i
	if S := f.shape.Slices(); p >= S { // i < S, so once suffices
		p -= S
	}
	return p
}

// shift ages the filter by n generations: each one clears the oldest
// slice and makes it the youngest. More than k+l generations clear
// everything, so idle time costs at most one pass over the bits.
func (f *Filter) shift(n uint64) {
	if n == 0 {
		return
	}
	S := uint64(f.shape.Slices())
	if n >= S {
		for p := range int(S) {
			f.clearSlice(p)
		}
	} else {
		for range n {
			f.head = uint32((uint64(f.head) + S - 1) % S)
			f.clearSlice(int(f.head))
		}
	}
	f.gen += n
	if f.gen < n {
		f.gen = math.MaxUint64
	}
	f.inGen = 0
}

// clearSlice empties physical slice p, marking its chunks changed first.
// A slice already empty is left alone: its chunks are not written again.
func (f *Filter) clearSlice(p int) {
	if f.ones[p] == 0 {
		return
	}
	w := f.shape.Words
	f.dirty.MarkRange(uint64(p)*w*8, w*8)
	clear(f.slice(p))
	f.ones[p] = 0
}

// advance brings a time window to now (never backwards).
func (f *Filter) advance(now int64) {
	f.shift(f.elapsed(now))
	if now > f.last {
		f.last = now
	}
}

// position is the item's bit in physical slice p: the 64-bit finaliser
// of MurmurHash3 applied to a + p·b, reduced by multiply-high. The bit
// depends on the physical slice, not its age, so an item's bits stay
// findable as its slices age. Enhanced double hashing, a + p·b +
// (p³−p)/6 reduced directly, measured 18–27% above the rate predicted
// from the fills in TestTimeWindowFalsePositives (slices of a few hundred
// bits, 10⁶ probes, 5σ and more): positions in neighbouring slices of
// one item are not independent when they are mere linear steps; mixed,
// they match the prediction within noise.
func (f *Filter) position(h engine.Hash, p int) (word uint64, mask uint64) {
	x := h.A + uint64(p)*h.B
	x ^= x >> 33
	x *= 0xff51afd7ed558ccd
	x ^= x >> 33
	x *= 0xc4ceb9fe1a85ec53
	x ^= x >> 33
	bit, _ := bits.Mul64(x, f.shape.SliceBits())
	return uint64(p)*f.shape.Words + bit>>6, 1 << (bit & 63)
}

// find reports whether k consecutive slices among the ages [0, n) hold
// the item. It tests a candidate run's oldest slice first and walks
// younger; a clear bit moves the candidate past it, and slices already
// seen set are not tested again, so a negative usually costs about
// (k+l)/k probes.
func (f *Filter) find(h engine.Hash, n int) bool {
	// The probe is written out here, with the filter's fields in locals:
	// as a call (has) it was not inlined and cost a third of a query.
	k, S, head := f.shape.K, f.shape.Slices(), int(f.head)
	W, m, words := f.shape.Words, f.shape.SliceBits(), f.bits
	set := func(age int) bool {
		p := head + age
		if p >= S {
			p -= S
		}
		x := h.A + uint64(p)*h.B
		x ^= x >> 33
		x *= 0xff51afd7ed558ccd
		x ^= x >> 33
		x *= 0xc4ceb9fe1a85ec53
		x ^= x >> 33
		bit, _ := bits.Mul64(x, m)
		return words[uint64(p)*W+bit>>6]&(1<<(bit&63)) != 0
	}
	start, seen := 0, 0 // ages [start, seen) are known set
	for start+k <= n {
		i := start + k - 1
		for i >= seen && set(i) {
			i--
		}
		if i < seen {
			return true
		}
		seen, start = start+k, i+1
	}
	return false
}

// visible is the number of ages still holding data after a virtual shift
// by e generations.
func (f *Filter) visible(e uint64) int {
	S := uint64(f.shape.Slices())
	if e >= S {
		return 0
	}
	return int(S - e)
}

// Add inserts item at time now and reports whether it was new: false
// when the window already reported it present (as BF.ADD answers 0). A
// present item is inserted again, so re-adding keeps it in the window.
// Every Add counts as an insert of a count window.
func (f *Filter) Add(item []byte, now int64) bool {
	h := engine.BloomHash64(item)
	f.advance(now)
	if f.inGen >= f.shape.Gen && (f.kind == Count || f.overflow == KeepRate) {
		f.shift(1)
	}
	existed := f.find(h, f.shape.Slices())
	// Each bit's chunk is marked (a Freeze copies it first) and counted
	// without a branch on whether the bit was clear: that branch, taken
	// half the time at the fills in use, cost a quarter of an Add. A bit
	// already set marks a chunk it does not change, which the next flush
	// writes again: at most the k youngest slices, which new items change
	// anyway.
	for i := range f.shape.K {
		p := f.phys(i)
		w, m := f.position(h, p)
		f.dirty.Mark(w * 8)
		old := f.bits[w]
		f.bits[w] = old | m
		f.ones[p] += uint64(bits.OnesCount64(^old & m))
	}
	if f.inGen < math.MaxUint64 {
		f.inGen++
	}
	if f.inserts < math.MaxUint64 {
		f.inserts++
	}
	return !existed
}

// Exists reports whether item was added within the window as of now. It
// does not modify the filter: a time window's pending generations are
// applied virtually (the slices they would clear are skipped).
func (f *Filter) Exists(item []byte, now int64) bool {
	return f.find(engine.BloomHash64(item), f.visible(f.elapsed(now)))
}

// Info describes a filter as of a time.
type Info struct {
	Kind      Kind
	Overflow  Overflow
	ErrorRate float64
	// Window is N inserts or T ms; Capacity the inserts per window sized for.
	Window, Capacity uint64
	K, L             int
	SliceBits        uint64
	// GenerationSize is the inserts per generation (g); GenerationMs a
	// time window's generation length (d), 0 for a count window.
	GenerationSize uint64
	GenerationMs   int64
	// Generation is the shifts so far, those pending at now included.
	Generation          uint64
	InsertsInGeneration uint64
	Inserts             uint64
	// Fill is each slice's fraction of set bits, youngest first.
	Fill []float64
	// EstimatedFP is the false-positive rate of a never-added item at the
	// current fills; MaxFP the bound the sizing guarantees.
	EstimatedFP, MaxFP float64
	// Items estimates the distinct items of the last l generations (the
	// window) from the fills: the slice at age i holds the generations at
	// ages i−k+1..i, so the slices at ages l−1, l−1−k, … hold each of the
	// l youngest once, and a slice of m bits with a fraction f set holds
	// about −m·ln(1−f) items. It costs no pass over the bits.
	Items float64
	// Guaranteed is how long an item is surely kept: l·g inserts (≥ N) or
	// l·d ms (≥ T). Forgotten is the age (in the same unit) after which
	// none of its bits remain: (k+l)·g inserts or (k+l)·d ms.
	Guaranteed, Forgotten uint64
	MemoryBytes           uint64
}

// MemoryBytes is the filter's memory: its bits, its count of set bits
// per slice, plus its struct, about. It costs O(1).
func (f *Filter) MemoryBytes() uint64 { return f.shape.Bytes() + 8*uint64(f.shape.Slices()) + 200 }

// Info reports the filter's parameters and state as of now.
func (f *Filter) Info(now int64) Info {
	s := f.shape
	in := Info{
		Kind: f.kind, Overflow: f.overflow, ErrorRate: f.errRate,
		Window: f.window, Capacity: f.capacity, K: s.K, L: s.L,
		SliceBits: s.SliceBits(), GenerationSize: s.Gen, GenerationMs: f.genMs,
		Generation: f.gen, InsertsInGeneration: f.inGen, Inserts: f.inserts,
		MaxFP:       s.MaxFP(),
		MemoryBytes: f.MemoryBytes(),
	}
	unit := s.Gen
	if f.kind == Time {
		unit = uint64(f.genMs)
	}
	in.Guaranteed = satMul(uint64(s.L), unit)
	in.Forgotten = satMul(uint64(s.Slices()), unit)
	e := f.elapsed(now)
	if e > 0 {
		in.Generation = satAdd(f.gen, e)
		in.InsertsInGeneration = 0
	}
	vis := f.visible(e)
	in.Fill = make([]float64, s.Slices())
	for i := range vis {
		in.Fill[s.Slices()-vis+i] = float64(f.ones[f.phys(i)]) / float64(s.SliceBits())
	}
	in.EstimatedFP = runProb(in.Fill, s.K)
	m := float64(s.SliceBits())
	for i := s.L - 1; i >= 0; i -= s.K {
		f := min(in.Fill[i], 1-1/m)
		in.Items -= m * math.Log1p(-f)
	}
	return in
}

func satMul(a, b uint64) uint64 {
	hi, lo := bits.Mul64(a, b)
	if hi != 0 {
		return math.MaxUint64
	}
	return lo
}

func satAdd(a, b uint64) uint64 {
	if a+b < a {
		return math.MaxUint64
	}
	return a + b
}
