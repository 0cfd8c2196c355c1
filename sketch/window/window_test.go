package window

import (
	"encoding/binary"
	"errors"
	"math"
	"math/rand/v2"
	"testing"
)

// key is the item for id in a namespace: added items and never-added
// probes cannot collide.
func key(ns byte, id uint64) []byte {
	var b [9]byte
	b[0] = ns
	binary.LittleEndian.PutUint64(b[1:], id)
	return b[:]
}

func mustNew(t testing.TB, o Options) *Filter {
	t.Helper()
	f, err := New(o)
	if err != nil {
		t.Fatalf("New(%+v): %v", o, err)
	}
	return f
}

// binomialUpper is a one-sided bound a Binomial(n, p) count exceeds with
// probability about 3e-5 (z = 4), plus one for tiny expectations.
func binomialUpper(n int, p float64) float64 {
	mu := float64(n) * p
	return mu + 4*math.Sqrt(mu*(1-p)) + 1
}

// probeFP counts false positives among q never-added items.
func probeFP(f *Filter, rng *rand.Rand, q int, now int64) int {
	fp := 0
	for range q {
		if f.Exists(key(0xee, rng.Uint64()), now) {
			fp++
		}
	}
	return fp
}

func TestNewValidates(t *testing.T) {
	cases := []struct {
		o    Options
		want error
	}{
		{Options{ErrorRate: 0, Kind: Count, Count: 10}, ErrErrorRate},
		{Options{ErrorRate: 0.6, Kind: Count, Count: 10}, ErrErrorRate},
		{Options{ErrorRate: math.NaN(), Kind: Count, Count: 10}, ErrErrorRate},
		{Options{ErrorRate: 0.01, Kind: Count, Count: 0}, ErrWindow},
		{Options{ErrorRate: 0.01, Kind: Count, Count: MaxItems + 1}, ErrWindow},
		{Options{ErrorRate: 0.01, Kind: Count, Count: 10, Overflow: KeepRate}, ErrOverflow},
		{Options{ErrorRate: 0.01, Kind: Time, WindowMs: 0, Capacity: 10}, ErrWindow},
		{Options{ErrorRate: 0.01, Kind: Time, WindowMs: 1000, Capacity: 0}, ErrWindow},
		{Options{ErrorRate: 0.01, Kind: Time, WindowMs: -5, Capacity: 10}, ErrWindow},
		{Options{ErrorRate: 0.01, Kind: Time, WindowMs: 1000, Capacity: 10, Overflow: 7}, ErrOverflow},
		{Options{ErrorRate: 0.01, Kind: 9, Count: 10}, ErrKind},
		{Options{ErrorRate: 0.01, Kind: Count, Count: 1 << 30, MaxBytes: 1 << 20}, ErrTooLarge},
		{Options{ErrorRate: 0.01, Kind: Count, Count: 100, Shape: &Shape{K: 3, L: 4, Words: 1, Gen: 20}}, ErrShape},
		{Options{ErrorRate: 0.01, Kind: Count, Count: 100, Shape: &Shape{K: 0, L: 4, Words: 1, Gen: 25}}, ErrShape},
		{Options{ErrorRate: 0.01, Kind: Count, Count: 100, Shape: &Shape{K: 3, L: 4, Words: 1 << 50, Gen: 25}}, ErrShape},
		{Options{ErrorRate: 0.01, Kind: Count, Count: 100, Shape: &Shape{K: 3, L: 4, Words: 1 << 30, Gen: 25}}, ErrTooLarge},
	}
	for _, c := range cases {
		if _, err := New(c.o); !errors.Is(err, c.want) {
			t.Errorf("New(%+v) = %v, want %v", c.o, err, c.want)
		}
	}
}

// TestGivenShape: a logged shape builds the same filter as sizing.
func TestGivenShape(t *testing.T) {
	o := Options{ErrorRate: 0.001, Kind: Time, WindowMs: 60_000, Capacity: 3000, Now: 7}
	a := mustNew(t, o)
	s := a.shape
	o.Shape = &s
	b := mustNew(t, o)
	if !Equal(a, b) {
		t.Fatal("a filter of the logged shape differs")
	}
}

