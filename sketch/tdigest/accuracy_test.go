package tdigest

import (
	"math"
	"math/rand/v2"
	"slices"
	"sort"
	"testing"
)

// rankBound is the rank error (as a fraction of N) the merging t-digest
// guarantees at quantile q: compress merges a centroid only while its
// weight w satisfies w·δ/(2π·N·ln N) ≤ q(1−q) at both its edges, so a
// centroid around q holds at most q(1−q)·2π·N·ln N/δ values, and
// interpolation inside it errs by at most half of that. A factor 2 covers
// the neighbouring centroid the interpolation also leans on, and 2/N the
// singletons at the ends.
func rankBound(q float64, n int, delta float64) float64 {
	return 2*q*(1-q)*math.Pi*math.Log(float64(n))/delta + 2/float64(n)
}

// trueRank is the fraction of data below x, counting values equal to x
// half (TDIGEST.CDF's definition).
func trueRank(sorted []float64, x float64) float64 {
	lo := sort.SearchFloat64s(sorted, x)
	hi := lo
	for hi < len(sorted) && sorted[hi] == x {
		hi++
	}
	return (float64(lo) + float64(hi-lo)/2) / float64(len(sorted))
}

// TestAccuracyTails measures quantile and CDF rank errors against the
// exact answers on 200 000 values of uniform, normal and exponential
// streams with compression 100, and holds them to rankBound; the tails
// (q = 0.001, 0.999 and beyond) are where t-digest is meant to be
// accurate.
func TestAccuracyTails(t *testing.T) {
	const n = 200000
	rnd := rand.New(rand.NewPCG(1, 2))
	qs := []float64{0.0001, 0.001, 0.01, 0.1, 0.5, 0.9, 0.99, 0.999, 0.9999}
	for _, dist := range []struct {
		name string
		gen  func() float64
	}{
		{"uniform", rnd.Float64},
		{"normal", rnd.NormFloat64},
		{"exponential", rnd.ExpFloat64},
	} {
		d, _ := New(DefaultCompression)
		data := make([]float64, n)
		for i := range data {
			data[i] = dist.gen()
			if err := d.AddValues(data[i : i+1]); err != nil {
				t.Fatal(err)
			}
		}
		slices.Sort(data)
		est := d.Quantiles(qs)
		var worst float64
		for i, q := range qs {
			bound := rankBound(q, n, DefaultCompression)
			qerr := math.Abs(trueRank(data, est[i]) - q)
			exact := data[int(q*n)]
			cerr := math.Abs(d.CDF([]float64{exact})[0] - trueRank(data, exact))
			if qerr > bound || cerr > bound {
				t.Errorf("%s q=%v: quantile rank error %.3g, CDF error %.3g, bound %.3g",
					dist.name, q, qerr, cerr, bound)
			}
			worst = max(worst, qerr/bound)
			t.Logf("%-11s q=%-6v rank error %.2e (quantile) %.2e (cdf), bound %.2e", dist.name, q, qerr, cerr, bound)
		}
		m, u := d.NodeCounts()
		t.Logf("%s: %d centroids (+%d buffered), worst error %.0f%% of the bound", dist.name, m, u, 100*worst)
	}
}

// TestDeterministic replays the same operations twice: bit-identical
// digests, the property replication relies on.
func TestDeterministic(t *testing.T) {
	build := func() *Digest {
		rnd := rand.New(rand.NewPCG(7, 7))
		a, _ := New(20)
		b, _ := New(50)
		for i := 0; i < 5000; i++ {
			v := []float64{math.Round(rnd.NormFloat64() * 10)}
			if i%3 == 0 {
				b.AddValues(v)
			} else {
				a.AddValues(v)
			}
			if i%700 == 0 {
				a.Quantiles([]float64{0.5})
			}
		}
		m, err := Merge(a, []*Digest{b, a}, MergeOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	x, y := build(), build()
	if !x.Equal(y) || x.Digest() != y.Digest() {
		t.Fatal("same operations, different digests")
	}
}

// TestSortNodesMatchesQuicksort checks sortNodes' linear shortcut for a
// range of one value against the plain C algorithm on inputs full of
// equal means carrying different weights.
func TestSortNodesMatchesQuicksort(t *testing.T) {
	rnd := rand.New(rand.NewPCG(3, 4))
	for trial := 0; trial < 2000; trial++ {
		n := 1 + rnd.IntN(200)
		m := make([]float64, n)
		w := make([]int64, n)
		distinct := 1 + rnd.IntN(4)
		for i := range m {
			m[i] = float64(rnd.IntN(distinct))
			if rnd.IntN(20) == 0 {
				m[i] = math.Copysign(0, -1)
			}
			w[i] = int64(i)
		}
		m2, w2 := slices.Clone(m), slices.Clone(w)
		sortNodes(m, w, 0, uint32(n-1))
		plainQsort(m2, w2, 0, uint32(n-1))
		for i := range m {
			if math.Float64bits(m[i]) != math.Float64bits(m2[i]) || w[i] != w2[i] {
				t.Fatalf("trial %d: position %d differs", trial, i)
			}
		}
	}
}

// plainQsort is td_qsort as written, recursion and all.
func plainQsort(m []float64, w []int64, start, end uint32) {
	if start >= end {
		return
	}
	if end-start == 1 {
		if m[start] > m[end] {
			m[start], m[end] = m[end], m[start]
			w[start], w[end] = w[end], w[start]
		}
		return
	}
	pivot := (end + start) / 2
	pv := m[pivot]
	m[pivot], m[end] = m[end], m[pivot]
	w[pivot], w[end] = w[end], w[pivot]
	i := int64(start) - 1
	for j := start; j < end; j++ {
		if m[j] < pv {
			i++
			m[i], m[j] = m[j], m[i]
			w[i], w[j] = w[j], w[i]
		}
	}
	p := uint32(i + 1)
	m[p], m[end] = m[end], m[p]
	w[p], w[end] = w[end], w[p]
	if p > start {
		plainQsort(m, w, start, p-1)
	}
	plainQsort(m, w, p+1, end)
}
