package replication

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/bfserver/bfserver/command"
	"github.com/bfserver/bfserver/keyspace"
	"github.com/bfserver/bfserver/persistence"
	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	"go.etcd.io/bbolt"
)

// Fsync policies for the Raft log, like Redis's appendfsync.
const (
	FsyncAlways   = "always"   // fsync before a write is acknowledged
	FsyncEverySec = "everysec" // fsync once a second: a crash of the machine may lose up to a second
	FsyncNo       = "no"       // leave it to the OS
)

// Options configure a Node. Zero values take the documented defaults.
type Options struct {
	// NodeID names this member. Default: RaftAddr.
	NodeID string
	// RaftAddr is the address Raft listens on and advertises. Required.
	RaftAddr string
	// RESPAddr is this node's client address, told to peers so they can
	// forward writes here. Required.
	RESPAddr string
	// DataDir holds the Raft log, snapshots and the Pebble image. Required.
	DataDir string
	// Join is the RESP address of any member to join through when this node
	// is not in a cluster yet. Empty: a new node bootstraps a cluster of one.
	Join string
	// Password authenticates RESP connections to peers (their requirepass).
	Password string
	// Fsync is the log's durability policy. Default FsyncAlways.
	Fsync string
	// FlushInterval is how often changed chunks are written to the image.
	// Longer means less rewriting of hot chunks, and more log to replay at
	// start-up. Default 30s.
	FlushInterval time.Duration
	// SnapshotThreshold is the number of log entries after which a snapshot
	// lets the log be truncated. Default 8192.
	SnapshotThreshold uint64
	// TrailingLogs is how many entries stay after a snapshot, so a briefly
	// absent follower catches up from the log. Default 10240.
	TrailingLogs uint64
	// SnapshotLogBytes also triggers a snapshot once this many bytes were
	// logged since the last one: a few large entries (LOADCHUNK, RESTORE)
	// must not leave gigabytes to replay at start-up. A clean shutdown
	// snapshots too when more than a tenth of it is pending. Default 512 MiB.
	SnapshotLogBytes uint64
	// HeartbeatTimeout and ElectionTimeout tune failure detection.
	// Default 500ms each.
	HeartbeatTimeout, ElectionTimeout time.Duration
	// NoReadLease makes every linearizable read round confirm leadership
	// with a heartbeat quorum. By default the leader also holds a lease:
	// an empty entry it proposed at time t has committed, so a quorum
	// heard from it after t and refuses other candidates until a full
	// HeartbeatTimeout passes without it; until t + HeartbeatTimeout/2 no
	// other node can have been elected, and the leader serves reads at its
	// commit index without a round. The lease trusts the nodes' clocks to
	// run at the same rate, to well within a factor of two. Default false:
	// leases on.
	NoReadLease bool
	// NoFollowerLease keeps followers from holding read leases (see
	// readlease.go): each batch of a follower's linearizable reads then
	// asks the leader for its read index. With leases, a follower serving
	// linearizable reads reads locally, and every write's reply waits
	// until the leader has told such followers it committed. Default
	// false: leases on (with NoReadLease, off).
	NoFollowerLease bool
	// TLS, if set, makes Raft and forwarded traffic mutual TLS: only nodes
	// with a certificate from the cluster's CA may take part.
	TLS *TLS
	// MaxFilterBytes caps forwarded commands the way the RESP layer caps
	// local ones. Default 512 MiB.
	MaxFilterBytes uint64
	// Logger receives events; Raft's own logs are routed through it.
	// Default slog.Default().
	Logger *slog.Logger
}

