// Package bloomcompare runs bfserver's Bloom chain and bits-and-blooms side
// by side through one benchmark body. It is its own module so the server
// never depends on bits-and-blooms.
package bloomcompare

import (
	"testing"

	"github.com/bfserver/bfserver/internal/bloombench"
	"github.com/bfserver/bfserver/scalable"
	"github.com/bits-and-blooms/bloom/v3"
)

type chain struct{ c *scalable.Chain }

func (f chain) Add(item []byte)       { f.c.Add(item, 1<<40) }
func (f chain) Test(item []byte) bool { return f.c.Test(item) }

func newChain(n int) bloombench.Filter {
	c, err := scalable.NewChain(uint64(n), 0.01, 2, true, 1<<40)
	if err != nil {
		panic(err)
	}
	return chain{c}
}

type bnb struct{ f *bloom.BloomFilter }

func (f bnb) Add(item []byte)       { f.f.Add(item) }
func (f bnb) Test(item []byte) bool { return f.f.Test(item) }

func newBnb(n int) bloombench.Filter { return bnb{bloom.NewWithEstimates(uint(n), 0.01)} }

func Benchmark1M(b *testing.B) {
	b.Run("bfserver", func(b *testing.B) { bloombench.Run(b, 1_000_000, newChain) })
	b.Run("bitsandblooms", func(b *testing.B) { bloombench.Run(b, 1_000_000, newBnb) })
}

func Benchmark100M(b *testing.B) {
	b.Run("bfserver", func(b *testing.B) { bloombench.Run(b, 100_000_000, newChain) })
	b.Run("bitsandblooms", func(b *testing.B) { bloombench.Run(b, 100_000_000, newBnb) })
}