// TestSizingMeetsRateAndPaper: every shape meets its rate at the
// worst-case fills, covers its window with l generations, and takes no
// more memory than the paper's fill-½ design point.
func TestSizingMeetsRateAndPaper(t *testing.T) {
	for _, e := range []float64{0.5, 0.1, 0.01, 1e-3, 1e-5, 1e-9} {
		for _, n := range []uint64{1, 2, 10, 333, 10_000, 1 << 22} {
			s, err := Size(e, n)
			if err != nil {
				t.Fatalf("Size(%g, %d): %v", e, n, err)
			}
			if fp := s.MaxFP(); fp > e {
				t.Errorf("Size(%g, %d) = %+v: worst-case rate %g", e, n, s, fp)
			}
			if uint64(s.L)*s.Gen < n {
				t.Errorf("Size(%g, %d) = %+v: l·g < n", e, n, s)
			}
			p, ok := PaperSize(e, n)
			if !ok || s.Bytes() > p.Bytes() {
				t.Errorf("Size(%g, %d) = %d bytes, paper %d (%v)", e, n, s.Bytes(), p.Bytes(), ok)
			}
		}
	}
}

// TestCountWindowNoFalseNegatives: after every insert, the item inserted
// N−1 inserts ago (the window's oldest) and a sample of the window are
// present, over streams with repeats.
func TestCountWindowNoFalseNegatives(t *testing.T) {
	for _, c := range []struct {
		e float64
		n uint64
	}{{0.1, 1}, {0.01, 7}, {0.01, 100}, {1e-3, 1000}, {1e-4, 5000}} {
		rng := rand.New(rand.NewPCG(uint64(c.n), 1))
		f := mustNew(t, Options{ErrorRate: c.e, Kind: Count, Count: c.n})
		var ids []uint64 // ids[i] is the item of insert i
		for i := range 20 * int(c.n) {
			id := uint64(i)
			if i > 0 && rng.IntN(4) == 0 { // re-add a recent item
				id = ids[len(ids)-1-rng.IntN(min(len(ids), int(c.n)*2))]
			}
			f.Add(key(1, id), 0)
			ids = append(ids, id)
			lo := max(0, len(ids)-int(c.n))
			if !f.Exists(key(1, ids[lo]), 0) {
				t.Fatalf("e=%g N=%d: insert %d (window's oldest) missing after %d inserts", c.e, c.n, lo, len(ids))
			}
			for range 3 {
				j := lo + rng.IntN(len(ids)-lo)
				if !f.Exists(key(1, ids[j]), 0) {
					t.Fatalf("e=%g N=%d: insert %d missing after %d inserts", c.e, c.n, j, len(ids))
				}
			}
		}
	}
}

// TestCountWindowFalsePositives: the rate measured on never-added items
// at 1×, 10× and 100× the window stays within a binomial bound of the
// target, and matches the rate Info estimates from the actual fills
// (which checks the independence the sizing assumes). Probes are taken
// at the end of a generation, where fills are highest.
func TestCountWindowFalsePositives(t *testing.T) {
	for _, c := range []struct {
		e float64
		n uint64
	}{{0.01, 2000}, {1e-3, 20_000}} {
		rng := rand.New(rand.NewPCG(uint64(c.n), 2))
		f := mustNew(t, Options{ErrorRate: c.e, Kind: Count, Count: c.n})
		const q = 200_000
		var added uint64
		for _, mult := range []uint64{1, 10, 100} {
			target := mult * c.n
			// stop at the end of a generation: fills at their worst
			target += (f.shape.Gen - target%f.shape.Gen) % f.shape.Gen
			for ; added < target; added++ {
				f.Add(key(1, added), 0)
			}
			in := f.Info(0)
			fp := probeFP(f, rng, q, 0)
			if float64(fp) > binomialUpper(q, c.e) {
				t.Errorf("e=%g N=%d at %d×: %d/%d false positives, bound %.0f", c.e, c.n, mult, fp, q, binomialUpper(q, c.e))
			}
			mu := q * in.EstimatedFP
			if math.Abs(float64(fp)-mu) > 5*math.Sqrt(mu)+2 {
				t.Errorf("e=%g N=%d at %d×: %d false positives, estimate %.1f", c.e, c.n, mult, fp, mu)
			}
			t.Logf("e=%g N=%d at %d× (k=%d l=%d): measured %.5f, estimated %.5f, bound %.5f", c.e, c.n, mult, in.K, in.L, float64(fp)/q, in.EstimatedFP, in.MaxFP)
		}
	}
}