func (o *Options) ensureDefaults() error {
	if o.RaftAddr == "" || o.RESPAddr == "" || o.DataDir == "" {
		return errors.New("replication: RaftAddr, RESPAddr and DataDir are required")
	}
	if o.NodeID == "" {
		o.NodeID = o.RaftAddr
	}
	switch o.Fsync {
	case "":
		o.Fsync = FsyncAlways
	case FsyncAlways, FsyncEverySec, FsyncNo:
	default:
		return fmt.Errorf("replication: fsync must be always, everysec or no, not %q", o.Fsync)
	}
	if o.FlushInterval <= 0 {
		o.FlushInterval = 30 * time.Second
	}
	if o.SnapshotThreshold == 0 {
		o.SnapshotThreshold = 8192
	}
	if o.TrailingLogs == 0 {
		o.TrailingLogs = 10240
	}
	if o.SnapshotLogBytes == 0 {
		o.SnapshotLogBytes = 512 << 20
	}
	if o.HeartbeatTimeout <= 0 {
		o.HeartbeatTimeout = 500 * time.Millisecond
	}
	if o.ElectionTimeout <= 0 {
		o.ElectionTimeout = 500 * time.Millisecond
	}
	if o.MaxFilterBytes == 0 {
		o.MaxFilterBytes = 512 << 20
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return nil
}

// Node is one member of the cluster. It implements resp.Backend and
// resp.Cluster.
type Node struct {
	opts      Options
	raft      *raft.Raft
	fsm       *fsm
	store     *persistence.Store
	logs      *raftboltdb.BoltStore
	logged    *loggedStore // logs, as Raft sees it
	trans     *raft.NetworkTransport
	snaps     *raft.FileSnapshotStore
	peers     *peerPool
	proposals chan *proposal
	nudges    chan struct{} // see nudge
	reads     *coalescer
	log       *slog.Logger

	// readyGen is the leadership generation whose barrier has committed: a
	// new leader serves reads only after an entry of its own term commits.
	leaderGen atomic.Uint64
	readyGen  atomic.Uint64
	// logBytes counts bytes proposed since the last snapshot this node
	// asked for; snapping guards against asking twice at once.
	logBytes atomic.Uint64
	snapping atomic.Bool
	// lease is the latest confirmation of leadership (see NoReadLease);
	// renewing guards against renewing it twice at once. rounds counts
	// heartbeat rounds run to confirm leadership, and renewals the entries
	// committed to renew the lease, for INFO.
	lease    atomic.Pointer[lease]
	renewing atomic.Bool
	rounds   atomic.Uint64
	renewals atomic.Uint64
	// holders are the followers holding read leases from this leader;
	// flease is the lease this node holds as a follower, told the latest
	// index its leader said was committed, lastRead when its latest
	// linearizable read arrived (Unix ns), leaseWake wakes leaseLoop after
	// a pause in reads, leaseAsks counts its requests.
	holders   *holders
	flease    atomic.Pointer[followerLease]
	told      atomic.Uint64
	lastRead  atomic.Int64
	leaseWake chan struct{}
	leaseAsks atomic.Uint64
	readRPCs  atomic.Uint64 // read-index requests sent to the leader
	// voters is the number of voters in the latest known configuration.
	// A leader that is the only voter cannot be deposed behind its back,
	// so its reads need no heartbeat round.
	voters atomic.Int64

	stop     chan struct{}
	wg       sync.WaitGroup
	shutOnce sync.Once
}

// Open starts a node: it loads the stored image, recovers a newer snapshot
// if a crash left one unapplied, and starts Raft.
func Open(opts Options) (*Node, error) {
	if err := opts.ensureDefaults(); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(opts.DataDir, 0o755); err != nil {
		return nil, err
	}
	n := &Node{opts: opts, log: opts.Logger, proposals: make(chan *proposal, 1024), stop: make(chan struct{})}
	// Generations start apart: Raft may report this node as leader a moment
	// before the notification that starts its readiness entry arrives.
	n.leaderGen.Store(1)
	n.peers = newPeerPool(opts.Password, dialFrom(opts.RaftAddr), opts.TLS)
	n.reads = newCoalescer(n.readIndexRound)
	n.holders, n.leaseWake, n.nudges = newHolders(n.tell), make(chan struct{}, 1), make(chan struct{}, 1)
	var err error
	if n.store, err = persistence.Open(persistence.Options{Dir: filepath.Join(opts.DataDir, "image"), Logger: opts.Logger}); err != nil {
		return nil, err
	}
	if n.fsm, err = newFSM(n.store); err != nil {
		n.store.Close()
		return nil, err
	}
	if err := n.startRaft(); err != nil {
		n.closeStores()
		return nil, err
	}
	n.wg.Add(3)
	go n.batcher()
	go n.background()
	go n.leaseLoop()
	if opts.Join != "" {
		n.wg.Add(1)
		go n.joinLoop()
	}
	return n, nil
}

// openLogStore opens the Raft log and stable store in dir. The freelist
// is rebuilt on open instead of written on every commit: with a log of
// many pages, writing it made each commit slow.
func openLogStore(dir string, sync bool) (*raftboltdb.BoltStore, error) {
	return raftboltdb.New(raftboltdb.Options{
		Path: filepath.Join(dir, "raft.db"), NoSync: !sync,
		BoltOptions: &bbolt.Options{Timeout: 5 * time.Second, NoFreelistSync: true, FreelistType: bbolt.FreelistMapType},
	})
}

func (n *Node) startRaft() error {
	o := n.opts
	hl := hclog.New(&hclog.LoggerOptions{Name: "raft", Level: hclog.Warn, Output: slogWriter{n.log}})
	var err error
	n.logs, err = openLogStore(o.DataDir, o.Fsync == FsyncAlways)
	if err != nil {
		return err
	}
	// Whatever the policy, the log is synced before the image moves past it.
	n.fsm.syncLog = n.logs.Sync
	n.fsm.onConfig = n.countVoters
	if n.snaps, err = raft.NewFileSnapshotStoreWithLogger(filepath.Join(o.DataDir, "snapshots"), 2, hl); err != nil {
		return err
	}
	// A crash between storing a received snapshot and installing it leaves
	// the image behind the snapshot: install it now, before the log replays.
	if metas, err := n.snaps.List(); err == nil && len(metas) > 0 && metas[0].Index > n.fsm.applied.Load() {
		_, rc, err := n.snaps.Open(metas[0].ID)
		if err != nil {
			return err
		}
		if err := n.fsm.Restore(rc); err != nil {
			return fmt.Errorf("installing snapshot %s: %w", metas[0].ID, err)
		}
	}
	stream, err := newStreamLayer(o.RaftAddr, o.TLS)
	if err != nil {
		return err
	}
	n.trans = raft.NewNetworkTransportWithLogger(stream, 4, 10*time.Second, hl)
	notify := make(chan bool, 16)
	cfg := raft.DefaultConfig()
	cfg.LocalID = raft.ServerID(o.NodeID)
	cfg.Logger = hl
	cfg.NotifyCh = notify
	cfg.NoSnapshotRestoreOnStart = true
	cfg.SnapshotThreshold = o.SnapshotThreshold
	cfg.TrailingLogs = o.TrailingLogs
	cfg.SnapshotInterval = 30 * time.Second
	cfg.HeartbeatTimeout = o.HeartbeatTimeout
	cfg.ElectionTimeout = o.ElectionTimeout
	cfg.LeaderLeaseTimeout = o.HeartbeatTimeout / 2
	cfg.CommitTimeout = 5 * time.Millisecond
	cfg.MaxAppendEntries = 256
	cfg.BatchApplyCh = true
	existing, err := raft.HasExistingState(n.logs, n.logs, n.snaps)
	if err != nil {
		return err
	}
	n.logged = newLoggedStore(n.logs)
	if n.raft, err = raft.NewRaft(cfg, n.fsm, n.logged, n.logs, n.snaps, n.trans); err != nil {
		return err
	}
	if !existing && o.Join == "" {
		boot := raft.Configuration{Servers: []raft.Server{{ID: cfg.LocalID, Address: n.trans.LocalAddr()}}}
		if err := n.raft.BootstrapCluster(boot).Error(); err != nil && !errors.Is(err, raft.ErrCantBootstrap) {
			return err
		}
	}
	n.wg.Add(1)
	go n.watchLeadership(notify)
	return nil
}

// watchLeadership marks a new leader ready for reads once an entry of its
// own term has committed (an empty command: Raft's own barrier and no-op
// entries never reach the state machine, so reads could not wait on their
// indexes), and records this node's RESP address.
func (n *Node) watchLeadership(notify <-chan bool) {
	defer n.wg.Done()
	for {
		select {
		case <-n.stop:
			return
		case leader := <-notify:
			gen := n.leaderGen.Add(1)
			if !leader {
				continue
			}
			if f := n.raft.GetConfiguration(); f.Error() == nil {
				n.countVoters(f.Configuration())
			}
			go func() {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				var cmds []*command.Cmd
				if n.fsm.memberAddr(n.opts.NodeID) != n.opts.RESPAddr {
					cmds = append(cmds, &command.Cmd{Op: command.SetMember, Key: []byte(n.opts.NodeID), Data: []byte(n.opts.RESPAddr)})
				}
				if _, _, err := n.propose(ctx, cmds); err != nil {
					return
				}
				if n.leaderGen.Load() == gen {
					n.readyGen.Store(gen)
				}
			}()
		}
	}
}

// background flushes the image and, for everysec, syncs the log.
func (n *Node) background() {
	defer n.wg.Done()
	flush := time.NewTicker(n.opts.FlushInterval)
	defer flush.Stop()
	sync := time.NewTicker(time.Second)
	defer sync.Stop()
	for {
		select {
		case <-n.stop:
			return
		case <-flush.C:
			if err := n.fsm.flush(); err != nil {
				n.log.Error("writing the image", "err", err)
			}
		case <-sync.C:
			if n.opts.Fsync == FsyncEverySec {
				if err := n.logs.Sync(); err != nil {
					n.log.Error("syncing the log", "err", err)
				}
			}
		}
	}
}

// joinLoop asks the member at Join to add this node until it succeeds. It
// never blocks start-up: a restarted member is already in the cluster even
// when the node it joined through is down.
func (n *Node) joinLoop() {
	defer n.wg.Done()
	for attempt := 0; ; attempt++ {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		err := n.peers.get(n.opts.Join).Do(ctx, "BFCLUSTER", "JOIN", n.opts.NodeID, n.opts.RaftAddr, n.opts.RESPAddr).Err()
		cancel()
		if err == nil {
			n.log.Info("joined the cluster", "via", n.opts.Join)
			return
		}
		if attempt%20 == 0 {
			n.log.Warn("join failed; retrying", "via", n.opts.Join, "err", err)
		}
		select {
		case <-n.stop:
			return
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// Close stops Raft, writes the image a last time and closes the stores.
func (n *Node) Close() error {
	var err error
	n.shutOnce.Do(func() {
		if n.logBytes.Load() > n.opts.SnapshotLogBytes/10 && !n.snapping.Load() {
			// Start-up then loads the image instead of replaying the log.
			if err := n.raft.Snapshot().Error(); err != nil {
				n.log.Warn("snapshot at shutdown", "err", err)
			}
		}
		close(n.stop)
		err = n.raft.Shutdown().Error()
		n.wg.Wait()
		if ferr := n.fsm.flush(); ferr != nil && err == nil {
			err = ferr
		}
		n.peers.close()
		n.trans.Close()
		n.closeStores()
	})
	return err
}

func (n *Node) closeStores() {
	if n.logs != nil {
		n.logs.Close()
	}
	n.store.Close()
}

// State is the local keyspace.
func (n *Node) State() *keyspace.Keyspace { return n.fsm.ks.Load() }

// Ready reports whether this node can serve: its state is loaded (Open
// returned) and a leader is known.
func (n *Node) Ready() bool {
	_, id := n.raft.LeaderWithID()
	return id != ""
}

// IsLeader reports whether this node leads.
func (n *Node) IsLeader() bool { return n.raft.State() == raft.Leader }

// leaderRESP is the RESP address of the current leader, or "".
func (n *Node) leaderRESP() (string, string) {
	_, id := n.raft.LeaderWithID()
	if id == "" {
		return "", ""
	}
	return string(id), n.fsm.memberAddr(string(id))
}

// ---- writes ----

type proposal struct {
	cmds []*command.Cmd
	done chan proposed
}

type proposed struct {
	index   uint64
	results []keyspace.Result
	err     error
}

// maxBatch bounds the commands group-committed into one log entry, and
// maxInflight the entries handed to Raft and not yet committed. Raft itself
// writes every entry waiting in its queue with one fsync, so several
// entries in flight keep the log busy; measured with redis-benchmark
// (50 clients), 16 beat 1, 2, 4, 64 and 256.
const (
	maxBatch    = 4096
	maxInflight = 16
)

// batcher is the group commit: proposals that arrive while the log is
// being written (see loggedStore), or while maxInflight entries are being
// committed, share the next entry; and Raft stores every queued entry with
// one fsync.
func (n *Node) batcher() {
	defer n.wg.Done()
	slots := make(chan struct{}, maxInflight)
	// Each proposal is encoded as it joins, while the log is busy with the
	// entry before, so the entry is ready the moment the log is free.
	var enc command.Encoder
	for {
		var p *proposal
		select {
		case <-n.stop:
			return
		case p = <-n.proposals:
		case <-n.nudges:
			// An entry that commits must reach the followers now, not at
			// Raft's next idle tick: any entry appended after it carries
			// the commit index to them, an empty one if nothing else.
			select {
			case p = <-n.proposals:
			default:
				p = &proposal{done: make(chan proposed, 1)}
			}
		}
		select {
		case slots <- struct{}{}:
		case <-n.stop:
			p.done <- proposed{err: command.ErrNoLeader}
			return
		}
		batch := []*proposal{p}
		for _, c := range p.cmds {
			enc.Add(c)
		}
		// While the log is being written, keep the entry open; once it is
		// idle, take only what is already queued.
		idle := n.logged.idleCh()
		for enc.Len() < maxBatch {
			var q *proposal
			select {
			case q = <-n.proposals:
			case <-idle:
				select {
				case q = <-n.proposals:
				default:
				}
			case <-n.stop:
				for _, q := range batch {
					q.done <- proposed{err: command.ErrNoLeader}
				}
				return
			}
			if q == nil {
				break
			}
			batch = append(batch, q)
			for _, c := range q.cmds {
				enc.Add(c)
			}
		}
		data := enc.Entry()
		fut := n.raft.Apply(data, 10*time.Second)
		if n.logBytes.Add(uint64(len(data))) > n.opts.SnapshotLogBytes {
			n.snapshotAsync()
		}
		go func() {
			finish(fut, batch)
			<-slots
		}()
	}
}

// nudge asks the batcher to carry the commit index to the followers with
// the next entry, appending an empty one if none is waiting: a follower
// learns of commits only from appended entries, or from Raft's tick
// (CommitTimeout) when none come.
func (n *Node) nudge() {
	select {
	case n.nudges <- struct{}{}:
	default:
	}
}

// snapshotAsync asks Raft for a snapshot unless one is already under way.
func (n *Node) snapshotAsync() {
	if !n.snapping.CompareAndSwap(false, true) {
		return
	}
	go func() {
		defer n.snapping.Store(false)
		if err := n.raft.Snapshot().Error(); err != nil {
			n.log.Warn("snapshot by log size", "err", err)
			return
		}
		n.logBytes.Store(0)
	}()
}

func finish(fut raft.ApplyFuture, batch []*proposal) {
	err := fut.Error()
	var results []keyspace.Result
	if err == nil {
		res, _ := fut.Response().(applyResult)
		results = res.results
	}
	err = mapRaftError(err)
	off := 0
	for _, q := range batch {
		r := proposed{index: fut.Index(), err: err}
		if err == nil && off+len(q.cmds) <= len(results) {
			r.results = results[off : off+len(q.cmds)]
		} else if err == nil {
			r.err = command.ErrUnknownOutcome
		}
		off += len(q.cmds)
		q.done <- r
	}
}

func mapRaftError(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, raft.ErrNotLeader):
		return command.ErrNoLeader // never appended
	case errors.Is(err, raft.ErrEnqueueTimeout):
		return command.ErrTimeout // never appended
	}
	return command.ErrUnknownOutcome // appended; may or may not commit
}

// propose submits commands on the leader and waits for their results.
func (n *Node) propose(ctx context.Context, cmds []*command.Cmd) (uint64, []keyspace.Result, error) {
	p := &proposal{cmds: cmds, done: make(chan proposed, 1)}
	select {
	case n.proposals <- p:
	case <-ctx.Done():
		return 0, nil, command.ErrTimeout
	case <-n.stop:
		return 0, nil, command.ErrNoLeader
	}
	select {
	case r := <-p.done:
		if r.err == nil && len(cmds) > 0 && n.holders.wait(ctx, r.index) != nil {
			return 0, nil, command.ErrUnknownOutcome
		}
		return r.index, r.results, r.err
	case <-ctx.Done():
		return 0, nil, command.ErrUnknownOutcome
	}
}

// Write implements resp.Backend: propose on the leader, or forward to it;
// either way reply only once this node has applied the entry.
func (n *Node) Write(ctx context.Context, cmds []*command.Cmd) ([]keyspace.Result, error) {
	for {
		if n.IsLeader() {
			_, res, err := n.propose(ctx, cmds)
			if !errors.Is(err, command.ErrNoLeader) {
				return res, err
			}
		} else {
			res, err := n.forward(ctx, cmds)
			if !errors.Is(err, command.ErrNoLeader) {
				return res, err
			}
		}
		// Known not applied, and no leader right now: wait for one.
		if err := n.waitLeaderChange(ctx); err != nil {
			return nil, command.ErrNoLeader
		}
	}
}

// waitLeaderChange polls briefly for a leader to be known.
func (n *Node) waitLeaderChange(ctx context.Context) error {
	t := time.NewTicker(20 * time.Millisecond)
	defer t.Stop()
	deadline := time.Now().Add(time.Second)
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-n.stop:
			return command.ErrNoLeader
		case <-t.C:
		}
		if id, addr := n.leaderRESP(); id != "" && (addr != "" || id == n.opts.NodeID) {
			return nil
		}
		if time.Now().After(deadline) {
			return command.ErrNoLeader
		}
	}
}

