package tdigest

import "math"

// The queries below are RedisBloom's replies, computed as rm_tdigest.c
// and tdigest.c compute them, operation for operation: products that
// feed a sum are rounded with float64(), so no platform fuses them into
// an FMA (the x86-64 build of RedisBloom has none there), and min/max
// use C's ternaries, whose NaN behaviour differs from math.Min/Max.

func cmax(a, b float64) float64 {
	if a > b {
		return a
	}
	return b
}

func cmin(a, b float64) float64 {
	if a < b {
		return a
	}
	return b
}

// Min is TDIGEST.MIN: the smallest value, nan when empty.
func (d *Digest) Min() float64 {
	if d.Size() > 0 {
		return d.min
	}
	return math.NaN()
}

// Max is TDIGEST.MAX: the largest value, nan when empty.
func (d *Digest) Max() float64 {
	if d.Size() > 0 {
		return d.max
	}
	return math.NaN()
}

// Quantiles is TDIGEST.QUANTILE over arguments already checked to lie in
// [0, 1] (CheckQuantile): each maximal non-decreasing run of qs is one
// td_quantiles call, which walks the centroids once.
func (d *Digest) Quantiles(qs []float64) []float64 {
	out := make([]float64, len(qs))
	for i := 0; i < len(qs); i++ {
		start := i
		for i < len(qs)-1 && qs[i] <= qs[i+1] {
			i++
		}
		d.quantiles(qs[start:i+1], out[start:i+1])
	}
	return out
}

// quantiles is td_quantiles.
func (d *Digest) quantiles(qs, out []float64) {
	d.compress()
	n := int(d.merged)
	switch n {
	case 0:
		for i := range out {
			out[i] = math.NaN()
		}
		return
	case 1:
		for i, q := range qs {
			if q < 0 || q > 1 {
				out[i] = math.NaN()
			} else {
				out[i] = d.mean[0]
			}
		}
		return
	}
	left := float64(d.weight[0])
	soFar := left / 2
	pos := 0
	for i, q := range qs {
		out[i] = d.valueAt(q*float64(d.mergedWeight), left, n, &soFar, &pos)
	}
}

// quantile is td_quantile (used by BYRANK and BYREVRANK).
func (d *Digest) quantile(q float64) float64 {
	d.compress()
	if q < 0 || q > 1 || d.merged == 0 {
		return math.NaN()
	}
	if d.merged == 1 {
		return d.mean[0]
	}
	index := q * float64(d.mergedWeight)
	if index < 1 {
		return d.min
	}
	left := float64(d.weight[0])
	soFar := left / 2
	pos := 0
	return d.valueAt(index, left, int(d.merged), &soFar, &pos)
}

func weightedAverage(x1, w1, x2, w2 float64) float64 {
	if x1 <= x2 {
		return weightedAverageSorted(x1, w1, x2, w2)
	}
	return weightedAverageSorted(x2, w2, x1, w1)
}

func weightedAverageSorted(x1, w1, x2, w2 float64) float64 {
	x := (float64(x1*w1) + float64(x2*w2)) / (w1 + w2)
	return cmax(x1, cmin(x, x2))
}

