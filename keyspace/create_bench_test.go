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