func (n *Node) forward(ctx context.Context, cmds []*command.Cmd) ([]keyspace.Result, error) {
	id, addr := n.leaderRESP()
	if id == "" || addr == "" || id == n.opts.NodeID {
		return nil, command.ErrNoLeader
	}
	reply, err := n.peers.get(addr).Do(ctx, "BFRAFT.FORWARD", command.EncodeBatch(cmds)).Slice()
	if err != nil {
		return nil, peerError(err)
	}
	if len(reply) != 2 {
		return nil, command.ErrUnknownOutcome
	}
	idx, _ := reply[0].(int64)
	raw, _ := reply[1].(string)
	res, err := keyspace.DecodeResults([]byte(raw))
	if err != nil || len(res) != len(cmds) {
		return nil, command.ErrUnknownOutcome
	}
	if err := n.fsm.waitApplied(ctx, uint64(idx)); err != nil {
		return nil, command.ErrUnknownOutcome
	}
	return res, nil
}

// peerError maps a peer's failure: its own CLUSTERDOWN means nothing was
// proposed; a dial failure too; anything else may have been.
func peerError(err error) error {
	msg := err.Error()
	switch {
	case strings.HasPrefix(msg, "CLUSTERDOWN"):
		return command.ErrNoLeader
	case strings.Contains(msg, "connect: connection refused"), strings.Contains(msg, "dial tcp"):
		return command.ErrNoLeader
	}
	return command.ErrUnknownOutcome
}

