package tdigest

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestPureQueries: a query that NeedsCompress, RanksCompress or
// ByRanksCompress says is pure leaves the digest bit-identical, so a
// replica may answer it without the log; one they say writes does change
// a digest that holds a buffer (bfserver sends it through the log).
func TestPureQueries(t *testing.T) {
	rng := rand.New(rand.NewPCG(26, 7))
	digests := seedDigests()
	for i := 0; i < 40; i++ {
		d, _ := New(int64(1 + rng.IntN(60)))
		for n := rng.IntN(400); n > 0; n-- {
			d.AddValues([]float64{math.Round(rng.NormFloat64()*20) / 4})
		}
		digests = append(digests, d)
	}
	vals := func() []float64 {
		out := make([]float64, 1+rng.IntN(4))
		for i := range out {
			switch rng.IntN(6) {
			case 0:
				out[i] = math.Inf(-1 + 2*rng.IntN(2))
			case 1:
				out[i] = math.NaN()
			case 2:
				out[i] = -1e9
			default:
				out[i] = math.Round(rng.NormFloat64()*30) / 4
			}
		}
		return out
	}
	ranks := func(d *Digest) []int64 {
		out := make([]int64, 1+rng.IntN(4))
		for i := range out {
			switch rng.IntN(4) {
			case 0:
				out[i] = 0
			case 1:
				out[i] = d.Size() + int64(rng.IntN(3))
			default:
				out[i] = rng.Int64N(d.Size() + 1)
			}
		}
		return out
	}
	pure, writes := 0, 0
	for round := 0; round < 20; round++ {
		for _, d := range digests {
			vs, rs := vals(), ranks(d)
			for q := 0; q < 6; q++ {
				c := d.Clone()
				var says bool
				switch q {
				case 0:
					says = c.NeedsCompress()
					c.Quantiles([]float64{0.5, 0.9})
				case 1:
					says = c.NeedsCompress()
					c.CDF(vs)
				case 2:
					says = c.NeedsCompress()
					c.TrimmedMean(0.1, 0.9)
				case 3:
					says = c.RanksCompress(vs)
					c.Ranks(vs, rng.IntN(2) == 0)
				case 4:
					says = c.ByRanksCompress(rs)
					c.ByRanks(rs, rng.IntN(2) == 0)
				case 5:
					says = false // MIN, MAX and INFO never compress
					c.Min()
					c.Max()
					c.Info()
				}
				same := c.Equal(d)
				if !says && !same {
					t.Fatalf("query %d said pure but changed the digest (vals %v, ranks %v)", q, vs, rs)
				}
				if says && same && d.Size() > 1 {
					t.Fatalf("query %d said it writes but left a digest of %d values as it was", q, d.Size())
				}
				if says {
					writes++
				} else {
					pure++
				}
			}
		}
		// Some digests end compressed, some gain a buffer.
		for _, d := range digests {
			if rng.IntN(2) == 0 {
				d.Compress()
			} else {
				d.AddValues([]float64{rng.Float64()})
			}
		}
	}
	if pure < 100 || writes < 100 {
		t.Fatalf("only %d pure and %d writing queries", pure, writes)
	}
}

// TestFootprintBounds: FootprintAfterAdd and MergeFootprint are never
// below the Footprint the ADD or MERGE leaves, so a byte cap checked
// with them before the change holds after it.
func TestFootprintBounds(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 26))
	for i := 0; i < 300; i++ {
		d, _ := New(int64(1 + rng.IntN(200)))
		for j := rng.IntN(5); j > 0; j-- {
			vals := make([]float64, rng.IntN(3000))
			for k := range vals {
				vals[k] = rng.NormFloat64()
			}
			bound := d.FootprintAfterAdd(len(vals))
			d.AddValues(vals)
			if f := d.Footprint(); f > bound {
				t.Fatalf("footprint %d after adding %d values, bound %d", f, len(vals), bound)
			}
		}
		src, _ := New(int64(1 + rng.IntN(300)))
		src.AddValues([]float64{1, 2, 3, rng.Float64()})
		opts := MergeOptions{Override: rng.IntN(2) == 0}
		if rng.IntN(2) == 0 {
			opts.Compression, opts.HasCompression = int64(1+rng.IntN(500)), true
		}
		bound := MergeFootprint(d, []*Digest{src, d}, opts)
		to, err := Merge(d, []*Digest{src, d}, opts)
		if err != nil {
			t.Fatal(err)
		}
		if f := to.Footprint(); f > bound {
			t.Fatalf("merged footprint %d, bound %d", f, bound)
		}
	}
}
