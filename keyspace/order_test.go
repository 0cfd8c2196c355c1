package keyspace

import (
	"errors"
	"math/rand/v2"
	"slices"
	"strconv"
	"testing"
)

// TestWalkOrder: the walk's order (pages of keys sorted apart and
// merged) lists every key of the record's map and its fresh list
// once, in chunk order, as one sort of them all does; a cut given up
// stops it with ErrCutAborted.
func TestWalkOrder(t *testing.T) {
	rng := rand.New(rand.NewPCG(41, 42))
	for _, n := range []int{0, 1, 100, blockLen, blockLen + 1, 3*blockLen + 777, 40 * blockLen} {
		c := &Cut{pending: map[dirtyKey]change{}}
		var all []dirtyKey
		for i := range n {
			dk := dirtyKey{db: uint8(rng.IntN(3)), key: "k" + strconv.Itoa(rng.IntN(2*n+1))}
			all = append(all, dk)
			if i%3 == 0 {
				c.pending[dk] = whole
			} else {
				c.fresh.add(dk)
			}
		}
		slices.SortFunc(all, chunkOrder)
		want := slices.Compact(all)
		order, err := c.walkOrder()
		if err != nil {
			t.Fatal(err)
		}
		var got []dirtyKey
		for i := range order.Len() {
			got = append(got, *order.at(i))
		}
		if !slices.Equal(got, want) {
			t.Fatalf("%d keys: the walk's order differs from one sort (%d keys against %d)", n, len(got), len(want))
		}
		if n > 0 {
			c.Abort()
			if _, err := c.walkOrder(); !errors.Is(err, ErrCutAborted) {
				t.Fatalf("%d keys, cut given up: %v", n, err)
			}
		}
	}
}

// TestWalkOrderPages: distinct keys filling whole pages exactly, one key
// past, and two pages, from the record's map alone, its fresh list
// alone, and both at once (each key twice): each comes out once, in
// chunk order.
func TestWalkOrderPages(t *testing.T) {
	for _, n := range []int{blockLen, blockLen + 1, 2 * blockLen} {
		for _, where := range []string{"pending", "fresh", "both"} {
			c := &Cut{pending: map[dirtyKey]change{}}
			var want []dirtyKey
			for i := range n {
				dk := dirtyKey{db: uint8(i % 2), key: "k" + strconv.Itoa(i)}
				want = append(want, dk)
				if where != "fresh" {
					c.pending[dk] = whole
				}
				if where != "pending" {
					c.fresh.add(dk)
				}
			}
			slices.SortFunc(want, chunkOrder)
			order, err := c.walkOrder()
			if err != nil {
				t.Fatal(err)
			}
			if order.Len() != n {
				t.Fatalf("%d keys in %s: %d in the order", n, where, order.Len())
			}
			for i := range n {
				if *order.at(i) != want[i] {
					t.Fatalf("%d keys in %s: key %d is %v, want %v", n, where, i, *order.at(i), want[i])
				}
			}
		}
	}
}