// Forward implements resp.Cluster on the leader: a follower's batch.
func (n *Node) Forward(ctx context.Context, batch []byte) (uint64, []byte, error) {
	cmds, err := command.DecodeBatch(batch)
	if err != nil {
		return 0, nil, err
	}
	for _, c := range cmds {
		// Only what a RESP layer would propose may come from a peer.
		if !c.Op.IsWrite() || c.Op == command.SetMember || c.Op == command.DelMember || c.MaxBytes > n.opts.MaxFilterBytes {
			return 0, nil, errors.New("forwarded command not allowed")
		}
	}
	if !n.IsLeader() {
		return 0, nil, command.ErrNoLeader
	}
	idx, res, err := n.propose(ctx, cmds)
	if err != nil {
		return 0, nil, err
	}
	n.nudge() // the follower replies once it has applied the entry
	return idx, keyspace.EncodeResults(res), nil
}

// ---- reads ----

// Barrier implements resp.Backend: a linearizable read waits until this
// node has applied everything committed before it was asked.
func (n *Node) Barrier(ctx context.Context, stale bool) error {
	if stale {
		return nil
	}
	// The only voter, or a leader holding a lease, leading and ready, knows
	// its commit index is current: no round to share, so no hand-off to the
	// coalescer's goroutine.
	if n.IsLeader() && n.readyGen.Load() == n.leaderGen.Load() && (n.voters.Load() == 1 || n.leaseHeld()) {
		if err := n.fsm.waitApplied(ctx, n.fsm.readIndex(n.raft.CommitIndex())); err != nil {
			return command.ErrTimeout
		}
		return nil
	}
	if n.followerLeases() {
		if ok, err := n.localRead(ctx); ok {
			if err != nil {
				return command.ErrTimeout
			}
			return nil
		}
	}
	for {
		idx, err := n.reads.do(ctx)
		if err == nil {
			if err := n.fsm.waitApplied(ctx, idx); err != nil {
				return command.ErrTimeout
			}
			return nil
		}
		if !errors.Is(err, command.ErrNoLeader) {
			return err
		}
		// An election may be under way: wait for a leader, briefly.
		if err := n.waitLeaderChange(ctx); err != nil {
			return command.ErrNoLeader
		}
	}
}

