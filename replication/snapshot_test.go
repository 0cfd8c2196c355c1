package replication

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/bfserver/bfserver/command"
	"github.com/bfserver/bfserver/internal/shrink"
	"github.com/bfserver/bfserver/keyspace"
	"github.com/bfserver/bfserver/persistence"
	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
)

// TestSnapshotWhileWriting: snapshots write the image while writes go on
// (Persist, not Apply, writes it); after a restart from the image and the
// log, the filter is what it was, byte for byte. The filter spans many
// chunks, so most chunks a snapshot takes are not changed again after it:
// a snapshot that lost what it took would show.
func TestSnapshotWhileWriting(t *testing.T) {
	dir := t.TempDir()
	opts := Options{RaftAddr: freeAddr(t), RESPAddr: "127.0.0.1:1", DataDir: dir}
	n, err := Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	add := func(n *Node, items ...string) error {
		c := &command.Cmd{Op: command.BFAdd, Key: []byte("k"), Multi: true, ErrorRate: 0.01, Capacity: 10_000_000, Expansion: 2, MaxBytes: 1 << 26}
		for _, it := range items {
			c.Items = append(c.Items, []byte(it))
		}
		_, err := n.Write(ctx, []*command.Cmd{c})
		return err
	}
	if err := add(n, "first"); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	stop := make(chan struct{})
	var acked []string
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			batch := []string{"a" + strconv.Itoa(i), "b" + strconv.Itoa(i)}
			if err := add(n, batch...); err != nil {
				t.Error(err)
				return
			}
			acked = append(acked, batch...)
		}
	}()
	for i := 0; i < 3; i++ {
		if err := n.raft.Snapshot().Error(); err != nil {
			t.Fatal(err)
		}
	}
	close(stop)
	wg.Wait()
	want := keyspace.Digest(n.State().Lookup(0, []byte("k"), 0))
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	if len(acked) == 0 {
		t.Fatal("no write was acknowledged during the snapshots")
	}

	n, err = Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	if _, err := n.Barrier(ctx, false); err != nil {
		t.Fatal(err)
	}
	v := n.State().Lookup(0, []byte("k"), 0)
	if got := keyspace.Digest(v); got != want {
		t.Fatalf("after restart the filter's digest is %s, was %s", got, want)
	}
	for _, it := range acked {
		if !v.Bloom().Test([]byte(it)) {
			t.Fatalf("acknowledged item %s is gone after restart", it)
		}
	}
}

