package topk

import (
	"bytes"
	"math"
	"math/rand/v2"
	"sort"
	"strconv"
	"testing"

	"github.com/bfserver/bfserver/rdb"
)

func heapItems(t *TopK) map[string]bool {
	m := map[string]bool{}
	for _, h := range t.Heap {
		if h.Count > 0 {
			m[string(h.Item)] = true
		}
	}
	return m
}

// zipf draws n items of a Zipf(s) law over m distinct ones.
func zipf(seed uint64, n, m int, s float64) []string {
	rng := rand.New(rand.NewPCG(seed, 7))
	z := rand.NewZipf(rng, s, 1, uint64(m-1))
	out := make([]string, n)
	for i := range out {
		out[i] = "item-" + strconv.FormatUint(z.Uint64(), 10)
	}
	return out
}

// TestRecallZipf: on a Zipf stream the sketch finds the true heavy
// hitters. HeavyKeeper's promise is about the heaviest: with rows a few
// times k wide and RedisBloom's default decay 0.9, the true top k/2 must
// all be in the heap and the recall of the top k be high.
func TestRecallZipf(t *testing.T) {
	for _, c := range []struct {
		k, width, depth int
		s               float64
	}{{10, 100, 5, 1.2}, {50, 400, 5, 1.1}, {100, 1000, 7, 1.05}} {
		stream := zipf(uint64(c.k), 200000, 50000, c.s)
		tk := New(uint32(c.k), uint32(c.width), uint32(c.depth), 0.9)
		truth := map[string]int{}
		for _, it := range stream {
			tk.Add([]byte(it), 1)
			truth[it]++
		}
		type kv struct {
			k string
			n int
		}
		var all []kv
		for k, n := range truth {
			all = append(all, kv{k, n})
		}
		sort.Slice(all, func(i, j int) bool { return all[i].n > all[j].n || all[i].n == all[j].n && all[i].k < all[j].k })
		in := heapItems(tk)
		hit := 0
		for i := 0; i < c.k; i++ {
			if in[all[i].k] {
				hit++
			} else if i < c.k/2 {
				t.Errorf("k=%d: the %d-th heaviest (%s, %d times) is not in the heap", c.k, i+1, all[i].k, all[i].n)
			}
		}
		recall := float64(hit) / float64(c.k)
		t.Logf("k=%d %dx%d zipf %.2f: recall %.2f", c.k, c.width, c.depth, c.s, recall)
		if recall < 0.8 {
			t.Errorf("k=%d: recall %.2f", c.k, recall)
		}
		// A listed count never exceeds the true count (HeavyKeeper only
		// under-counts, fingerprints aside).
		for _, h := range tk.List() {
			if int(h.Count) > truth[string(h.Item)] {
				t.Errorf("k=%d: %s listed with %d, added %d times", c.k, h.Item, h.Count, truth[string(h.Item)])
			}
		}
	}
}

// TestReplicasAgree: two sketches given the same adds hold the same bytes,
// generator included, whatever collides; and the coin is drawn only by
// adds that meet another item's counter.
func TestReplicasAgree(t *testing.T) {
	a, b := New(5, 16, 3, 0.9), New(5, 16, 3, 0.9)
	stream := zipf(3, 20000, 500, 1.1)
	for i, it := range stream {
		inc := uint32(1 + i%3)
		ea, oka := a.Add([]byte(it), inc)
		eb, okb := b.Add([]byte(it), inc)
		if oka != okb || !bytes.Equal(ea, eb) {
			t.Fatalf("add %d: expelled %q/%v and %q/%v", i, ea, oka, eb, okb)
		}
	}
	if !bytes.Equal(a.Marshal(), b.Marshal()) {
		t.Fatal("same adds, different sketches")
	}
	if a.Rand == seed {
		t.Fatal("a stream with collisions drew no coin")
	}
	c := New(5, 100000, 3, 0.9)
	c.Add([]byte("x"), 5)
	c.Add([]byte("x"), 5)
	if c.Rand != seed {
		t.Fatal("adds that met no other item drew a coin")
	}
}