// readIndexRound obtains one read index for every read waiting on it.
func (n *Node) readIndexRound(ctx context.Context) (uint64, error) {
	if n.IsLeader() {
		return n.ReadIndex(ctx)
	}
	id, addr := n.leaderRESP()
	if id == "" || addr == "" || id == n.opts.NodeID {
		return 0, command.ErrNoLeader
	}
	n.readRPCs.Add(1)
	v, err := n.peers.get(addr).Do(ctx, "BFRAFT.READINDEX").Int64()
	if err != nil {
		return 0, command.ErrNoLeader
	}
	return uint64(v), nil
}

// ReadIndex implements resp.Cluster on the leader: the commit index, once
// leadership is confirmed by a quorum.
func (n *Node) ReadIndex(ctx context.Context) (uint64, error) {
	if !n.IsLeader() || n.readyGen.Load() != n.leaderGen.Load() {
		return 0, command.ErrNoLeader
	}
	idx := n.fsm.readIndex(n.raft.CommitIndex())
	if n.voters.Load() == 1 || n.leaseHeld() {
		return idx, nil
	}
	if err := n.confirmLeader(); err != nil {
		return 0, err
	}
	return idx, nil
}

// lease is a confirmation of leadership: valid in leadership generation
// gen until until (a monotonic reading).
type lease struct {
	gen   uint64
	until time.Time
}

