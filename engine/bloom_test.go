package engine

import (
	"bytes"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"testing"
)

// TestProbePositions checks the division-free probe against the definition,
// (a + i·b) mod m in wrapping uint64 arithmetic, bit by bit: for filters of
// odd sizes, legacy power-of-two links and k above the batched limit.
func TestProbePositions(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	params := []BloomParams{}
	for _, c := range []struct {
		entries uint64
		err     float64
	}{{1, 0.01}, {7, 0.1}, {1000, 0.01}, {12345, 0.001}, {100, 1e-12}, {400_000, 1e-6}} {
		p, ok := SizeBloom(c.entries, c.err)
		if !ok {
			t.Fatal("SizeBloom refused", c)
		}
		params = append(params, p)
	}
	if p := params[len(params)-1]; p.Bytes <= manyHashesResident || p.Hashes <= stagedHashes || p.Bytes > cacheResident {
		t.Fatalf("%+v: not the batched add of many hashes below cacheResident", p)
	}
	legacy, _ := SizeBloom(1000, 0.01)
	legacy.N2 = 12
	params = append(params, legacy)
	many, _ := SizeBloom(100, 0.01)
	many.Hashes = 40 // the unbatched path
	params = append(params, many)

	for _, p := range params {
		mod := p.Bits
		if p.N2 > 0 {
			mod = uint64(1) << p.N2
		}
		tries := 2000
		if p.Bytes > manyHashesResident {
			tries = 20 // each scans every bit of a megabyte and a half
		}
		for n := 0; n < tries; n++ {
			h := Hash{rng.Uint64(), rng.Uint64()}
			if n%5 == 0 {
				h.B = ^uint64(0) - uint64(n) // wraps on nearly every step
			}
			b := NewBloom(p)
			if !b.Add(h) {
				t.Fatalf("%+v: first Add of %x reported no new bit", p, h)
			}
			want := map[uint64]bool{}
			for i := uint64(0); i < uint64(p.Hashes); i++ {
				want[(h.A+i*h.B)%mod] = true
			}
			got := map[uint64]bool{}
			for x := uint64(0); x < p.Bits; x++ {
				if b.words()[x>>6]&(1<<(x&63)) != 0 {
					got[x] = true
				}
			}
			if len(got) != len(want) {
				t.Fatalf("%+v hash %x: %d bits set, want %d", p, h, len(got), len(want))
			}
			for x := range want {
				if !got[x] {
					t.Fatalf("%+v hash %x: bit %d not set", p, h, x)
				}
			}
			if !b.Test(h) || b.Add(h) {
				t.Fatalf("%+v hash %x: Test false or second Add flipped a bit", p, h)
			}
		}
	}
}

// TestTestAgreesWithBits checks every lookup path (bit by bit for a small
// filter; loads first for one above cacheResident, in two rounds with
// more than stagedHashes hashes) against the bits themselves, for added
// items and for fresh ones. The filter of many hashes is half full, as at
// capacity, so that fresh items reach the second round.
func TestTestAgreesWithBits(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, c := range []struct {
		entries uint64
		error   float64
		full    bool
	}{{2000, 0.01, false}, {10_000_000, 0.01, false}, {3_000_000, 0.01 / (1 << 12), true}} {
		entries := c.entries
		p, _ := SizeBloom(entries, c.error)
		b := NewBloom(p)
		if entries > 5000 && b.Bytes <= cacheResident {
			t.Fatalf("%d entries make %d bytes: not above cacheResident", entries, b.Bytes)
		}
		if c.full {
			if p.Hashes <= stagedHashes {
				t.Fatalf("%d hashes: Test loads them in one round", p.Hashes)
			}
			for i := range b.words() {
				b.words()[i] = rng.Uint64()
			}
		}
		second := 0 // fresh items whose first round of bits is all set
		added := make([]Hash, 20000)
		for i := range added {
			added[i] = Hash{rng.Uint64(), rng.Uint64()}
			b.Add(added[i])
		}
		pos, neg := 0, 0
		for n := 0; n < 40000; n++ {
			h := Hash{rng.Uint64(), rng.Uint64()}
			if n%2 == 0 {
				h = added[n/2]
			}
			want, firstSet := true, true
			for i := uint64(0); i < uint64(p.Hashes); i++ {
				x := (h.A + i*h.B) % p.Bits
				if b.words()[x>>6]&(1<<(x&63)) == 0 {
					want = false
					firstSet = firstSet && i >= firstStage
				}
			}
			if n%2 == 1 && firstSet && !want {
				second++
			}
			if n%2 == 0 && !want {
				t.Fatalf("%d entries: added hash %x has a clear bit", entries, h)
			}
			if b.Test(h) != want {
				t.Fatalf("%d entries, hash %x: Test %v, bits say %v", entries, h, !want, want)
			}
			if want {
				pos++
			} else {
				neg++
			}
		}
		if pos == 0 || neg == 0 {
			t.Fatalf("%d entries: %d positive and %d negative lookups; both paths need both", entries, pos, neg)
		}
		if c.full && second == 0 {
			t.Fatalf("%d entries: no absent item reached the second round", entries)
		}
	}
}

