package window

import (
	"math"
	"sync"
)

// Sizing limits. MaxK and MaxL bound the slices a filter (or a dump
// header) may have, so a query's scan and a header's arithmetic stay
// small; MinErrorRate is the smallest rate whose sizing fits in MaxK.
const (
	MaxK         = 64
	MaxL         = 1024
	MinErrorRate = 1e-12
	MaxErrorRate = 0.5
	// MaxItems bounds a count window and a time window's capacity.
	MaxItems = 1 << 40
	// MaxWindowMs bounds a time window (about 285 years).
	MaxWindowMs = 1 << 53
	// DefaultMaxBytes is the memory cap New and the decoders apply
	// when the caller gives none.
	DefaultMaxBytes = 1 << 30
)

// Shape is what sizing decides: k slices take each insert, l more keep
// it while it ages, every slice has Words 64-bit words, and a generation
// holds Gen inserts. The filter holds (K+L)·Words·8 bytes of bits.
type Shape struct {
	K, L  int
	Words uint64 // per slice
	Gen   uint64 // inserts per generation (g)
}

// Slices is k+l.
func (s Shape) Slices() int { return s.K + s.L }

// Bytes is the bit array's size.
func (s Shape) Bytes() uint64 { return uint64(s.Slices()) * s.Words * 8 }

// SliceBits is the bits in one slice (m).
func (s Shape) SliceBits() uint64 { return s.Words * 64 }

// fills writes into p the worst-case fill of every slice, youngest first:
// the fill reached at the end of a generation in steady state, where the
// slice at age i has taken min(i+1, k) generations of g inserts, each
// setting one of its m bits. The expected fill of a slice that took n
// inserts is 1 − (1 − 1/m)^n, exactly.
func (s Shape) fills(p []float64) []float64 {
	p = p[:0]
	m := float64(s.SliceBits())
	lq := math.Log1p(-1 / m)
	for i := range s.Slices() {
		n := float64(min(i+1, s.K)) * float64(s.Gen)
		p = append(p, -math.Expm1(n*lq))
	}
	return p
}

// MaxFP is the false-positive rate the shape guarantees for an item never
// added (and for one older than the forgetting margin): the probability
// that some k consecutive slices all hold the item's bit, at the
// worst-case fills. Fills only grow with inserts and the probability grows
// with every fill, so no fill reached in use exceeds it (in expectation
// over the hash, as for any Bloom filter).
func (s Shape) MaxFP() float64 {
	var buf [MaxK + MaxL]float64
	return runProb(s.fills(buf[:0]), s.K)
}

// runProb is the probability that k consecutive positions of independent
// Bernoulli(p[i]) trials all succeed. F[i], the probability of such a run
// within the first i positions, grows by the chance that the first run
// ends at i−1: positions i−k..i−1 succeed, i−k−1 fails, and no run lies
// within the first i−k−1. Summing the increments avoids the cancellation
// of 1 − P(no run) for tiny rates. The window's product is kept as the
// product of its non-zero terms and a count of zeros, so the pass is
// O(len(p)) for any k.
func runProb(p []float64, k int) float64 {
	n := len(p)
	if k <= 0 || n < k {
		return 0
	}
	var buf [MaxK + MaxL + 1]float64
	F := buf[:n+1]
	nz, zeros := 1.0, 0
	push := func(v float64) {
		if v == 0 {
			zeros++
		} else {
			nz *= v
		}
	}
	for j := range k {
		push(p[j])
	}
	prod := func() float64 {
		if zeros > 0 {
			return 0
		}
		return nz
	}
	F[k] = prod()
	for i := k + 1; i <= n; i++ {
		// slide the window from [i−k−1, i−1) to [i−k, i)
		if v := p[i-k-1]; v == 0 {
			zeros--
		} else {
			nz /= v
		}
		push(p[i-1])
		F[i] = F[i-1] + (1-p[i-k-1])*prod()*(1-F[i-k-1])
	}
	return min(max(F[n], 0), 1)
}

// maxLoad is the largest inserts-per-bit per generation, x = g/m, at
// which a (k, l) filter stays at or under rate e (bisection: the rate
// grows with x), using the large-m fill 1 − e^(−jx). It returns 0 when no
// load is small enough.
func maxLoad(k, l int, e float64) float64 {
	var buf [MaxK + MaxL]float64
	S := k + l
	fp := func(x float64) float64 {
		p := buf[:S]
		// only k distinct fills: the young slices', then the full one
		for i := range k {
			p[i] = -math.Expm1(-float64(i+1) * x)
		}
		for i := k; i < S; i++ {
			p[i] = p[k-1]
		}
		return runProb(p, k)
	}
	lo, hi := 0.0, 4.0
	if fp(hi) <= e {
		return hi
	}
	if fp(1e-9) > e {
		return 0
	}
	for range 32 { // x to within 4·2^-32: far below a slice's rounding
		mid := (lo + hi) / 2
		if fp(mid) <= e {
			lo = mid
		} else {
			hi = mid
		}
	}
	return lo
}

// ceilDiv is ⌈a/b⌉ for b > 0.
func ceilDiv(a, b uint64) uint64 { return a/b + min(a%b, 1) }

