package keyspace

import (
	"reflect"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"unsafe"
	"weak"

	"github.com/bfserver/bfserver/command"
	"github.com/bfserver/bfserver/scalable"
)

// TestSmallFilterLayout: what a small filter costs the heap, object by
// object (docs/STORAGE.md, Memory): its entry (Value and chain) fits Go's
// 80-byte size class, and an auto-created filter takes a handful of
// allocations, not the hundred and fifty that sizing it once took (an
// exact logarithm per filter, whose garbage fragmented the heap).
func TestSmallFilterLayout(t *testing.T) {
	if n := unsafe.Sizeof(bloomEntry{}); n > 80 {
		t.Fatalf("a filter's entry is %d bytes, over the 80-byte size class", n)
	}
	k := New()
	keys := make([][]byte, 1000)
	for i := range keys {
		keys[i] = []byte("tenant:" + strconv.Itoa(i))
	}
	items := [][]byte{[]byte("x")}
	i := 0
	allocs := testing.AllocsPerRun(len(keys)-1, func() {
		r := k.Apply(&command.Cmd{Op: command.BFAdd, Key: keys[i], Items: items, ErrorRate: 0.01, Capacity: 100, Expansion: 2, MaxBytes: 1 << 30})
		if r.Err != nil || len(r.Ints) != 1 || r.Ints[0] != 1 {
			t.Fatalf("BF.ADD %s: %+v", keys[i], r)
		}
		i++
	})
	t.Logf("%.1f allocations per auto-created filter", allocs)
	// The entry with its bit array and its key inline (keyedBloomEntry,
	// one object for the collector to mark), with the map's growth spread
	// over every call (no change record here); the reply is shared memory
	// (appendInt).
	if allocs > 2 {
		t.Fatalf("an auto-created filter takes %.1f allocations, want at most 2", allocs)
	}
	// The entry with its bits is one size class, no larger than the two
	// objects were (80 + 144 bytes); with its key, the 256-byte class.
	if n := unsafe.Sizeof(smallBloomEntry{}); n > 224 {
		t.Fatalf("a small filter's entry with its bits is %d bytes, over the 224-byte size class", n)
	}
	if n := unsafe.Sizeof(shortKeyedEntry{}); n > 240 {
		t.Fatalf("a small filter's entry with its bits and a short key is %d bytes, over the 240-byte size class", n)
	}
	if n := unsafe.Sizeof(keyedBloomEntry{}); n > 256 {
		t.Fatalf("a small filter's entry with its bits and key is %d bytes, over the 256-byte size class", n)
	}
	v := k.Lookup(0, keys[0], 0)
	first := v.Bloom().LinksIn(new([1]*scalable.Link))[0].LoadTarget()
	ke := (*shortKeyedEntry)(unsafe.Pointer(v))
	if first != nil && (len(first) != 144 || unsafe.Pointer(&first[0]) != unsafe.Pointer(&ke.bits[0])) {
		t.Fatal("an auto-created filter's bits are not in its entry")
	}
	// The key table files it under the entry's own copy of the key.
	var filed string
	for key := range k.db(0).keys.all() {
		if key == string(keys[0]) {
			filed = key
		}
	}
	if unsafe.StringData(filed) != &ke.key[0] || filed != string(keys[0]) {
		t.Fatalf("the key table's key %q is not the entry's copy", filed)
	}
	// The command's bytes are the client's buffer, reused for the next
	// request: the filed key must not change with them.
	keys[0][0] = 'X'
	if k.Lookup(0, []byte("tenant:0"), 0) != v {
		t.Fatal("changing the command's key bytes changed the filed key")
	}
	// Keys of 17–32 bytes go in the larger entry; a longer one is a
	// string of its own.
	for _, n := range []int{17, 32, 33} {
		key := []byte(strings.Repeat("k", n))
		if r := k.Apply(&command.Cmd{Op: command.BFAdd, Key: key, Items: items, ErrorRate: 0.01, Capacity: 100, Expansion: 2, MaxBytes: 1 << 30}); r.Err != nil || r.Ints[0] != 1 {
			t.Fatalf("BF.ADD of a %d-byte key: %+v", n, r)
		}
		lv := k.Lookup(0, key, 0)
		if lv == nil {
			t.Fatalf("the %d-byte key is not found", n)
		}
		for filed := range k.db(0).keys.all() {
			if filed == string(key) && keyInside(lv, filed) != (n <= 32) {
				t.Fatalf("%d-byte key: held in its entry %v", n, keyInside(lv, filed))
			}
		}
	}
	// A filter too large for the entry's room gets its own array.
	if r := k.Apply(&command.Cmd{Op: command.BFReserve, Key: []byte("big"), ErrorRate: 0.01, Capacity: 1000, Expansion: 2, MaxBytes: 1 << 30}); r.Err != nil {
		t.Fatal(r.Err)
	}
	if r := k.Apply(&command.Cmd{Op: command.BFAdd, Key: []byte("big"), Items: items, ErrorRate: 0.01, Capacity: 100, Expansion: 2, MaxBytes: 1 << 30}); r.Err != nil || r.Ints[0] != 1 {
		t.Fatalf("BF.ADD big: %+v", r)
	}
}