// TestRestoreRefusesDamagedSnapshot: a snapshot stream with one byte
// changed on its way from the leader's store to a follower's (after
// Raft's CRC of the one and before the other's) is refused by Restore:
// an error, the keyspace and the image as they were, no disk fault, the
// stored copy removed once closed. The same stream undamaged then
// installs the leader's state exactly.
func TestRestoreRefusesDamagedSnapshot(t *testing.T) {
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	newMem := func() *fsm {
		store, err := persistence.Open(persistence.Options{Dir: "/img", InMemory: true})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { store.Close() })
		f, err := newFSM(store, quiet)
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
	add := func(f *fsm, index uint64, key string, items ...string) {
		c := &command.Cmd{Op: command.BFAdd, Key: []byte(key), Multi: true, ErrorRate: 0.01, Capacity: 1000, Expansion: 2, MaxBytes: 1 << 20}
		for _, it := range items {
			c.Items = append(c.Items, []byte(it))
		}
		f.Apply(&raft.Log{Index: index, Type: raft.LogCommand, Data: command.EncodeBatch([]*command.Cmd{c})})
	}
	digest := func(f *fsm, key string) string { return keyspace.Digest(f.ks.Load().Lookup(0, []byte(key), 0)) }

	leader, follower := newMem(), newMem()
	var items []string
	for i := range 300 {
		items = append(items, "item"+strconv.Itoa(i))
	}
	add(leader, 1, "k", items...)
	add(follower, 1, "other", "x")
	var faults []error
	follower.onDisk = func(_ fault, err error) {
		if err != nil {
			faults = append(faults, err)
		}
	}
	wantOther, before := digest(follower, "other"), follower.ks.Load()
	// The follower's image holds its state (a flush).
	if err := follower.flush(); err != nil {
		t.Fatal(err)
	}
	imageAt, err := follower.store.Applied()
	if err != nil || imageAt != 1 {
		t.Fatalf("the follower's image is at %d, %v", imageAt, err)
	}

	lstore, err := newSnapshotStore(t.TempDir(), "", func() imageView { return leader.store.NewSnapshot() }, hclog.NewNullLogger())
	if err != nil {
		t.Fatal(err)
	}
	_, rc, err := lstore.Open(takeSnapshot(t, leader, lstore, 1))
	if err != nil {
		t.Fatal(err)
	}
	stream, err := io.ReadAll(rc)
	rc.Close()
	if err != nil {
		t.Fatal(err)
	}

	fstore, err := newSnapshotStore(t.TempDir(), "", nil, hclog.NewNullLogger())
	if err != nil {
		t.Fatal(err)
	}
	// receive stores b as a follower's Raft does, and opens it.
	receive := func(b []byte) (string, io.ReadCloser) {
		id := storeStream(t, fstore, 1, b)
		_, rc, err := fstore.Open(id)
		if err != nil {
			t.Fatal(err) // Raft's own CRC: what was written is what is read
		}
		return id, rc
	}
	r := rand.New(rand.NewPCG(3, 4))
	for round := range 20 {
		damaged := bytes.Clone(stream)
		i := len(damaged) / 2
		if round > 0 {
			i = r.IntN(len(damaged))
		}
		damaged[i] ^= byte(1 + r.IntN(255))
		id, rc := receive(damaged)
		err := follower.Restore(rc)
		if err == nil {
			t.Fatalf("a stream with byte %d of %d changed was installed", i, len(stream))
		}
		if !errors.Is(err, persistence.ErrCorrupt) {
			t.Fatalf("byte %d changed: %v", i, err)
		}
		if round == 0 && !errors.Is(err, persistence.ErrChecksum) {
			t.Fatalf("the middle byte changed: %v, not a checksum mismatch", err)
		}
		if follower.ks.Load() != before || digest(follower, "other") != wantOther || follower.ks.Load().Lookup(0, []byte("k"), 0) != nil {
			t.Fatalf("byte %d changed: the keyspace changed", i)
		}
		if applied, _ := follower.store.Applied(); applied != imageAt || follower.applied.Load() != 1 {
			t.Fatalf("byte %d changed: the image is at %d (was %d), the keyspace at %d", i, applied, imageAt, follower.applied.Load())
		}
		metas, err := fstore.List()
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range metas {
			if m.ID == id {
				t.Fatalf("the refused snapshot %s is still stored", id)
			}
		}
	}
	if len(faults) > 0 {
		t.Fatalf("refused snapshots were reported as disk faults: %v", faults)
	}
	if got := follower.refused.Load(); got != 20 {
		t.Fatalf("refused %d snapshots, want 20", got)
	}

	_, rc = receive(stream)
	if err := follower.Restore(rc); err != nil {
		t.Fatal(err)
	}
	if got, want := digest(follower, "k"), digest(leader, "k"); got != want {
		t.Fatalf("installed digest %s, the leader's %s", got, want)
	}
	if f := follower.ks.Load().Lookup(0, []byte("other"), 0); f != nil {
		t.Fatal("the follower's own key survived the install")
	}
	if follower.installed.Load() != 1 {
		t.Fatalf("installed %d", follower.installed.Load())
	}
}

// newSink starts the snapshot at index in store, as Raft does.
func newSink(t *testing.T, store *snapshotStore, index uint64) raft.SnapshotSink {
	t.Helper()
	_, trans := raft.NewInmemTransport("")
	conf := raft.Configuration{Servers: []raft.Server{{ID: "n1", Address: "a"}}}
	sink, err := store.Create(raft.SnapshotVersionMax, index, 1, conf, 1, trans)
	if err != nil {
		t.Fatal(err)
	}
	return sink
}