// TestCountWindowForgets: items older than the forgetting margin,
// (k+l)·g inserts, are found no more often than never-added items; the
// log shows how recall falls between l·g and (k+l)·g.
func TestCountWindowForgets(t *testing.T) {
	const n, e = 5000, 0.01
	f := mustNew(t, Options{ErrorRate: e, Kind: Count, Count: n})
	in := f.Info(0)
	g := in.GenerationSize
	total := in.Forgotten + 4*g
	for i := range total {
		f.Add(key(1, i), 0)
	}
	// item i has age total−1−i inserts
	for age := in.Guaranteed; age < total; age += g {
		hit, q := 0, 0
		for j := range min(g, total-age) {
			i := total - 1 - age - j
			q++
			if f.Exists(key(1, i), 0) {
				hit++
			}
		}
		if age >= in.Forgotten && float64(hit) > binomialUpper(q, e) {
			t.Errorf("age %d ≥ forgotten %d: %d/%d still found", age, in.Forgotten, hit, q)
		}
		if age < in.Guaranteed+uint64(in.K)*g+2*g {
			t.Logf("age %d (%.2f windows): recall %.4f", age, float64(age)/n, float64(hit)/float64(q))
		}
	}
}

// timeStream drives a time window with a moving clock: steps of
// spacing·T/capacity·(1..1.5) ms, idle gaps of up to 3T, and steps
// backwards of up to back ms that the filter must treat as no move at
// all. It checks after every insert that the oldest item added less than
// T ago (by the filter's clock, the latest seen) and a random one of them
// are present.
//
// While the clock catches up after a step back, the filter's time stands
// still: those inserts all fall in one generation. With spacing 1 and
// back = T that is a burst of up to the whole capacity, which a KeepTime
// window absorbs (no false negatives, a higher rate) and a KeepRate one
// answers by starting generations early; spacing 2 and back of a quarter
// generation keep every generation within its share.
func timeStream(t *testing.T, f *Filter, rng *rand.Rand, inserts int, spacing, back int64) {
	T := int64(f.window)
	step := max(spacing*T/int64(f.capacity), 1)
	type rec struct {
		id uint64
		at int64
	}
	var recent []rec // adds in the last T, oldest first
	clock, latest := f.last, f.last
	for i := range inserts {
		switch r := rng.IntN(1000); {
		case r == 0:
			clock += rng.Int64N(3 * T)
		case r == 1 && back > 0:
			clock -= rng.Int64N(back)
		default:
			clock += step + rng.Int64N(step/2+1)
		}
		latest = max(latest, clock)
		f.Add(key(1, uint64(i)), clock)
		recent = append(recent, rec{uint64(i), latest})
		for len(recent) > 0 && latest-recent[0].at >= T {
			recent = recent[1:]
		}
		if !f.Exists(key(1, recent[0].id), clock) {
			t.Fatalf("insert %d at %d missing at %d (T=%d)", recent[0].id, recent[0].at, latest, T)
		}
		if j := rng.IntN(len(recent)); !f.Exists(key(1, recent[j].id), clock) {
			t.Fatalf("insert %d at %d missing at %d (T=%d)", recent[j].id, recent[j].at, latest, T)
		}
	}
}

