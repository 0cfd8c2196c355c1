package cms

import (
	"bufio"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/bfserver/bfserver/rdb"
)

// TestDepthSteps checks INITBYPROB's depth at every place it steps in
// (0, 1): testdata/depth-steps.txt lists, from glibc 2.36's own log10f on
// x86-64, each float32 delta at which the depth drops, with the depth just
// below and at it. Between steps the depth is constant, so these points
// fix it everywhere. Go's log is not glibc's (logf differs by an ulp on
// about 1% of inputs), which is why the table exists.
func TestDepthSteps(t *testing.T) {
	f, err := os.Open("testdata/depth-steps.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	n := 0
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "#") {
			continue
		}
		var bits uint32
		var below, at uint64
		if _, err := fmt.Sscanf(line, "0x%x %d %d", &bits, &below, &at); err != nil {
			t.Fatalf("%q: %v", line, err)
		}
		x := math.Float32frombits(bits)
		prev := math.Float32frombits(bits - 1)
		if _, d := DimFromProb(0.5, float64(x)); d != at {
			t.Errorf("depth(%g) = %d, glibc %d", x, d, at)
		}
		if _, d := DimFromProb(0.5, float64(prev)); d != below {
			t.Errorf("depth(%g) = %d, glibc %d", prev, d, below)
		}
		n++
	}
	if n != 148 {
		t.Fatalf("%d steps, want 148", n)
	}
	// Past the smallest denormal, delta rounds to 0: log10f is -inf, and
	// the conversion of +inf gives 0 (refused as invalid init arguments).
	if _, d := DimFromProb(0.1, 1e-50); d != 0 {
		t.Errorf("depth(1e-50) = %d", d)
	}
	for _, c := range []struct {
		eps   float64
		width uint64
	}{{0.1, 20}, {0.01, 200}, {0.001, 2000}, {0.3, 7}, {1e-300, 0}, {0.6666666666666666, 3}, {0.6666666666666667, 3}} {
		if w, _ := DimFromProb(c.eps, 0.5); w != c.width {
			t.Errorf("width(%g) = %d, want %d", c.eps, w, c.width)
		}
	}
}

func TestIncrQueryOverflow(t *testing.T) {
	s := New(10, 3)
	if got := s.IncrBy([]byte("a"), 1); got != 1 {
		t.Fatalf("IncrBy = %d", got)
	}
	if got := s.IncrBy([]byte("a"), 4294967295); got != CellMax {
		t.Fatalf("IncrBy past 2^32-1 = %d, want saturation", got)
	}
	if got := s.Query([]byte("a")); got != CellMax {
		t.Fatalf("Query = %d", got)
	}
	if s.Count != 4294967296 {
		t.Fatalf("Count = %d", s.Count)
	}
	// An increment of 2^32 saturates even a zero counter (RedisBloom
	// compares the wrapped counter with the 64-bit increment).
	if got := s.IncrBy([]byte("fresh"), 1<<32); got != CellMax {
		t.Fatalf("IncrBy(2^32) = %d", got)
	}
}

func TestMerge(t *testing.T) {
	a, b, d := New(50, 4), New(50, 4), New(50, 4)
	a.IncrBy([]byte("x"), 5)
	b.IncrBy([]byte("x"), 2)
	b.IncrBy([]byte("y"), 7)
	if err := Merge(d, []*Sketch{a, b}, []int64{2, 3}); err != nil {
		t.Fatal(err)
	}
	if d.Query([]byte("x")) != 16 || d.Query([]byte("y")) != 21 || d.Count != 37 {
		t.Fatalf("merge: x %d y %d count %d", d.Query([]byte("x")), d.Query([]byte("y")), d.Count)
	}
	before := d.Marshal()
	for _, w := range [][]int64{{1, -1}, {math.MaxInt64, 1}, {1 << 31, 1 << 31}} {
		if err := Merge(d, []*Sketch{a, b}, w); err != ErrOverflow {
			t.Errorf("weights %v: %v, want overflow", w, err)
		}
	}
	if string(d.Marshal()) != string(before) {
		t.Fatal("a refused merge changed the destination")
	}
	// The destination may be a source.
	if err := Merge(d, []*Sketch{d}, []int64{2}); err != nil || d.Query([]byte("x")) != 32 || d.Count != 74 {
		t.Fatalf("self merge: %v, x %d, count %d", err, d.Query([]byte("x")), d.Count)
	}
}