// TestExpelled: what Add answers as expelled under the generator is right:
// an item answered expelled was in the heap before the add and is not
// after it, the added item is in the heap after it, and an item that left
// the heap was answered.
func TestExpelled(t *testing.T) {
	tk := New(8, 20, 3, 0.8)
	expelled := 0
	for i, it := range zipf(9, 30000, 300, 1.01) {
		before := heapItems(tk)
		out, ok := tk.Add([]byte(it), uint32(1+i%4))
		after := heapItems(tk)
		if ok {
			if !after[it] {
				t.Fatalf("add %d: %s took a slot but is not in the heap", i, it)
			}
			if out != nil {
				expelled++
				if !before[string(out)] || after[string(out)] {
					t.Fatalf("add %d: %q answered expelled (before %v, after %v)", i, out, before[string(out)], after[string(out)])
				}
			}
		}
		for k := range before {
			if !after[k] && (!ok || string(out) != k) {
				t.Fatalf("add %d: %s left the heap unanswered", i, k)
			}
		}
	}
	if expelled == 0 {
		t.Fatal("nothing was expelled")
	}
}

func TestCodecs(t *testing.T) {
	tk := New(4, 30, 3, 0.9)
	for _, it := range zipf(5, 3000, 100, 1.1) {
		tk.Add([]byte(it), 1)
	}
	tk.Add([]byte(""), 5000)
	if !tk.Query([]byte("")) {
		t.Fatal("the empty item is not in the heap")
	}
	u, err := Unmarshal(tk.Marshal(), 1<<20)
	if err != nil || !bytes.Equal(u.Marshal(), tk.Marshal()) {
		t.Fatalf("Unmarshal: %v", err)
	}
	if _, err := Unmarshal(tk.Marshal(), 100); err != ErrTooLarge {
		t.Fatalf("over the cap: %v", err)
	}
	r := rdb.NewReader(tk.AppendRDB(nil), 1<<20)
	v, err := FromRDB(r, 1<<20)
	if err != nil || len(r.Rest()) != 0 {
		t.Fatalf("FromRDB: %v", err)
	}
	// The generator is not in RedisBloom's encoding; the rest is, except
	// that an empty item comes back as RedisBloom loads it: a null.
	if !bytes.Equal(v.AppendRDB(nil), tk.AppendRDB(nil)) {
		t.Fatal("AppendRDB/FromRDB do not round-trip")
	}
	if !v.Query([]byte("")) {
		t.Fatal("the empty item is no longer found")
	}
	if v.MemUsage() != 2088+30*3*8+4*24 {
		t.Fatalf("MemUsage %d", v.MemUsage())
	}
}

func TestDecayTable(t *testing.T) {
	tk := New(1, 1, 1, 0.9)
	for _, n := range []uint32{0, 1, 10, 255, 256, 300, 1000, 1 << 20} {
		got, want := tk.decayAt(n), math.Pow(0.9, float64(n))
		if want > 1e-300 && math.Abs(got-want)/want > 1e-12 {
			t.Errorf("decay^%d = %g, want %g", n, got, want)
		}
	}
}

func FuzzUnmarshal(f *testing.F) {
	tk := New(2, 3, 2, 0.9)
	tk.Add([]byte("a"), 3)
	f.Add(tk.Marshal())
	f.Fuzz(func(t *testing.T, b []byte) {
		u, err := Unmarshal(b, 1<<16)
		if err != nil {
			return
		}
		if !bytes.Equal(u.Marshal(), b) {
			t.Fatal("Unmarshal/Marshal do not round-trip")
		}
		u.Add([]byte("x"), 2)
		u.Count([]byte("y"))
		u.List()
	})
}

func FuzzFromRDB(f *testing.F) {
	tk := New(2, 3, 2, 0.9)
	tk.Add([]byte("a"), 3)
	f.Add(tk.AppendRDB(nil))
	f.Fuzz(func(t *testing.T, b []byte) {
		u, err := FromRDB(rdb.NewReader(b, 1<<16), 1<<16)
		if err != nil {
			return
		}
		if u.MemUsage() > 1<<16 || len(u.Heap) != int(u.K) || len(u.Buckets) != int(u.Width*u.Depth) {
			t.Fatal("a decoded sketch breaks its invariants")
		}
		u.Add([]byte("x"), 2)
		u.List()
		if _, err := FromRDB(rdb.NewReader(u.AppendRDB(nil), 1<<16), 1<<16); err != nil {
			t.Fatalf("its own encoding does not decode: %v", err)
		}
	})
}
