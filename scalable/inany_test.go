package scalable

import (
	"encoding/binary"
	"math/rand/v2"
	"testing"
)

// TestInAnyMatchesLinks: an add's test of the older links (inAny, every
// link's first bits read before any is looked at), and a lookup's of all
// of them (Test), answer what testing them one after another does, on
// chains of a few links and of more than the 64 inAny takes at a time,
// for present and absent items. (No chain has a link of one hash: its
// first link's error is already halved. The engine's
// TestFirstBitsMatchesBits covers that.)
func TestInAnyMatchesLinks(t *testing.T) {
	rng := rand.New(rand.NewPCG(21, 22))
	for _, tc := range []struct {
		capacity uint64
		errRate  float64
		growth   uint32
		items    int
	}{
		{100, 0.01, 2, 20_000},   // the auto-created default: 8 links
		{10, 0.3, 1, 1_500},      // 128 links of 3 to 130 hashes
		{50, 0.001, 1, 9_000},    // 179 links of 11 to 189 hashes
		{1000, 0.0001, 4, 30000}, // 4 links, 15 hashes and more
	} {
		ch, err := NewChain(tc.capacity, tc.errRate, tc.growth, false, noCap)
		if err != nil {
			t.Fatal(err)
		}
		var buf [8]byte
		for i := range tc.items {
			binary.LittleEndian.PutUint64(buf[:], uint64(i))
			if _, err := ch.Add(buf[:], noCap); err != nil {
				t.Fatal(err)
			}
		}
		links := ch.Links()
		older := links[:len(links)-1]
		var held, absent int
		for n := 0; n < 2*tc.items; n++ {
			binary.LittleEndian.PutUint64(buf[:], uint64(rng.IntN(2*tc.items)))
			h := ch.hash(buf[:])
			want := false
			for _, l := range older {
				if l.Test(h) {
					want = true
					break
				}
			}
			if got := inAny(older, h); got != want {
				t.Fatalf("capacity %d growth %d, %d links: inAny %v, the links one by one %v", tc.capacity, tc.growth, len(links), got, want)
			}
			if got, all := ch.Test(buf[:]), want || links[len(links)-1].Test(h); got != all {
				t.Fatalf("capacity %d growth %d, %d links: Test %v, the links one by one %v", tc.capacity, tc.growth, len(links), got, all)
			}
			if want {
				held++
			} else {
				absent++
			}
		}
		if held == 0 || absent == 0 || tc.growth == 1 && len(older) <= 64 {
			t.Fatalf("capacity %d growth %d: %d links, %d held, %d absent: the case tests too little", tc.capacity, tc.growth, len(links), held, absent)
		}
	}
}
