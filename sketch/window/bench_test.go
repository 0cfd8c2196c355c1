package window

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/bfserver/bfserver/engine"
)

// The benchmarks compare one window filter with one engine Bloom filter
// (what BF.ADD/BF.EXISTS use) at the same error rate and capacity, each
// hashing the item itself, in steady state: the window has taken 3× its
// N, the Bloom filter N (a full filter; it never forgets).

func benchItems(n int) [][]byte {
	rng := rand.New(rand.NewPCG(11, 11))
	items := make([][]byte, n)
	for i := range items {
		items[i] = key(3, rng.Uint64())
	}
	return items
}

var benchCases = []struct {
	e float64
	n uint64
}{{0.01, 100_000}, {0.001, 1_000_000}}

func BenchmarkAdd(b *testing.B) {
	items := benchItems(1 << 20)
	const mask = 1<<20 - 1
	for _, c := range benchCases {
		name := fmt.Sprintf("e=%g/N=%d", c.e, c.n)
		b.Run("window/"+name, func(b *testing.B) {
			f := mustNew(b, Options{ErrorRate: c.e, Kind: Count, Count: c.n})
			for i := range 3 * int(c.n) {
				f.Add(items[i&mask], 0)
			}
			for i := 0; b.Loop(); i++ {
				f.Add(items[i&mask], 0)
			}
			b.ReportMetric(float64(f.shape.Bytes()), "bytes")
		})
		b.Run("bloom/"+name, func(b *testing.B) {
			p, _ := engine.SizeBloom(c.n, c.e)
			f := engine.NewBloom(p)
			for i := range int(c.n) {
				f.Add(engine.BloomHash64(items[i&mask]))
			}
			for i := 0; b.Loop(); i++ {
				f.Add(engine.BloomHash64(items[i&mask]))
			}
			b.ReportMetric(float64(p.Bytes), "bytes")
		})
	}
}

func BenchmarkExists(b *testing.B) {
	items := benchItems(1 << 20)
	const mask = 1<<20 - 1
	absent := make([][]byte, 1<<16)
	for i := range absent {
		absent[i] = key(4, uint64(i))
	}
	for _, c := range benchCases {
		name := fmt.Sprintf("e=%g/N=%d", c.e, c.n)
		f := mustNew(b, Options{ErrorRate: c.e, Kind: Count, Count: c.n})
		for i := range 3 * int(c.n) {
			f.Add(items[i%int(c.n)], 0) // the last N are items[0..N)
		}
		p, _ := engine.SizeBloom(c.n, c.e)
		bf := engine.NewBloom(p)
		for i := range int(c.n) {
			bf.Add(engine.BloomHash64(items[i]))
		}
		n := int(c.n)
		b.Run("window/present/"+name, func(b *testing.B) {
			for i := 0; b.Loop(); i++ {
				f.Exists(items[i%n], 0)
			}
		})
		b.Run("bloom/present/"+name, func(b *testing.B) {
			for i := 0; b.Loop(); i++ {
				bf.Test(engine.BloomHash64(items[i%n]))
			}
		})
		b.Run("window/absent/"+name, func(b *testing.B) {
			for i := 0; b.Loop(); i++ {
				f.Exists(absent[i&(1<<16-1)], 0)
			}
		})
		b.Run("bloom/absent/"+name, func(b *testing.B) {
			for i := 0; b.Loop(); i++ {
				bf.Test(engine.BloomHash64(absent[i&(1<<16-1)]))
			}
		})
	}
}

// BenchmarkSize is the cost of sizing (uncached) a new filter.
func BenchmarkSize(b *testing.B) {
	for _, c := range []struct {
		e float64
		n uint64
	}{{0.01, 100_000}, {0.001, 1_000_000}, {1e-9, 1_000_000}} {
		b.Run(fmt.Sprintf("e=%g/N=%d", c.e, c.n), func(b *testing.B) {
			for b.Loop() {
				size(c.e, c.n)
			}
		})
	}
}
