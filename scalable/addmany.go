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
// caller's, as for Add: the state machine's look-ahead). Splitting one
// call's older-link tests over two goroutines was slower once setting a
// bit took no lock (internal/release): 0.61 s against 0.54 s for a
// million items (BenchmarkBulkLoad). Across a log entry's commands it is
// not (TestOlder).
func (c *Chain) AddMany(items [][]byte, maxBytes uint64, into []int64) ([]int64, error) {
	return c.AddManyTested(items, maxBytes, into, nil)
}

// Older is what TestOlder found of a batch of items: which are in one of
// the links older than the newest of Chain, when it had Links links.
type Older struct {
	Chain *Chain
	Links int
	In    []uint64 // bit i: item i is in one of them
}

func (o *Older) in(i int) bool { return o.In[i/64]>>(i%64)&1 != 0 }

// TestOlder tests items against the links older than the chain's newest,
// as a reader does: it changes nothing, and may run beside the writer.
// Those links take no more items, so AddManyTested can skip these tests
// later, as long as nothing but adds reached the chain meanwhile (a
// LOADCHUNK writes older links: the caller's to rule out; the tests of
// another chain AddManyTested refuses itself). The state machine runs
// it on a second goroutine for the commands of a log entry that Apply has
// not reached (keyspace's pretest): a chain's adds cost half as much with
// the older links tested already.
func (c *Chain) TestOlder(items [][]byte, o *Older) {
	var one [1]*Link
	links := c.LinksIn(&one)
	o.Chain, o.Links = c, len(links)
	o.In = append(o.In[:0], make([]uint64, (len(items)+63)/64)...)
	older := links[:len(links)-1]
	if len(older) == 0 {
		return
	}
	var ring [PrefetchAhead]engine.Hash
	for i, it := range items[:min(len(items), PrefetchAhead)] {
		ring[i] = c.hash(it)
		prefetchFirstBits(older, ring[i])
	}
	for i := range items {
		h := ring[i%PrefetchAhead]
		if j := i + PrefetchAhead; j < len(items) {
			hj := c.hash(items[j])
			ring[j%PrefetchAhead] = hj
			prefetchFirstBits(older, hj)
		}
		if inAny(older, h) {
			o.In[i/64] |= 1 << (i % 64)
		}
	}
}

func prefetchFirstBits(links []*Link, h engine.Hash) {
	for _, l := range links {
		l.PrefetchFirstBits(h)
	}
}

// AddManyTested is AddMany of items whose tests against the chain's older
// links o holds (TestOlder; nil: none, AddMany). Links that became older
// since are tested here; the answers and bits are AddMany's. An o of
// another chain, or of more links than c has, counts as none.
func (c *Chain) AddManyTested(items [][]byte, maxBytes uint64, into []int64, o *Older) ([]int64, error) {
	var one [1]*Link
	if o != nil && (o.Chain != c || o.Links > len(c.LinksIn(&one)) || len(o.In) < (len(items)+63)/64) {
		o = nil
	}
	from := 0 // the links before it are tested in o
	if o != nil {
		from = o.Links - 1
	}
	var ring [PrefetchAhead]engine.Hash
	for i, it := range items[:min(len(items), PrefetchAhead)] {
		ring[i] = c.hash(it)
	}
	for i := range items {
		h := ring[i%PrefetchAhead]
		if j := i + PrefetchAhead; j < len(items) {
			hj := c.hash(items[j])
			ring[j%PrefetchAhead] = hj
			c.prefetchFrom(hj, from)
		}
		var added bool
		var err error
		if o == nil {
			added, err = c.addHashed(h, maxBytes)
		} else if !o.in(i) {
			links := c.LinksIn(&one)
			if newest := len(links) - 1; !inAny(links[from:newest], h) {
				added, err = c.addNewest(links, h, maxBytes)
			}
		}
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
