package keyspace

import (
	"strconv"
	"testing"

	"github.com/bfserver/bfserver/command"
)

// BenchmarkCreateSmall: BF.ADD tenant:N x auto-creating b.N filters in
// a keyspace that records changes (a durable node's), the path a million
// filters take when they are created.
func BenchmarkCreateSmall(b *testing.B) {
	k := New()
	k.TrackChanges()
	keys := make([][]byte, b.N)
	for i := range keys {
		keys[i] = []byte("tenant:" + strconv.Itoa(i))
	}
	item := [][]byte{[]byte("x")}
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		k.Apply(&command.Cmd{Op: command.BFAdd, Key: keys[i], Items: item, Multi: true, ErrorRate: 0.01, Capacity: 100, Expansion: 2, MaxBytes: capBytes})
	}
}

// BenchmarkFirstWatch: the one pause of a node's life when the first
// WATCH turns version tracking on (unmark) over b.N created filters:
// ns/op is that pause divided by the keys, so ns/op × keys is the pause.
func BenchmarkFirstWatch(b *testing.B) {
	k := New()
	k.TrackChanges()
	item := [][]byte{[]byte("x")}
	for i := range b.N {
		k.Apply(&command.Cmd{Op: command.BFAdd, Key: []byte("tenant:" + strconv.Itoa(i)), Items: item, Multi: true, ErrorRate: 0.01, Capacity: 100, Expansion: 2, MaxBytes: capBytes})
	}
	b.ResetTimer()
	k.Apply(&command.Cmd{Op: command.Watch, Now: 1})
}

// BenchmarkCreateSmallEntries: BF.ADD tenant:N x auto-creating b.N
// filters as the state machine applies them, in log entries of 1,000
// commands (ApplyEntry, a result slice per entry), to keys in no order:
// each creation misses the cache in the key table, as it does in a node
// holding a million filters (PrefetchKey).
func BenchmarkCreateSmallEntries(b *testing.B) {
	k := New()
	k.TrackChanges()
	item := [][]byte{[]byte("x")}
	cmds := make([]*command.Cmd, b.N)
	for i := range cmds {
		key := []byte("tenant:" + strconv.FormatUint(uint64(i)*0x9E3779B97F4A7C15>>20, 10))
		cmds[i] = &command.Cmd{Op: command.BFAdd, Key: key, Items: item, Multi: true, ErrorRate: 0.01, Capacity: 100, Expansion: 2, MaxBytes: capBytes}
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i += 1000 {
		e := cmds[i:min(i+1000, b.N)]
		out := make([]Result, len(e))
		k.ApplyEntry(e, out, func() command.Users { return nil }, nil)
	}
}