func TestTimeWindowNoFalseNegatives(t *testing.T) {
	for _, c := range []struct {
		e    float64
		T    int64
		cap  uint64
		over Overflow
	}{{0.01, 1000, 100, KeepTime}, {1e-3, 60_000, 5000, KeepTime}, {0.01, 7, 3, KeepTime}, {0.01, 10_000, 500, KeepRate}} {
		rng := rand.New(rand.NewPCG(uint64(c.T), 3))
		f := mustNew(t, Options{ErrorRate: c.e, Kind: Time, WindowMs: c.T, Capacity: c.cap, Overflow: c.over, Now: 1_700_000_000_000})
		if c.over == KeepTime {
			timeStream(t, f, rng, 30*int(c.cap), 1, c.T)
		} else {
			timeStream(t, f, rng, 30*int(c.cap), 2, f.genMs/4)
		}
	}
}

// TestTimeWindowFalsePositives: with the moving clock of timeStream, the
// rate on never-added items, probed at 1×, 10× and 100× the window's
// capacity of inserts, stays within the binomial bound of the target and
// matches Info's estimate. (The stream runs at 0.8 of the capacity on average, with steps back of
// up to a quarter generation:
// see timeStream.) A million probes per point make the estimate check
// sharp enough to catch correlated slice positions (see position).
func TestTimeWindowFalsePositives(t *testing.T) {
	const e, T, capacity = 0.01, 60_000, 2000
	rng := rand.New(rand.NewPCG(4, 4))
	f := mustNew(t, Options{ErrorRate: e, Kind: Time, WindowMs: T, Capacity: capacity, Now: 1_700_000_000_000})
	done := 0
	for _, mult := range []int{1, 10, 100} {
		timeStream(t, f, rng, mult*capacity-done, 1, f.genMs/4)
		done = mult * capacity
		now := f.last
		const q = 1_000_000
		fp := probeFP(f, rng, q, now)
		in := f.Info(now)
		if float64(fp) > binomialUpper(q, e) {
			t.Errorf("at %d×: %d/%d false positives, bound %.0f", mult, fp, q, binomialUpper(q, e))
		}
		mu := q * in.EstimatedFP
		if math.Abs(float64(fp)-mu) > 5*math.Sqrt(mu)+2 {
			t.Errorf("at %d×: %d false positives, estimate %.1f", mult, fp, mu)
		}
		t.Logf("at %d×: measured %.5f, estimated %.5f, bound %.5f", mult, float64(fp)/q, in.EstimatedFP, in.MaxFP)
	}
}

