package persistence

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bfserver/bfserver/command"
	"github.com/bfserver/bfserver/engine"
	"github.com/bfserver/bfserver/keyspace"
	"github.com/bfserver/bfserver/sketch/window"
	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
)

// cutFixture fills k with what a cut must carry: a Bloom filter of many
// chunks (held, not copied whole, by a walk), small filters, a Cuckoo
// filter, a string.
func cutFixture(k *keyspace.Keyspace) {
	k.Apply(&command.Cmd{Op: command.BFReserve, Key: []byte("big"), ErrorRate: 0.01, Capacity: 2 << 20, Expansion: 2, MaxBytes: 1 << 30})
	bfAdd(k, "big", "a", 20000)
	for i := range 50 {
		k.Apply(&command.Cmd{Op: command.BFAdd, Key: []byte("small" + strconv.Itoa(i)), Items: items("s", 3), Multi: true, ErrorRate: 0.01, Capacity: 100, Expansion: 2, MaxBytes: 1 << 30})
	}
	k.Apply(&command.Cmd{Op: command.CFReserve, Key: []byte("cf"), Capacity: 1 << 20, BucketSize: 2, MaxIterations: 20, Expansion: 1, MaxExpansions: 32, MaxBytes: 1 << 30})
	k.Apply(&command.Cmd{Op: command.CFAdd, Key: []byte("cf"), Items: items("c", 2000), Multi: true, Capacity: 1 << 20, BucketSize: 2, MaxIterations: 20, Expansion: 1, MaxExpansions: 32, MaxBytes: 1 << 30})
	k.Apply(&command.Cmd{Op: command.Set, Key: []byte("str"), Data: []byte("v1")})
	k.Apply(windowReserve("win", 400_000)) // about 1 MiB: held
	k.Apply(windowReserve("ws", 100))
	wAdd(k, "win", "a", 20000)
	if k.Lookup(0, []byte("cf"), 0) == nil || k.Lookup(0, []byte("big"), 0) == nil || k.Lookup(0, []byte("win"), 0) == nil {
		panic("the fixture's filters were not created")
	}
}

// windowReserve is BFX.WRESERVE key 0.01 COUNT n as the proposer sends it.
func windowReserve(key string, n int64) *command.Cmd {
	s, err := window.Size(0.01, uint64(n))
	if err != nil {
		panic(err)
	}
	return &command.Cmd{Op: command.WReserve, Key: []byte(key), ErrorRate: 0.01, Field: uint8(window.Count), Iter: n, Data: command.EncodeShape(s), MaxBytes: 1 << 30}
}

// wAdd is BFX.WMADD of n items.
func wAdd(k *keyspace.Keyspace, key, prefix string, n int) {
	if r := k.Apply(&command.Cmd{Op: command.WAdd, Key: []byte(key), Items: items(prefix, n), Multi: true, NoCreate: true}); r.Err != nil {
		panic(r.Err)
	}
}

// during is what Apply does while a cut is written: adds all over the large
// filter's chunks and the Cuckoo filter's, small filters changed, deleted
// and created, the string replaced, a key renamed.
func during(k *keyspace.Keyspace, round int) {
	r := strconv.Itoa(round)
	bfAdd(k, "big", "d"+r+"-", 5000)
	wAdd(k, "win", "d"+r+"-", 5000) // shifts too: a generation is about 6,500
	wAdd(k, "ws", "d"+r+"-", 10)
	k.Apply(&command.Cmd{Op: command.CFAdd, Key: []byte("cf"), Items: items("e"+r+"-", 500), Multi: true, Capacity: 1 << 20, BucketSize: 2, MaxIterations: 20, Expansion: 1, MaxExpansions: 32, MaxBytes: 1 << 30})
	for _, it := range items("c", 100) {
		if r := k.Apply(&command.Cmd{Op: command.CFDel, Key: []byte("cf"), Items: [][]byte{it}}); r.Err != nil {
			panic(r.Err)
		}
	}
	for i := range 50 {
		key := []byte("small" + strconv.Itoa(i))
		switch i % 3 {
		case 0:
			k.Apply(&command.Cmd{Op: command.BFAdd, Key: key, Items: items("t"+r, 2), Multi: true, ErrorRate: 0.01, Capacity: 100, Expansion: 2, MaxBytes: 1 << 30})
		case 1:
			k.Apply(&command.Cmd{Op: command.Del, Keys: [][]byte{key}})
		}
	}
	k.Apply(&command.Cmd{Op: command.BFAdd, Key: []byte("new" + r), Items: items("n", 5), Multi: true, ErrorRate: 0.01, Capacity: 100, Expansion: 2, MaxBytes: 1 << 30})
	k.Apply(&command.Cmd{Op: command.Set, Key: []byte("str"), Data: []byte("v" + r)})
	k.Apply(&command.Cmd{Op: command.Rename, Key: []byte("small2"), Dst: []byte("renamed" + r)})
}

