package keyspace

import (
	"fmt"
	"reflect"
	"runtime"
	"strconv"
	"testing"

	"github.com/bfserver/bfserver/command"
	"github.com/bfserver/bfserver/engine"
	"github.com/bfserver/bfserver/sketch/window"
)

// cutContents is what a walk of cut reads (as chunksOfCut), calling
// between after each key's chunks: Apply beside the walk.
func cutContents(cut *Cut, between func()) map[string]string {
	out := map[string]string{}
	buf := make([]byte, engine.ChunkSize)
	cut.Walk(func(ck *CutKey) error {
		name := strconv.Itoa(int(ck.DB)) + "/" + ck.Key
		out[name] = fmt.Sprintf("full=%v gone=%v largest=%d meta=%x", ck.Full, ck.Gone(), ck.Largest(), ck.Meta())
		err := ck.Chunks(buf, func(c Chunk) error {
			out[fmt.Sprintf("%s/%d/%d", name, c.Part, c.Index)] = string(c.Data)
			return nil
		})
		between()
		return err
	})
	return out
}

func cutState(k *Keyspace, step int) {
	s := strconv.Itoa(step)
	apply := func(c *command.Cmd) {
		c.ErrorRate, c.Capacity, c.Expansion, c.MaxBytes, c.Multi = 0.01, 100, 2, capBytes, true
		k.Apply(c)
	}
	if step == 0 {
		k.Apply(&command.Cmd{Op: command.CFReserve, Key: []byte("cf"), Capacity: 1 << 16, BucketSize: 2, MaxIterations: 20, Expansion: 1, MaxExpansions: 32, MaxBytes: capBytes})
		k.Apply(&command.Cmd{Op: command.BFReserve, Key: []byte("big"), ErrorRate: 0.01, Capacity: 2 << 20, Expansion: 2, MaxBytes: capBytes})
		// A window of about 1 MiB (held, not copied inline: over
		// inlineBytes) and a small one.
		k.Apply(windowCmd(nil, command.WReserve, "win", window.Count, 400_000, 0, 0.01))
		k.Apply(windowCmd(nil, command.WReserve, "ws", window.Count, 100, 0, 0.01))
	}
	items := make([][]byte, 3000)
	for i := range items {
		items[i] = []byte(s + "-" + strconv.Itoa(i))
	}
	apply(&command.Cmd{Op: command.BFAdd, Key: []byte("big"), Items: items})
	for _, w := range []string{"win", "ws"} {
		k.Apply(&command.Cmd{Op: command.WAdd, Key: []byte(w), Items: items, Multi: true, NoCreate: true})
	}
	for i := range 20 {
		key := []byte("k" + strconv.Itoa(i))
		apply(&command.Cmd{Op: command.BFAdd, Key: key, Items: items[:i+1]})
		apply(&command.Cmd{Op: command.BFAdd, DB: 1, Key: key, Items: items[:2]})
	}
	if r := k.Apply(&command.Cmd{Op: command.CFAdd, Key: []byte("cf"), Items: items[:500], Multi: true, Capacity: 1 << 16, BucketSize: 2, MaxIterations: 20, Expansion: 1, MaxExpansions: 32, MaxBytes: capBytes}); r.Err != nil {
		panic(r.Err)
	}
	apply(&command.Cmd{Op: command.Set, Key: []byte("str"), Data: []byte("v" + s)})
	if step > 0 {
		apply(&command.Cmd{Op: command.Del, Keys: [][]byte{[]byte("k3"), []byte("k17")}})
		apply(&command.Cmd{Op: command.Rename, Key: []byte("k5"), Dst: []byte("moved" + s)})
		apply(&command.Cmd{Op: command.FlushDB, DB: 1})
		apply(&command.Cmd{Op: command.Expire, Key: []byte("k7"), Iter: 1, Now: 2})
	}
}

// TestCutWalkBesideApply: a walk reads every key as it was at the cut,
// whatever Apply does between its keys (in-place adds over the chunks of
// a large filter, deletes, a rename, FLUSHDB of a database, expiry), and
// the next cut carries those changes.
func TestCutWalkBesideApply(t *testing.T) {
	a, b := New(), New()
	a.TrackChanges()
	b.TrackChanges()
	cutState(a, 0)
	cutState(b, 0)
	walked(a.Cut())
	walked(b.Cut())
	cutState(a, 1)
	cutState(b, 1)
	want := cutContents(b.Cut(), func() {})
	step := 2
	got := cutContents(a.Cut(), func() {
		if step < 5 {
			cutState(a, step)
			step++
		}
	})
	if !reflect.DeepEqual(got, want) {
		for k, v := range want {
			if got[k] != v {
				t.Errorf("%s: the walk read other contents than at the cut", k)
			}
		}
		t.Fatalf("the walk beside Apply read %d records, at the cut %d", len(got), len(want))
	}
	for step := 2; step < 5; step++ {
		cutState(b, step)
	}
	got, want = cutContents(a.Cut(), func() {}), cutContents(b.Cut(), func() {})
	for _, key := range []string{"0/big", "0/moved4", "0/k7", "0/cf"} {
		if got[key] == "" || got[key] != want[key] {
			t.Errorf("%s: the next cut carries %q, want %q", key, got[key], want[key])
		}
	}
	if a.cutting.Load() != nil {
		t.Fatal("a walked cut is still running")
	}
}

