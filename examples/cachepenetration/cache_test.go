package main

import (
	"testing"
	"time"
)

// A read that asked the database before a create committed must not store
// its "absent" afterwards; one stored before the create is dropped by it.
func TestCacheCreateWinsOverNullEntry(t *testing.T) {
	c := newCache(10)
	gen := c.generation() // a reader misses, asks the database: no row yet
	c.created(7)          // the create commits meanwhile
	if c.put(7, nil, time.Minute, gen) {
		t.Fatal("a stale absence was stored after the create")
	}
	if _, ok := c.get(7); ok {
		t.Fatal("id 7 is cached as absent")
	}

	gen = c.generation()
	if !c.put(8, nil, time.Minute, gen) {
		t.Fatal("an absence was not stored")
	}
	c.created(8)
	if _, ok := c.get(8); ok {
		t.Fatal("the create did not drop the absence")
	}
}

func TestCacheExpiryAndBound(t *testing.T) {
	now := time.Unix(1000, 0)
	c := newCache(2)
	c.now = func() time.Time { return now }
	c.put(1, &product{ID: 1}, time.Second, c.generation())
	if e, ok := c.get(1); !ok || e.p.ID != 1 {
		t.Fatal("entry 1 missing")
	}
	now = now.Add(time.Second)
	if _, ok := c.get(1); ok {
		t.Fatal("entry 1 outlived its TTL")
	}
	for id := int64(10); id < 20; id++ {
		c.put(id, nil, time.Hour, c.generation())
	}
	if len(c.entries) > 2 {
		t.Fatalf("%d entries, bound 2", len(c.entries))
	}
}

func TestNullTTLRange(t *testing.T) {
	for range 1000 {
		if d := nullTTL(30*time.Second, 60*time.Second); d < 30*time.Second || d >= 60*time.Second {
			t.Fatalf("null TTL %v outside [30s, 60s)", d)
		}
	}
}