// TestRecordKeepsNoEntry: a small filter's key lives in its entry, and
// the change record outlives a deleted key until the image's next flush:
// it must hold copies of the keys, not the entries (a million filters
// flushed and a million created at once held both). Entries deleted by
// DEL, by expiry and by FLUSHALL, listed fresh or in the record's map,
// are collected.
func TestRecordKeepsNoEntry(t *testing.T) {
	k := New()
	k.TrackChanges()
	items := [][]byte{[]byte("x")}
	const n = 300
	weaks := make([]weak.Pointer[Value], n)
	for i := range n {
		key := []byte("tenant:" + strconv.Itoa(i))
		if i == n/2 {
			// A removal: from here on the record's map lists creations
			// too (voids).
			k.Apply(&command.Cmd{Op: command.BFAdd, Key: []byte("seed"), Items: items, ErrorRate: 0.01, Capacity: 100, Expansion: 2, MaxBytes: 1 << 30})
			k.Apply(&command.Cmd{Op: command.Del, Keys: [][]byte{[]byte("seed")}})
			if !k.voids {
				t.Fatal("a removal did not make the record list creations in its map")
			}
		}
		if r := k.Apply(&command.Cmd{Op: command.BFAdd, Key: key, Items: items, ErrorRate: 0.01, Capacity: 100, Expansion: 2, MaxBytes: 1 << 30}); r.Err != nil {
			t.Fatal(r.Err)
		}
		weaks[i] = weak.Make(k.Lookup(0, key, 0))
	}
	if k.fresh.Len() != n/2+1 || len(k.dirty) < n/2 { // +1: seed
		t.Fatalf("the record lists %d keys fresh and %d in its map, want %d and at least %d", k.fresh.Len(), len(k.dirty), n/2+1, n/2)
	}
	listed := func(key string) {
		v := k.Lookup(0, []byte(key), 0)
		if v == nil || keyInside(v, key) {
			t.Fatalf("the record lists %q by its entry's own key (or a key with no value: %v)", key, v == nil)
		}
	}
	for dk := range k.fresh.all() {
		if dk.key != "seed" {
			listed(dk.key)
		}
	}
	for dk := range k.dirty {
		if dk.key != "seed" {
			listed(dk.key)
		}
	}
	for i := 0; i < n; i += 3 {
		if r := k.Apply(&command.Cmd{Op: command.Del, Keys: [][]byte{[]byte("tenant:" + strconv.Itoa(i))}}); r.Err != nil || r.Int != 1 {
			t.Fatalf("DEL: %+v", r)
		}
	}
	for i := 1; i < n; i += 3 {
		key := []byte("tenant:" + strconv.Itoa(i))
		k.Apply(&command.Cmd{Op: command.Expire, Key: key, Iter: 1, Now: 2}) // in the past: deleted
		if k.Lookup(0, key, 2) != nil {
			t.Fatalf("%s outlived its expiry", key)
		}
	}
	if r := k.Apply(&command.Cmd{Op: command.FlushAll}); r.Err != nil {
		t.Fatal(r.Err)
	}
	if len(k.dirty) < n {
		t.Fatalf("the record holds %d removed keys, want %d", len(k.dirty), n)
	}
	runtime.GC()
	runtime.GC()
	for i, w := range weaks {
		if w.Value() != nil {
			t.Fatalf("tenant:%d's entry is still reachable after its key was deleted", i)
		}
	}
	runtime.KeepAlive(k) // the record is what must not hold them
}