// shapeFor builds the (k, l) shape for n inserts per window at load x,
// growing the slice until the exact-fill rate is at or under e (rounding
// the slice to whole words usually suffices).
func shapeFor(k, l int, n uint64, x, e float64) (Shape, bool) {
	g := ceilDiv(n, uint64(l))
	bitsF := math.Ceil(float64(g) / x)
	if !(bitsF < float64(MaxItems)*64) {
		return Shape{}, false
	}
	s := Shape{K: k, L: l, Words: max(ceilDiv(uint64(bitsF), 64), 1), Gen: g}
	for range 64 {
		if s.MaxFP() <= e {
			return s, true
		}
		s.Words += max(s.Words/64, 1)
	}
	return Shape{}, false
}

// Size chooses the shape of least memory for a window of n inserts (a
// count window's N, a time window's capacity per T) at error rate e.
//
// The paper fixes each slice's final fill at ½ (m = k·g/ln 2) and picks
// (k, l) from its table; here the fill is free too: for a given (k, l)
// the largest load x = g/m meeting e is found by bisection on the run
// probability, and memory is (k+l)·m. For each k, a ternary search over l
// on the continuous cost (k+l)/(l·x) finds the best l, the l around it
// are sized exactly (g and m rounded up); the scan over k stops once 4 k
// in a row did no better. The paper's own candidates (fill ½ at the
// largest l each k allows, PaperSize) are sized too, for every k, so the
// result never takes more memory than the paper's design point. It costs a few milliseconds,
// tens at the smallest rates; the result depends only on (e, n).
func Size(e float64, n uint64) (Shape, error) {
	if !(e >= MinErrorRate && e <= MaxErrorRate) {
		return Shape{}, ErrErrorRate
	}
	if n < 1 || n > MaxItems {
		return Shape{}, ErrWindow
	}
	k := sizeKey{math.Float64bits(e), n}
	sizes.Lock()
	s, ok := sizes.m[k]
	sizes.Unlock()
	if ok {
		return s, nil
	}
	s, err := size(e, n)
	if err != nil {
		return s, err
	}
	sizes.Lock()
	if len(sizes.m) >= 256 || sizes.m == nil {
		sizes.m = map[sizeKey]Shape{}
	}
	sizes.m[k] = s
	sizes.Unlock()
	return s, nil
}

// sizes remembers recent sizings: servers create many filters of the same
// parameters, and a sizing costs milliseconds. Bounded by clearing.
var sizes struct {
	sync.Mutex
	m map[sizeKey]Shape
}

type sizeKey struct {
	e uint64
	n uint64
}

// size is Size's search, uncached.
func size(e float64, n uint64) (Shape, error) {
	var best Shape
	better := func(s Shape) bool {
		if best.K == 0 || s.Bytes() < best.Bytes() ||
			s.Bytes() == best.Bytes() && s.Slices() < best.Slices() {
			best = s
			return true
		}
		return false
	}
	lmax := int(min(n, MaxL))
	for k := 1; k <= MaxK; k++ {
		if s, ok := paperShape(k, lmax, n, e); ok {
			better(s)
		}
	}
	worseK, optBest := 0, uint64(math.MaxUint64)
	for k := 1; k <= MaxK && worseK < 4; k++ {
		loads := map[int]float64{}
		load := func(l int) float64 {
			x, ok := loads[l]
			if !ok {
				x = maxLoad(k, l, e)
				loads[l] = x
			}
			return x
		}
		cost := func(l int) float64 {
			x := load(l)
			if x == 0 {
				return math.Inf(1)
			}
			return float64(k+l) / (float64(l) * x)
		}
		lo, hi := 1, lmax
		for hi-lo > 4 {
			a, b := lo+(hi-lo)/3, hi-(hi-lo)/3
			if cost(a) <= cost(b) {
				hi = b
			} else {
				lo = a
			}
		}
		improved := false
		for l := max(lo-8, 1); l <= min(hi+8, lmax); l++ {
			if x := load(l); x > 0 {
				if s, ok := shapeFor(k, l, n, x, e); ok {
					better(s)
					if s.Bytes() < optBest {
						optBest, improved = s.Bytes(), true
					}
				}
			}
		}
		if improved {
			worseK = 0
		} else {
			worseK++
		}
	}
	if best.K == 0 {
		return Shape{}, ErrErrorRate
	}
	return best, nil
}

// paperShape is the paper's design point for k: every slice ends at fill
// ½, m = ⌈k·g/ln 2⌉ bits, and l is the largest (at most lmax) whose rate
// meets e, found by bisection since at fixed fills the rate only grows
// with l; memory, (k+l)/l times a plain filter's, then is least.
func paperShape(k, lmax int, n uint64, e float64) (Shape, bool) {
	at := func(l int) Shape {
		g := ceilDiv(n, uint64(l))
		m := math.Ceil(float64(k) * float64(g) / math.Ln2)
		return Shape{K: k, L: l, Words: max(ceilDiv(uint64(m), 64), 1), Gen: g}
	}
	if at(1).MaxFP() > e {
		return Shape{}, false
	}
	lo, hi := 1, lmax // at(lo) meets e
	for lo < hi {
		mid := (lo + hi + 1) / 2
		if at(mid).MaxFP() <= e {
			lo = mid
		} else {
			hi = mid - 1
		}
	}
	return at(lo), true
}

// PaperSize is the paper's design point for comparison: fill ½ at every
// slice's end, and the k (with its largest l) of least memory.
func PaperSize(e float64, n uint64) (Shape, bool) {
	var best Shape
	for k := 1; k <= MaxK; k++ {
		if s, ok := paperShape(k, int(min(n, MaxL)), n, e); ok && (best.K == 0 || s.Bytes() < best.Bytes()) {
			best = s
		}
	}
	return best, best.K != 0
}
