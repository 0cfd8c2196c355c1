package scalable

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"testing"
)

// op is one step of a random sequence against one Bloom chain and one
// Cuckoo filter.
type op struct {
	kind int // 0 bloom add, 1 cuckoo add, 2 cuckoo addnx, 3 cuckoo del, 4 compact
	item []byte
}

func randomOps(seed uint64, n int) ([]op, CuckooParams, [3]float64) {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	pool := 50 + r.IntN(500)
	ops := make([]op, n)
	for i := range ops {
		ops[i] = op{kind: r.IntN(5), item: []byte(fmt.Sprintf("it:%d", r.IntN(pool)))}
		if ops[i].kind == 4 && r.IntN(10) != 0 {
			ops[i].kind = 1
		}
	}
	p := CuckooParams{Capacity: uint64(4 + r.IntN(200)), BucketSize: uint16(1 + r.IntN(4)),
		MaxIterations: uint16(1 + r.IntN(50)), Expansion: uint16(r.IntN(3))}
	if p.Capacity < 2*uint64(p.BucketSize) {
		p.Capacity = 2 * uint64(p.BucketSize)
	}
	bf := [3]float64{float64(1 + r.IntN(200)), []float64{0.1, 0.01, 0.001}[r.IntN(3)], float64(r.IntN(4))}
	return ops, p, bf
}

// run applies ops and checks, after every step, that no item added and not
// deleted since is reported absent (Cuckoo: tracked with a multiset, since
// deleting a never-added item may remove another's fingerprint, the ops only
// delete items currently present).
func run(t *testing.T, ops []op, p CuckooParams, bf [3]float64) (*Chain, *Cuckoo) {
	ch, err := NewChain(uint64(bf[0]), bf[1], uint32(bf[2]), bf[2] == 0, noCap)
	if err != nil {
		t.Fatal(err)
	}
	cf, err := NewCuckoo(p, noCap)
	if err != nil {
		t.Fatal(err)
	}
	inBloom := map[string]bool{}
	inCuckoo := map[string]int{}
	for i, o := range ops {
		k := string(o.item)
		switch o.kind {
		case 0:
			if _, err := ch.Add(o.item, noCap); err == nil {
				inBloom[k] = true
			}
		case 1, 2:
			if cf.Insert(o.item, o.kind == 2, noCap) == Inserted {
				inCuckoo[k]++
			}
		case 3:
			if inCuckoo[k] > 0 {
				if !cf.Delete(o.item) {
					t.Fatalf("step %d: delete of present %s failed", i, k)
				}
				inCuckoo[k]--
			}
		case 4:
			cf.Compact()
		}
		if o.kind == 0 && inBloom[k] && !ch.Test(o.item) {
			t.Fatalf("step %d: bloom false negative for %s", i, k)
		}
	}
	for k := range inBloom {
		if !ch.Test([]byte(k)) {
			t.Fatalf("bloom false negative for %s", k)
		}
	}
	for k, n := range inCuckoo {
		if n > 0 && !cf.Exists([]byte(k)) {
			t.Fatalf("cuckoo false negative for %s", k)
		}
		if got := cf.Count([]byte(k)); got < uint64(n) {
			t.Fatalf("cuckoo count %s = %d, want >= %d", k, got, n)
		}
	}
	return ch, cf
}

func dumpBytes(ch *Chain, cf *Cuckoo) []byte {
	pos, data := dump(ch, cf)
	var b bytes.Buffer
	for i := range pos {
		fmt.Fprintf(&b, "%d:", pos[i])
		b.Write(data[i])
	}
	return b.Bytes()
}

// TestRandomSequences: over seeded random sequences, no false negatives;
// dump → load → dump is the identity; replaying the same sequence gives
// identical bytes.
func TestRandomSequences(t *testing.T) {
	for seed := uint64(1); seed <= 60; seed++ {
		ops, p, bf := randomOps(seed, 3000)
		ch, cf := run(t, ops, p, bf)
		ch2, cf2 := run(t, ops, p, bf)
		for _, pair := range [][2]any{{ch, ch2}, {cf, cf2}} {
			var a, b []byte
			if x, ok := pair[0].(*Chain); ok {
				a, b = dumpBytes(x, nil), dumpBytes(pair[1].(*Chain), nil)
			} else {
				a, b = dumpBytes(nil, pair[0].(*Cuckoo)), dumpBytes(nil, pair[1].(*Cuckoo))
			}
			if !bytes.Equal(a, b) {
				t.Fatalf("seed %d: two replays differ", seed)
			}
		}
		for _, typ := range []string{"bf", "cf"} {
			var pos []int64
			var data [][]byte
			if typ == "bf" {
				pos, data = dump(ch, nil)
			} else {
				pos, data = dump(nil, cf)
			}
			lch, lcf := load(t, typ, pos, data)
			if pos[0] == 0 {
				continue
			}
			if typ == "bf" && !bytes.Equal(dumpBytes(lch, nil), dumpBytes(ch, nil)) ||
				typ == "cf" && !bytes.Equal(dumpBytes(nil, lcf), dumpBytes(nil, cf)) {
				t.Fatalf("seed %d: %s dump → load → dump differs", seed, typ)
			}
		}
	}
}
