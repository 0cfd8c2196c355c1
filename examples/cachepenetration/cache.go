package main

import (
	"math/rand/v2"
	"sync"
	"time"
)

// cache is the in-process cache in front of PostgreSQL: product rows, and
// "no such product" entries for the filter's false positives (null
// caching). It is bounded, and it is per process: a shared cache (a Redis
// string key) would let every pod share the null entries too, at a network
// round trip per read; see README.md.
//
// A create must never be hidden by a null entry. A reader that missed the
// cache notes the generation before it asks the database and stores what
// it found only if no create happened meanwhile; a create bumps the
// generation and drops the id's entry after its transaction commits. So a
// null entry is either stored before the create dropped it, or not stored.
type cache struct {
	mu      sync.Mutex
	entries map[int64]entry
	gen     uint64
	max     int
	now     func() time.Time
}

type entry struct {
	p       *product // nil: the product does not exist
	expires time.Time
}

func newCache(max int) *cache {
	return &cache{entries: map[int64]entry{}, max: max, now: time.Now}
}

// get returns the entry for id, if there is a live one.
func (c *cache) get(id int64) (entry, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.entries[id]
	if ok && !c.now().Before(e.expires) {
		delete(c.entries, id)
		return entry{}, false
	}
	return e, ok
}

// generation is the value to pass to put for what is read from the
// database after this call.
func (c *cache) generation() uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.gen
}

// put stores p (nil: absent) for ttl, unless a create happened since gen.
func (c *cache) put(id int64, p *product, ttl time.Duration, gen uint64) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.gen != gen {
		return false
	}
	if len(c.entries) >= c.max {
		for k := range c.entries { // evict an arbitrary entry
			delete(c.entries, k)
			break
		}
	}
	c.entries[id] = entry{p: p, expires: c.now().Add(ttl)}
	return true
}

// created records a committed create of id.
func (c *cache) created(id int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.gen++
	delete(c.entries, id)
}

// nullTTL is how long a "no such product" entry lives: uniform in
// [lo, hi), so entries stored together do not expire together.
func nullTTL(lo, hi time.Duration) time.Duration {
	if hi <= lo {
		return lo
	}
	return lo + rand.N(hi-lo)
}
