package keyspace

import (
	"strconv"
	"testing"
	"unsafe"

	"github.com/bfserver/bfserver/command"
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
	// The key, the entry, the bit array and the reply's slice, with the
	// map's growth and the change record spread over every call.
	if allocs > 5 {
		t.Fatalf("an auto-created filter takes %.1f allocations, want at most 5", allocs)
	}
}
