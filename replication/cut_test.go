package replication

import (
	"errors"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/bfserver/bfserver/command"
	"github.com/bfserver/bfserver/keyspace"
	"github.com/bfserver/bfserver/persistence"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
	"github.com/hashicorp/raft"
)

// cutEntry is log entry i of TestFlushBesideApply: adds to one filter of
// many chunks, an auto-created small filter, and now and then a delete.
func cutEntry(i uint64) *raft.Log {
	s := strconv.FormatUint(i, 10)
	big := &command.Cmd{Op: command.BFAdd, Key: []byte("big"), Multi: true, ErrorRate: 0.01, Capacity: 1 << 21, Expansion: 2, MaxBytes: 1 << 26}
	for j := range 50 {
		big.Items = append(big.Items, []byte(s+"-"+strconv.Itoa(j)))
	}
	cmds := []*command.Cmd{big,
		{Op: command.BFAdd, Key: []byte("t" + strconv.FormatUint(i%300, 10)), Items: [][]byte{[]byte(s)}, Multi: true, ErrorRate: 0.01, Capacity: 100, Expansion: 2, MaxBytes: 1 << 26}}
	if i%7 == 0 {
		cmds = append(cmds, &command.Cmd{Op: command.Del, Keys: [][]byte{[]byte("t" + strconv.FormatUint(i%300/2, 10))}})
	}
	return &raft.Log{Index: i, Type: raft.LogCommand, Data: command.EncodeBatch(cmds)}
}

func allDigests(k *keyspace.Keyspace) map[string]string {
	out := map[string]string{}
	for db := uint8(0); db < keyspace.NumDBs; db++ {
		k.Range(db, func(key string, v *keyspace.Value) bool {
			out[strconv.Itoa(int(db))+"/"+key] = keyspace.Digest(v)
			return true
		})
	}
	return out
}

// TestFlushBesideApply: flushes and a snapshot run while entries apply on
// another goroutine (run it with -race); each image the flushes leave, and
// the snapshot's stream, is exactly the state at the index it records, as
// a replay of the log to that index gives it.
func TestFlushBesideApply(t *testing.T) {
	f := memFSM(t, nil)
	const last = 3000
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := uint64(1); i <= last; i++ {
			f.Apply(cutEntry(i))
		}
	}()
	ref := memFSM(t, nil) // replays the log to each image's index
	check := func(ks *keyspace.Keyspace, at uint64, what string) {
		t.Helper()
		for i := ref.applied.Load() + 1; i <= at; i++ {
			ref.Apply(cutEntry(i))
		}
		if ref.applied.Load() != at {
			t.Fatalf("%s at %d, the replay at %d", what, at, ref.applied.Load())
		}
		want, got := allDigests(ref.ks.Load()), allDigests(ks)
		if len(got) != len(want) {
			t.Fatalf("%s at %d: %d keys, the replay %d", what, at, len(got), len(want))
		}
		for k, v := range want {
			if got[k] != v {
				t.Fatalf("%s at %d: key %s differs from the replay", what, at, k)
			}
		}
	}
	flushes, snapshotted := 0, false
	// Until the log is applied, three flushes are done and one snapshot is
	// taken (the flush at the last index is past last/3 if none was before).
	for f.applied.Load() < last || flushes < 3 || !snapshotted {
		if err := f.flush(); err != nil {
			t.Fatal(err)
		}
		flushes++
		ks, at, err := f.store.Load()
		if err != nil {
			t.Fatal(err)
		}
		check(ks, at, "flush "+strconv.Itoa(flushes))
		if !snapshotted && at > last/3 {
			snapshotted = true
			snap, err := f.Snapshot()
			if err != nil {
				t.Fatal(err)
			}
			stream := persist(t, f, snap)
			dst, err := persistence.Open(persistence.Options{Dir: "/snap", InMemory: true})
			if err != nil {
				t.Fatal(err)
			}
			if err := dst.ReadSnapshot(stream); err != nil {
				t.Fatal(err)
			}
			ks, at, err := dst.Load()
			dst.Close()
			if err != nil {
				t.Fatal(err)
			}
			check(ks, at, "snapshot")
		}
	}
	wg.Wait()
	if !snapshotted {
		t.Fatal("no snapshot was taken beside Apply")
	}
}