// valueAt is td_internal_iterate_centroids_to_index: the value at rank
// index, interpolating between centroid centres, resuming at *pos.
func (d *Digest) valueAt(index, left float64, n int, soFar *float64, pos *int) float64 {
	m, w := d.mean, d.weight
	if left > 1 && index < left/2 {
		return d.min + float64((index-1)/(left/2-1)*(m[0]-d.min))
	}
	if index > float64(d.mergedWeight-1) {
		return d.max
	}
	right := float64(w[n-1])
	rightMean := m[n-1]
	mw := float64(d.mergedWeight)
	if right > 1 && mw-index <= right/2 {
		return d.max - float64((mw-index-1)/(right/2-1)*(d.max-rightMean))
	}
	for ; *pos < n-1; *pos++ {
		i := *pos
		nw, nwNext := float64(w[i]), float64(w[i+1])
		nm, nmNext := m[i], m[i+1]
		dw := (nw + nwNext) / 2
		if *soFar+dw > index {
			leftUnit := 0.0
			if nw == 1 {
				if index-*soFar < 0.5 {
					return nm
				}
				leftUnit = 0.5
			}
			rightUnit := 0.0
			if nwNext == 1 {
				if *soFar+dw-index <= 0.5 {
					return nmNext
				}
				rightUnit = 0.5
			}
			z1 := index - *soFar - leftUnit
			z2 := *soFar + dw - index - rightUnit
			return weightedAverage(nm, z2, nmNext, z1)
		}
		*soFar += dw
	}
	z1 := index - mw - right/2.0
	z2 := right/2 - z1
	return weightedAverage(rightMean, z1, d.max, z2)
}

// CDF is TDIGEST.CDF: td_cdf of each value.
func (d *Digest) CDF(vals []float64) []float64 {
	out := make([]float64, len(vals))
	for i, v := range vals {
		out[i] = d.cdf(v)
	}
	return out
}

// cdf is td_cdf.
func (d *Digest) cdf(val float64) float64 {
	d.compress()
	if d.merged == 0 {
		return math.NaN()
	}
	if val < d.min {
		return 0
	}
	if val > d.max {
		return 1
	}
	m, w := d.mean, d.weight
	if d.merged == 1 {
		width := d.max - d.min
		if val-d.min <= width {
			return 0.5
		}
		return (val - d.min) / width
	}
	n := int(d.merged)
	leftMean := m[0]
	left := float64(w[0])
	mw := float64(d.mergedWeight)
	if val < leftMean {
		width := leftMean - d.min
		if width > 0 {
			if val == d.min {
				return 0.5 / mw
			}
			return (1 + float64((val-d.min)/width*(left/2-1))) / mw
		}
		return 0
	}
	rightMean := m[n-1]
	right := float64(w[n-1])
	if val > rightMean {
		width := d.max - rightMean
		if width > 0 {
			if val == d.max {
				return 1 - 0.5/mw
			}
			dq := (1 + float64((d.max-val)/width*(right/2-1))) / mw
			return 1 - dq
		}
		return 1
	}
	soFar := 0.0
	for it := 0; it < n-1; it++ {
		if m[it] == val {
			dw := 0.0
			for it < n && m[it] == val {
				dw += float64(w[it])
				it++
			}
			return (soFar + dw/2) / mw
		} else if m[it] <= val && val < m[it+1] {
			nw, nwNext := float64(w[it]), float64(w[it+1])
			nm, nmNext := m[it], m[it+1]
			if nmNext-nm > 0 {
				leftExcluded, rightExcluded := 0.0, 0.0
				if nw == 1 {
					if nwNext == 1 {
						return (soFar + 1) / mw
					}
					leftExcluded = 0.5
				} else if nwNext == 1 {
					rightExcluded = 0.5
				}
				dw := (nw + nwNext) / 2
				dwNoSingleton := dw - leftExcluded - rightExcluded
				base := soFar + nw/2 + leftExcluded
				return (base + dwNoSingleton*(val-nm)/(nmNext-nm)) / mw
			}
			dw := (nw + nwNext) / 2
			return (soFar + dw) / mw
		} else {
			soFar += float64(w[it])
		}
	}
	return 1 - 0.5/mw
}

