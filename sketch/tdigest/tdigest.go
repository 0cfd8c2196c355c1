package tdigest

import (
	"math"

	"github.com/bfserver/bfserver/engine"
)

// DefaultCompression is TDIGEST.CREATE's compression without COMPRESSION.
const DefaultCompression = 100

// HeaderBytes is sizeof(td_histogram_t) on 64-bit, the fixed part of
// RedisBloom's mem_usage.
const HeaderBytes = 80

// MaxCompression is the largest compression New accepts. td_init refuses
// what overflows a size_t; beyond that, RedisBloom refuses a compression
// when calloc cannot give it two arrays of 6·c+10 doubles, which depends
// on the machine: an x86-64 Linux process has 2^47 bytes of address
// space, so no machine gives more than that, and the reference machine
// (23 GiB, no swap, heuristic overcommit) refused from about c = 4.9e8
// (23 GiB an array) while accepting 4e8. bfserver allocates nodes as they
// arrive, so it takes every compression some RedisBloom could: arrays up
// to 2^47 bytes each.
const MaxCompression = (1<<47/8 - 10) / 6

// Digest is a merging t-digest with RedisBloom's td_histogram_t state:
// every field RedisBloom keeps, in its C types (cap and the node counts
// are C ints, weights long longs), so the same operations leave the same
// bits. Node arrays grow as nodes arrive instead of being allocated at
// capacity; nothing ever reads a node at or past merged+unmerged.
//
// A Digest is not safe for concurrent use. Queries other than Min, Max
// and Info compress the buffer first (RedisBloom's do), so they write.
type Digest struct {
	compression       float64
	min, max          float64
	cap               int32
	merged, unmerged  int32
	totalCompressions int64
	mergedWeight      int64
	unmergedWeight    int64
	mean              []float64 // len merged+unmerged
	weight            []int64
	// dirty records which 64 KiB chunks of the nodes, as the image lays
	// them out (Array: 16 bytes a node), changed since the image last
	// took them; it grows with the arrays' capacity. Every change marks
	// before it writes (a node's 16 bytes, inside one 64-byte line, or a
	// range), so that an image write holding the nodes (engine.Freeze) can
	// copy them first.
	dirty engine.Dirty
}

// New is td_init for a compression given as TDIGEST.CREATE and MERGE do
// (a long long converted to double); false when td_init refuses it
// ("allocation failed"): above MaxCompression. It does not allocate nodes, so a huge
// compression costs nothing until values arrive. Capacity is 6·c+10
// truncated to a C int, as RedisBloom stores it: compressions from
// 357913940 up wrap to a negative capacity, and such a digest refuses
// every value ("overflow detected"), exactly as RedisBloom's does.
func New(compression int64) (*Digest, bool) {
	return newDigest(float64(compression))
}

func newDigest(c float64) (*Digest, bool) {
	if !(c >= 0 && c < 0x1p64) {
		return nil, false
	}
	u := uint64(c)
	if u > MaxCompression {
		return nil, false
	}
	d := &Digest{compression: c, cap: capacityOf(u)}
	d.Reset()
	return d, true
}

// capacityOf is td_init's capacity, 6·c+10 stored in a C int.
func capacityOf(c uint64) int32 { return int32(uint32(6*c + 10)) }

// Reset is TDIGEST.RESET (td_reset): empty, compression kept.
func (d *Digest) Reset() {
	d.min = math.MaxFloat64
	d.max = -math.MaxFloat64
	d.merged, d.unmerged = 0, 0
	d.mergedWeight, d.unmergedWeight = 0, 0
	d.totalCompressions = 0
	d.mean, d.weight = d.mean[:0], d.weight[:0]
}

// Compression is the digest's compression as INFO reports it.
func (d *Digest) Compression() int64 { return cvtt(d.compression) }

// Size is td_size: merged plus unmerged weight.
func (d *Digest) Size() int64 { return d.mergedWeight + d.unmergedWeight }

// NeedsCompress reports whether a query may change the digest: it holds
// buffered nodes, which QUANTILE, CDF, TRIMMED_MEAN, and RANK or BYRANK
// with an argument inside the data compress. False means every query is
// a pure read that a replica may answer without the log.
func (d *Digest) NeedsCompress() bool { return d.unmerged != 0 }

// Clone is a deep copy.
func (d *Digest) Clone() *Digest {
	c := *d
	c.mean = append([]float64(nil), d.mean...)
	c.weight = append([]int64(nil), d.weight...)
	c.dirty = engine.Dirty{} // its own record: the copy's changes are not d's
	c.dirty.Grow(16 * uint64(cap(c.mean)))
	return &c
}

