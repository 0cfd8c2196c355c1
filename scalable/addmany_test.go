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
				if len(got) != len(want) {
					t.Fatalf("batch %d: %d answers, Add gave %d", b, len(got), len(want))
				}
				for i := range got {
					if got[i] != want[i] {
						t.Fatalf("batch %d item %d: AddMany %d, Add %d", b, i, got[i], want[i])
					}
				}
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
