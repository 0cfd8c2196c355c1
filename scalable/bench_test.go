package scalable

import (
	"testing"

	"github.com/bfserver/bfserver/internal/bloombench"
)

// chainFilter adapts a non-scaling chain at 0.01 (the same sizing as
// bits-and-blooms' NewWithEstimates(n, 0.01)) to the benchmark body.
type chainFilter struct{ c *Chain }

func (f chainFilter) Add(item []byte)       { f.c.Add(item, noCap) }
func (f chainFilter) Test(item []byte) bool { return f.c.Test(item) }

// newChainFilter builds the benchmarked filter.
func newChainFilter(n int) bloombench.Filter {
	c, err := NewChain(uint64(n), 0.01, 2, true, noCap)
	if err != nil {
		panic(err)
	}
	return chainFilter{c}
}

func BenchmarkChain1M(b *testing.B)   { bloombench.Run(b, 1_000_000, newChainFilter) }
func BenchmarkChain100M(b *testing.B) { bloombench.Run(b, 100_000_000, newChainFilter) }