// TestCutBesideApply: a cut's table is the state at the cut, whatever
// Apply did while it was written (the changes copied first, keys
// captured first), and the next cut's table carries those changes: the
// image loads back to the state at each cut. Apply runs before the walk
// (every change then meets a held chunk or an uncaptured key) and on
// another goroutine during the write (run it with -race).
func TestCutBesideApply(t *testing.T) {
	s := openMem(t)
	k := keyspace.New()
	k.TrackChanges()
	cutFixture(k)
	if err := write(s, k, nil, 1); err != nil {
		t.Fatal(err)
	}
	bfAdd(k, "big", "b", 20000)
	during(k, 0)
	// Apply between the cut and its walk.
	want := digests(k)
	cut := k.Cut()
	during(k, 1)
	tb, err := s.WriteCut(cut, 2, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := tb.Commit(); err != nil {
		t.Fatal(err)
	}
	if copies, _, _, _ := cut.Copied(); copies == 0 {
		t.Fatal("Apply changed held chunks and none was copied")
	}
	loaded, applied, err := s.Load()
	if err != nil || applied != 2 {
		t.Fatalf("applied %d, %v", applied, err)
	}
	sameDigests(t, want, digests(loaded))
	// Apply beside the walk.
	for round := 2; round < 6; round++ {
		want := digests(k)
		cut := k.Cut()
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			during(k, round)
		}()
		tb, err := s.WriteCut(cut, uint64(round+1), nil)
		if err == nil {
			err = tb.Commit()
		}
		wg.Wait()
		if err != nil {
			t.Fatal(err)
		}
		loaded, _, err := s.Load()
		if err != nil {
			t.Fatal(err)
		}
		sameDigests(t, want, digests(loaded))
	}
	// The next cut carries what Apply did during the last.
	if err := write(s, k, nil, 10); err != nil {
		t.Fatal(err)
	}
	loaded, _, err = s.Load()
	if err != nil {
		t.Fatal(err)
	}
	sameDigests(t, digests(k), digests(loaded))
}

// TestFailedCutRestoresCopies: a cut whose table fails to be written while
// Apply copied held chunks goes back into the change record, its held
// chunks' marks with it: the next cut brings the image to the live state.
func TestFailedCutRestoresCopies(t *testing.T) {
	for _, kind := range []errorfs.OpKind{errorfs.OpFileWrite, errorfs.OpFileSync} {
		inj := &failing{kind: kind}
		s, err := Open(Options{Dir: "/db", FS: errorfs.Wrap(vfs.NewMem(), inj)})
		if err != nil {
			t.Fatal(err)
		}
		k := keyspace.New()
		k.TrackChanges()
		cutFixture(k)
		if err := write(s, k, nil, 1); err != nil {
			t.Fatal(err)
		}
		bfAdd(k, "big", "b", 20000)
		during(k, 0)
		cut := k.Cut()
		during(k, 1)
		inj.on.Store(true)
		tb, err := s.WriteCut(cut, 2, nil)
		if err == nil {
			err = tb.Commit()
		}
		if !errors.Is(err, errorfs.ErrInjected) {
			t.Fatalf("op %v: write with failures: %v", kind, err)
		}
		cut.Restore()
		if copies, _, _, _ := cut.Copied(); copies == 0 {
			t.Fatalf("op %v: Apply changed held chunks and none was copied", kind)
		}
		inj.on.Store(false)
		if _, applied, err := s.Load(); err != nil || applied != 1 {
			t.Fatalf("op %v: after a failed write the image is at %d (%v), want 1", kind, applied, err)
		}
		if err := write(s, k, nil, 3); err != nil {
			t.Fatal(err)
		}
		loaded, applied, err := s.Load()
		if err != nil || applied != 3 {
			t.Fatalf("op %v: applied %d, %v", kind, applied, err)
		}
		sameDigests(t, digests(k), digests(loaded))
		s.Close()
	}
}

