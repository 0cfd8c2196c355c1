package replication

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/bfserver/bfserver/command"
	"github.com/bfserver/bfserver/keyspace"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
	"github.com/hashicorp/raft"
)

// imageFault fails the creation of the image's tables while on, as a
// disk that refuses writes does.
type imageFault struct{ on atomic.Bool }

func (f *imageFault) MaybeError(op errorfs.Op) error {
	if f.on.Load() && strings.HasSuffix(op.Path, ".sst") && op.Kind.ReadOrWrite() == errorfs.OpIsWrite {
		return syscall.EIO
	}
	return nil
}

func (f *imageFault) String() string { return "image fault" }

// logFault fails every write to the Raft log while on, as a failed fsync
// reports itself.
type logFault struct {
	raft.LogStore
	on *atomic.Bool
}

func (l *logFault) StoreLogs(logs []*raft.Log) error {
	if l.on.Load() {
		return fmt.Errorf("sync raft.db: %w", syscall.EIO)
	}
	return l.LogStore.StoreLogs(logs)
}

func (l *logFault) StoreLog(log *raft.Log) error { return l.StoreLogs([]*raft.Log{log}) }

func addCmd(key, item string) []*command.Cmd {
	return []*command.Cmd{{Op: command.BFAdd, Key: []byte(key), Items: [][]byte{[]byte(item)}, ErrorRate: 0.01, Capacity: 1000, Expansion: 2, MaxBytes: 1 << 30}}
}

// TestStorageFaults: with the image failing and then the Raft log failing,
// a node stays up: writes are refused with a storage error (nothing
// proposed) once it knows, reads still work, it reports not ready, and it
// recovers by itself when the fault clears. After a restart every
// acknowledged item is present and the state equals a replay of the whole
// log from scratch: no change was dropped and no index recorded past one.
func TestStorageFaults(t *testing.T) {
	dir := t.TempDir()
	img := &imageFault{}
	var logBad atomic.Bool
	opts := Options{RaftAddr: freeAddr(t), RESPAddr: "127.0.0.1:1", DataDir: dir, FlushInterval: 20 * time.Millisecond,
		SnapshotThreshold: 1 << 40, SnapshotLogBytes: 1 << 40, ImageFS: errorfs.Wrap(vfs.Default, img),
		wrapLog: func(s raft.LogStore) raft.LogStore { return &logFault{LogStore: s, on: &logBad} }}
	n, err := Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var acked []string
	seq := 0
	// write adds one item to a filter of its own, so that a change the
	// image dropped is not written again with a later one to the same
	// filter; it keeps the acknowledged ones.
	write := func() error {
		seq++
		item := fmt.Sprint("item", seq)
		_, err := n.Write(ctx, addCmd(item, item))
		if err == nil {
			acked = append(acked, item)
		}
		return err
	}
	// until writes until one is refused with a storage error, or accepted.
	until := func(what string, refused bool) {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for {
			err := write()
			var st *command.StorageError
			if errors.As(err, &st) == refused && (refused || err == nil) {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: still %v", what, err)
			}
			time.Sleep(5 * time.Millisecond) // pacing the writes
		}
	}
	for i := 0; i < 200; i++ {
		if err := write(); err != nil {
			t.Fatal(err)
		}
	}
	img.on.Store(true)
	until("image failing", true)
	if ok, why := n.Ready(); ok || !strings.Contains(why, "the image") {
		t.Fatalf("ready %v (%s) while the image fails", ok, why)
	}
	if _, err := n.Barrier(ctx, false); err != nil {
		t.Fatalf("read barrier while the image fails: %v", err)
	}
	if r := n.State().Read(&command.Cmd{Op: command.BFExists, Key: []byte(acked[0]), Items: [][]byte{[]byte(acked[0])}}); r.Ints[0] != 1 {
		t.Fatal("a read missed an acknowledged item while the image fails")
	}
	img.on.Store(false)
	until("image recovered", false)
	for i := 0; i < 100; i++ {
		write()
	}
	logBad.Store(true)
	until("log failing", true)
	last := acked[len(acked)-1]
	if r := n.State().Read(&command.Cmd{Op: command.BFExists, Key: []byte(last), Items: [][]byte{[]byte(last)}}); r.Ints[0] != 1 {
		t.Fatal("a stale read missed an acknowledged item while the log fails")
	}
	logBad.Store(false)
	until("log recovered", false)
	for i := 0; i < 100; i++ {
		if err := write(); err != nil {
			t.Fatal(err)
		}
	}
	if ok, why := n.Ready(); !ok {
		t.Fatalf("not ready after recovery: %s", why)
	}
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}

	opts.ImageFS, opts.wrapLog = nil, nil
	n, err = Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	for _, err := n.Barrier(ctx, false); err != nil; _, err = n.Barrier(ctx, false) {
		if ctx.Err() != nil {
			t.Fatal(err) // a single voter elects itself within a few heartbeat timeouts
		}
	}
	for _, item := range acked {
		if v := n.State().Lookup(0, []byte(item), 0); v == nil || !v.Bloom().Test([]byte(item)) {
			t.Fatalf("acknowledged %s lost (%d acknowledged)", item, len(acked))
		}
	}
	got := digestsOf(n.State())
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	if want := replayDigests(t, dir); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatal("the restored state differs from a replay of the whole log")
	}
}

// digestsOf maps every key of db 0 to its digest.
func digestsOf(ks *keyspace.Keyspace) map[string]string {
	out := map[string]string{}
	ks.Range(0, func(key string, v *keyspace.Value) bool {
		out[key] = keyspace.Digest(v)
		return true
	})
	return out
}

// replayDigests applies every command of a node's Raft log to a fresh
// keyspace and returns its digests.
func replayDigests(t *testing.T, dir string) map[string]string {
	t.Helper()
	store := openLogForTest(t, dir)
	defer store.Close()
	first, _ := store.FirstIndex()
	last, _ := store.LastIndex()
	if first > 1 {
		t.Fatalf("the log was truncated to %d", first)
	}
	ks := keyspace.New()
	for i := first; i <= last; i++ {
		var l raft.Log
		if err := store.GetLog(i, &l); err != nil {
			t.Fatal(err)
		}
		if l.Type != raft.LogCommand {
			continue
		}
		cmds, err := command.DecodeBatch(l.Data)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range cmds {
			ks.Apply(c)
		}
	}
	return digestsOf(ks)
}

// manifestFault fails every read of the image's MANIFEST: the image does
// not open.
type manifestFault struct{}

func (manifestFault) MaybeError(op errorfs.Op) error {
	if strings.Contains(op.Path, "MANIFEST") && op.Kind.ReadOrWrite() == errorfs.OpIsRead {
		return syscall.EIO
	}
	return nil
}

func (manifestFault) String() string { return "manifest fault" }

// TestFailedOpenReleasesLog: a node whose image does not open reports it,
// and closes the Raft log it opened alongside: the next start on the same
// directory opens the log at once, where a log left open would keep its
// lock and fail that start after bbolt's timeout.
func TestFailedOpenReleasesLog(t *testing.T) {
	opts := Options{RaftAddr: freeAddr(t), RESPAddr: "127.0.0.1:1", DataDir: t.TempDir()}
	n, err := Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	bad := opts
	bad.ImageFS = errorfs.Wrap(vfs.Default, manifestFault{})
	if n, err := Open(bad); err == nil {
		n.Close()
		t.Fatal("a node opened on an image it cannot read")
	}
	n, err = Open(opts)
	if err != nil {
		t.Fatalf("after a failed open: %v", err)
	}
	n.Close()
}
