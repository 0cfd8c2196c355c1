package scalable

import (
	"encoding/binary"
	"fmt"
	"testing"
)

// BenchmarkScalingLoad is the state machine's share of the harness's bulk
// load: a million distinct items into an auto-created chain (capacity
// 100, 1%, expansion 2; 14 links at the end), one op a million adds.
// Every add tests each older link first (SBChain_Add), and those links
// together outgrow the L2 cache: most of the time is those tests' misses.
func BenchmarkScalingLoad(b *testing.B) {
	var buf [8]byte
	for b.Loop() {
		c, err := NewChain(100, 0.01, 2, false, noCap)
		if err != nil {
			b.Fatal(err)
		}
		for i := range 1_000_000 {
			binary.LittleEndian.PutUint64(buf[:], uint64(i)*0x9E3779B97F4A7C15)
			if _, err := c.Add(buf[:], noCap); err != nil {
				b.Fatal(err)
			}
		}
	}
}

// BenchmarkChainAdd is the state machine's adds into a chain that
// already holds 1 or 20 million items, with Prefetch four items ahead as
// bfAdd does; one op is a BF.MADD of 1,000 items. Every add tests the
// older links (the item is absent from them) and sets its bits in the
// newest. At 1M the newest link grows from 1.4 to 5.6 MiB with 20–22
// hashes; at 20M there are 18 links, the later ones past 8 MiB.
func BenchmarkChainAdd(b *testing.B) {
	for _, n := range []int{1_000_000, 20_000_000} {
		b.Run(fmt.Sprintf("%dM", n/1_000_000), func(b *testing.B) { benchChainAdd(b, n) })
	}
}

func benchChainAdd(b *testing.B, prefill int) {
	c, err := NewChain(100, 0.01, 2, false, noCap)
	if err != nil {
		b.Fatal(err)
	}
	var buf [8]byte
	next := uint64(0)
	item := func(p []byte) {
		binary.LittleEndian.PutUint64(p, next*0x9E3779B97F4A7C15)
		next++
	}
	for range prefill {
		item(buf[:])
		if _, err := c.Add(buf[:], noCap); err != nil {
			b.Fatal(err)
		}
	}
	items := make([][]byte, 1000)
	for i := range items {
		items[i] = make([]byte, 8)
	}
	for b.Loop() {
		b.StopTimer()
		for _, it := range items {
			item(it)
		}
		b.StartTimer()
		for _, it := range items[:4] {
			c.Prefetch(it)
		}
		for i, it := range items {
			if i+4 < len(items) {
				c.Prefetch(items[i+4])
			}
			if _, err := c.Add(it, noCap); err != nil {
				b.Fatal(err)
			}
		}
	}
}

// BenchmarkChainTest is lookups (BF.EXISTS, BF.MEXISTS) of absent items
// in a chain grown to 3 million items from the auto-created default (15
// links, 0.3–6 MiB the last five), with Prefetch four items ahead as a
// pipeline's look-ahead does, and without (one lookup a request); one op
// is 1,000 lookups. Every link is tested for an absent item.
func BenchmarkChainTest(b *testing.B) {
	c, err := NewChain(100, 0.01, 2, false, noCap)
	if err != nil {
		b.Fatal(err)
	}
	var buf [8]byte
	for i := range 3_000_000 {
		binary.LittleEndian.PutUint64(buf[:], uint64(i)*0x9E3779B97F4A7C15)
		if _, err := c.Add(buf[:], noCap); err != nil {
			b.Fatal(err)
		}
	}
	items := make([][]byte, 1000)
	for i := range items {
		items[i] = make([]byte, 8)
	}
	next := uint64(1 << 40) // never added
	for _, ahead := range []bool{false, true} {
		b.Run(fmt.Sprintf("prefetch=%v", ahead), func(b *testing.B) {
			found := 0
			for b.Loop() {
				b.StopTimer()
				for _, it := range items {
					binary.LittleEndian.PutUint64(it, next*0x9E3779B97F4A7C15)
					next++
				}
				b.StartTimer()
				for i, it := range items {
					if ahead && i+4 < len(items) {
						c.Prefetch(items[i+4])
					}
					if c.Test(it) {
						found++
					}
				}
			}
			if found > b.N*1000/20 {
				b.Fatalf("%d of %d absent items found: the chain is not at its error rate", found, b.N*1000)
			}
		})
	}
}

// BenchmarkBulkLoad is the state machine's share of the harness's bulk
// case as it runs it: a million random 12-digit items (redis-benchmark's
// __rand_int__) into an auto-created chain, in AddMany calls of 1,000
// (one BF.MADD each); one op is the million.
func BenchmarkBulkLoad(b *testing.B) {
	items := make([][]byte, 1_000_000)
	x := uint64(1)
	for i := range items {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		items[i] = fmt.Appendf(nil, "%012d", x%1_000_000_000)
	}
	var into []int64
	for b.Loop() {
		c, err := NewChain(100, 0.01, 2, false, noCap)
		if err != nil {
			b.Fatal(err)
		}
		for i := 0; i < len(items); i += 1000 {
			if into, err = c.AddMany(items[i:i+1000], noCap, into[:0]); err != nil {
				b.Fatal(err)
			}
		}
	}
}