// TestFlushDuringCut: a FLUSHALL while a cut is walked stashes the values
// of the cut's keys the walk has not reached, rather than capturing each
// (a million small filters' captures held 570 MB), and the walk still
// reads every key as it was at the cut, whatever follows the flush: a
// key created again and changed, a second FLUSHALL, and the first WATCH
// (which captures the stash while the marks still say what is fresh).
func TestFlushDuringCut(t *testing.T) {
	for _, watch := range []bool{false, true} {
		a, b := New(), New()
		items := [][]byte{[]byte("x"), []byte("y")}
		state := func(k *Keyspace) {
			k.TrackChanges()
			for i := range 60 {
				k.Apply(&command.Cmd{Op: command.BFAdd, Key: []byte("tenant:" + strconv.Itoa(i)), Items: items[:1], Multi: true, ErrorRate: 0.01, Capacity: 100, Expansion: 2, MaxBytes: 1 << 30})
			}
			walked(k.Cut())
			// Changed in place (pending), and created fresh.
			for i := range 30 {
				k.Apply(&command.Cmd{Op: command.BFAdd, Key: []byte("tenant:" + strconv.Itoa(i)), Items: items[1:], Multi: true, ErrorRate: 0.01, Capacity: 100, Expansion: 2, MaxBytes: 1 << 30})
			}
			for i := 60; i < 100; i++ {
				k.Apply(&command.Cmd{Op: command.BFAdd, Key: []byte("tenant:" + strconv.Itoa(i)), Items: items, Multi: true, ErrorRate: 0.01, Capacity: 100, Expansion: 2, MaxBytes: 1 << 30})
			}
		}
		state(a)
		state(b)
		want := cutContents(b.Cut(), func() {})
		c := a.Cut()
		step, early, stashed := 0, -1, 0
		got := cutContents(c, func() {
			switch step {
			case 0:
				a.Apply(&command.Cmd{Op: command.FlushAll})
				c.freeze.Lock()
				early, stashed = len(c.early), len(c.stash)
				c.freeze.Unlock()
			case 1:
				for _, key := range []string{"tenant:50", "tenant:70"} {
					for range 2 {
						a.Apply(&command.Cmd{Op: command.BFAdd, Key: []byte(key), Items: [][]byte{[]byte("new")}, Multi: true, ErrorRate: 0.01, Capacity: 100, Expansion: 2, MaxBytes: 1 << 30})
					}
				}
				a.Apply(&command.Cmd{Op: command.FlushAll})
			case 2:
				if watch {
					a.Apply(&command.Cmd{Op: command.Watch, Now: 1})
				}
			}
			step++
		})
		if early != 0 || stashed != c.Len()-1 {
			t.Fatalf("watch %v: the flush captured %d keys early (want 0) and stashed %d (want the %d not walked)", watch, early, stashed, c.Len()-1)
		}
		if !reflect.DeepEqual(got, want) {
			for k, v := range want {
				if got[k] != v {
					t.Errorf("watch %v: %s: the walk read %q, at the cut %q", watch, k, got[k], v)
				}
			}
			t.Fatalf("watch %v: the walk beside the flushes read %d records, at the cut %d", watch, len(got), len(want))
		}
		if c.stash != nil {
			t.Fatalf("watch %v: the ended cut still holds its stash", watch)
		}
	}
}