// storeStream stores data as the snapshot at index, as a follower's Raft
// stores what a leader sends, and returns its id.
func storeStream(t *testing.T, store *snapshotStore, index uint64, data []byte) string {
	t.Helper()
	sink := newSink(t, store, index)
	if _, err := sink.Write(data); err != nil {
		t.Fatal(err)
	}
	if err := sink.Close(); err != nil {
		t.Fatal(err)
	}
	return sink.ID()
}

// takeSnapshot has f snapshot at index into store, as Raft does, and
// returns the snapshot's id.
func takeSnapshot(t *testing.T, f *fsm, store *snapshotStore, index uint64) string {
	t.Helper()
	snap, err := f.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	sink := newSink(t, store, index)
	if err := snap.Persist(sink); err != nil {
		t.Fatal(err)
	}
	snap.Release()
	return sink.ID()
}

// TestSnapshotRefersToImage: a snapshot the node takes stores a
// reference to its image, not a copy (refMagic alone); opened, it streams
// the image as it is then, at or past the snapshot's index, with the
// size Raft sends ahead of it exact, and a follower installing that
// stream holds the leader's state. A reference the image is behind is
// refused, never streamed; a stream closed early lets its view go.
func TestSnapshotRefersToImage(t *testing.T) {
	add := func(f *fsm, index uint64, key string, n int) {
		c := &command.Cmd{Op: command.BFAdd, Key: []byte(key), Multi: true, ErrorRate: 0.01, Capacity: 1000, Expansion: 2, MaxBytes: 1 << 20}
		for i := range n {
			c.Items = append(c.Items, []byte(key+strconv.Itoa(i)))
		}
		f.Apply(&raft.Log{Index: index, Type: raft.LogCommand, Data: command.EncodeBatch([]*command.Cmd{c})})
	}
	digest := func(f *fsm, key string) string { return keyspace.Digest(f.ks.Load().Lookup(0, []byte(key), 0)) }

	leader := memFSM(t, nil)
	leader.self = "n1"
	views := 0
	base := t.TempDir()
	store, err := newSnapshotStore(base, "n1", func() imageView { views++; return leader.store.NewSnapshot() }, hclog.NewNullLogger())
	if err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		add(leader, uint64(i+1), "k"+strconv.Itoa(i), 500)
	}
	id := takeSnapshot(t, leader, store, 5)
	if b, err := os.ReadFile(filepath.Join(base, "snapshots", id, "state.bin")); err != nil || string(b) != refMagic+"n1" {
		t.Fatalf("stored %q (%v), want the reference alone", b, err)
	}
	// The image moves on past the snapshot before a follower asks for it.
	add(leader, 6, "late", 10)
	if err := leader.flush(); err != nil {
		t.Fatal(err)
	}
	meta, rc, err := store.Open(id)
	if err != nil {
		t.Fatal(err)
	}
	stream, err := io.ReadAll(rc)
	if err != nil {
		t.Fatal(err)
	}
	if err := rc.Close(); err != nil {
		t.Fatal(err)
	}
	if meta.Index != 5 || meta.Size != int64(len(stream)) {
		t.Fatalf("meta index %d size %d, want 5 and the %d bytes streamed", meta.Index, meta.Size, len(stream))
	}
	var want bytes.Buffer
	if err := leader.store.WriteSnapshot(&want); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(stream, want.Bytes()) {
		t.Fatalf("streamed %d bytes, not the image's %d", len(stream), want.Len())
	}
	follower := memFSM(t, nil)
	add(follower, 1, "other", 1)
	if err := follower.Restore(io.NopCloser(bytes.NewReader(stream))); err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"k0", "k4", "late"} {
		if got, want := digest(follower, key), digest(leader, key); got != want {
			t.Fatalf("%s: installed digest %s, the leader's %s", key, got, want)
		}
	}
	if follower.applied.Load() != 6 || follower.persisted != 6 {
		t.Fatalf("installed at %d (persisted %d), want the image's 6: entries it covers are skipped", follower.applied.Load(), follower.persisted)
	}

	// Closed before its end: the writer stops and the view is let go.
	_, rc, err = store.Open(id)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rc.Read(make([]byte, 10)); err != nil {
		t.Fatal(err)
	}
	if err := rc.Close(); err != nil {
		t.Fatal(err)
	}

	// A reference past the image (index 100) is refused.
	store100 := func(b []byte) string { return storeStream(t, store, 100, b) }
	before := views
	if _, _, err := store.Open(store100(reference("n1"))); !errors.Is(err, errImageBehind) {
		t.Fatalf("opening a reference past the image: %v, want errImageBehind", err)
	}
	if views != before+1 {
		t.Fatalf("%d views taken for the refused open", views-before)
	}
	// One naming another node (received from an older build that stored
	// it) is a stream, which an install refuses as damaged.
	_, rc, err = store.Open(store100(reference("n2")))
	if err != nil {
		t.Fatal(err)
	}
	if err := follower.Restore(rc); !errors.Is(err, persistence.ErrCorrupt) {
		t.Fatalf("installing another node's reference: %v, want ErrCorrupt", err)
	}
	if views != before+1 {
		t.Fatal("another node's reference was streamed from this image")
	}
	// A snapshot whose index the image has not reached is not stored as a
	// reference (Persist).
	snap, err := leader.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	if err := snap.Persist(newSink(t, store, 200)); !errors.Is(err, errImageBehind) {
		t.Fatalf("persisting past the image: %v, want errImageBehind", err)
	}
	snap.Release()
}