// oneChunkCut is a store and the fixture's keyspace with a cut taken at a
// budget of one chunk, and the digests at the cut.
func oneChunkCut(t *testing.T) (*Store, *keyspace.Keyspace, map[string]string, *keyspace.Cut) {
	s := openMem(t)
	k := keyspace.New()
	k.TrackChanges()
	k.SetCutBudget(1)
	cutFixture(k)
	bfAdd(k, "big", "b", 20000)
	want := digests(k)
	return s, k, want, k.Cut()
}

// TestCutBudget: with a budget of one chunk, Apply waits for the walk
// rather than copy more, and the table is still the state at the cut.
func TestCutBudget(t *testing.T) {
	s, k, want, cut := oneChunkCut(t)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for round := range 3 {
			during(k, round)
		}
	}()
	tb, err := s.WriteCut(cut, 1, nil)
	if err == nil {
		err = tb.Commit()
	}
	<-done
	if err != nil {
		t.Fatal(err)
	}
	_, _, peak, _ := cut.Copied()
	if peak > engine.MinBudget {
		t.Fatalf("copies held %d bytes at once, over a budget of one chunk", peak)
	}
	loaded, _, err := s.Load()
	if err != nil {
		t.Fatal(err)
	}
	sameDigests(t, want, digests(loaded))
}

// TestCutSpill: with a spill and a budget of one chunk, Apply changes
// every held chunk before the walk has read any (without a spill it would
// wait for a walk that has not started) and the table is still the state
// at the cut, the chunks read back from the spill included.
func TestCutSpill(t *testing.T) {
	s, k, want, cut := oneChunkCut(t)
	spill := s.NewSpill()
	if spill == nil {
		t.Fatal("no spill")
	}
	spill.Attach(cut)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for round := range 3 {
			during(k, round)
		}
	}()
	select {
	case <-done:
	case <-time.After(time.Minute):
		t.Fatal("Apply waited for the walk")
	}
	tb, err := s.WriteCut(cut, 1, nil)
	spill.Close()
	if err == nil {
		err = tb.Commit()
	}
	if err != nil {
		t.Fatal(err)
	}
	if _, _, peak, waits := cut.Copied(); waits != 0 || peak > engine.MinBudget || cut.Spilled() == 0 {
		t.Fatalf("waits %d, peak %d bytes, %d chunks spilled: want none, one chunk at most, some", waits, peak, cut.Spilled())
	}
	loaded, _, err := s.Load()
	if err != nil {
		t.Fatal(err)
	}
	sameDigests(t, want, digests(loaded))
}

// rangeDeletions counts the range deletions in the image's tables.
func rangeDeletions(t *testing.T, s *Store) uint64 {
	t.Helper()
	levels, err := s.db.SSTables(pebble.WithProperties())
	if err != nil {
		t.Fatal(err)
	}
	var n uint64
	for _, tables := range levels {
		for _, tb := range tables {
			n += tb.Properties.NumRangeDeletions
		}
	}
	return n
}