// leaseHeld reports whether this leader's lease is valid now, and renews
// it in the background once half of it is gone, so that steady reads
// never wait for a round.
func (n *Node) leaseHeld() bool {
	l := n.lease.Load()
	if l == nil || l.gen != n.leaderGen.Load() {
		return false
	}
	left := time.Until(l.until)
	if left <= 0 {
		return false
	}
	if left < n.leaseTerm()/2 {
		n.renewLease()
	}
	return true
}

func (n *Node) leaseTerm() time.Duration { return n.opts.HeartbeatTimeout / 2 }

// renewLease commits an empty entry in the background and starts a lease
// from the moment it was proposed. A quorum stored the entry, so each of
// those followers heard from this leader after that moment (a heartbeat's
// answer can be older than the question it is counted for; an entry that
// did not exist yet cannot be), and will refuse other candidates for a
// heartbeat timeout after. Under writes the entry shares their group
// commit.
func (n *Node) renewLease() {
	if n.opts.NoReadLease || !n.renewing.CompareAndSwap(false, true) {
		return
	}
	go func() {
		defer n.renewing.Store(false)
		gen := n.leaderGen.Load()
		asked := time.Now()
		ctx, cancel := context.WithTimeout(context.Background(), n.leaseTerm())
		defer cancel()
		n.renewals.Add(1)
		if _, _, err := n.propose(ctx, nil); err != nil {
			return
		}
		if n.leaderGen.Load() == gen && n.IsLeader() {
			n.lease.Store(&lease{gen: gen, until: asked.Add(n.leaseTerm())})
		}
	}()
}

