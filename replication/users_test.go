package replication

import (
	"bytes"
	"io"
	"log/slog"
	"slices"
	"strings"
	"testing"

	"github.com/bfserver/bfserver/command"
	"github.com/bfserver/bfserver/persistence"
	"github.com/hashicorp/raft"
)

// memSink is a raft.SnapshotSink into memory.
type memSink struct{ bytes.Buffer }

func (s *memSink) ID() string    { return "mem" }
func (s *memSink) Cancel() error { return nil }
func (s *memSink) Close() error  { return nil }

// persist persists snap as Raft does and returns the stream a follower
// receives for it: the snapshot refers to f's image, which
// snapshotStore.Open streams.
func persist(t *testing.T, f *fsm, snap raft.FSMSnapshot) *bytes.Buffer {
	t.Helper()
	var sink memSink
	if err := snap.Persist(&sink); err != nil {
		t.Fatal(err)
	}
	snap.Release()
	if sink.String() != string(reference(f.self)) {
		t.Fatalf("persisted %q, want a reference to the image", sink.Bytes())
	}
	var out bytes.Buffer
	if err := f.store.WriteSnapshot(&out); err != nil {
		t.Fatal(err)
	}
	return &out
}

func testFSM(t *testing.T, store *persistence.Store) *fsm {
	t.Helper()
	m, err := newFSM(store, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func memStore(t *testing.T) *persistence.Store {
	t.Helper()
	store, err := persistence.Open(persistence.Options{Dir: "/img", InMemory: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	return store
}

func words(s ...string) [][]byte {
	out := make([][]byte, len(s))
	for i, x := range s {
		out[i] = []byte(x)
	}
	return out
}

// TestFSMUsers: ACL SETUSER and DELUSER entries change the replicated user
// table in log order (compare and set), each change makes a new version
// and wakes the watchers; the table is in the image, so it survives a
// restart, and in snapshots, so a restored node has it too.
func TestFSMUsers(t *testing.T) {
	store := memStore(t)
	m := testFSM(t, store)
	v0, users, changed := m.userTable()
	if len(users) != 0 {
		t.Fatalf("new table %v", users)
	}
	entry := func(i uint64, cmds ...*command.Cmd) applyResult {
		t.Helper()
		res, _ := m.Apply(&raft.Log{Index: i, Type: raft.LogCommand, Data: command.EncodeBatch(cmds)}).(applyResult)
		if m.halt.Load() != nil {
			t.Fatalf("halted: %v", *m.halt.Load())
		}
		return res
	}
	r := entry(1,
		&command.Cmd{Op: command.ACLSetUser, Key: []byte("alice"), Items: words("on", "#"+strings.Repeat("a", 64), "~k*", "resetchannels", "-@all", "+@bloom"), NX: true},
		&command.Cmd{Op: command.ACLSetUser, Key: []byte("bob"), Items: words("off"), NX: true},
		&command.Cmd{Op: command.ACLSetUser, Key: []byte("bob"), Items: words("on"), NX: true}, // exists by now
		&command.Cmd{Op: command.BFAdd, Key: []byte("k"), Items: words("x"), ErrorRate: 0.01, Capacity: 100, Expansion: 2, MaxBytes: 1 << 16},
	)
	if got := []int64{r.results[0].Int, r.results[1].Int, r.results[2].Int}; !slices.Equal(got, []int64{1, 1, 0}) {
		t.Fatalf("results %v", got)
	}
	select {
	case <-changed:
	default:
		t.Fatal("the change did not close the channel")
	}
	v1, users, _ := m.userTable()
	if v1 == v0 || len(users) != 2 || !slices.Equal(users["bob"], []string{"off"}) {
		t.Fatalf("version %d→%d, table %v", v0, v1, users)
	}
	r = entry(2,
		&command.Cmd{Op: command.ACLSetUser, Key: []byte("bob"), Items: words("on", "nopass"), Keys: words("off")},
		&command.Cmd{Op: command.ACLDelUser, Keys: words("alice", "carol")},
		&command.Cmd{Op: command.ACLSetUser, Key: []byte("bad name"), Items: words("on")}, // invalid in the log
	)
	if r.results[0].Int != 1 || r.results[1].Int != 1 || r.results[2].Err == nil {
		t.Fatalf("results %+v", r.results)
	}
	want := command.Users{"bob": {"on", "nopass"}}
	check := func(what string, m *fsm) {
		t.Helper()
		_, got, _ := m.userTable()
		if len(got) != len(want) || !slices.Equal(got["bob"], want["bob"]) {
			t.Fatalf("%s: table %v, want %v", what, got, want)
		}
	}
	check("applied", m)
	if err := m.flush(); err != nil {
		t.Fatal(err)
	}
	check("restarted from the image", testFSM(t, store))

	snap, err := m.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	stream := persist(t, m, snap)
	other := testFSM(t, memStore(t))
	_, _, otherChanged := other.userTable()
	if err := other.Restore(io.NopCloser(stream)); err != nil {
		t.Fatal(err)
	}
	check("restored from a snapshot", other)
	select {
	case <-otherChanged:
	default:
		t.Fatal("restoring did not wake the watchers")
	}
}