// A shape is found by its parameters' exact bits: −0 is not 0 (a dump must
// load back byte for byte), and NaN parameters find their shape again
// instead of adding an entry that can never be deleted.
func TestShapeKeyBits(t *testing.T) {
	p := BloomParams{Entries: 100, Error: 0.01, BPE: 0, Bits: 128, Bytes: 16, Hashes: 1}
	neg := p
	neg.BPE = math.Copysign(0, -1)
	if s, n := shapeOf(p), shapeOf(neg); s == n || !math.Signbit(n.BPE) || math.Signbit(s.BPE) {
		t.Fatalf("−0 and 0 share a shape: %v %v", s.BPE, n.BPE)
	}
	nan := p
	nan.Error = math.NaN()
	a := shapeOf(nan)
	if b := shapeOf(nan); a != b {
		t.Fatal("a NaN parameter made a second shape")
	}
	// Again once it has left the recent shapes: found in the map.
	for i := range 2 * recentShapes {
		q := p
		q.Entries = uint64(1000 + i)
		shapeOf(q)
	}
	if b := shapeOf(nan); a != b {
		t.Fatal("a NaN parameter made a second shape once out of the recent ones")
	}
}

// TestStagedMatchesBits: a filter above cacheResident answers from its
// bits for every number of hashes the loaded path takes (1–32, one round
// or two), on a half-full array where absent items reach any round.
func TestStagedMatchesBits(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	p, _ := SizeBloom(8_000_000, 0.01)
	if p.Bytes <= cacheResident {
		t.Fatalf("%d bytes: not above cacheResident", p.Bytes)
	}
	b := NewBloom(p)
	words := b.words()
	for i := range words {
		words[i] = rng.Uint64() | rng.Uint64() // three bits in four: later rounds are reached
	}
	k0 := b.Hashes
	defer func() { b.Hashes = k0 }() // the shape is shared by every filter of p
	for k := uint32(1); k <= 32; k++ {
		b.Hashes = k
		second := 0
		for n := 0; n < 3000; n++ {
			h := Hash{rng.Uint64(), rng.Uint64()}
			if n%7 == 0 {
				h.B = ^uint64(0) - uint64(n) // wraps on nearly every step
			}
			want, cleared := true, -1
			for i := uint64(0); i < uint64(k); i++ {
				x := (h.A + i*h.B) % p.Bits
				if words[x>>6]&(1<<(x&63)) == 0 {
					want = false
					if cleared < 0 {
						cleared = int(i)
					}
				}
			}
			if cleared >= firstStage {
				second++
			}
			if got := b.Test(h); got != want {
				t.Fatalf("%d hashes, hash %x: Test %v, bits say %v", k, h, got, want)
			}
		}
		if k > stagedHashes && second == 0 {
			t.Fatalf("%d hashes: no lookup was answered in the second round", k)
		}
	}
}

// TestBatchedAddMarks: a filter of many hashes between manyHashesResident
// and cacheResident adds with its loads together, and sets the same bits
// and dirty marks that setting them one at a time does.
func TestBatchedAddMarks(t *testing.T) {
	p, _ := SizeBloom(400_000, 1e-6)
	if p.Bytes <= manyHashesResident || p.Bytes > cacheResident || p.Hashes <= stagedHashes {
		t.Fatalf("%+v: not a batched add of many hashes below cacheResident", p)
	}
	got, want := NewBloom(p), NewBloom(p)
	rng := rand.New(rand.NewPCG(13, 14))
	for n := 0; n < 5000; n++ {
		h := Hash{rng.Uint64(), rng.Uint64()}
		switch n % 5 {
		case 1:
			h.B = 0 // every probe on one bit
		case 2:
			h.B = p.Bits // likewise, modulo m
		}
		flipped := false
		for i := uint64(0); i < uint64(p.Hashes); i++ {
			x := (h.A + i*h.B) % p.Bits
			if w := &want.words()[x>>6]; *w&(1<<(x&63)) == 0 {
				*w |= 1 << (x & 63)
				want.mark(x >> 3)
				flipped = true
			}
		}
		if got.Add(h) != flipped {
			t.Fatalf("hash %x: Add reported %v, the bits %v", h, !flipped, flipped)
		}
	}
	if !slices.Equal(got.words(), want.words()) {
		t.Fatal("the bits differ")
	}
	ext := func(d Dirty) []uint64 {
		if d.x == nil {
			return nil
		}
		return d.x.bits
	}
	if got.Dirty.word != want.Dirty.word || !slices.Equal(ext(got.Dirty), ext(want.Dirty)) {
		t.Fatal("the dirty marks differ")
	}
	if got.Dirty.word == 0 && len(ext(got.Dirty)) == 0 {
		t.Fatal("no chunk marked dirty")
	}
}