// confirmLeader runs a heartbeat round for reads that found no lease, and
// starts renewing one for the reads after them.
func (n *Node) confirmLeader() error {
	n.rounds.Add(1)
	if err := n.raft.VerifyLeader().Error(); err != nil {
		return command.ErrNoLeader
	}
	n.renewLease()
	return nil
}

func (n *Node) countVoters(c raft.Configuration) {
	v := int64(0)
	for _, s := range c.Servers {
		if s.Suffrage == raft.Voter {
			v++
		}
	}
	n.voters.Store(v)
}

// ---- membership and INFO ----

// Join implements resp.Cluster: add a voter (on the leader; followers
// forward), then record its RESP address through the log.
func (n *Node) Join(ctx context.Context, id, raftAddr, respAddr string) error {
	if !n.IsLeader() {
		_, addr := n.leaderRESP()
		if addr == "" {
			return command.ErrNoLeader
		}
		return n.peers.get(addr).Do(ctx, "BFCLUSTER", "JOIN", id, raftAddr, respAddr).Err()
	}
	if err := n.raft.AddVoter(raft.ServerID(id), raft.ServerAddress(raftAddr), 0, 10*time.Second).Error(); err != nil {
		return mapRaftError(err)
	}
	_, _, err := n.propose(ctx, []*command.Cmd{{Op: command.SetMember, Key: []byte(id), Data: []byte(respAddr)}})
	return err
}

