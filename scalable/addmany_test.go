package scalable

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"testing"
)

// TestAddManyMatchesAdd: AddMany (each item hashed once, its bits loaded
// a few items ahead) answers, stops and sets bits exactly as Add on each
// item in turn, with duplicates inside a batch, the chain growing
// in the middle of one, a non-scaling chain filling and a byte cap
// reached.
func TestAddManyMatchesAdd(t *testing.T) {
	rng := rand.New(rand.NewPCG(31, 32))
	for _, tc := range []struct {
		name       string
		capacity   uint64
		growth     uint32
		nonScaling bool
		maxBytes   uint64
		batches    int
	}{
		{"default", 100, 2, false, noCap, 40},
		{"growth 1", 300, 1, false, noCap, 30},
		{"non-scaling", 5000, 2, true, noCap, 10},
		{"byte cap", 100, 2, false, 64 << 10, 40},
	} {
		t.Run(tc.name, func(t *testing.T) {
			one, err := NewChain(tc.capacity, 0.01, tc.growth, tc.nonScaling, tc.maxBytes)
			if err != nil {
				t.Fatal(err)
			}
			many, err := NewChain(tc.capacity, 0.01, tc.growth, tc.nonScaling, tc.maxBytes)
			if err != nil {
				t.Fatal(err)
			}
			var grewInside, stopped int
			var next uint64
			for b := range tc.batches {
				n := 1 + rng.IntN(3000)
				if b%5 == 0 {
					n = b / 5 % (PrefetchAhead + 2) // none, and fewer than the look-ahead
				}
				items := make([][]byte, n)
				for i := range items {
					v := next + uint64(i)
					if rng.IntN(8) == 0 && next > 0 { // an item added before, or earlier in this batch
						v = rng.Uint64N(next + uint64(i))
					}
					items[i] = binary.LittleEndian.AppendUint64(nil, v)
				}
				next += uint64(n)
				var want []int64
				var wantErr error
				for _, it := range items {
					added, err := one.Add(it, tc.maxBytes)
					if err != nil {
						wantErr = err
						break
					}
					want = append(want, b2i(added))
				}
				linksBefore := len(many.Links())
				got, err := many.AddMany(items, tc.maxBytes, nil)
				if !errors.Is(err, wantErr) || (err == nil) != (wantErr == nil) {
					t.Fatalf("batch %d: AddMany error %v, Add %v", b, err, wantErr)
				}
				if wantErr != nil {
					stopped++
				}
				if len(many.Links()) > linksBefore {
					grewInside++
				}
				sameAnswers(t, b, got, want)
				sameChains(t, one, many)
			}
			if !tc.nonScaling && grewInside == 0 {
				t.Fatal("no batch grew the chain inside it")
			}
			if (tc.nonScaling || tc.maxBytes != noCap) && stopped == 0 {
				t.Fatal("no batch stopped at the chain's limit")
			}
		})
	}
}

// sameAnswers fails unless batch b's answers are the reference's.
func sameAnswers(t *testing.T, b int, got, want []int64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("batch %d: %d answers, against %d", b, len(got), len(want))
	}
	for i := range got {
		if got[i] != want[i] {
			t.Fatalf("batch %d item %d: %d, against %d", b, i, got[i], want[i])
		}
	}
}

func sameChains(t *testing.T, a, b *Chain) {
	t.Helper()
	la, lb := a.Links(), b.Links()
	if len(la) != len(lb) {
		t.Fatalf("%d links against %d", len(la), len(lb))
	}
	for i := range la {
		if la[i].Size() != lb[i].Size() || la[i].BloomParams != lb[i].BloomParams {
			t.Fatalf("link %d: size %d against %d", i, la[i].Size(), lb[i].Size())
		}
		x, y := make([]byte, la[i].BloomParams.Bytes), make([]byte, lb[i].BloomParams.Bytes)
		la[i].ReadBytes(x, 0)
		lb[i].ReadBytes(y, 0)
		if !bytes.Equal(x, y) {
			t.Fatalf("link %d: bits differ", i)
		}
	}
}

