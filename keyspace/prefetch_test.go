package keyspace

import (
	"reflect"
	"strconv"
	"testing"

	"github.com/bfserver/bfserver/command"
	"github.com/bfserver/bfserver/scalable"
)

// TestPrefetchChangesNothing: Prefetch never creates a key, never removes
// an expired one, and the same commands give the same results and the same
// filter whether or not the state machine prefetched them.
func TestPrefetchChangesNothing(t *testing.T) {
	plain, fetched := New(), New()
	var cmds []*command.Cmd
	cmds = append(cmds,
		&command.Cmd{Op: command.BFReserve, Key: []byte("big"), ErrorRate: 0.01, Capacity: 10_000_000, Expansion: 2, NonScaling: true},
		&command.Cmd{Op: command.BFAdd, Key: []byte("gone"), Items: [][]byte{[]byte("x")}, ErrorRate: 0.01, Capacity: 100, Expansion: 2},
		&command.Cmd{Op: command.Expire, Key: []byte("gone"), Iter: 3, Now: 1}, // due at 3; later commands run at 5
	)
	for i := 0; i < 3000; i++ {
		items := [][]byte{[]byte(strconv.Itoa(i % 2500))}
		if i%100 == 0 {
			items = append(items, []byte("m"+strconv.Itoa(i)), []byte("m"+strconv.Itoa(i+1)), []byte("n"), []byte("n"), []byte("o"))
		}
		cmds = append(cmds, &command.Cmd{Op: command.BFAdd, Key: []byte("big"), Items: items, Multi: len(items) > 1, Now: 5})
	}
	for i, c := range cmds {
		c.MaxBytes = capBytes
		if i+scalable.PrefetchAhead < len(cmds) {
			fetched.Prefetch(cmds[i+scalable.PrefetchAhead])
		}
		// Keys the later commands name, missing or expired, stay as they are.
		for _, p := range []*command.Cmd{
			{Op: command.BFAdd, Key: []byte("missing"), Items: [][]byte{[]byte("x")}},
			{Op: command.BFAdd, Key: []byte("gone"), Items: [][]byte{[]byte("x")}, Now: 5},
		} {
			fetched.Prefetch(p)
		}
		if a, b := plain.Apply(c), fetched.Apply(c); !reflect.DeepEqual(a, b) {
			t.Fatalf("command %d (%v): %+v without prefetch, %+v with", i, c.Op, a, b)
		}
		if i >= 2 {
			if fetched.db(0).keys.get("missing") != nil || fetched.db(0).keys.get("gone") == nil {
				t.Fatal("Prefetch created or removed a key")
			}
		}
	}
	if a, b := Digest(plain.Lookup(0, []byte("big"), 5)), Digest(fetched.Lookup(0, []byte("big"), 5)); a != b {
		t.Fatalf("digests differ: %s, %s", a, b)
	}
}

// TestPrefetchExistsChangesNothing: PrefetchExists, on Bloom and Cuckoo
// filters above the cache size, a key of another type, a missing key and
// an expired one, creates and removes no key and changes no filter.
func TestPrefetchExistsChangesNothing(t *testing.T) {
	k := New()
	for _, c := range []*command.Cmd{
		{Op: command.BFReserve, Key: []byte("bf"), ErrorRate: 0.01, Capacity: 10_000_000, Expansion: 2, NonScaling: true},
		{Op: command.CFReserve, Key: []byte("cf"), Capacity: 10_000_000, BucketSize: 2, MaxIterations: 20, Expansion: 1, MaxExpansions: 32},
		{Op: command.BFAdd, Key: []byte("bf"), Items: [][]byte{[]byte("a")}, ErrorRate: 0.01, Capacity: 100, Expansion: 2, Now: 1},
		{Op: command.CFAdd, Key: []byte("cf"), Items: [][]byte{[]byte("a")}, Capacity: 1024, BucketSize: 2, MaxIterations: 20, Expansion: 1, MaxExpansions: 32, Now: 1},
		{Op: command.Set, Key: []byte("str"), Data: []byte("v")},
		{Op: command.BFAdd, Key: []byte("gone"), Items: [][]byte{[]byte("x")}, ErrorRate: 0.01, Capacity: 100, Expansion: 2},
		{Op: command.Expire, Key: []byte("gone"), Iter: 3, Now: 1}, // due at 3; the prefetches run at 5
	} {
		c.MaxBytes = capBytes
		if r := k.Apply(c); r.Err != nil {
			t.Fatalf("%v: %v", c.Op, r.Err)
		}
	}
	digests := func() [2]string {
		return [2]string{Digest(k.Lookup(0, []byte("bf"), 5)), Digest(k.Lookup(0, []byte("cf"), 5))}
	}
	before := digests()
	for i := range 10000 {
		for _, key := range []string{"bf", "cf", "str", "missing", "gone"} {
			k.PrefetchExists(0, []byte(key), []byte(strconv.Itoa(i)), 5)
		}
	}
	if digests() != before {
		t.Fatal("PrefetchExists changed a filter")
	}
	if k.db(0).keys.get("missing") != nil || k.db(0).keys.get("gone") == nil || k.db(0).keys.len() != 4 {
		t.Fatal("PrefetchExists created or removed a key")
	}
	for _, key := range []string{"bf", "cf"} {
		op := map[string]command.Op{"bf": command.BFExists, "cf": command.CFExists}[key]
		if r := k.Read(&command.Cmd{Op: op, Key: []byte(key), Items: [][]byte{[]byte("a")}, Now: 5}); len(r.Ints) != 1 || r.Ints[0] != 1 {
			t.Fatalf("%s: %+v after the prefetches", key, r)
		}
	}
}