// Ranks is TDIGEST.RANK (reverse false) or TDIGEST.REVRANK (true): -2 for
// an empty digest; below the minimum -1 (RANK) or the count (REVRANK);
// above the maximum the count (RANK) or -1 (REVRANK); otherwise the CDF
// scaled to the count and rounded (half down for RANK, half away from
// zero for REVRANK, whose result is the count minus that).
func (d *Digest) Ranks(vals []float64, reverse bool) []int64 {
	size := float64(d.Size())
	lo, hi := d.min, d.max
	out := make([]int64, len(vals))
	for i, v := range vals {
		var r float64
		switch {
		case size == 0:
			r = -2
		case v < lo:
			r = -1
			if reverse {
				r = size
			}
		case v > hi:
			r = size
			if reverse {
				r = -1
			}
		default:
			prior := d.cdf(v) * size
			if reverse {
				r = math.Round(size - math.Round(prior))
			} else {
				r = halfRoundDown(prior)
			}
		}
		out[i] = cvtt(r)
	}
	return out
}

// RanksCompress reports whether Ranks(vals, …) would change the digest:
// it holds buffered nodes and some value lies within [min, max] (the
// only case that reaches td_cdf, which compresses). When false, Ranks is
// a pure read.
func (d *Digest) RanksCompress(vals []float64) bool {
	if !d.NeedsCompress() || d.Size() == 0 {
		return false
	}
	for _, v := range vals {
		if !(v < d.min) && !(v > d.max) {
			return true
		}
	}
	return false
}

// halfRoundDown is rm_tdigest's _halfRoundDown: round half towards zero.
func halfRoundDown(f float64) float64 {
	ip, frac := cModf(f)
	if math.Abs(frac) <= 0.5 {
		return ip
	}
	if ip >= 0 {
		return ip + 1
	}
	return ip - 1
}

// cModf is C's modf (Go's gives a NaN fraction for ±Inf, C a zero).
func cModf(f float64) (float64, float64) {
	if math.IsInf(f, 0) {
		return f, math.Copysign(0, f)
	}
	return math.Modf(f)
}

// ByRanks is TDIGEST.BYRANK (reverse false) or TDIGEST.BYREVRANK (true)
// over ranks already checked non-negative (CheckRank): nan for an empty
// digest, rank 0 is the minimum (maximum), a rank at or past the count is
// inf (-inf), others the value at quantile rank/count ((count−rank−1)/count).
func (d *Digest) ByRanks(ranks []int64, reverse bool) []float64 {
	size := float64(d.Size())
	lo, hi := d.min, d.max
	out := make([]float64, len(ranks))
	for i, rk := range ranks {
		r := float64(rk)
		switch {
		case size == 0:
			out[i] = math.NaN()
		case r == 0:
			out[i] = lo
			if reverse {
				out[i] = hi
			}
		case r >= size:
			out[i] = math.Inf(1)
			if reverse {
				out[i] = math.Inf(-1)
			}
		default:
			if reverse {
				r = size - r - 1
			}
			out[i] = d.quantile(r / size)
		}
	}
	return out
}

// ByRanksCompress reports whether ByRanks(ranks, …) would change the
// digest: it holds buffered nodes and some rank lies in (0, count) (the
// only case that reaches td_quantile, which compresses). When false,
// ByRanks is a pure read.
func (d *Digest) ByRanksCompress(ranks []int64) bool {
	size := float64(d.Size())
	if !d.NeedsCompress() || size == 0 {
		return false
	}
	for _, rk := range ranks {
		if r := float64(rk); r != 0 && !(r >= size) {
			return true
		}
	}
	return false
}

// TrimmedMean is TDIGEST.TRIMMED_MEAN over cuts already checked
// (CheckCuts): the mean of the values between the two quantiles.
func (d *Digest) TrimmedMean(low, high float64) float64 {
	d.compress()
	if d.merged == 0 || low < 0 || low > 1 || high < 0 || high > 1 {
		return math.NaN()
	}
	if d.merged == 1 {
		return d.mean[0]
	}
	mw := float64(d.mergedWeight)
	leftmost := math.Floor(mw * low)
	rightmost := math.Ceil(mw * high)
	done, sum, count := 0.0, 0.0, 0.0
	for i := 0; i < int(d.merged); i++ {
		nw := float64(d.weight[i])
		add := nw
		add -= cmin(cmax(0, leftmost-done), add)
		add = cmin(cmax(0, rightmost-done), add)
		done += nw
		sum += float64(d.mean[i] * add)
		count += add
		if done >= rightmost {
			break
		}
	}
	return sum / count
}

