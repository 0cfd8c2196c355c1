package engine

import (
	"bytes"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestPrefetchChangesNothing: Prefetch and PrefetchFirstBits leave every bit
// and every dirty mark as it found them, and a filter filled with prefetches
// interleaved ends byte-identical to one filled without, with the same
// answers.
func TestPrefetchChangesNothing(t *testing.T) {
	p, _ := SizeBloom(10_000_000, 0.01)
	if p.Bytes <= prefetchFrom {
		t.Fatalf("%d bytes: not above prefetchFrom, Prefetch would do nothing", p.Bytes)
	}
	plain, fetched := NewBloom(p), NewBloom(p)
	rng := rand.New(rand.NewPCG(5, 6))
	hs := make([]Hash, 50000)
	for i := range hs {
		hs[i] = Hash{rng.Uint64(), rng.Uint64()}
		if i%3 == 0 && i > 0 {
			hs[i] = hs[i-1] // repeats answer false
		}
	}
	for i, h := range hs[:1000] {
		plain.Add(h)
		fetched.Add(h)
		if i == 999 {
			before := bytes.Clone(wordsOf(fetched))
			dirty := fetched.Dirty
			marks := append([]uint64(nil), fetched.Dirty.x.bits...)
			for _, h := range hs {
				fetched.Prefetch(h)
				fetched.PrefetchFirstBits(h)
			}
			if !bytes.Equal(before, wordsOf(fetched)) {
				t.Fatal("Prefetch changed bits")
			}
			if dirty.word != fetched.Dirty.word || !slices.Equal(marks, fetched.Dirty.x.bits) {
				t.Fatal("Prefetch changed dirty marks")
			}
		}
	}
	for i, h := range hs[1000:] {
		if i+4 < len(hs)-1000 {
			fetched.Prefetch(hs[1000+i+4])
		}
		if a, b := plain.Add(h), fetched.Add(h); a != b {
			t.Fatalf("item %d: Add %v without prefetch, %v with", 1000+i, a, b)
		}
	}
	if !bytes.Equal(wordsOf(plain), wordsOf(fetched)) {
		t.Fatal("filters differ after the same adds")
	}
	for _, h := range hs {
		if !fetched.Test(h) {
			t.Fatalf("added hash %x tests false", h)
		}
	}
}

func wordsOf(b *Bloom) []byte {
	out := make([]byte, b.Bytes)
	b.ReadBytes(out, 0)
	return out
}

// BenchmarkAddLarge: adding to a 60 MB filter (50M entries at 1%), far
// larger than the CPU cache, one item at a time as a state machine applies
// a log entry, without and with Prefetch four items ahead.
func BenchmarkAddLarge(b *testing.B) {
	p, _ := SizeBloom(50_000_000, 0.01)
	f := NewBloom(p)
	rng := rand.New(rand.NewPCG(7, 8))
	hs := make([]Hash, 1<<20)
	for i := range hs {
		hs[i] = Hash{rng.Uint64(), rng.Uint64()}
	}
	for _, h := range hs { // fault every page in
		f.Add(h)
	}
	const mask = 1<<20 - 1
	b.Run("plain", func(b *testing.B) {
		for i := 0; b.Loop(); i++ {
			f.Add(hs[i&mask])
		}
	})
	b.Run("prefetch", func(b *testing.B) {
		for i := 0; b.Loop(); i++ {
			f.Prefetch(hs[(i+4)&mask])
			f.Add(hs[i&mask])
		}
	})
}

// BenchmarkTestLarge: membership tests in a half-full 120 MB filter (100M
// entries, 1%, 7 hashes) and in one of 22 hashes (a scalable chain's later
// link, its error halved at every link), for items absent (a cache
// guard's common answer, and every add's test of a chain's older links)
// and present, one at a time as reads are served.
func BenchmarkTestLarge(b *testing.B) {
	for _, c := range []struct {
		name  string
		n     uint64
		error float64
	}{{"k7", 100_000_000, 0.01}, {"k22", 20_000_000, 0.01 / (1 << 12)}} {
		p, _ := SizeBloom(c.n, c.error)
		f := NewBloom(p)
		rng := rand.New(rand.NewPCG(9, 10))
		present := make([]Hash, 1<<20)
		for i := range present {
			present[i] = Hash{rng.Uint64(), rng.Uint64()}
		}
		// Half the bits set, as at capacity: random words, then the
		// present items' bits.
		words := f.words()
		for i := range words {
			words[i] = rng.Uint64()
		}
		for _, h := range present {
			f.Add(h)
		}
		absent := make([]Hash, 1<<20)
		for i := range absent {
			absent[i] = Hash{rng.Uint64(), rng.Uint64()}
		}
		const mask = 1<<20 - 1
		b.Run(c.name+"/absent", func(b *testing.B) {
			for i := 0; b.Loop(); i++ {
				f.Test(absent[i&mask])
			}
		})
		b.Run(c.name+"/present", func(b *testing.B) {
			for i := 0; b.Loop(); i++ {
				f.Test(present[i&mask])
			}
		})
	}
}

// TestCuckooPrefetchChangesNothing: CuckooTable.Prefetch leaves every slot
// and dirty mark as it found them, in a regular table and in one of 3·2^k
// buckets (a crafted dump's), whose 32-bit index wraps nowhere but whose
// buckets are not a power of two, for hashes that reach its last bucket.
func TestCuckooPrefetchChangesNothing(t *testing.T) {
	for _, nb := range []uint32{1 << 23, 3 << 22} {
		tb := NewCuckooTable(nb, 2)
		if len(tb.Data) <= cacheResident {
			t.Fatalf("%d bytes: not above cacheResident, Prefetch would do nothing", len(tb.Data))
		}
		rng := rand.New(rand.NewPCG(11, 12))
		for range 1000 {
			l := NewLookup(rng.Uint64())
			if s := tb.FreeSlot(l); s >= 0 {
				tb.Set(s, l.FP)
			}
		}
		before := bytes.Clone(tb.Data)
		dirty := tb.Dirty
		marks := append([]uint64(nil), tb.Dirty.x.bits...)
		for _, h := range []uint64{0, uint64(nb) - 1, uint64(nb), ^uint64(0)} {
			tb.Prefetch(NewLookup(h))
		}
		for range 100000 {
			tb.Prefetch(NewLookup(rng.Uint64()))
		}
		if !bytes.Equal(before, tb.Data) {
			t.Fatal("Prefetch changed slots")
		}
		if dirty.word != tb.Dirty.word || !slices.Equal(marks, tb.Dirty.x.bits) {
			t.Fatal("Prefetch changed dirty marks")
		}
	}
}