// TestCutAbortRestores: a walk given up halfway (Abort, as for a snapshot)
// stops with ErrCutAborted; restored, the next cut writes what the given
// up one and the changes since would have, together.
func TestCutAbortRestores(t *testing.T) {
	a, b := New(), New()
	a.TrackChanges()
	b.TrackChanges()
	cutState(a, 0)
	cutState(b, 0)
	walked(a.Cut())
	walked(b.Cut())
	cutState(a, 1)
	cutState(b, 1)
	c := a.Cut()
	walks := 0
	err := c.Walk(func(ck *CutKey) error {
		walks++
		if walks == 3 {
			cutState(a, 2) // Apply beside the walk: copies, early captures
			c.Abort()
		}
		return ck.Chunks(make([]byte, engine.ChunkSize), func(Chunk) error { return nil })
	})
	if err != ErrCutAborted {
		t.Fatalf("an aborted walk returned %v", err)
	}
	c.Restore()
	cutState(b, 2)
	got, want := cutContents(a.Cut(), func() {}), cutContents(b.Cut(), func() {})
	for k, v := range want {
		if g, ok := got[k]; ok && g != v {
			t.Errorf("%s: the cut after a restore reads other contents", k)
		}
	}
	// Chunks the restored cut held reach the next cut: every chunk of the
	// large filter the reference cut has, this one has too (the reference
	// holds only what changed in steps 1 and 2).
	for k := range want {
		if _, ok := got[k]; !ok {
			t.Errorf("%s: lost by the aborted cut", k)
		}
	}
}

// TestCutWalkAllocations: walking a cut of many small filters (auto-created
// by BF.ADD) allocates three objects a key (the chain's header, its
// reader and the capture's closure), not the 11-12 it did: a cut of a
// million of them fed the collector, whose work slowed every write beside
// it.
func TestCutWalkAllocations(t *testing.T) {
	k := New()
	k.TrackChanges()
	const n = 20000
	for i := range n {
		k.Apply(&command.Cmd{Op: command.BFAdd, Key: []byte("tenant:" + strconv.Itoa(i)), Items: [][]byte{[]byte("x")},
			Multi: true, ErrorRate: 0.01, Capacity: 100, Expansion: 2, MaxBytes: capBytes})
	}
	// The first cut writes each key whole, the second the chunks an add
	// changed (a key changed in place).
	for round := range 2 {
		cut := k.Cut()
		buf := make([]byte, engine.ChunkSize)
		walkedKeys := make([]string, 0, n)
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		if err := cut.Walk(func(ck *CutKey) error {
			walkedKeys = append(walkedKeys, ck.Key)
			return ck.Chunks(buf, func(Chunk) error { return nil })
		}); err != nil {
			t.Fatal(err)
		}
		runtime.ReadMemStats(&after)
		// What the table's later sections read of each key, by index
		// across the list's pages, is the key the walk gave.
		for i, key := range walkedKeys {
			if got := cut.Keys.At(i).Key; got != key {
				t.Fatalf("round %d: walked key %d is %q, the walk gave %q", round, i, got, key)
			}
		}
		if per := float64(after.Mallocs-before.Mallocs) / n; per > 3.5 {
			t.Errorf("round %d: %.2f allocations a key", round, per)
		}
		// What the walk keeps of a written key for the table's later
		// sections is a few words (Walked), and a created key's capture
		// is not kept at all: its whole capture (~320 bytes a key, all
		// pointers to scan) doubled the live heap of a flush of a
		// million new filters (760 bytes allocated a key; 426 since).
		per := float64(after.TotalAlloc-before.TotalAlloc) / n
		t.Logf("round %d: %.0f bytes allocated a key", round, per)
		if round == 0 && per > 550 {
			t.Errorf("round %d: %.0f bytes allocated a created key, want at most 550", round, per)
		}
		// Nor is a capture of a key changed in place: only what a
		// restore needs of it (engine.Kept) is (816 bytes allocated a
		// key while every capture was kept; 631 since).
		if round == 1 && per > 700 {
			t.Errorf("round %d: %.0f bytes allocated a key changed in place, want at most 700", round, per)
		}
		if cut.Keys.Len() != n {
			t.Fatalf("round %d: %d keys walked, want %d", round, cut.Keys.Len(), n)
		}
		for i := range n {
			k.Apply(&command.Cmd{Op: command.BFAdd, Key: []byte("tenant:" + strconv.Itoa(i)), Items: [][]byte{[]byte("y")},
				Multi: true, ErrorRate: 0.01, Capacity: 100, Expansion: 2, MaxBytes: capBytes})
		}
	}
}