// TestSnapshotStreamPaced: the snapshot store asks for its stream to be
// written back as it is written (pacedSink), and what it stores reads back
// whole, in small writes or large ones.
func TestSnapshotStreamPaced(t *testing.T) {
	store, err := newSnapshotStore(t.TempDir(), "", nil, hclog.NewNullLogger())
	if err != nil {
		t.Fatal(err)
	}
	data := make([]byte, 6<<20+123)
	r := rand.New(rand.NewPCG(5, 6))
	for i := range data {
		data[i] = byte(r.Uint32())
	}
	for _, piece := range []int{4096, 3 << 20} {
		sink := newSink(t, store, 1)
		p, ok := sink.(*pacedSink)
		if !ok {
			t.Fatalf("the sink is a %T, not paced", sink)
		}
		for b := data; len(b) > 0; {
			n := min(piece, len(b))
			if _, err := sink.Write(b[:n]); err != nil {
				t.Fatal(err)
			}
			b = b[n:]
		}
		if p.synced < int64(len(data))-2<<20-snapshotBytesPerSync {
			t.Fatalf("written back to %d of %d bytes", p.synced, len(data))
		}
		if err := sink.Close(); err != nil {
			t.Fatal(err)
		}
		_, rc, err := store.Open(sink.ID())
		if err != nil {
			t.Fatal(err)
		}
		got, err := io.ReadAll(rc)
		rc.Close()
		if err != nil || !bytes.Equal(got, data) {
			t.Fatalf("read back %d bytes (%v), want the %d written", len(got), err, len(data))
		}
	}
}