// TestLoadedSmallFilterLayout: a small filter loaded from the image is
// laid out as BF.ADD lays out a new one (its bits and key in its entry),
// and holds what was stored: after a restart a million small filters
// cost the collector and the heap what they did before it.
func TestLoadedSmallFilterLayout(t *testing.T) {
	src, dst := New(), New()
	items := [][]byte{[]byte("a"), []byte("b"), []byte("c")}
	keys := []string{"t:1", strings.Repeat("m", 20), strings.Repeat("l", 40)}
	for _, key := range keys {
		if r := src.Apply(&command.Cmd{Op: command.BFAdd, Key: []byte(key), Items: items, Multi: true, ErrorRate: 0.01, Capacity: 100, Expansion: 2, MaxBytes: 1 << 30}); r.Err != nil {
			t.Fatal(r.Err)
		}
		src.Apply(&command.Cmd{Op: command.Expire, Key: []byte(key), Iter: 1 << 50, Now: 1})
		loadImage(t, dst, key, src.Lookup(0, []byte(key), 0))
	}
	// A large one keeps its bits apart.
	if r := src.Apply(&command.Cmd{Op: command.BFReserve, Key: []byte("big"), ErrorRate: 0.01, Capacity: 10000, Expansion: 2, MaxBytes: 1 << 30}); r.Err != nil {
		t.Fatal(r.Err)
	}
	src.Apply(&command.Cmd{Op: command.BFAdd, Key: []byte("big"), Items: items, Multi: true, MaxBytes: 1 << 30})
	loadImage(t, dst, "big", src.Lookup(0, []byte("big"), 0))
	for _, key := range append(keys, "big") {
		v := dst.Lookup(0, []byte(key), 0)
		if v == nil {
			t.Fatalf("%s: not loaded", key)
		}
		first := v.Bloom().LinksIn(new([1]*scalable.Link))[0].LoadTarget()
		// Where the entry's bits would be: compared as addresses, as v
		// is a smaller object when it has none.
		at := uintptr(unsafe.Pointer(v)) + unsafe.Offsetof(smallBloomEntry{}.bits)
		inline := len(first) > 0 && uintptr(unsafe.Pointer(&first[0])) == at
		if first != nil && inline != (key != "big") { // nil: not a little-endian machine
			t.Errorf("%s: bits in the entry %v", key, inline)
		}
		if want := src.Lookup(0, []byte(key), 0); v.ExpireAt != want.ExpireAt || v.Kind != KindBloom {
			t.Errorf("%s: loaded with expiry %d kind %v, stored %d", key, v.ExpireAt, v.Kind, want.ExpireAt)
		}
		var filed string
		for k := range dst.db(0).keys.all() {
			if k == key {
				filed = k
			}
		}
		if keyInside(v, filed) != (len(key) <= 32 && key != "big") {
			t.Errorf("%s: key in the entry %v", key, keyInside(v, filed))
		}
		if got, want := MemoryUsage(v), MemoryUsage(src.Lookup(0, []byte(key), 0)); got != want {
			t.Errorf("%s: MEMORY USAGE %d after the load, %d before", key, got, want)
		}
		for _, it := range append(items, []byte("absent")) {
			r := dst.Read(&command.Cmd{Op: command.BFExists, Key: []byte(key), Items: [][]byte{it}})
			w := src.Read(&command.Cmd{Op: command.BFExists, Key: []byte(key), Items: [][]byte{it}})
			if r.Err != nil || r.Int != w.Int || !reflect.DeepEqual(r.Ints, w.Ints) {
				t.Fatalf("%s: BF.EXISTS %s after the load %+v, before %+v", key, it, r, w)
			}
		}
	}
}

// TestOneItemAddAllocatesNothing: BF.ADD and CF.ADD of one item to a
// filter that exists, the commonest write, allocate nothing in Apply: the
// reply is a slice of shared, never written memory (appendInt).
func TestOneItemAddAllocatesNothing(t *testing.T) {
	k := New()
	items := make([][]byte, 1000)
	for i := range items {
		items[i] = []byte("item:" + strconv.Itoa(i))
	}
	for _, c := range []command.Cmd{
		{Op: command.BFAdd, Key: []byte("bf"), ErrorRate: 0.01, Capacity: 100000, Expansion: 2, MaxBytes: 1 << 30},
		{Op: command.CFAdd, Key: []byte("cf"), Capacity: 100000, BucketSize: 2, MaxIterations: 20, Expansion: 1, MaxExpansions: 32, MaxBytes: 1 << 30},
	} {
		c.Items = items[:1]
		if r := k.Apply(&c); r.Err != nil || len(r.Ints) != 1 || r.Ints[0] != 1 {
			t.Fatalf("creating %s: %+v", c.Key, r)
		}
		i := 1
		var added int64
		allocs := testing.AllocsPerRun(len(items)-2, func() {
			c.Items = items[i : i+1]
			r := k.Apply(&c)
			if r.Err != nil || len(r.Ints) != 1 || cap(r.Ints) != 1 {
				t.Fatalf("%s %s: %+v (capacity %d: an append must not write the shared replies)", c.Key, items[i], r, cap(r.Ints))
			}
			added += r.Ints[0]
			i++
		})
		if allocs != 0 {
			t.Fatalf("an add of one item to %s: %.1f allocations, want none", c.Key, allocs)
		}
		if added < int64(len(items))-10 {
			t.Fatalf("%s: %d of %d items added", c.Key, added, len(items)-1)
		}
		if oneInts != [3]int64{-1, 0, 1} {
			t.Fatalf("the shared replies were written: %v", oneInts)
		}
	}
}
