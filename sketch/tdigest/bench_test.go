package tdigest

import (
	"math/rand/v2"
	"testing"

	"github.com/bfserver/bfserver/internal/redisnum"
)

func benchValues(n int) []float64 {
	rnd := rand.New(rand.NewPCG(1, 1))
	v := make([]float64, n)
	for i := range v {
		v[i] = rnd.NormFloat64()*100 + 1000
	}
	return v
}

// BenchmarkAdd is TDIGEST.ADD's work per value (compressions included)
// for a few compressions.
func BenchmarkAdd(b *testing.B) {
	vals := benchValues(1 << 16)
	for _, c := range []int64{100, 1000} {
		b.Run(map[int64]string{100: "c100", 1000: "c1000"}[c], func(b *testing.B) {
			d, _ := New(c)
			for i := 0; b.Loop(); i++ {
				d.AddValues(vals[i&(1<<16-1) : i&(1<<16-1)+1])
			}
		})
	}
}

// BenchmarkQuantile is TDIGEST.QUANTILE of 3 fractions on a compressed
// digest of 100 000 values.
func BenchmarkQuantile(b *testing.B) {
	d, _ := New(DefaultCompression)
	d.AddValues(benchValues(100000))
	qs := []float64{0.5, 0.99, 0.999}
	for b.Loop() {
		d.Quantiles(qs)
	}
}

// BenchmarkMerge is TDIGEST.MERGE of two 100 000-value digests into a new
// one.
func BenchmarkMerge(b *testing.B) {
	x, _ := New(DefaultCompression)
	y, _ := New(DefaultCompression)
	vals := benchValues(200000)
	x.AddValues(vals[:100000])
	y.AddValues(vals[100000:])
	for b.Loop() {
		if _, err := Merge(nil, []*Digest{x, y}, MergeOptions{}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkCompressConstant is a full buffer of one repeated value at
// compression 1000 (6010 nodes): the case td_qsort takes quadratic time
// on and sortNodes finishes in linear time.
func BenchmarkCompressConstant(b *testing.B) {
	d, _ := New(1000)
	vals := make([]float64, 6000)
	for i := range vals {
		vals[i] = 7
	}
	for b.Loop() {
		d.Reset()
		d.AddValues(vals)
		d.Compress()
	}
}

func BenchmarkFormatDouble(b *testing.B) {
	vals := benchValues(1024)
	var buf []byte
	for i := 0; b.Loop(); i++ {
		buf = redisnum.AppendDouble(buf[:0], vals[i&1023])
	}
}