// Remove implements resp.Cluster.
func (n *Node) Remove(ctx context.Context, id string) error {
	if !n.IsLeader() {
		_, addr := n.leaderRESP()
		if addr == "" {
			return command.ErrNoLeader
		}
		return n.peers.get(addr).Do(ctx, "BFCLUSTER", "REMOVE", id).Err()
	}
	if err := n.raft.RemoveServer(raft.ServerID(id), 0, 10*time.Second).Error(); err != nil {
		return mapRaftError(err)
	}
	_, _, err := n.propose(ctx, []*command.Cmd{{Op: command.DelMember, Key: []byte(id)}})
	return err
}

// Members implements resp.Cluster: id, Raft address, RESP address.
func (n *Node) Members() ([][3]string, error) {
	f := n.raft.GetConfiguration()
	if err := f.Error(); err != nil {
		return nil, err
	}
	addrs := n.fsm.memberList()
	var out [][3]string
	for _, s := range f.Configuration().Servers {
		out = append(out, [3]string{string(s.ID), string(s.Address), addrs[string(s.ID)]})
	}
	sort.Slice(out, func(i, j int) bool { return out[i][0] < out[j][0] })
	return out, nil
}

// ReplicationInfo implements resp.Cluster.
func (n *Node) ReplicationInfo() [][2]string {
	role := "follower"
	switch n.raft.State() {
	case raft.Leader:
		role = "leader"
	case raft.Candidate:
		role = "candidate"
	case raft.Shutdown:
		role = "shutdown"
	}
	leaderID, leaderAddr := n.leaderRESP()
	stats := n.raft.Stats()
	info := [][2]string{
		{"role", role},
		{"node_id", n.opts.NodeID},
		{"leader_id", leaderID},
		{"leader_addr", leaderAddr},
		{"term", stats["term"]},
		{"commit_index", strconv.FormatUint(n.raft.CommitIndex(), 10)},
		{"applied_index", strconv.FormatUint(n.fsm.applied.Load(), 10)},
		{"last_log_index", strconv.FormatUint(n.raft.LastIndex(), 10)},
		{"fsync", n.opts.Fsync},
		{"read_lease", strconv.FormatBool(!n.opts.NoReadLease)},
		{"leader_rounds", strconv.FormatUint(n.rounds.Load(), 10)},
		{"lease_renewals", strconv.FormatUint(n.renewals.Load(), 10)},
		{"follower_read_lease", strconv.FormatBool(n.followerLeases())},
		{"follower_lease", strconv.FormatBool(n.holdsLease())},
		{"follower_lease_requests", strconv.FormatUint(n.leaseAsks.Load(), 10)},
		{"read_index_requests", strconv.FormatUint(n.readRPCs.Load(), 10)},
		{"lease_holders", strconv.Itoa(n.holders.count())},
	}
	members, _ := n.Members()
	var parts []string
	for _, m := range members {
		parts = append(parts, m[0]+"@"+m[2]+"/"+m[1])
	}
	info = append(info, [2]string{"members", strings.Join(parts, ",")}, [2]string{"num_members", strconv.Itoa(len(members))})
	return info
}

// slogWriter routes hclog lines into slog.
type slogWriter struct{ l *slog.Logger }

func (w slogWriter) Write(p []byte) (int, error) {
	w.l.Warn(strings.TrimSpace(string(p)), "component", "raft")
	return len(p), nil
}

var _ io.Writer = slogWriter{}