// TestTimeWindowAtCapacity: the moving clock of timeStream runs at 0.8 of
// the capacity; here a time window is driven as hard as its sizing allows
// (KeepTime, each generation taking g−1 inserts: about 97% of the
// capacity, jittered, with idle gaps) and beyond it (KeepRate at twice
// the capacity), and probed at 1×, 10× and 100× the window at the end of
// a generation, where the fills are at their worst: the rate on
// never-added items stays within the binomial bound of the target and
// matches Info's estimate; every item of the last T ms is present; an
// item older than the forgetting margin ((k+l)·d ms) is found no more
// often than a never-added one.
func TestTimeWindowAtCapacity(t *testing.T) {
	const e, T, capacity = 0.01, 60_000, 2000
	for _, c := range []struct {
		over Overflow
		rate float64 // inserts per generation, over g
	}{{KeepTime, 0}, {KeepRate, 2}} {
		rng := rand.New(rand.NewPCG(6, uint64(c.over)))
		start := int64(1_700_000_000_000)
		f := mustNew(t, Options{ErrorRate: e, Kind: Time, WindowMs: T, Capacity: capacity, Overflow: c.over, Now: start})
		d, g := f.genMs, int64(f.shape.Gen)
		// step: at most g−1 inserts in any generation (KeepTime), or twice
		// the capacity (KeepRate).
		step := (d + g - 2) / (g - 1)
		if c.rate > 0 {
			step = max(1, int64(float64(d)/(c.rate*float64(g))))
		}
		type rec struct {
			id  uint64
			at  int64
			gen uint64 // the generation it went into
		}
		var log []rec // every add, oldest first
		clock := start
		const q = 1_000_000
		for _, mult := range []int64{1, 10, 100} {
			for clock < start+mult*T {
				// now and then idle, but not in the last 2T before a probe
				if rng.IntN(5*capacity) == 0 && clock < start+(mult-2)*T {
					clock += rng.Int64N(2 * T)
				}
				clock += step
				if c.over == KeepTime {
					clock += rng.Int64N(step/16 + 1) // jitter only slows it
				}
				id := uint64(len(log))
				f.Add(key(1, id), clock)
				log = append(log, rec{id, clock, f.gen})
			}
			// the end of the current generation: fills at their worst
			now := (clock/d+1)*d - 1
			in := f.Info(now)
			fp := probeFP(f, rng, q, now)
			if float64(fp) > binomialUpper(q, e) {
				t.Errorf("%s at %d×: %d/%d false positives, bound %.0f", c.over, mult, fp, q, binomialUpper(q, e))
			}
			mu := q * in.EstimatedFP
			if math.Abs(float64(fp)-mu) > 5*math.Sqrt(mu)+2 {
				t.Errorf("%s at %d×: %d false positives, estimate %.1f", c.over, mult, fp, mu)
			}
			// No false negative among the items of the last T ms
			// (KeepTime) or of the last l generations (both; KeepRate
			// starts them early while it runs over its capacity). Past
			// k+l generations ((k+l)·d ms for KeepTime) an item is a
			// stranger.
			missing, old, oldFound := 0, 0, 0
			for _, r := range log {
				age := in.Generation - r.gen
				switch {
				case age <= uint64(in.L) || c.over == KeepTime && now-r.at < T:
					if !f.Exists(key(1, r.id), now) {
						missing++
					}
				case age >= uint64(in.K+in.L):
					if c.over == KeepTime && now-r.at < int64(in.Forgotten) {
						t.Fatalf("k+l generations in less than %d ms", in.Forgotten)
					}
					old++
					if f.Exists(key(1, r.id), now) {
						oldFound++
					}
				}
			}
			if missing > 0 {
				t.Errorf("%s at %d×: %d items inside the window missing", c.over, mult, missing)
			}
			if old > 0 && float64(oldFound) > binomialUpper(old, e) {
				t.Errorf("%s at %d×: %d of %d items past the forgetting margin found", c.over, mult, oldFound, old)
			}
			t.Logf("%s at %d× (%d inserts, k=%d l=%d, max fill %.3f): measured %.5f, estimated %.5f, bound %.5f; forgotten found %d/%d",
				c.over, mult, len(log), in.K, in.L, maxOf(in.Fill), float64(fp)/q, in.EstimatedFP, in.MaxFP, oldFound, old)
		}
	}
}

func maxOf(p []float64) float64 {
	m := 0.0
	for _, x := range p {
		m = max(m, x)
	}
	return m
}

// TestKeepRateBoundsOverload: at five times the capacity a KeepRate
// window keeps its rate (it starts generations early) while a KeepTime
// one keeps every item and reports the higher rate it reached.
func TestKeepRateBoundsOverload(t *testing.T) {
	const e, T, capacity = 0.01, 10_000, 1000
	for _, over := range []Overflow{KeepRate, KeepTime} {
		f := mustNew(t, Options{ErrorRate: e, Kind: Time, WindowMs: T, Capacity: capacity, Overflow: over})
		rng := rand.New(rand.NewPCG(5, uint64(over)))
		now := int64(0)
		for i := range 20 * capacity {
			now += int64(rng.IntN(4)) // ≈ 1.5 ms apart: 6.7× the capacity
			f.Add(key(1, uint64(i)), now)
		}
		const q = 100_000
		fp := probeFP(f, rng, q, now)
		in := f.Info(now)
		t.Logf("%v: measured %.4f, estimated %.4f (target %g)", over, float64(fp)/q, in.EstimatedFP, e)
		if over == KeepRate && float64(fp) > binomialUpper(q, e) {
			t.Errorf("KeepRate overloaded: %d/%d false positives", fp, q)
		}
		if over == KeepTime && in.EstimatedFP <= e {
			t.Errorf("KeepTime overloaded: estimate %g not above the target", in.EstimatedFP)
		}
	}
}

