package keyspace

import (
	"runtime"
	"strconv"
	"testing"

	"github.com/bfserver/bfserver/command"
)

// TestBytesPerSmallFilter: one auto-created filter (BF.ADD tenant:N x with
// the defaults) costs no more heap than RedisBloom's used_memory grows by
// per such filter (339 bytes, measured with bench/memory -scenario small):
// its bits (144), its key and map slot, the Value and a one-link chain that
// shares its shape with every filter of the same parameters.
func TestBytesPerSmallFilter(t *testing.T) {
	const n = 100000
	k := New()
	k.TrackChanges()
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for i := 0; i < n; i++ {
		k.Apply(&command.Cmd{Op: command.BFAdd, Key: []byte("tenant:" + strconv.Itoa(i)), Items: [][]byte{[]byte("x")},
			ErrorRate: 0.01, Capacity: 100, Expansion: 2, MaxBytes: 1 << 20})
	}
	walked(k.Cut())
	runtime.GC()
	runtime.ReadMemStats(&after)
	per := float64(after.HeapAlloc-before.HeapAlloc) / n
	t.Logf("%.0f bytes of heap per filter", per)
	if per > 339 {
		t.Fatalf("%.0f bytes of heap per auto-created filter, RedisBloom's is 339", per)
	}
	runtime.KeepAlive(k)
}