// TestAddManyTestedMatchesAddMany: AddManyTested with the older links'
// tests made by TestOlder answers, stops and sets bits as AddMany, when
// the tests were made just before, and when made before earlier batches
// were added (the state machine's helper testing a later command of an
// entry, on another goroutine, while Apply adds an earlier one), so that
// links became older since; tests of another chain, which found the items
// in its older links, are not taken.
func TestAddManyTestedMatchesAddMany(t *testing.T) {
	rng := rand.New(rand.NewPCG(41, 42))
	for _, tc := range []struct {
		name       string
		capacity   uint64
		nonScaling bool
		maxBytes   uint64
	}{
		{"default", 100, false, noCap},
		{"non-scaling", 20000, true, noCap},
		{"byte cap", 100, false, 64 << 10},
	} {
		t.Run(tc.name, func(t *testing.T) {
			plain, err := NewChain(tc.capacity, 0.01, 2, tc.nonScaling, tc.maxBytes)
			if err != nil {
				t.Fatal(err)
			}
			tested, _ := NewChain(tc.capacity, 0.01, 2, tc.nonScaling, tc.maxBytes)
			batches := make([][][]byte, 60)
			var next uint64
			for b := range batches {
				n := 1 + rng.IntN(2000)
				items := make([][]byte, n)
				for i := range items {
					v := next + uint64(i)
					switch {
					case next == 0:
					case rng.IntN(8) == 0: // added before, or earlier in the batch
						v = rng.Uint64N(next + uint64(i))
					case rng.IntN(8) == 0: // added lately: perhaps in a link that aged since its tests
						v = next - 1 - rng.Uint64N(min(next, 4000))
					}
					items[i] = binary.LittleEndian.AppendUint64(nil, v)
				}
				next += uint64(n)
				batches[b] = items
			}
			var olders [3]Older
			var stale, grewSince, stopped, others int
			for b, items := range batches {
				o := &olders[b%3]
				switch {
				case b%7 == 3:
					// Another chain's tests, which find the items in its
					// older links: not to be taken.
					other, _ := NewChain(100, 0.01, 2, false, noCap)
					other.AddMany(items, noCap, nil)
					for n := len(other.Links()); len(other.Links()) == n; {
						other.AddMany([][]byte{binary.LittleEndian.AppendUint64([]byte("filler"), rng.Uint64())}, noCap, nil)
					}
					other.TestOlder(items, o)
					if o.Links <= len(tested.Links()) && o.in(0) {
						others++
					}
				case b%2 == 1 && b > 0 && olders[b%3].Chain == tested:
					stale++ // made before the batches since were added
				default:
					tested.TestOlder(items, o)
				}
				if o.Chain == tested && o.Links < len(tested.Links()) {
					grewSince++
				}
				want, wantErr := plain.AddMany(items, tc.maxBytes, nil)
				got, err := tested.AddManyTested(items, tc.maxBytes, nil, o)
				if !errors.Is(err, wantErr) {
					t.Fatalf("batch %d: error %v, AddMany %v", b, err, wantErr)
				}
				if wantErr != nil {
					stopped++
				}
				sameAnswers(t, b, got, want)
				sameChains(t, plain, tested)
				// The next use of this slot tests the batch three on,
				// before the two between are added.
				if b+3 < len(batches) && b%2 == 0 {
					tested.TestOlder(batches[b+3], &olders[(b+3)%3])
				}
			}
			if stale == 0 {
				t.Fatal("no batch used tests made before earlier batches")
			}
			if !tc.nonScaling && others == 0 {
				t.Fatal("no batch was offered another chain's tests that only the chain tells apart")
			}
			if !tc.nonScaling && grewSince == 0 {
				t.Fatal("no batch's chain grew between its tests and its adds")
			}
			if (tc.nonScaling || tc.maxBytes != noCap) && stopped == 0 {
				t.Fatal("no batch stopped at the chain's limit")
			}
		})
	}
}

// TestTestOlderBesideAdds runs TestOlder on a second goroutine while the
// writer adds, as the state machine's helper does: under -race this is
// the check that it only reads what the writer no longer writes, and the
// answers stay AddMany's.
func TestTestOlderBesideAdds(t *testing.T) {
	plain, _ := NewChain(100, 0.01, 2, false, noCap)
	tested, _ := NewChain(100, 0.01, 2, false, noCap)
	var batches [][][]byte
	for b := range 40 {
		items := make([][]byte, 500)
		for i := range items {
			items[i] = binary.LittleEndian.AppendUint64(nil, uint64(b*400+i)) // a fifth seen before
		}
		batches = append(batches, items)
	}
	olders := make([]Older, len(batches))
	done := make([]chan struct{}, len(batches))
	for b := range done {
		done[b] = make(chan struct{})
	}
	go func() {
		for b := 1; b < len(batches); b++ {
			tested.TestOlder(batches[b], &olders[b])
			close(done[b])
		}
	}()
	for b, items := range batches {
		var o *Older
		if b > 0 {
			<-done[b]
			o = &olders[b]
		}
		want, _ := plain.AddMany(items, noCap, nil)
		got, err := tested.AddManyTested(items, noCap, nil, o)
		if err != nil {
			t.Fatal(err)
		}
		sameAnswers(t, b, got, want)
	}
	sameChains(t, plain, tested)
	if len(tested.Links()) < 5 {
		t.Fatalf("%d links: the chain hardly grew", len(tested.Links()))
	}
}
