package scalable

import "github.com/bfserver/bfserver/engine"

// PrefetchAhead is how many items ahead of the one being added or tested
// a chain's bits start loading (Prefetch): enough for several items' cache
// misses to overlap (measured: a 60 MB filter adds in 180 ns instead of
// 440), few enough that the lines are still cached when used. The state
// machine looks as many commands ahead.
const PrefetchAhead = 4

// PrefetchFirst starts loading the bits of the first PrefetchAhead items,
// before AddMany, or a loop over the items that calls PrefetchNext.
func (c *Chain) PrefetchFirst(items [][]byte) {
	for _, it := range items[:min(len(items), PrefetchAhead)] {
		c.Prefetch(it)
	}
}

// PrefetchNext, in a loop over items at i, starts loading the bits of the
// item PrefetchAhead places on.
func (c *Chain) PrefetchNext(items [][]byte, i int) {
	if j := i + PrefetchAhead; j < len(items) {
		c.Prefetch(items[j])
	}
}

// AddMany adds items in order and appends to into each one's answer (1
// added, 0 already present), with the answers and bits of Add on each in
// turn; at an error it stops, returning the answers so far and the error.
//
// Why not Add on each: an add's cost is memory and arithmetic, not
// logic. Each item after the first PrefetchAhead is hashed once here (Add
// after Prefetch hashed it twice), and its bits in every link start
// loading PrefetchAhead items before they are read (PrefetchFirst is the
// caller's, as for Add: the state machine's look-ahead). Testing the
// older links of half the items on a second goroutine first was slower
// once setting a bit took no lock (internal/release): 0.61 s against
// 0.54 s for a million items (BenchmarkBulkLoad), with the second core
// idle, and the server's other core is not.
func (c *Chain) AddMany(items [][]byte, maxBytes uint64, into []int64) ([]int64, error) {
	var ring [PrefetchAhead]engine.Hash
	for i, it := range items[:min(len(items), PrefetchAhead)] {
		ring[i] = c.hash(it)
	}
	for i := range items {
		h := ring[i%PrefetchAhead]
		if j := i + PrefetchAhead; j < len(items) {
			hj := c.hash(items[j])
			ring[j%PrefetchAhead] = hj
			c.prefetchHash(hj)
		}
		added, err := c.addHashed(h, maxBytes)
		if err != nil {
			return into, err
		}
		into = append(into, b2i(added))
	}
	return into, nil
}

func b2i(b bool) int64 {
	if b {
		return 1
	}
	return 0
}