func TestCodecs(t *testing.T) {
	s := New(7, 3)
	s.IncrBy([]byte("a"), 3)
	s.IncrBy([]byte("b"), 1<<20)
	u, err := Unmarshal(s.Marshal(), 1<<20)
	if err != nil || string(u.Marshal()) != string(s.Marshal()) {
		t.Fatalf("Unmarshal: %v", err)
	}
	if _, err := Unmarshal(s.Marshal(), 50); err != ErrTooLarge {
		t.Fatalf("over the cap: %v", err)
	}
	r := rdb.NewReader(s.AppendRDB(nil), 1<<20)
	v, err := FromRDB(r, 1<<20)
	if err != nil || string(v.Marshal()) != string(s.Marshal()) || len(r.Rest()) != 0 {
		t.Fatalf("FromRDB: %v", err)
	}
}

// TestAccuracy checks the guarantee CMS.INITBYPROB sizes for: an item's
// count is over-estimated by at most eps·N (N the total) with probability
// at least 1-delta. Over many independent sketches (items are named per
// trial, so the hash positions are independent draws), the share of
// queries over eps·N must stay under delta, with a margin for sampling
// noise. RedisBloom's width 2/eps is twice the classic e/eps... close to
// it, and its depth log2(1/delta) makes each row's failure chance 1/2.
func TestAccuracy(t *testing.T) {
	for _, c := range []struct{ eps, delta float64 }{{0.01, 0.05}, {0.005, 0.01}, {0.02, 0.1}} {
		w, d := DimFromProb(c.eps, c.delta)
		rng := rand.New(rand.NewPCG(1, uint64(w)))
		const trials, n, distinct = 30, 20000, 20000
		over, queries := 0, 0
		for tr := 0; tr < trials; tr++ {
			s := New(w, d)
			truth := make([]uint64, distinct)
			for i := 0; i < n; i++ {
				// Many light items: every row collides often, the case
				// the bound is about.
				k := rng.IntN(distinct)
				truth[k]++
				s.IncrBy([]byte("t"+strconv.Itoa(tr)+"-"+strconv.Itoa(k)), 1)
			}
			for k := 0; k < distinct; k += 13 {
				est := s.Query([]byte("t" + strconv.Itoa(tr) + "-" + strconv.Itoa(k)))
				if est < truth[k] {
					t.Fatalf("under-count: %d < %d", est, truth[k])
				}
				queries++
				if float64(est-truth[k]) > c.eps*float64(s.Count) {
					over++
				}
			}
		}
		rate := float64(over) / float64(queries)
		t.Logf("eps %g delta %g: %dx%d, %d of %d queries over eps*N (%.4f)", c.eps, c.delta, w, d, over, queries, rate)
		if rate > c.delta {
			t.Errorf("eps %g delta %g: %.4f of queries over eps*N", c.eps, c.delta, rate)
		}
	}
}

func FuzzUnmarshal(f *testing.F) {
	s := New(3, 2)
	s.IncrBy([]byte("a"), 9)
	f.Add(s.Marshal())
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		u, err := Unmarshal(b, 1<<16)
		if err != nil {
			return
		}
		if string(u.Marshal()) != string(b) {
			t.Fatal("Unmarshal/Marshal do not round-trip")
		}
		u.IncrBy([]byte("x"), 1)
		u.Query([]byte("y"))
	})
}

func FuzzFromRDB(f *testing.F) {
	s := New(3, 2)
	s.IncrBy([]byte("a"), 9)
	f.Add(s.AppendRDB(nil))
	f.Add([]byte{2, 1, 2, 1, 2, 0, 5, 4, 0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		u, err := FromRDB(rdb.NewReader(b, 1<<16), 1<<16)
		if err != nil {
			return
		}
		if u.MemUsage() > 1<<16 || uint64(len(u.Cells)) != u.Width*u.Depth {
			t.Fatal("a decoded sketch breaks its invariants")
		}
		r := rdb.NewReader(u.AppendRDB(nil), 1<<16)
		if v, err := FromRDB(r, 1<<16); err != nil || string(v.Marshal()) != string(u.Marshal()) {
			t.Fatal("AppendRDB/FromRDB do not round-trip")
		}
	})
}