// AddValues is TDIGEST.ADD after its arguments parsed: each value with
// weight 1, in order. On overflow the values before stay added, as in
// RedisBloom, and ErrOverflow is returned.
func (d *Digest) AddValues(vals []float64) error {
	for _, v := range vals {
		if !d.add(v, 1) {
			return ErrOverflow
		}
	}
	return nil
}

// cvtt converts as x86-64's cvttsd2si does, which is what RedisBloom's
// double-to-long-long casts compile to: truncation, and the "integer
// indefinite" MinInt64 for NaN and out-of-range values (Go leaves those
// to the platform).
func cvtt(f float64) int64 {
	if f >= -0x1p63 && f < 0x1p63 {
		return int64(f)
	}
	return math.MinInt64
}

// addSafe is _tdigest_long_long_add_safe, with its wrapping limit.
func addSafe(a, b int64) bool {
	lim := math.MaxInt64 - b
	if b < 0 {
		return a >= lim
	}
	return a <= lim
}

// overflows is _check_td_overflow.
func overflows(unmerged, total float64) bool {
	inf := math.Inf(1)
	if unmerged == inf || total == inf {
		return true
	}
	return 2*math.Pi*total*glibcLog(total) == inf
}

// add is td_add.
func (d *Digest) add(mean float64, weight int64) bool {
	if d.merged+d.unmerged >= d.cap-1 {
		if !d.compress() {
			return false
		}
	}
	pos := d.merged + d.unmerged
	if pos >= d.cap {
		return false
	}
	if !addSafe(d.unmergedWeight, weight) {
		return false
	}
	nu := d.unmergedWeight + weight
	if !addSafe(nu, d.mergedWeight) {
		return false
	}
	if overflows(float64(nu), float64(nu+d.mergedWeight)) {
		return false
	}
	if mean < d.min {
		d.min = mean
	}
	if mean > d.max {
		d.max = mean
	}
	if len(d.mean) == cap(d.mean) {
		d.grow(int(pos) + 1)
	}
	d.dirty.Mark(16 * uint64(pos))
	d.mean = append(d.mean, mean)
	d.weight = append(d.weight, weight)
	d.unmerged++
	d.unmergedWeight = nu
	return true
}

// grow makes room for at least n nodes: doubling, but never past the
// capacity, so a full digest holds what RedisBloom allocates and no more.
func (d *Digest) grow(n int) {
	c := min(max(2*cap(d.mean), 16, n), int(d.cap))
	m := make([]float64, len(d.mean), c)
	w := make([]int64, len(d.weight), c)
	copy(m, d.mean)
	copy(w, d.weight)
	d.mean, d.weight = m, w
	d.dirty.Grow(16 * uint64(c))
}

// Compress is td_compress: sort the buffer in with the centroids and
// merge neighbours while the merged centroid stays under the size bound
// q(1−q)·2πW·log(W)/compression. False is RedisBloom's EDOM (a weight too
// large for the bound), with the buffer sorted but not merged.
func (d *Digest) Compress() bool { return d.compress() }

func (d *Digest) compress() bool {
	if d.unmerged == 0 {
		return true
	}
	n := int(d.merged + d.unmerged)
	d.dirty.MarkRange(0, 16*uint64(n)) // the sort and the merge may move every node
	sortNodes(d.mean, d.weight, 0, uint32(n-1))
	total := float64(d.mergedWeight) + float64(d.unmergedWeight)
	if overflows(float64(d.unmergedWeight), total) {
		return false
	}
	if total <= 1 {
		// RedisBloom leaves a lone unit-weight point unmerged: with one
		// value added, queries answer nan.
		return true
	}
	denom := 2 * math.Pi * total * glibcLog(total)
	if denom == math.Inf(1) {
		return false
	}
	normalizer := d.compression / denom
	if normalizer == math.Inf(1) {
		return false
	}
	m, w := d.mean, d.weight
	cur := 0
	soFar := 0.0
	for i := 1; i < n; i++ {
		proposed := float64(w[cur]) + float64(w[i])
		z := proposed * normalizer
		q0 := soFar / total
		q2 := (soFar + proposed) / total
		if z <= q0*(1-q0) && z <= q2*(1-q2) {
			w[cur] += w[i]
			delta := m[i] - m[cur]
			m[cur] += delta * float64(w[i]) / float64(w[cur])
		} else {
			soFar += float64(w[cur])
			cur++
			w[cur] = w[i]
			m[cur] = m[i]
		}
	}
	d.merged = int32(cur + 1)
	d.mean, d.weight = m[:cur+1], w[:cur+1]
	d.mergedWeight = cvtt(total)
	d.unmerged = 0
	d.unmergedWeight = 0
	d.totalCompressions++
	return true
}