// TestFirstBitsMatchesBits: FirstBits is 1 exactly when the item's first
// two bits (its one, its none) are set, and with TestAfterFirst it answers
// what the bits say, for every hash count a header may give from 0 on, in
// a filter of a power-of-two modulus (N2) and in one past cacheResident
// (where Test loads in rounds) too.
func TestFirstBitsMatchesBits(t *testing.T) {
	rng := rand.New(rand.NewPCG(13, 14))
	small, _ := SizeBloom(50_000, 0.01)
	legacy, _ := SizeBloom(1000, 0.01)
	legacy.N2 = 12
	large, _ := SizeBloom(8_000_000, 0.01)
	if large.Bytes <= cacheResident {
		t.Fatalf("%d bytes: not above cacheResident", large.Bytes)
	}
	for _, p := range []BloomParams{small, legacy, large} {
		mod := p.Bits
		if p.N2 > 0 {
			mod = uint64(1) << p.N2
		}
		b := NewBloom(p)
		words := b.words()
		for i := range words {
			words[i] = rng.Uint64() | rng.Uint64()>>rng.IntN(64) // mostly set: later bits are reached
		}
		k0 := b.Hashes
		defer func() { b.Hashes = k0 }() // the shape is shared by every filter of p
		for k := uint32(0); k <= 40; k++ {
			b.Hashes = k
			var passed, held int
			for n := 0; n < 2000; n++ {
				h := Hash{rng.Uint64(), rng.Uint64()}
				if n%7 == 0 {
					h.B = ^uint64(0) - uint64(n) // wraps on nearly every step
				}
				set := func(i uint64) bool {
					x := (h.A + i*h.B) % mod
					return words[x>>6]&(1<<(x&63)) != 0
				}
				first, all := true, true
				for i := uint64(0); i < uint64(k); i++ {
					if !set(i) {
						all = false
						if i < 2 {
							first = false
						}
					}
				}
				fb := b.FirstBits(h)
				if fb != b2u(first) {
					t.Fatalf("%d bytes, %d hashes, hash %x: FirstBits %d, bits say %v", p.Bytes, k, h, fb, first)
				}
				if fb == 1 {
					passed++
					if got := b.TestAfterFirst(h); got != all {
						t.Fatalf("%d bytes, %d hashes, hash %x: TestAfterFirst %v, bits say %v", p.Bytes, k, h, got, all)
					}
				}
				if all {
					held++
				}
				if got := b.Test(h); got != all {
					t.Fatalf("%d bytes, %d hashes, hash %x: Test %v, bits say %v", p.Bytes, k, h, got, all)
				}
			}
			if passed == 0 || k < 12 && held == 0 {
				t.Fatalf("%d bytes, %d hashes: %d passed the first bits, %d held: the bits test too little", p.Bytes, k, passed, held)
			}
		}
	}
}

func b2u(b bool) uint64 {
	if b {
		return 1
	}
	return 0
}

// TestReadBytesAnyRange: ReadBytes gives the array's bytes (little-endian
// words) for ranges starting and ending anywhere, whole words copied in a
// loop of their own.
func TestReadBytesAnyRange(t *testing.T) {
	p, _ := SizeBloom(20_000, 0.01)
	var b Bloom
	b.Init(p)
	for i := range 3000 {
		b.Add(BloomHash64([]byte{byte(i), byte(i >> 8)}))
	}
	whole := make([]byte, p.Bytes)
	for i := range whole {
		whole[i] = byte(b.words()[i/8] >> (uint(i%8) * 8))
	}
	rng := rand.New(rand.NewPCG(7, 8))
	for range 2000 {
		off := rng.Uint64N(p.Bytes)
		n := rng.Uint64N(min(p.Bytes-off, 200) + 1)
		got := make([]byte, n)
		b.ReadBytes(got, off)
		if !bytes.Equal(got, whole[off:off+n]) {
			t.Fatalf("ReadBytes at %d, %d bytes: %x, want %x", off, n, got, whole[off:off+n])
		}
	}
}

// TestShapesInterned: filters of one shape share it, also once more than
// recentShapes other shapes have passed through (found through the weak
// map then), and the map lets go of shapes no filter holds, all but the
// few recent ones, so hostile parameters cannot grow it.
func TestShapesInterned(t *testing.T) {
	p, _ := SizeBloom(100, 0.01)
	a := NewBloom(p)
	for i := range 3 * recentShapes {
		q, _ := SizeBloom(uint64(200+i), 0.01)
		NewBloom(q)
	}
	if b := NewBloom(p); b.shape != a.shape {
		t.Fatal("two filters of the same parameters hold two shapes")
	}
	for i := range 1000 {
		q, _ := SizeBloom(uint64(10_000+i), 0.01)
		NewBloom(q)
	}
	for range 100 {
		runtime.GC() // cleanups run after it, on their own goroutine
		shapes.mu.Lock()
		n := len(shapes.m)
		shapes.mu.Unlock()
		if n <= recentShapes+1 { // the recent ones and a's
			runtime.KeepAlive(a)
			return
		}
	}
	t.Fatal("the shapes of filters long gone stayed interned")
}