// TestSnapshotReap: the store keeps the newest two snapshots and removes
// the older ones itself once a new one is in place (snapshotStore.reap),
// across a reopening too; a snapshot being read when it is reaped is
// unlinked, not shrunk, so its reader still gets every byte.
func TestSnapshotReap(t *testing.T) {
	base := t.TempDir()
	store, err := newSnapshotStore(base, "", nil, hclog.NewNullLogger())
	if err != nil {
		t.Fatal(err)
	}
	_, trans := raft.NewInmemTransport("")
	conf := raft.Configuration{Servers: []raft.Server{{ID: "n1", Address: "a"}}}
	// Large enough to be shrunk were it not being read (package shrink).
	big := bytes.Repeat([]byte("0123456789abcdef"), (shrink.Min+shrink.Step)/16)
	take := func(index uint64, data []byte) string { return storeStream(t, store, index, data) }
	ids := func() []string {
		t.Helper()
		store.wait()
		metas, err := store.List()
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, m := range metas {
			out = append(out, m.ID)
		}
		return out
	}
	first := take(10, big)
	_, rc, err := store.Open(first)
	if err != nil {
		t.Fatal(err)
	}
	second := take(20, []byte("two"))
	third := take(30, []byte("three"))
	if got := ids(); !slices.Equal(got, []string{third, second}) {
		t.Fatalf("snapshots kept %v, want %v", got, []string{third, second})
	}
	got, err := io.ReadAll(rc)
	rc.Close()
	if err != nil || !bytes.Equal(got, big) {
		t.Fatalf("the reaped snapshot's reader got %d of %d bytes (%v)", len(got), len(big), err)
	}
	if _, err := os.Stat(filepath.Join(base, "snapshots", first)); !os.IsNotExist(err) {
		t.Fatalf("the reaped snapshot's directory: %v", err)
	}

	// Snapshots left past the two (an older build's, or a crash between a
	// snapshot and its reap) go when the store is opened.
	raw, err := raft.NewFileSnapshotStoreWithLogger(base, 10, hclog.NewNullLogger())
	if err != nil {
		t.Fatal(err)
	}
	sink, err := raw.Create(raft.SnapshotVersionMax, 5, 1, conf, 1, trans)
	if err != nil {
		t.Fatal(err)
	}
	sink.Write([]byte("old"))
	if err := sink.Close(); err != nil {
		t.Fatal(err)
	}
	if got := ids(); len(got) != 3 {
		t.Fatalf("before reopening: %v", got)
	}
	if store, err = newSnapshotStore(base, "", nil, hclog.NewNullLogger()); err != nil {
		t.Fatal(err)
	}
	if got := ids(); !slices.Equal(got, []string{third, second}) {
		t.Fatalf("reopened: snapshots %v, want %v", got, []string{third, second})
	}
}

// TestConfigurationBelowImage: a membership entry the image already
// covers, delivered again after a start or an install, leaves the voters
// the image recorded; one past it sets them.
func TestConfigurationBelowImage(t *testing.T) {
	store := memStore(t)
	conf := func(ids ...string) raft.Configuration {
		var c raft.Configuration
		for _, id := range ids {
			c.Servers = append(c.Servers, raft.Server{ID: raft.ServerID(id), Address: raft.ServerAddress(id), Suffrage: raft.Voter})
		}
		return c
	}
	voters := func(f *fsm) []string {
		f.mu.Lock()
		defer f.mu.Unlock()
		return slices.Clone(f.voters)
	}
	a := memFSM(t, store)
	a.StoreConfiguration(1, conf("n1"))
	a.StoreConfiguration(2, conf("n1", "n2", "n3"))
	c := &command.Cmd{Op: command.Set, Key: []byte("k"), Data: []byte("v")}
	a.Apply(&raft.Log{Index: 3, Type: raft.LogCommand, Data: command.EncodeBatch([]*command.Cmd{c})})
	if err := a.flush(); err != nil {
		t.Fatal(err)
	}
	b := memFSM(t, store) // a start: the image is at 3
	b.StoreConfiguration(1, conf("n1"))
	if got := voters(b); !slices.Equal(got, []string{"n1", "n2", "n3"}) {
		t.Fatalf("after an entry the image covers: voters %v, want the image's", got)
	}
	b.StoreConfiguration(4, conf("n1", "n2"))
	if got := voters(b); !slices.Equal(got, []string{"n1", "n2"}) {
		t.Fatalf("after an entry past the image: voters %v", got)
	}
}
