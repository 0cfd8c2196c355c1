package replication

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bfserver/bfserver/command"
	"github.com/bfserver/bfserver/keyspace"
	"github.com/hashicorp/raft"
)

func freeAddr(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// TestNoReadBeforeReadiness: a node that Raft already reports as leader
// serves no linearizable read until an entry of its own term committed.
// The generations start apart so the very first term is covered too.
func TestNoReadBeforeReadiness(t *testing.T) {
	n, err := Open(Options{RaftAddr: freeAddr(t), RESPAddr: "127.0.0.1:1", DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	if n.readyGen.Load() == n.leaderGen.Load() {
		t.Fatal("a fresh node counts as ready")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// Once ready, writes and reads work, and the read sees the write.
	res, err := n.Write(ctx, []*command.Cmd{{Op: command.BFAdd, Key: []byte("k"), Items: [][]byte{[]byte("x")}, ErrorRate: 0.01, Capacity: 100, Expansion: 2, MaxBytes: 1 << 20}})
	if err != nil || res[0].Ints[0] != 1 {
		t.Fatalf("write: %v %+v", err, res)
	}
	if _, err := n.Barrier(ctx, false); err != nil {
		t.Fatal(err)
	}
	if r := n.State().Read(&command.Cmd{Op: command.BFExists, Key: []byte("k"), Items: [][]byte{[]byte("x")}}); r.Ints[0] != 1 {
		t.Fatal("read after write missed it")
	}
}

// TestCommittedOutOfRange: a commit notice is taken only for entries this
// node holds, or receives while it waits, and only from the leader; one
// beyond its log is refused and changes nothing.
func TestCommittedOutOfRange(t *testing.T) {
	n, err := Open(Options{RaftAddr: freeAddr(t), RESPAddr: "127.0.0.1:1", DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	if err := n.Committed(^uint64(0)); err == nil || n.told.Load() != 0 {
		t.Fatalf("index 2^64-1 accepted: %v, told %d", err, n.told.Load())
	}
	if err := n.Committed(n.raft.LastIndex() + 1_000_000); err == nil || n.told.Load() != 0 {
		t.Fatalf("an index a million past the log accepted: %v, told %d", err, n.told.Load())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := n.Barrier(ctx, false); err != nil {
		t.Fatal(err)
	}
	last := n.raft.LastIndex()
	if err := n.Committed(last); err != nil || n.told.Load() != last {
		t.Fatalf("index %d, in the log, refused: %v, told %d", last, err, n.told.Load())
	}
	// The next entry, told of while it is being appended, is waited for.
	done := make(chan error, 1)
	go func() { done <- n.Committed(last + 1) }()
	if _, err := n.Write(ctx, []*command.Cmd{{Op: command.BFAdd, Key: []byte("k"), Items: [][]byte{[]byte("x")}, ErrorRate: 0.01, Capacity: 100, Expansion: 2, MaxBytes: 1 << 20}}); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil || n.told.Load() != last+1 {
		t.Fatalf("index %d, appended while told, refused: %v, told %d", last+1, err, n.told.Load())
	}
	if err := n.committedFrom("not-the-leader", last+1); err == nil {
		t.Fatal("a commit notice from a node that does not lead was taken")
	}
}

// TestCoalescerFreshIndex: every caller gets an index obtained after it
// asked, while concurrent callers share rounds.
func TestCoalescerFreshIndex(t *testing.T) {
	var commit, calls atomic.Uint64
	c := newCoalescer(func(context.Context) (uint64, error) {
		calls.Add(1)
		time.Sleep(time.Millisecond) // a round takes a while, like a heartbeat
		return commit.Load(), nil
	})
	var wg sync.WaitGroup
	for g := 0; g < 50; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 100; i++ {
				v := commit.Add(1)
				idx, err := c.do(context.Background())
				if err != nil || idx < v {
					t.Errorf("index %d for a read issued at %d", idx, v)
					return
				}
			}
		}()
	}
	wg.Wait()
	if n := calls.Load(); n >= 5000 {
		t.Fatalf("%d rounds for 5000 reads: nothing shared", n)
	}
	t.Logf("%d rounds for 5000 reads", calls.Load())
}

// TestReadIndexSkipsEmptyEntries: entries that carry no command (lease
// renewals, a new leader's first entry) do not make reads wait, and an
// entry that does carry one does.
func TestReadIndexSkipsEmptyEntries(t *testing.T) {
	n, err := Open(Options{RaftAddr: freeAddr(t), RESPAddr: "127.0.0.1:1", DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := n.Barrier(ctx, false); err != nil { // waits for leadership
		t.Fatal(err)
	}
	add := &command.Cmd{Op: command.BFAdd, Key: []byte("k"), Items: [][]byte{[]byte("x")}, ErrorRate: 0.01, Capacity: 100, Expansion: 2, MaxBytes: 1 << 20}
	written, _, err := n.propose(ctx, []*command.Cmd{add})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		if _, _, err := n.propose(ctx, nil); err != nil {
			t.Fatal(err)
		}
	}
	commit := n.raft.CommitIndex()
	if commit <= written {
		t.Fatalf("commit index %d not past the write at %d", commit, written)
	}
	if got := n.fsm.readIndex(commit); got != written {
		t.Fatalf("read index %d for commit %d, want the write's %d", got, commit, written)
	}
	again, _, err := n.propose(ctx, []*command.Cmd{add})
	if err != nil {
		t.Fatal(err)
	}
	if got := n.fsm.readIndex(n.raft.CommitIndex()); got != again {
		t.Fatalf("read index %d, want the latest write's %d", got, again)
	}
	// Not yet applied up to the commit index: the commit index itself.
	if got := n.fsm.readIndex(again + 100); got != again+100 {
		t.Fatalf("read index %d for an index not applied yet", got)
	}
}

// crash stops a node as kill -9 would leave its data: no last flush.
func crash(n *Node) {
	n.shutOnce.Do(func() {
		close(n.stop)
		n.cancel()
		n.raft.Shutdown().Error()
		n.wg.Wait()
		n.peers.close()
		n.trans.Close()
		n.closeStores()
	})
}

// TestSoleVoterServesBeforeElection: a lone voter restarted after a crash
// replays its log's tail before Raft starts and serves linearizable reads
// of it at once, before its election (everything it could have committed
// is in its own log); CF.ADD is not applied twice once Raft applies the
// same entries.
func TestSoleVoterServesBeforeElection(t *testing.T) {
	dir := t.TempDir()
	opts := Options{RaftAddr: freeAddr(t), RESPAddr: "127.0.0.1:1", DataDir: dir, FlushInterval: time.Hour, noCampaign: true}
	n, err := Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cf := func(item string) []*command.Cmd {
		return []*command.Cmd{{Op: command.CFAdd, Key: []byte("c"), Items: [][]byte{[]byte(item)}, Capacity: 1024, BucketSize: 2, MaxIterations: 20, Expansion: 1, MaxExpansions: 32, MaxBytes: 1 << 20}}
	}
	for !n.IsLeader() {
		if err := n.waitLeaderChange(ctx); err != nil && ctx.Err() != nil {
			t.Fatal(err)
		}
	}
	if _, err := n.Write(ctx, cf("before")); err != nil {
		t.Fatal(err)
	}
	if err := n.fsm.flush(); err != nil { // the image knows the voters now
		t.Fatal(err)
	}
	for i := 0; i < 50; i++ {
		if _, err := n.Write(ctx, cf(fmt.Sprint("tail", i))); err != nil {
			t.Fatal(err)
		}
	}
	crash(n)
	n, err = Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	if _, err := n.Barrier(ctx, false); err != nil {
		t.Fatal(err)
	}
	if n.IsLeader() {
		t.Fatal("elected already: the test shows nothing (heartbeat timeout 500ms)")
	}
	info := func() uint64 {
		return n.State().Read(&command.Cmd{Op: command.CFInfo, Key: []byte("c")}).CF().NumItems
	}
	if got := info(); got != 51 {
		t.Fatalf("before the election the node holds %d items, want 51", got)
	}
	// Once Raft leads and applies the same entries, nothing is added twice.
	for !n.IsLeader() || n.readyGen.Load() != n.leaderGen.Load() {
		if err := n.waitLeaderChange(ctx); err != nil && ctx.Err() != nil {
			t.Fatal(err)
		}
	}
	if _, err := n.Write(ctx, cf("after")); err != nil {
		t.Fatal(err)
	}
	if got := info(); got != 52 {
		t.Fatalf("after the election %d items, want 52", got)
	}
}

// TestSoleVoterElectsAtOnce: a lone voter stands for election as it
// starts, fresh and after a crash, rather than after its heartbeat
// timeout: with a timeout of a minute, it leads and takes writes within
// the test's 20 seconds.
func TestSoleVoterElectsAtOnce(t *testing.T) {
	opts := Options{RaftAddr: freeAddr(t), RESPAddr: "127.0.0.1:1", DataDir: t.TempDir(), FlushInterval: time.Hour,
		HeartbeatTimeout: time.Minute, ElectionTimeout: time.Minute}
	add := []*command.Cmd{{Op: command.BFAdd, Key: []byte("b"), Items: [][]byte{[]byte("x")}, Capacity: 100, ErrorRate: 0.01, Expansion: 2, MaxBytes: 1 << 20}}
	for _, start := range []string{"fresh", "restarted"} {
		n, err := Open(opts)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		for !n.IsLeader() {
			if err := n.waitLeaderChange(ctx); err != nil && ctx.Err() != nil {
				crash(n)
				t.Fatalf("%s: not leader after 20s, with a heartbeat timeout of a minute: %v", start, err)
			}
		}
		if _, err := n.Write(ctx, add); err != nil {
			t.Fatalf("%s: %v", start, err)
		}
		if !n.WritesLocally() {
			t.Fatalf("%s: a lone voter leading says its writes wait on others", start)
		}
		cancel()
		crash(n)
	}
}

// TestWritesLocally: only a leader whose configuration is itself alone
// writes without waiting on another node (a non-voter may hold a read
// lease that each write waits on).
func TestWritesLocally(t *testing.T) {
	n, err := Open(Options{RaftAddr: freeAddr(t), RESPAddr: "127.0.0.1:1", DataDir: t.TempDir(), FlushInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for !n.IsLeader() {
		if err := n.waitLeaderChange(ctx); err != nil && ctx.Err() != nil {
			t.Fatal(err)
		}
	}
	self := raft.Server{ID: raft.ServerID(n.opts.NodeID), Suffrage: raft.Voter}
	for _, c := range []struct {
		servers []raft.Server
		want    bool
	}{
		{[]raft.Server{self}, true},
		{[]raft.Server{self, {ID: "b", Suffrage: raft.Nonvoter}}, false},
		{[]raft.Server{self, {ID: "b", Suffrage: raft.Voter}}, false},
		{[]raft.Server{self}, true},
	} {
		n.configured(raft.Configuration{Servers: c.servers})
		if got := n.WritesLocally(); got != c.want {
			t.Errorf("WritesLocally with %v = %v, want %v", c.servers, got, c.want)
		}
	}
}

// TestSoleVoter: only a configuration whose one voter is the node lets
// it stand at once (campaign).
func TestSoleVoter(t *testing.T) {
	v := func(id string) raft.Server { return raft.Server{ID: raft.ServerID(id), Suffrage: raft.Voter} }
	nv := func(id string) raft.Server { return raft.Server{ID: raft.ServerID(id), Suffrage: raft.Nonvoter} }
	for _, c := range []struct {
		servers []raft.Server
		want    bool
	}{
		{nil, false},
		{[]raft.Server{v("a")}, true},
		{[]raft.Server{v("a"), nv("b")}, true},
		{[]raft.Server{v("b")}, false},
		{[]raft.Server{nv("a"), v("b")}, false},
		{[]raft.Server{v("a"), v("b")}, false},
		{[]raft.Server{v("a"), v("b"), v("c")}, false},
	} {
		if got := soleVoter(raft.Configuration{Servers: c.servers}, "a"); got != c.want {
			t.Errorf("soleVoter(%v, a) = %v, want %v", c.servers, got, c.want)
		}
	}
}

// TestForwardLowersTheCap: a write forwarded with a per-filter cap above
// the leader's is applied under the leader's (a follower on a bigger
// machine has a bigger default cap): a filter that fits the leader's cap is
// created, one that does not is refused as too large, not the whole write.
func TestForwardLowersTheCap(t *testing.T) {
	n, err := Open(Options{RaftAddr: freeAddr(t), RESPAddr: "127.0.0.1:1", DataDir: t.TempDir(), MaxFilterBytes: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for !n.IsLeader() || n.readyGen.Load() != n.leaderGen.Load() {
		if err := n.waitLeaderChange(ctx); err != nil && ctx.Err() != nil {
			t.Fatal(err)
		}
	}
	reserve := func(key string, capacity uint64) *command.Cmd {
		return &command.Cmd{Op: command.BFReserve, Key: []byte(key), ErrorRate: 0.01, Capacity: capacity, Expansion: 2, MaxBytes: 1 << 30}
	}
	// 1,000 items: 1.2 KB; 10 million: 12 MB, over the leader's 1 MiB.
	_, out, err := n.Forward(ctx, command.EncodeBatch([]*command.Cmd{reserve("small", 1000), reserve("big", 10_000_000)}))
	if err != nil {
		t.Fatalf("forward: %v", err)
	}
	res, err := keyspace.DecodeResults(out)
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != 2 || res[0].Err != nil || res[1].Err != keyspace.ErrTooLarge {
		t.Fatalf("results %+v, want the small filter created and the big one too large", res)
	}
}

// TestSnapshotAfterBulkLoad: a burst of large entries, more than an eighth
// of SnapshotLogBytes but far fewer entries than the snapshot threshold, is
// followed by a snapshot once the log goes quiet, so the next start does
// not decode them all again.
func TestSnapshotAfterBulkLoad(t *testing.T) {
	opts := Options{RaftAddr: freeAddr(t), RESPAddr: "127.0.0.1:1", DataDir: t.TempDir(), FlushInterval: time.Hour,
		SnapshotLogBytes: 64 << 20}
	n, ctx := openLeader(t, opts)
	snapshots := func() string { return n.raft.Stats()["last_snapshot_index"] }
	before := snapshots()
	val := make([]byte, 1<<20)
	for i := 0; i < 10; i++ { // 10 MiB in ten entries: more than 64 MiB / 8
		if _, err := n.Write(ctx, []*command.Cmd{{Op: command.Set, Key: []byte(fmt.Sprint("k", i)), Data: val}}); err != nil {
			t.Fatal(err)
		}
	}
	for snapshots() == before {
		if ctx.Err() != nil {
			t.Fatalf("no snapshot after a 10 MiB burst (last_snapshot_index %s)", snapshots())
		}
		time.Sleep(50 * time.Millisecond) // polling Raft's stats
	}
	if got := n.fsm.logged.Load(); got > 1<<20 {
		t.Fatalf("%d bytes still counted after the snapshot", got)
	}
}

// TestSnapshotByCost: a follower that needs a snapshot is streamed the
// whole image (snapshotDue), so entries past the snapshot threshold are not enough while they hold less than a
// sixteenth of the filters' bytes; once they do, the node snapshots.
func TestSnapshotByCost(t *testing.T) {
	opts := Options{RaftAddr: freeAddr(t), RESPAddr: "127.0.0.1:1", DataDir: t.TempDir(), FlushInterval: time.Hour,
		SnapshotThreshold: 20, SnapshotLogBytes: 1 << 40}
	n, ctx := openLeader(t, opts)
	// A 32 MiB filter: a snapshot is due after 2 MiB of log.
	if _, err := n.Write(ctx, []*command.Cmd{{Op: command.BFReserve, Key: []byte("big"), ErrorRate: 0.01, Capacity: 28_000_000, Expansion: 2, NonScaling: true, MaxBytes: 1 << 30}}); err != nil {
		t.Fatal(err)
	}
	if b := n.fsm.ks.Load().Bytes(); b < 30<<20 {
		t.Fatalf("filter of %d bytes", b)
	}
	snapshots := func() string { return n.raft.Stats()["last_snapshot_index"] }
	before := snapshots()
	for i := range 100 {
		if _, err := n.Write(ctx, []*command.Cmd{{Op: command.BFAdd, Key: []byte("big"), Items: [][]byte{[]byte(fmt.Sprint("item", i))}, ErrorRate: 0.01, Capacity: 100, Expansion: 2, MaxBytes: 1 << 30}}); err != nil {
			t.Fatal(err)
		}
	}
	if e := n.fsm.entries.Load(); e < 100 {
		t.Fatalf("%d entries counted since the snapshot", e)
	}
	if n.snapshotDue() || snapshots() != before {
		t.Fatalf("a snapshot after %d bytes of log for a %d-byte image", n.fsm.logged.Load(), n.fsm.ks.Load().Bytes())
	}
	val := make([]byte, 1<<20)
	for i := range 3 {
		if _, err := n.Write(ctx, []*command.Cmd{{Op: command.Set, Key: []byte(fmt.Sprint("k", i)), Data: val}}); err != nil {
			t.Fatal(err)
		}
	}
	for snapshots() == before {
		if ctx.Err() != nil {
			t.Fatalf("no snapshot after %d bytes of log", n.fsm.logged.Load())
		}
		time.Sleep(50 * time.Millisecond) // polling Raft's stats
	}
}

// openLeader opens a lone node, closed at the test's end, and waits until
// it leads; ctx ends 30 s on.
func openLeader(t *testing.T, opts Options) (*Node, context.Context) {
	t.Helper()
	n, err := Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	for !n.IsLeader() {
		if err := n.waitLeaderChange(ctx); err != nil && ctx.Err() != nil {
			t.Fatal(err)
		}
	}
	return n, ctx
}

// TestTrailingLogBytes: a snapshot after large entries leaves no more of
// them behind it than TrailingLogBytes holds, however many TrailingLogs
// allows; after small ones, TrailingLogs decides. It fails if every
// snapshot kept TrailingLogs entries (a bulk load's gigabyte in raft.db).
func TestTrailingLogBytes(t *testing.T) {
	opts := Options{RaftAddr: freeAddr(t), RESPAddr: "127.0.0.1:1", DataDir: t.TempDir(), FlushInterval: time.Hour,
		SnapshotThreshold: 1 << 40, SnapshotLogBytes: 1 << 40, TrailingLogs: 10240, TrailingLogBytes: 1 << 20}
	n, ctx := openLeader(t, opts)
	kept := func() uint64 {
		first, err := n.logs.FirstIndex()
		if err != nil {
			t.Fatal(err)
		}
		last, err := n.logs.LastIndex()
		if err != nil {
			t.Fatal(err)
		}
		return last - first + 1
	}
	val := make([]byte, 256<<10)
	for i := range 40 {
		if _, err := n.Write(ctx, []*command.Cmd{{Op: command.Set, Key: []byte(fmt.Sprint("k", i)), Data: val}}); err != nil {
			t.Fatal(err)
		}
	}
	if k := kept(); k < 40 {
		t.Fatalf("%d entries in the log before the snapshot", k)
	}
	if err := n.Snapshot(ctx); err != nil {
		t.Fatal(err)
	}
	// 1 MiB at about 256 KiB an entry: four, give or take the entries'
	// framing and the leader's first entries in the average.
	if k := kept(); k > 5 {
		t.Fatalf("%d entries of about 256 KiB kept after the snapshot, TrailingLogBytes 1 MiB", k)
	}
	for i := range 50 {
		if _, err := n.Write(ctx, []*command.Cmd{{Op: command.Set, Key: []byte(fmt.Sprint("s", i)), Data: []byte("v")}}); err != nil {
			t.Fatal(err)
		}
	}
	if err := n.Snapshot(ctx); err != nil {
		t.Fatal(err)
	}
	if k := kept(); k < 50 {
		t.Fatalf("%d small entries kept after the snapshot, TrailingLogs 10240", k)
	}
}

// TestAdoptNodeID: a data directory's recorded id replaces the default,
// refuses another given one, and a file that holds no id (empty, or longer
// than any id) is an error, read no further than that.
func TestAdoptNodeID(t *testing.T) {
	dir := t.TempDir()
	o := Options{RaftAddr: "127.0.0.1:1", RESPAddr: "127.0.0.1:2", DataDir: dir}
	if err := o.Validate(); err != nil {
		t.Fatal(err)
	}
	if err := adoptNodeID(&o); err != nil || o.NodeID != "127.0.0.1:1" {
		t.Fatalf("no record: id %q, %v", o.NodeID, err)
	}
	if err := recordNodeID(dir, "n1"); err != nil {
		t.Fatal(err)
	}
	if err := recordNodeID(dir, "n2"); err != nil { // kept: the first record stays
		t.Fatal(err)
	}
	if err := adoptNodeID(&o); err != nil || o.NodeID != "n1" {
		t.Fatalf("default id: %q, %v; want the record n1", o.NodeID, err)
	}
	given := Options{RaftAddr: "127.0.0.1:1", RESPAddr: "127.0.0.1:2", DataDir: dir, NodeID: "n2"}
	if err := given.Validate(); err != nil {
		t.Fatal(err)
	}
	if err := adoptNodeID(&given); !errors.Is(err, ErrNodeID) {
		t.Fatalf("another id given: %v, want ErrNodeID", err)
	}
	for _, body := range []string{"", "\n", strings.Repeat("x", maxNodeID+1)} {
		if err := os.WriteFile(filepath.Join(dir, nodeIDFile), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := adoptNodeID(&o); err == nil {
			t.Fatalf("a record of %d bytes was taken as id %q", len(body), o.NodeID)
		}
	}
}

// TestWritesReturnAtClose: writers going on while the node closes all
// return soon after Close, whether their proposals were taken or still
// queued when the batcher stopped (those were never answered: each
// waited out its WriteTimeout, twice).
func TestWritesReturnAtClose(t *testing.T) {
	opts := Options{RaftAddr: freeAddr(t), RESPAddr: "127.0.0.1:1", DataDir: t.TempDir(), WriteTimeout: time.Minute}
	n, ctx := openLeader(t, opts)
	var acked atomic.Int64
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				cmd := &command.Cmd{Op: command.BFAdd, Key: []byte("z"), Items: [][]byte{[]byte(fmt.Sprint(g, ":", i))}, ErrorRate: 0.01, Capacity: 1000, Expansion: 2, MaxBytes: 1 << 20}
				if _, err := n.Write(ctx, []*command.Cmd{cmd}); err != nil {
					return
				}
				acked.Add(1)
			}
		}()
	}
	for deadline := time.Now().Add(10 * time.Second); acked.Load() < 200; {
		if time.Now().After(deadline) {
			t.Fatalf("only %d writes acknowledged", acked.Load())
		}
		runtime.Gosched()
	}
	closed := make(chan error, 1)
	go func() { closed <- n.Close() }()
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("writers had not returned 10 s after Close")
	}
	<-closed
}