// TestFreshKeysNoRangeDeletion: keys created where the image holds
// nothing of them are written without a range deletion of their chunks
// (a million auto-created filters put a million in a flush's table, and
// Pebble spent seconds on them); a key created over one the image still
// holds (removed in the same interval, or in a cut whose write failed)
// still drops the stored chunks first, so a load finds none of the old
// ones (one outside the new array would be ErrCorruptImage).
func TestFreshKeysNoRangeDeletion(t *testing.T) {
	inj := &failing{kind: errorfs.OpFileWrite}
	s, err := Open(Options{Dir: "/db", FS: errorfs.Wrap(vfs.NewMem(), inj)})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	k := keyspace.New()
	k.TrackChanges()
	small := func(key, item string) {
		if r := k.Apply(&command.Cmd{Op: command.BFAdd, Key: []byte(key), Items: [][]byte{[]byte(item)}, Multi: true,
			ErrorRate: 0.01, Capacity: 100, Expansion: 2, MaxBytes: 1 << 30}); r.Err != nil {
			t.Fatal(r.Err)
		}
	}
	big := func(key string) {
		k.Apply(&command.Cmd{Op: command.BFReserve, Key: []byte(key), ErrorRate: 0.01, Capacity: 1 << 20, Expansion: 2, MaxBytes: 1 << 30})
		bfAdd(k, key, key, 5000) // every chunk of its 1.2 MB
	}
	check := func(idx uint64) {
		t.Helper()
		if err := write(s, k, nil, idx); err != nil {
			t.Fatal(err)
		}
		loaded := loadBoth(t, s)
		sameDigests(t, digests(k), digests(loaded))
	}
	for i := range 100 {
		small("tenant:"+strconv.Itoa(i), "x")
	}
	big("a")
	big("b")
	check(1)
	if n := rangeDeletions(t, s); n != 0 {
		t.Fatalf("%d range deletions after creating keys the image did not hold", n)
	}
	// Removed and created again (small) in one interval: its old chunks go.
	k.Apply(&command.Cmd{Op: command.Del, Keys: [][]byte{[]byte("a")}})
	small("a", "y")
	check(2)
	if n := rangeDeletions(t, s); n == 0 {
		t.Fatal("a key created over one the image held dropped no chunks")
	}
	// Removed before a cut whose write fails, created again while it is
	// written: the failed cut's removal is put back, and wins.
	k.Apply(&command.Cmd{Op: command.Del, Keys: [][]byte{[]byte("b")}})
	cut := k.Cut()
	small("b", "z")
	small("tenant:100", "x") // fresh, in the next record
	inj.on.Store(true)
	tb, err := s.WriteCut(cut, 3, nil)
	if err == nil {
		err = tb.Commit()
	}
	if !errors.Is(err, errorfs.ErrInjected) {
		t.Fatalf("write with failures: %v", err)
	}
	cut.Restore()
	inj.on.Store(false)
	check(4)
	// A fresh key removed in its own interval is gone from the image.
	small("c", "x")
	k.Apply(&command.Cmd{Op: command.Del, Keys: [][]byte{[]byte("c")}})
	small("tenant:0", "y") // changed in place
	check(5)
}

// diskOps counts the writes and syncs of tables being built, once on.
type diskOps struct {
	on atomic.Bool
	n  atomic.Int64
}

func (d *diskOps) String() string { return "diskOps" }

func (d *diskOps) MaybeError(op errorfs.Op) error {
	if d.on.Load() && strings.HasSuffix(op.Path, ".sst") && op.Kind.ReadOrWrite() == errorfs.OpIsWrite && op.Kind != errorfs.OpFileClose {
		d.n.Add(1)
	}
	return nil
}

// TestAbortTouchesNoDisk: a table given up (a flush aborted for a snapshot,
// which waits for it on Raft's FSM goroutine with every Apply) is not
// finished first: no last block, index or sync reaches its file.
func TestAbortTouchesNoDisk(t *testing.T) {
	ops := &diskOps{}
	s, err := Open(Options{Dir: "/db", FS: errorfs.Wrap(vfs.NewMem(), ops)})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	tb, err := s.newTable(0)
	if err != nil {
		t.Fatal(err)
	}
	v := make([]byte, 100<<10)
	for i := range 40 {
		tb.set(fmt.Appendf(nil, "c%08d", i), v)
	}
	tb.set([]byte("k-last"), []byte("pending in the writer's block"))
	ops.on.Store(true)
	tb.Abort()
	if n := ops.n.Load(); n != 0 {
		t.Fatalf("aborting the table wrote or synced its file %d times", n)
	}
}
