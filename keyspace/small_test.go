package keyspace

import (
	"strconv"
	"strings"
	"testing"
	"unsafe"

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
	// one object for the collector to mark) and the reply's slice, with
	// the map's growth and the change record spread over every call.
	if allocs > 3 {
		t.Fatalf("an auto-created filter takes %.1f allocations, want at most 3", allocs)
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
	for key := range k.db(0).keys {
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
		for filed := range k.db(0).keys {
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

// TestFlushCopiesRecordedKeys: a small filter's key lives in its entry,
// so the change record, which outlives a FLUSHALL until the image's next
// flush, must hold copies of the flushed keys, not the entries (a million
// flushed filters kept 250 MB alive beside the next million created).
func TestFlushCopiesRecordedKeys(t *testing.T) {
	k := New()
	k.TrackChanges()
	items := [][]byte{[]byte("x")}
	vals := map[string]*Value{}
	for i := range 100 {
		key := []byte("tenant:" + strconv.Itoa(i))
		if r := k.Apply(&command.Cmd{Op: command.BFAdd, Key: key, Items: items, ErrorRate: 0.01, Capacity: 100, Expansion: 2, MaxBytes: 1 << 30}); r.Err != nil {
			t.Fatal(r.Err)
		}
		vals[string(key)] = k.Lookup(0, key, 0)
	}
	inside := 0
	for _, dk := range k.fresh {
		if keyInside(vals[dk.key], dk.key) {
			inside++
		}
	}
	if inside != len(vals) {
		t.Fatalf("before the flush %d of %d recorded keys are the entries' own", inside, len(vals))
	}
	if r := k.Apply(&command.Cmd{Op: command.FlushAll}); r.Err != nil {
		t.Fatal(r.Err)
	}
	for _, dk := range k.fresh {
		if keyInside(vals[dk.key], dk.key) {
			t.Fatalf("the record's fresh key %q still points into its flushed entry", dk.key)
		}
	}
	for dk := range k.dirty {
		if keyInside(vals[dk.key], dk.key) {
			t.Fatalf("the record's key %q still points into its flushed entry", dk.key)
		}
	}
	if len(k.dirty) < len(vals) {
		t.Fatalf("the record holds %d removed keys, want %d", len(k.dirty), len(vals))
	}
}