// sortNodes is td_qsort: quicksort with the middle element as pivot and
// Lomuto's partition, weights moved with their means. Its order among
// equal means (which may carry different weights) decides which nodes
// merge, so it is reproduced exactly, not replaced by another sort.
// Ranges are disjoint, so a loop with an explicit stack gives the same
// result as the C recursion, without its depth. A range found to hold
// one value only finishes in linear time (the C code takes quadratic
// time there, with the same result): a constant stream would otherwise
// cost n²/2 comparisons per compress.
func sortNodes(m []float64, w []int64, start, end uint32) {
	type span struct{ lo, hi uint32 }
	stack := []span{{start, end}}
	for len(stack) > 0 {
		s := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		lo, hi := s.lo, s.hi
		for lo < hi {
			if hi-lo == 1 {
				if m[lo] > m[hi] {
					m[lo], m[hi] = m[hi], m[lo]
					w[lo], w[hi] = w[hi], w[lo]
				}
				break
			}
			p, same := partition(m, w, lo, hi, (hi+lo)/2)
			if same {
				equalRun(m, w, p+1, hi)
				break
			}
			if p > lo {
				stack = append(stack, span{lo, p - 1})
			}
			lo = p + 1
		}
	}
}

// partition is Lomuto's, as td_qsort's partition; same reports that every
// mean in the range equalled the pivot.
func partition(m []float64, w []int64, lo, hi, pivot uint32) (uint32, bool) {
	pv := m[pivot]
	m[pivot], m[hi] = m[hi], m[pivot]
	w[pivot], w[hi] = w[hi], w[pivot]
	i := int64(lo) - 1
	same := true
	for j := lo; j < hi; j++ {
		v := m[j]
		if v != pv {
			same = false
		}
		if v < pv {
			i++
			m[i], m[j] = v, m[i]
			w[i], w[j] = w[j], w[i]
		}
	}
	p := uint32(i + 1)
	m[p], m[hi] = m[hi], m[p]
	w[p], w[hi] = w[hi], w[p]
	return p, same
}

// equalRun finishes sortNodes on [lo, hi] where every mean is the same
// (non-NaN) value: each partition then swaps the middle to the end and
// the end to the front and nothing else, so only those swaps are made.
func equalRun(m []float64, w []int64, lo, hi uint32) {
	for lo < hi && hi-lo != 1 {
		mid := (hi + lo) / 2
		m[mid], m[hi] = m[hi], m[mid]
		w[mid], w[hi] = w[hi], w[mid]
		m[lo], m[hi] = m[hi], m[lo]
		w[lo], w[hi] = w[hi], w[lo]
		lo++
	}
}

// mergeInto is td_merge(into, d): compress both (d is changed too, as in
// RedisBloom), then add d's centroids with their weights.
func (d *Digest) mergeInto(into *Digest) bool {
	if !into.compress() || !d.compress() {
		return false
	}
	n := int(d.merged + d.unmerged)
	for i := 0; i < n; i++ {
		if !into.add(d.mean[i], d.weight[i]) {
			return false
		}
	}
	return true
}

// MergeOptions are TDIGEST.MERGE's options: COMPRESSION's value when
// HasCompression, and OVERRIDE.
type MergeOptions struct {
	Compression    int64
	HasCompression bool
	Override       bool
}

// Merge is TDIGEST.MERGE after its arguments were parsed and its keys
// looked up: dst is the destination's digest (nil when the
// key is absent; it may also appear among srcs, in numkeys order). It
// returns the new destination digest, which replaces dst. The sources
// are compressed on the way (RedisBloom's td_merge does it), even when
// Merge fails.
//
// The compression: COMPRESSION's value if given; else, without OVERRIDE,
// an existing destination's; else the largest of the sources'. An
// existing destination's own data is merged first unless OVERRIDE, and a
// failure there is ignored (RedisBloom ignores it).
func Merge(dst *Digest, srcs []*Digest, opts MergeOptions) (*Digest, error) {
	to, ok := New(mergeCompression(dst, srcs, opts))
	if !ok {
		return nil, ErrMergeAlloc
	}
	if dst != nil && !opts.Override {
		dst.mergeInto(to)
	}
	for _, s := range srcs {
		if !s.mergeInto(to) {
			return nil, ErrOverflow
		}
	}
	return to, nil
}

// mergeCompression is the compression Merge gives the new destination.
func mergeCompression(dst *Digest, srcs []*Digest, opts MergeOptions) int64 {
	c := int64(0)
	useMax := dst == nil
	if dst != nil {
		c = cvtt(dst.compression)
	}
	override := opts.Override
	if opts.HasCompression {
		useMax = false
		c = opts.Compression
	} else if override {
		useMax = true
		c = 0
	}
	if useMax {
		for _, s := range srcs {
			if sc := cvtt(s.compression); sc > c {
				c = sc
			}
		}
	}
	return c
}
