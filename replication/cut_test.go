package replication

import (
	"strconv"
	"sync"
	"testing"

	"github.com/bfserver/bfserver/command"
	"github.com/bfserver/bfserver/keyspace"
	"github.com/bfserver/bfserver/persistence"
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
			sink := &memSink{}
			if err := snap.Persist(sink); err != nil {
				t.Fatal(err)
			}
			snap.Release()
			dst, err := persistence.Open(persistence.Options{Dir: "/snap", InMemory: true})
			if err != nil {
				t.Fatal(err)
			}
			if err := dst.ReadSnapshot(&sink.Buffer); err != nil {
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