// Info is TDIGEST.INFO's fields, in its order.
type Info struct {
	Compression       int64
	Capacity          int64
	MergedNodes       int64
	UnmergedNodes     int64
	MergedWeight      int64
	UnmergedWeight    int64
	Observations      int64
	TotalCompressions int64
	MemoryUsage       int64
}

// InfoFieldNames are TDIGEST.INFO's field names, in order.
var InfoFieldNames = [9]string{
	"Compression", "Capacity", "Merged nodes", "Unmerged nodes", "Merged weight",
	"Unmerged weight", "Observations", "Total compressions", "Memory usage",
}

// Info is TDIGEST.INFO; it does not compress.
func (d *Digest) Info() Info {
	return Info{
		Compression:       d.Compression(),
		Capacity:          int64(d.cap),
		MergedNodes:       int64(d.merged),
		UnmergedNodes:     int64(d.unmerged),
		MergedWeight:      d.mergedWeight,
		UnmergedWeight:    d.unmergedWeight,
		Observations:      d.unmergedWeight + d.mergedWeight,
		TotalCompressions: d.totalCompressions,
		MemoryUsage:       int64(d.MemUsage()),
	}
}

// Values is the Info fields in InfoFieldNames order.
func (i Info) Values() [9]int64 {
	return [9]int64{i.Compression, i.Capacity, i.MergedNodes, i.UnmergedNodes, i.MergedWeight,
		i.UnmergedWeight, i.Observations, i.TotalCompressions, i.MemoryUsage}
}

// MemUsage is RedisBloom's mem_usage of the key's value (TDIGEST.INFO's
// Memory usage; MEMORY USAGE adds the key's own overhead): the header and
// two arrays of capacity 8-byte nodes, in size_t arithmetic, so a
// wrapped (negative) capacity gives the huge value RedisBloom reports as
// a negative long long. It depends on the capacity only, not on what the
// digest holds.
func (d *Digest) MemUsage() uint64 {
	return HeaderBytes + 2*(uint64(int64(d.cap))*8)
}

// Footprint is the memory this Digest actually holds (its nodes grow on
// demand), for bfserver's own accounting.
func (d *Digest) Footprint() uint64 { return footprintOf(cap(d.mean)) }

func footprintOf(nodes int) uint64 { return 128 + 16*uint64(nodes) }

// growCap is the node arrays' capacity once grown from have to hold need
// nodes, as grow does it (doubling, at least 16, never past capacity).
func growCap(have, need int, capacity int32) int {
	c := have
	for c < need && c < int(capacity) {
		c = min(max(2*c, 16, c+1), int(capacity))
	}
	return c
}

// FootprintAfterAdd bounds Footprint after AddValues of n values (a
// compress on the way only lowers it), so a byte cap can refuse an ADD
// before it changes anything.
func (d *Digest) FootprintAfterAdd(n int) uint64 {
	need := min(len(d.mean)+n, int(max(d.cap, 0)))
	return footprintOf(growCap(cap(d.mean), need, d.cap))
}

// MergeFootprint bounds the Footprint of Merge's result for the same
// arguments, computed before Merge changes anything.
func MergeFootprint(dst *Digest, srcs []*Digest, opts MergeOptions) uint64 {
	c := mergeCompression(dst, srcs, opts)
	if c < 0 || c > MaxCompression {
		return footprintOf(0) // New refuses it: nothing is allocated
	}
	n := 0
	if dst != nil && !opts.Override {
		n += len(dst.mean)
	}
	for _, s := range srcs {
		n += len(s.mean)
	}
	capacity := capacityOf(uint64(c))
	return footprintOf(growCap(0, min(n, int(max(capacity, 0))), capacity))
}
