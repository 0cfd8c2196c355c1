package keyspace

import (
	"strconv"
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
	// The key, the entry with its bit array inline (smallBloomEntry, one
	// object fewer for the collector to mark) and the reply's slice, with
	// the map's growth and the change record spread over every call.
	if allocs > 4 {
		t.Fatalf("an auto-created filter takes %.1f allocations, want at most 4", allocs)
	}
	// The entry with its bits is one size class, no larger than the two
	// objects were (80 + 144 bytes).
	if n := unsafe.Sizeof(smallBloomEntry{}); n > 224 {
		t.Fatalf("a small filter's entry with its bits is %d bytes, over the 224-byte size class", n)
	}
	v := k.Lookup(0, keys[0], 0)
	first := v.Bloom().LinksIn(new([1]*scalable.Link))[0].LoadTarget()
	if se := (*smallBloomEntry)(unsafe.Pointer(v)); first != nil && (len(first) != 144 || unsafe.Pointer(&first[0]) != unsafe.Pointer(&se.bits[0])) {
		t.Fatal("an auto-created filter's bits are not in its entry")
	}
	// A filter too large for the entry's room gets its own array.
	if r := k.Apply(&command.Cmd{Op: command.BFReserve, Key: []byte("big"), ErrorRate: 0.01, Capacity: 1000, Expansion: 2, MaxBytes: 1 << 30}); r.Err != nil {
		t.Fatal(r.Err)
	}
	if r := k.Apply(&command.Cmd{Op: command.BFAdd, Key: []byte("big"), Items: items, ErrorRate: 0.01, Capacity: 100, Expansion: 2, MaxBytes: 1 << 30}); r.Err != nil || r.Ints[0] != 1 {
		t.Fatalf("BF.ADD big: %+v", r)
	}
}