// TestIdleAndBackwards: an idle filter ages on the next operation (a
// read sees the same as the write that follows), a gap beyond k+l
// generations clears it, and a clock stepping back neither ages nor
// rejuvenates anything.
func TestIdleAndBackwards(t *testing.T) {
	f := mustNew(t, Options{ErrorRate: 0.01, Kind: Time, WindowMs: 1000, Capacity: 100, Now: 5000})
	in := f.Info(5000)
	f.Add([]byte("a"), 5000)
	if !f.Exists([]byte("a"), 5000+999) || !f.Exists([]byte("a"), 4000) {
		t.Fatal("a missing inside the window")
	}
	gone := 5000 + int64(in.Forgotten)
	if f.Exists([]byte("a"), gone) {
		t.Fatal("a present after the forgetting margin")
	}
	if f.Info(gone).Fill[in.K+in.L-1] != 0 {
		t.Fatal("virtual shift left bits")
	}
	before := f.Marshal()
	f.Add([]byte("b"), gone+1e12) // a year idle: one clear, not 1e9 shifts
	if f.Exists([]byte("a"), gone) || !f.Exists([]byte("b"), 0) {
		t.Fatal("after a long gap: a must be gone, b present (time never goes back)")
	}
	if f.last != gone+1e12 || Equal(f, mustUnmarshal(t, before)) {
		t.Fatal("clock not advanced")
	}
	f.Add([]byte("c"), 10) // backwards: treated as the latest time
	if f.last != gone+1e12 || !f.Exists([]byte("c"), gone+1e12+999) {
		t.Fatal("backwards add moved the clock")
	}
}

func mustUnmarshal(t *testing.T, b []byte) *Filter {
	t.Helper()
	f, err := Unmarshal(b, 0)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func TestAddReportsNew(t *testing.T) {
	f := mustNew(t, Options{ErrorRate: 0.001, Kind: Count, Count: 100})
	if !f.Add([]byte("x"), 0) || f.Add([]byte("x"), 0) {
		t.Fatal("Add must answer true then false")
	}
	for i := range 1000 {
		f.Add(key(1, uint64(i)), 0)
	}
	if f.Exists([]byte("x"), 0) || !f.Add([]byte("x"), 0) {
		t.Fatal("x should have been forgotten and be new again")
	}
}

func TestInfo(t *testing.T) {
	f := mustNew(t, Options{ErrorRate: 0.01, Kind: Count, Count: 1000})
	for i := range 2500 {
		f.Add(key(1, uint64(i)), 0)
	}
	in := f.Info(0)
	if in.Kind != Count || in.Window != 1000 || in.K < 1 || in.L < 1 || len(in.Fill) != in.K+in.L ||
		in.Guaranteed < 1000 || in.Forgotten <= in.Guaranteed || in.Inserts != 2500 ||
		in.MemoryBytes < uint64(in.K+in.L)*in.SliceBits/8 || in.MaxFP > 0.01 ||
		in.EstimatedFP <= 0 || in.EstimatedFP > in.MaxFP*1.5 || in.Generation != 2500/in.GenerationSize-boolU(2500%in.GenerationSize == 0) {
		t.Fatalf("implausible info %+v", in)
	}
	// Items: the last l generations, (l−1)·g + the current one's, estimated
	g := in.GenerationSize
	want := float64(uint64(in.L-1)*g + in.InsertsInGeneration)
	if math.Abs(in.Items-want) > 0.05*want {
		t.Errorf("items estimated %.0f, the window holds %.0f", in.Items, want)
	}
	// the youngest slices fill in order; the oldest are about ½
	for i := 1; i < in.K; i++ {
		if in.Fill[i] < in.Fill[i-1] {
			t.Errorf("fill[%d] = %g < fill[%d] = %g", i, in.Fill[i], i-1, in.Fill[i-1])
		}
	}
	tw := mustNew(t, Options{ErrorRate: 0.01, Kind: Time, WindowMs: 1000, Capacity: 10, Now: 0})
	tw.Add([]byte("a"), 0)
	ti := tw.Info(10_000_000)
	if ti.EstimatedFP != 0 || ti.Generation == 0 || ti.GenerationMs*int64(ti.L) < 1000 {
		t.Fatalf("idle time window info %+v", ti)
	}
}

func boolU(b bool) uint64 {
	if b {
		return 1
	}
	return 0
}
