package persistence

import (
	"errors"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bfserver/bfserver/command"
	"github.com/bfserver/bfserver/keyspace"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
)

// failing injects an error into every matching operation on a table being
// built while it is on (linking it in falls back to a copy, so a failing
// link is no fault). A sync is any of them (a table is written back as it
// goes and synced with fdatasync at its end).
type failing struct {
	on   atomic.Bool
	kind errorfs.OpKind
}

func (f *failing) MaybeError(op errorfs.Op) error {
	kind := op.Kind
	if kind == errorfs.OpFileSyncData || kind == errorfs.OpFileSyncTo {
		kind = errorfs.OpFileSync
	}
	if f.on.Load() && kind == f.kind && strings.Contains(op.Path, ".sst") {
		return errorfs.ErrInjected
	}
	return nil
}

func (f *failing) String() string { return "failing" }

// TestFailedWriteKeepsChanges: a table that cannot be created, written or
// synced leaves the image at the index it had; the changes it carried
// are restored and written by the next write, after which the image loads
// back to exactly the live keyspace.
func TestFailedWriteKeepsChanges(t *testing.T) {
	for _, kind := range []errorfs.OpKind{errorfs.OpCreate, errorfs.OpFileWrite, errorfs.OpFileSync} {
		inj := &failing{kind: kind}
		s, err := Open(Options{Dir: "/db", FS: errorfs.Wrap(vfs.NewMem(), inj)})
		if err != nil {
			t.Fatal(err)
		}
		k := keyspace.New()
		k.TrackChanges()
		add := func(key, prefix string, n int) {
			k.Apply(&command.Cmd{Op: command.BFAdd, Key: []byte(key), Items: items(prefix, n), Multi: true, ErrorRate: 0.01, Capacity: 1000, Expansion: 2, MaxBytes: 1 << 30})
		}
		add("b", "a", 50000)
		if err := write(s, k, nil, 1); err != nil {
			t.Fatal(err)
		}
		add("b", "b", 20000)
		add("new", "c", 100)
		inj.on.Store(true)
		if err := write(s, k, nil, 2); !errors.Is(err, errorfs.ErrInjected) {
			t.Fatalf("op %v: write with failures: %v", kind, err)
		}
		inj.on.Store(false)
		if _, applied, err := s.Load(); err != nil || applied != 1 {
			t.Fatalf("op %v: after a failed write the image is at %d (%v), want 1", kind, applied, err)
		}
		add("b", "d", 10)
		if err := write(s, k, nil, 3); err != nil {
			t.Fatalf("op %v: %v", kind, err)
		}
		loaded, applied, err := s.Load()
		if err != nil || applied != 3 {
			t.Fatalf("op %v: applied %d, %v", kind, applied, err)
		}
		sameDigests(t, digests(k), digests(loaded))
		s.Close()
	}
}

// lowDisk reports only avail bytes free.
type lowDisk struct {
	vfs.FS
	avail atomic.Uint64
}

func (l *lowDisk) GetDiskUsage(string) (vfs.DiskUsage, error) {
	return vfs.DiskUsage{AvailBytes: l.avail.Load(), TotalBytes: 1 << 40}, nil
}

// TestNoSpaceRefusedBeforePebble: a write that would leave less than the
// reserve free is refused before anything reaches Pebble (whose MANIFEST
// writes are fatal when they fail), and goes through once space returns.
func TestNoSpaceRefusedBeforePebble(t *testing.T) {
	fs := &lowDisk{FS: vfs.NewMem()}
	fs.avail.Store(1 << 40)
	s, err := Open(Options{Dir: "/db", FS: fs})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	k := keyspace.New()
	k.TrackChanges()
	k.Apply(&command.Cmd{Op: command.BFAdd, Key: []byte("b"), Items: items("a", 100000), Multi: true, ErrorRate: 0.001, Capacity: 100000, Expansion: 2, MaxBytes: 1 << 30})
	fs.avail.Store(64<<20 + 1000) // the reserve and a little: not enough
	err = write(s, k, nil, 1)
	if !errors.Is(err, ErrNoSpace) {
		t.Fatalf("write on a full disk: %v", err)
	}
	s.discards.Wait()
	if files, _ := fs.List(filepath.Join("/db", "ingest")); len(files) != 0 {
		t.Fatalf("a refused write left %v", files)
	}
	fs.avail.Store(1 << 40)
	if err := write(s, k, nil, 1); err != nil {
		t.Fatal(err)
	}
	loaded, applied, err := s.Load()
	if err != nil || applied != 1 {
		t.Fatalf("applied %d, %v", applied, err)
	}
	sameDigests(t, digests(k), digests(loaded))
}

// TestCloseAfterFatal: once Pebble has met an error it cannot go on after
// (its goroutine parked in Fatalf), the store refuses writes and still
// closes, with that error: a node in this state must be able to shut down.
func TestCloseAfterFatal(t *testing.T) {
	fatal := make(chan error, 1)
	s, err := Open(Options{Dir: "image", InMemory: true, OnFatal: func(err error) { fatal <- err }})
	if err != nil {
		t.Fatal(err)
	}
	go pebbleLogger{s}.Fatalf("backing file %s: no such file or directory", "000020.sst")
	if err := <-fatal; !errors.Is(err, ErrStopped) {
		t.Fatalf("OnFatal told %v", err)
	}
	ks := keyspace.New()
	ks.Apply(&command.Cmd{Op: command.Set, Key: []byte("k"), Data: []byte("v")})
	if _, err := s.WriteCut(ks.Cut(), 1, nil); !errors.Is(err, ErrStopped) {
		t.Fatalf("a write after the fatal error: %v", err)
	}
	closed := make(chan error, 1)
	go func() { closed <- s.Close() }()
	select {
	case err := <-closed:
		if !errors.Is(err, ErrStopped) {
			t.Fatalf("Close: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Close waited for the parked goroutine")
	}
}