// syncFault fails every sync while on: a table being committed then
// fails to commit.
type syncFault struct{ on atomic.Bool }

func (f *syncFault) MaybeError(op errorfs.Op) error {
	switch op.Kind {
	case errorfs.OpFileSync, errorfs.OpFileSyncData, errorfs.OpFileSyncTo:
		if f.on.Load() {
			return errorfs.ErrInjected
		}
	}
	return nil
}

func (f *syncFault) String() string { return "sync fault" }

// imageMatchesReplay checks that f's image is exactly the state a replay
// of cutEntry to the index it records gives, and returns that index.
func imageMatchesReplay(t *testing.T, f *fsm) uint64 {
	t.Helper()
	ks, at, err := f.store.Load()
	if err != nil {
		t.Fatal(err)
	}
	ref := memFSM(t, nil)
	for i := uint64(1); i <= at; i++ {
		ref.Apply(cutEntry(i))
	}
	want, got := allDigests(ref.ks.Load()), allDigests(ks)
	if len(got) != len(want) {
		t.Fatalf("the image at %d holds %d keys, the replay %d", at, len(got), len(want))
	}
	for k, v := range want {
		if got[k] != v {
			t.Fatalf("the image at %d: key %s differs from the replay", at, k)
		}
	}
	return at
}

// TestFailedCommitDoomsLaterCut: a flush's table fails to commit after
// the next cut (a snapshot's) was taken. That cut
// lacks the failed one's changes, so its table must not land either: the
// image would record its index without them, and every snapshot sent from
// it would carry the hole to followers. The image stays exactly the state
// at the index it records, and the next flush brings it to the end.
func TestFailedCommitDoomsLaterCut(t *testing.T) {
	fail := &syncFault{}
	store, err := persistence.Open(persistence.Options{Dir: "/img", FS: errorfs.Wrap(vfs.NewMem(), fail)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	f := memFSM(t, store)
	for i := uint64(1); i <= 100; i++ {
		f.Apply(cutEntry(i))
	}
	// A flush has walked its cut and commits it (flush's steps)...
	f.cutMu.Lock()
	p1, err := f.take()
	if err != nil {
		t.Fatal(err)
	}
	t1, err := f.write(p1)
	if err != nil {
		t.Fatal(err)
	}
	f.flushMu.Lock()
	f.cutMu.Unlock()
	// ... while entries apply and a snapshot takes and walks the next cut.
	for i := uint64(101); i <= 200; i++ {
		f.Apply(cutEntry(i))
	}
	f.cutMu.Lock()
	p2, err := f.take()
	if err != nil {
		t.Fatal(err)
	}
	fail.on.Store(true)
	if err := f.commit(t1, p1); err == nil {
		t.Fatal("the flush's table committed through a failing sync")
	}
	fail.on.Store(false)
	f.flushMu.Unlock()
	// The snapshot's cut is walked once the store lets it build a table
	// (one at a time), then committed (snapshot.write's steps).
	t2, err := f.write(p2)
	if err != nil {
		t.Fatal(err)
	}
	f.flushMu.Lock()
	f.cutMu.Unlock()
	err = f.commit(t2, p2)
	f.flushMu.Unlock()
	if !errors.Is(err, errEarlierCommit) {
		t.Fatalf("the snapshot's table, cut before the failed one was put back: %v, want %v", err, errEarlierCommit)
	}
	if at := imageMatchesReplay(t, f); at >= 100 {
		t.Fatalf("the image records index %d", at)
	}
	if err := f.flush(); err != nil {
		t.Fatal(err)
	}
	if at := imageMatchesReplay(t, f); at != 200 {
		t.Fatalf("after the next flush the image is at %d, want 200", at)
	}
}
