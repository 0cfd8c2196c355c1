package replication

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/bfserver/bfserver/command"
	"github.com/bfserver/bfserver/keyspace"
	"github.com/bfserver/bfserver/persistence"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
)

// Fsync policies for the Raft log, like Redis's appendfsync.
const (
	FsyncAlways   = "always"   // fsync before a write is acknowledged
	FsyncEverySec = "everysec" // fsync once a second: a crash of the machine may lose up to a second
	FsyncNo       = "no"       // leave it to the OS
)

// Joiner asks a member of a cluster, by its client (RESP) address, to add
// this node. The operators' membership commands live on the client port,
// so joining speaks to it as an operator would; cmd/bfserver implements it.
type Joiner interface {
	Join(ctx context.Context, memberAddr, id, raftAddr, respAddr string) error
}

// Options configure a Node. Zero values take the documented defaults;
// Validate refuses the rest.
type Options struct {
	// NodeID names this member. Default: the name the data directory
	// records (its node-id file, written at the first start), else
	// RaftAddr. Given, it must match the recorded one (ErrNodeID).
	NodeID string
	// RaftAddr is the address Raft and the peer protocol listen on.
	// Required.
	RaftAddr string
	// RaftAdvertise is the address peers reach this node's Raft port at,
	// when it differs from RaftAddr (a node listening on 0.0.0.0, or
	// behind a name). Default RaftAddr.
	RaftAdvertise string
	// RESPAddr is the client address this node advertises, recorded in the
	// log for INFO (master_host, slaveN) and for operators. Required.
	RESPAddr string
	// DataDir holds the Raft log, snapshots and the Pebble image. Required.
	DataDir string
	// Join is the RESP address of any member to join through when this node
	// is not in a cluster yet, asked through Joiner. Empty: a new node
	// bootstraps a cluster of one.
	Join   string
	Joiner Joiner
	// Fsync is the log's durability policy. Default FsyncAlways.
	Fsync string
	// LogStore is the Raft log's store: LogStoreWAL (raft-wal, one fsync
	// per batch) or LogStoreBolt (raft-boltdb, two). A data directory
	// that holds the other kind has its log moved into this one at start
	// (openLogStore). Default LogStoreWAL.
	LogStore string
	// WriteTimeout is how long a write may wait for the log without
	// progress: to enter it, and then for the log to commit or apply
	// anything. A write whose entry is being applied waits for its result
	// however long the command runs (one command's size is bounded, so
	// that is finite). Default 10s.
	WriteTimeout time.Duration
	// FlushInterval is how often changed chunks are written to the image.
	// Longer means less rewriting of hot chunks, and more log to replay at
	// start-up. Default 30s.
	FlushInterval time.Duration
	// SnapshotThreshold is the number of log entries after which a snapshot
	// lets the log be truncated, once they also hold a sixteenth of the
	// filters' bytes (see snapshotDue).
	// Default 8192.
	SnapshotThreshold uint64
	// TrailingLogs is how many entries stay after a snapshot, so a briefly
	// absent follower catches up from the log. Default 10240.
	TrailingLogs uint64
	// TrailingLogBytes bounds what the TrailingLogs entries left after a
	// snapshot may hold, by the average entry since the snapshot before:
	// at least one entry stays. A bulk load's entries (1 MiB LOADCHUNK
	// pieces) otherwise stayed in raft.db behind the snapshot that covers
	// them, and bbolt walks every page of its tree at each start to
	// rebuild its freelist: a quarter of a node's start-up CPU after a
	// 1 GiB load. Default 64 MiB.
	TrailingLogBytes uint64
	// SnapshotLogBytes also triggers a snapshot once this many bytes were
	// logged since the last one, or an eighth of it when the log then goes
	// quiet for two seconds: a few large entries (LOADCHUNK, RESTORE) must
	// not leave gigabytes to decode at start-up. A clean shutdown
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
	// NoImageBase keeps no base, the flat copy of the large arrays a start
	// reads at disk speed (persistence.Options.NoBase). Default false.
	NoImageBase bool
	// NoFollowerLease keeps followers from holding read leases (see
	// readlease.go): each batch of a follower's linearizable reads then
	// asks the leader for its read index. With leases, a follower serving
	// linearizable reads reads locally, and every write's reply waits
	// until the leader has told such followers it committed. Default
	// false: leases on (with NoReadLease, off).
	NoFollowerLease bool
	// TLS, if set, makes the Raft port mutual TLS: only nodes with a
	// certificate from the cluster's CA (and, with TLS.AllowedNames, one
	// of the names allowed for nodes) may take part.
	TLS *TLS
	// ClusterSecret, if set, is the credential every node of the cluster
	// shares: a connection to the Raft port proves it holds it before it
	// is served, and this node proves it back (peerauth.go), so a stranger
	// can neither take part nor pass for a member. At least MinSecretLen
	// bytes. With TLS too, a peer needs both.
	ClusterSecret []byte
	// SecretTransition also lets in peers that present no secret, and
	// dials a node that does not speak the handshake without it: only for
	// the rolling restart that gives a running cluster its secret
	// (docs/OPERATIONS.md). Needs ClusterSecret.
	SecretTransition bool
	// InsecurePeers lets any connection to the Raft port take part in
	// the cluster with neither TLS nor a secret: for networks where every
	// host that can reach the port is trusted. Without TLS, a secret or
	// this, a node whose Raft address is not loopback does not start
	// (ErrNoPeerAuth), and one on loopback makes a secret of its own that
	// no other node knows: it runs alone.
	InsecurePeers bool
	// MaxPeerConns bounds the connections the Raft port holds open,
	// Raft's and the peer protocol's, authenticated or not; beyond it a
	// connection is closed at once. Each peer opens at most 48 of its own
	// plus Raft's. Default 256.
	MaxPeerConns int
	// ImageMaxOpenFiles bounds the descriptors the image (Pebble) keeps
	// open: persistence.Options.MaxOpenFiles. cmd/bfserver sets it from
	// the process's descriptor limit. Default Pebble's, 1000.
	ImageMaxOpenFiles int
	// BackupDir is the only directory BFBACKUP writes into (backupName):
	// it must exist and not be in DataDir. Default none: BFBACKUP is
	// refused (ErrNoBackupDir).
	BackupDir string
	// MaxFilterBytes is the largest per-filter byte cap a forwarded command
	// is applied with: what this node's RESP layer stamps on its own (a
	// larger cap from a peer is lowered to it). cmd/bfserver passes the
	// resolved --max-filter-bytes (by default the node's memory). Default
	// here 512 MiB.
	MaxFilterBytes uint64
	// ImageFS is the image's filesystem. Default: the operating system's.
	// Tests inject failing ones.
	ImageFS vfs.FS
	// Logger receives events; Raft's and Pebble's logs are routed through
	// it. Default slog.Default().
	Logger *slog.Logger

	// wrapLog lets tests put a failing store in front of the Raft log.
	wrapLog func(raft.LogStore) raft.LogStore
	// noCampaign leaves a lone voter's election to Raft's heartbeat
	// timeout (campaign), for tests of what a node does before it.
	noCampaign bool
	// ownSecret: Validate made ClusterSecret, and no other node knows it.
	ownSecret bool
	// idDefault: NodeID was not given (Validate made it RaftAddr), so the
	// one the data directory records wins.
	idDefault bool
}

// ErrNoPeerAuth: a node that other hosts could reach, or one that joins a
// cluster, has no way to authenticate its peers (Options.TLS,
// ClusterSecret or InsecurePeers).
var ErrNoPeerAuth = errors.New("replication: the Raft port needs cluster TLS or a cluster secret")

// Validate fills the defaults and refuses settings no node can run with.
func (o *Options) Validate() error {
	if o.RaftAddr == "" || o.RESPAddr == "" || o.DataDir == "" {
		return errors.New("replication: RaftAddr, RESPAddr and DataDir are required")
	}
	if o.Join != "" && o.Joiner == nil {
		return errors.New("replication: Join needs a Joiner")
	}
	if o.NodeID == "" {
		o.NodeID, o.idDefault = o.RaftAddr, true
	}
	if o.RaftAdvertise == "" {
		o.RaftAdvertise = o.RaftAddr
	}
	if len(o.ClusterSecret) > 0 && len(o.ClusterSecret) < MinSecretLen {
		return fmt.Errorf("replication: the cluster secret must be at least %d bytes, not %d", MinSecretLen, len(o.ClusterSecret))
	}
	if o.SecretTransition && len(o.ClusterSecret) == 0 {
		return errors.New("replication: SecretTransition needs a ClusterSecret")
	}
	if o.TLS == nil && len(o.ClusterSecret) == 0 && !o.InsecurePeers {
		if !isLoopback(o.RaftAddr) || !isLoopback(o.RaftAdvertise) {
			return fmt.Errorf("%w: the Raft address %s is not loopback", ErrNoPeerAuth, o.RaftAddr)
		}
		if o.Join != "" {
			return fmt.Errorf("%w to join a cluster", ErrNoPeerAuth)
		}
		o.ClusterSecret = make([]byte, 32)
		rand.Read(o.ClusterSecret)
		o.ownSecret = true
	}
	if o.ownSecret && o.Join != "" {
		return fmt.Errorf("%w to join a cluster", ErrNoPeerAuth)
	}
	if o.BackupDir != "" {
		var err error
		if o.BackupDir, err = filepath.Abs(o.BackupDir); err != nil {
			return fmt.Errorf("replication: backup directory: %w", err)
		}
		if err := checkBackupDir(o); err != nil {
			return err
		}
	}
	if o.MaxPeerConns < 0 {
		return fmt.Errorf("replication: MaxPeerConns %d is negative", o.MaxPeerConns)
	}
	if o.MaxPeerConns == 0 {
		o.MaxPeerConns = 256
	}
	switch o.Fsync {
	case "":
		o.Fsync = FsyncAlways
	case FsyncAlways, FsyncEverySec, FsyncNo:
	default:
		return fmt.Errorf("replication: fsync must be always, everysec or no, not %q", o.Fsync)
	}
	switch o.LogStore {
	case "":
		o.LogStore = LogStoreWAL
	case LogStoreWAL, LogStoreBolt:
	default:
		return fmt.Errorf("replication: the raft log store must be wal or bolt, not %q", o.LogStore)
	}
	for _, d := range []struct {
		v   *time.Duration
		def time.Duration
	}{{&o.WriteTimeout, 10 * time.Second}, {&o.FlushInterval, 30 * time.Second},
		{&o.HeartbeatTimeout, 500 * time.Millisecond}, {&o.ElectionTimeout, 500 * time.Millisecond}} {
		if *d.v < 0 {
			return fmt.Errorf("replication: negative duration %v", *d.v)
		}
		if *d.v == 0 {
			*d.v = d.def
		}
	}
	if o.HeartbeatTimeout < 10*time.Millisecond || o.ElectionTimeout < o.HeartbeatTimeout {
		return fmt.Errorf("replication: heartbeat timeout %v must be at least 10ms and at most the election timeout %v", o.HeartbeatTimeout, o.ElectionTimeout)
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
	if o.TrailingLogBytes == 0 {
		o.TrailingLogBytes = 64 << 20
	}
	if o.MaxFilterBytes == 0 {
		o.MaxFilterBytes = 512 << 20
	}
	if o.MaxFilterBytes > command.MaxFilterBytes {
		return fmt.Errorf("replication: MaxFilterBytes %d over %d", o.MaxFilterBytes, uint64(command.MaxFilterBytes))
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return nil
}

// Node is one member of the cluster. It implements server.Backend and
// resp.Cluster.
type Node struct {
	opts      Options
	raft      *raft.Raft
	raftUp    atomic.Bool // raft is set: peer requests may use it
	fsm       *fsm
	store     *persistence.Store
	logs      logStore
	logged    *loggedStore // logs, as Raft sees it
	trans     *raft.NetworkTransport
	mux       *mux
	snaps     *snapshotStore
	peers     *peerClient
	auth      *peerAuth
	proposals chan *proposal
	nudges    chan struct{} // see nudge
	reads     *coalescer
	log       *slog.Logger

	// readyGen is the leadership generation whose barrier has committed: a
	// new leader serves reads only after an entry of its own term commits.
	leaderGen atomic.Uint64
	readyGen  atomic.Uint64
	// leaderMoved is closed and replaced whenever Raft reports another
	// leader (or none): writes waiting on a leader watch it.
	leaderMu    sync.Mutex
	leaderMoved chan struct{}
	// snapping guards against asking for two snapshots at once;
	// snapFailed is when the latest one asked by log size failed (Unix
	// ns), 0 once one succeeds.
	snapping   atomic.Bool
	snapFailed atomic.Int64
	// trailMu orders the read-modify-write of Raft's reloadable config
	// before each snapshot (snapshot).
	trailMu sync.Mutex
	// inflight holds the bytes of entries this node proposed that are not
	// yet applied (the batcher's bound, maxInflightBytes).
	inflight inflight
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
	// noticeRefused logs refused commit notices, at most once a second.
	noticeRefused rateLog
	readRPCs      atomic.Uint64 // read-index requests sent to the leader
	// voters is the number of voters in the latest known configuration.
	// A leader that is the only voter cannot be deposed behind its back,
	// so its reads need no heartbeat round. servers maps each member's id
	// to its Raft address.
	voters  atomic.Int64
	servers atomic.Pointer[map[string]string]
	// soleStart: this node started as the only voter with its whole log
	// applied, so it serves linearizable reads before its election (the
	// only node that could have committed anything is itself).
	soleStart atomic.Bool
	// disk is the storage fault this node is in, if any (see storage.go).
	disk diskHealth
	// stages times the durable path's hand-offs (stages.go).
	stages stageTimes
	// lastSave is when the latest snapshot this node took completed (Unix
	// seconds), for LASTSAVE; the start time before the first.
	lastSave atomic.Int64

	stop     chan struct{} // closed at Close, with ctx
	ctx      context.Context
	cancel   context.CancelFunc
	wg       sync.WaitGroup
	shutOnce sync.Once
}

// imageMaxValue is the least per-filter size the image loads: persistence's
// default, whatever the cap now.
const imageMaxValue = 4 << 30

// Open starts a node: it loads the stored image, recovers a newer snapshot
// if a crash left one unapplied, and starts Raft.
func Open(opts Options) (*Node, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(opts.DataDir, 0o755); err != nil {
		return nil, err
	}
	if err := adoptNodeID(&opts); err != nil {
		return nil, err
	}
	n := &Node{opts: opts, log: opts.Logger, proposals: make(chan *proposal, 1024), stop: make(chan struct{}),
		leaderMoved: make(chan struct{})}
	n.ctx, n.cancel = context.WithCancel(context.Background())
	n.lastSave.Store(time.Now().Unix())
	// Generations start apart: Raft may report this node as leader a moment
	// before the notification that starts its readiness entry arrives.
	n.leaderGen.Store(1)
	n.auth = &peerAuth{secret: opts.ClusterSecret, transition: opts.SecretTransition, id: opts.NodeID}
	n.peers = newPeerClient(dialer(opts.RaftAddr, opts.TLS, n.auth))
	n.reads = newCoalescer(n.readIndexRound)
	n.holders, n.leaseWake, n.nudges = newHolders(n.tell), make(chan struct{}, 1), make(chan struct{}, 1)
	n.disk.log = n.log
	var err error
	// The image loads every filter this node's cap lets it create (the
	// default cap follows the machine's memory, past the image's 4 GiB
	// default), so what was accepted is never refused at the next start.
	imageOpts := persistence.Options{Dir: filepath.Join(opts.DataDir, "image"), FS: opts.ImageFS, Logger: opts.Logger,
		MaxValueBytes: max(imageMaxValue, opts.MaxFilterBytes), NoBase: opts.NoImageBase,
		MaxOpenFiles: opts.ImageMaxOpenFiles}
	// The Raft log opens (bbolt reads its tree to rebuild the freelist,
	// raft-wal its tail segment; a log of the other kind is moved) while
	// the image loads: the two read different files, and neither needs
	// the other until Raft starts.
	began := time.Now()
	logs := make(chan logOpened, 1)
	go func() {
		s, err := openLogStore(opts.DataDir, opts.LogStore, opts.Fsync == FsyncAlways, opts.Logger)
		logs <- logOpened{s, err}
	}()
	if n.store, err = persistence.Open(imageOpts); err != nil {
		closeLogStore(logs)
		return nil, err
	}
	if n.fsm, err = newFSM(n.store, n.log); err != nil {
		closeLogStore(logs)
		n.store.Close()
		return nil, err
	}
	n.log.Info("image loaded", "applied", n.fsm.applied.Load(), "from_base", n.store.Stats().BaseLoaded, "took", time.Since(began).Round(time.Millisecond))
	l := <-logs
	if l.err != nil {
		n.store.Close()
		return nil, l.err
	}
	n.logs = l.store
	if err := n.startRaft(); err != nil {
		if n.trans != nil {
			n.trans.Close()
		}
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

// logOpened is openLogStore's result, from the goroutine that opens it.
type logOpened struct {
	store logStore
	err   error
}

// closeLogStore closes the log store once it has opened, when the node
// failed to open before it needed it.
func closeLogStore(logs <-chan logOpened) {
	if l := <-logs; l.err == nil {
		l.store.Close()
	}
}

// startRaft starts Raft on n.logs, open.
func (n *Node) startRaft() error {
	o := n.opts
	hl := hclog.New(&hclog.LoggerOptions{Name: "raft", Level: hclog.Warn, Output: slogWriter{n.log}})
	var err error
	// Whatever the policy, the log is synced before the image moves past it.
	n.fsm.syncLog = n.syncLog
	n.fsm.self = o.NodeID
	n.fsm.stages = &n.stages
	n.fsm.onConfig = n.configured
	n.fsm.onHalt = n.halted
	n.fsm.onDisk = n.disk.report
	if n.snaps, err = newSnapshotStore(filepath.Join(o.DataDir, "snapshots"), o.NodeID, func() imageView { return n.store.NewSnapshot() }, hl); err != nil {
		return err
	}
	// A crash between storing a received snapshot and installing it leaves
	// the image behind the snapshot: install it now, before the log replays
	// (Raft takes the newest snapshot's index as applied). One whose stream
	// is damaged (refused when it arrived, or since) is removed instead,
	// the image left as it is, and the next newest looked at: the leader
	// sends another. One of this node's own that the image is behind
	// (snapshotStore) refuses the start.
	for removed := ""; ; {
		metas, err := n.snaps.List()
		if err != nil || len(metas) == 0 || metas[0].Index <= n.fsm.applied.Load() {
			break
		}
		if metas[0].ID == removed {
			return fmt.Errorf("snapshot %s: refused as damaged, and still stored", removed)
		}
		_, rc, err := n.snaps.Open(metas[0].ID)
		if err != nil {
			return err
		}
		err = n.fsm.Restore(rc)
		if err == nil {
			break
		}
		if !errors.Is(err, persistence.ErrCorrupt) {
			return fmt.Errorf("installing snapshot %s: %w", metas[0].ID, err)
		}
		removed = metas[0].ID
	}
	ln, err := listen(o.RaftAddr, o.TLS)
	if err != nil {
		return err
	}
	n.mux = newMux(ln, n.auth, o.MaxPeerConns, n.servePeer, n.log)
	n.trans = raft.NewNetworkTransportWithLogger(&streamLayer{m: n.mux, dial: dialer(o.RaftAddr, o.TLS, n.auth), advertise: o.RaftAdvertise}, 4, 10*time.Second, hl)
	notify := make(chan bool, 16)
	cfg := raft.DefaultConfig()
	cfg.LocalID = raft.ServerID(o.NodeID)
	cfg.Logger = hl
	cfg.NotifyCh = notify
	cfg.NoSnapshotRestoreOnStart = true
	cfg.SnapshotThreshold = math.MaxUint64 // snapshotDue decides
	cfg.TrailingLogs = o.TrailingLogs
	cfg.SnapshotInterval = 30 * time.Second
	cfg.HeartbeatTimeout = o.HeartbeatTimeout
	cfg.ElectionTimeout = o.ElectionTimeout
	cfg.LeaderLeaseTimeout = o.HeartbeatTimeout / 2
	cfg.CommitTimeout = 5 * time.Millisecond
	cfg.MaxAppendEntries = raftMaxAppend
	cfg.BatchApplyCh = true // Raft's queue of proposals holds MaxAppendEntries (see batcher)
	existing, err := raft.HasExistingState(n.logs, n.logs, n.snaps)
	if err != nil {
		return err
	}
	// Every entry read back is checked (logcheck.go); a damaged one halts
	// the state machine there.
	checked := &checkedStore{LogStore: n.logs, damaged: n.fsm.stop}
	// A lone voter need not wait for its own election to serve what it
	// holds (fsm.replayTail).
	sole, err := n.fsm.replayTail(checked, o.NodeID)
	if err != nil {
		return err
	}
	if err := n.HaltErr(); err != nil {
		return err
	}
	if sole {
		n.voters.Store(1)
		n.soleStart.Store(true)
	}
	var logs raft.LogStore = checked
	if o.wrapLog != nil {
		logs = o.wrapLog(logs)
	}
	n.logged = newLoggedStore(logs, &n.disk, &n.stages)
	if n.raft, err = raft.NewRaft(cfg, n.fsm, n.logged, n.logs, n.snaps, failpointTransport(n.trans)); err != nil {
		return err
	}
	n.raftUp.Store(true)
	if err := n.HaltErr(); err != nil { // Raft read a damaged entry as it started
		n.raft.Shutdown()
		return err
	}
	if !existing && o.Join == "" {
		boot := raft.Configuration{Servers: []raft.Server{{ID: cfg.LocalID, Address: n.trans.LocalAddr()}}}
		if err := n.raft.BootstrapCluster(boot).Error(); err != nil && !errors.Is(err, raft.ErrCantBootstrap) {
			return err
		}
	}
	if err := recordNodeID(o.DataDir, o.NodeID); err != nil {
		n.raft.Shutdown()
		return err
	}
	if f := n.raft.GetConfiguration(); f.Error() == nil {
		n.configured(f.Configuration()) // the voters, before any election
		if servers := len(f.Configuration().Servers); servers > 1 && o.ownSecret {
			n.raft.Shutdown()
			return fmt.Errorf("%w: this node is one of %d members, and without one it cannot reach them (docs/OPERATIONS.md, Security)", ErrNoPeerAuth, servers)
		}
	}
	if sole && n.voters.Load() != 1 {
		n.soleStart.Store(false) // the image said alone; the log says otherwise
	}
	if !o.noCampaign {
		go n.campaign(cfg.LocalID)
	}
	observations := make(chan raft.Observation, 16)
	n.raft.RegisterObserver(raft.NewObserver(observations, false, func(o *raft.Observation) bool {
		_, ok := o.Data.(raft.LeaderObservation)
		return ok
	}))
	n.wg.Add(2)
	go n.watchLeadership(notify)
	go n.watchLeader(observations)
	return nil
}

// campaign starts this node's election at once when it is the only voter
// of its configuration. Raft's follower waits a heartbeat timeout (500 ms
// to 1 s) for a leader before it stands, though a lone voter's can only
// be itself, and every write after a start or restart waited that long.
// Raft has no call for it; its TimeoutNow RPC, which a leadership
// transfer sends its target, is that election, so the node sends it to
// itself through its own transport. An election is safe whenever it
// starts (votes decide, not timers): if the dial fails, the timeout
// elects the node as before.
func (n *Node) campaign(id raft.ServerID) {
	f := n.raft.GetConfiguration()
	if f.Error() != nil || !soleVoter(f.Configuration(), id) || n.raft.State() != raft.Follower {
		return
	}
	addr := n.trans.LocalAddr()
	req := &raft.TimeoutNowRequest{RPCHeader: raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax, ID: []byte(id), Addr: n.trans.EncodePeer(id, addr)}}
	if err := n.trans.TimeoutNow(id, addr, req, &raft.TimeoutNowResponse{}); err != nil {
		n.log.Info("election at start left to the heartbeat timeout", "err", err)
	}
}

// soleVoter: id is the configuration's one voter.
func soleVoter(c raft.Configuration, id raft.ServerID) bool {
	voters, self := 0, false
	for _, s := range c.Servers {
		if s.Suffrage == raft.Voter {
			voters++
			self = self || s.ID == id
		}
	}
	return voters == 1 && self
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
				n.configured(f.Configuration())
			}
			go func() {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				n.moveOwnAddress()
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

// watchLeader wakes the writes waiting on a leader whenever Raft reports
// another one, or none.
func (n *Node) watchLeader(obs <-chan raft.Observation) {
	defer n.wg.Done()
	for {
		select {
		case <-n.stop:
			return
		case <-obs:
			n.leaderMu.Lock()
			close(n.leaderMoved)
			n.leaderMoved = make(chan struct{})
			n.leaderMu.Unlock()
		}
	}
}

// leaderMovedCh is closed when Raft next reports a change of leader.
func (n *Node) leaderMovedCh() <-chan struct{} {
	n.leaderMu.Lock()
	defer n.leaderMu.Unlock()
	return n.leaderMoved
}

// background flushes the image and, for everysec, syncs the log. While
// the disk is failing it retries every second, and recovers by itself.
func (n *Node) background() {
	defer n.wg.Done()
	flush := time.NewTicker(n.opts.FlushInterval)
	defer flush.Stop()
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case <-n.stop:
			return
		case <-flush.C:
			n.flush()
		case <-tick.C:
			n.checkLogSpace()
			if n.snapshotDue() && n.HaltErr() == nil && !n.disk.failing(faultImage) {
				n.snapshotAsync()
			}
			if n.opts.Fsync == FsyncEverySec {
				n.disk.report(faultLog, n.syncLog())
			}
			if n.disk.failing(faultImage) {
				n.flush()
			}
			if n.disk.failing(faultLog) && n.IsLeader() {
				// An empty entry: if the log takes it, it works again.
				go func() {
					ctx, cancel := n.stopContext()
					defer cancel()
					n.propose(ctx, nil)
				}()
			}
		}
	}
}

// syncLog makes every entry stored so far durable.
func (n *Node) syncLog() error {
	n.stages.syncs.Add(1)
	return n.logs.Sync()
}

// WriteStages is INFO writestages (stages.go).
func (n *Node) WriteStages() [][2]string { return n.stages.info(n.opts.LogStore) }

// ResetWriteStages starts the stage counts afresh (CONFIG RESETSTAT).
func (n *Node) ResetWriteStages() { n.stages.reset() }

// flush writes the image (the state machine reports how it went).
func (n *Node) flush() { n.fsm.flush() }

// joinLoop asks the member at Join to add this node until it succeeds. It
// never blocks start-up: a restarted member is already in the cluster even
// when the node it joined through is down.
func (n *Node) joinLoop() {
	defer n.wg.Done()
	for attempt := 0; ; attempt++ {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		err := n.opts.Joiner.Join(ctx, n.opts.Join, n.opts.NodeID, n.opts.RaftAdvertise, n.opts.RESPAddr)
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

// stopContext is a context that ends when the node stops.
func (n *Node) stopContext() (context.Context, context.CancelFunc) {
	return context.WithCancel(n.ctx)
}

// Close stops Raft, writes the image a last time and closes the stores.
func (n *Node) Close() error {
	var err error
	n.shutOnce.Do(func() {
		if n.fsm.logged.Load() > n.opts.SnapshotLogBytes/10 && !n.snapping.Load() && n.fsm.halt.Load() == nil {
			// Start-up then loads the image instead of replaying the log.
			if err := n.snapshot().Error(); err != nil {
				n.log.Warn("snapshot at shutdown", "err", err)
			}
		}
		close(n.stop)
		n.cancel()
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
	if n.snaps != nil {
		n.snaps.wait()
	}
	n.store.Close()
}

// State is the local keyspace.
func (n *Node) State() *keyspace.Keyspace { return n.fsm.ks.Load() }

// Users implements the RESP layer's user table: the replicated ACL users
// as this node applied them (not to be modified), the table's version and
// a channel closed when it next changes.
func (n *Node) Users() (uint64, map[string][]string, <-chan struct{}) { return n.fsm.userTable() }

// UsersVersion is the version of the user table Users returns.
func (n *Node) UsersVersion() uint64 { return n.fsm.users.Version() }

// Ready reports whether this node can serve: its state is loaded (Open
// returned), a leader is known, it did not stop at an entry it cannot
// apply, and its disk takes writes. Why not, when not.
func (n *Node) Ready() (bool, string) {
	if err := n.fsm.halt.Load(); err != nil {
		return false, (*err).Error()
	}
	if err := n.disk.err(); err != nil {
		return false, err.Error()
	}
	if _, id := n.raft.LeaderWithID(); id == "" {
		return false, "no leader known"
	}
	return true, ""
}

// Halted is closed once the node met a log entry it cannot apply; HaltErr
// then says which, and what it needs. The process should exit: nothing
// at or after that entry is applied.
func (n *Node) Halted() <-chan struct{} { return n.fsm.halted }

// HaltErr is why the node halted, or nil.
func (n *Node) HaltErr() error {
	if err := n.fsm.halt.Load(); err != nil {
		return *err
	}
	return nil
}

// halted is the state machine's report that it stopped.
func (n *Node) halted(err error) {
	n.log.Error("the node stopped applying the log", "err", err)
}

// IsLeader reports whether this node leads.
func (n *Node) IsLeader() bool { return n.raft.State() == raft.Leader }

// leaderRaft is the current leader's id and Raft address, or "".
func (n *Node) leaderRaft() (id, addr string) {
	a, i := n.raft.LeaderWithID()
	return string(i), string(a)
}

// configured records a committed membership.
func (n *Node) configured(c raft.Configuration) {
	v := int64(0)
	servers := map[string]string{}
	for _, s := range c.Servers {
		if s.Suffrage == raft.Voter {
			v++
		}
		servers[string(s.ID)] = string(s.Address)
	}
	n.voters.Store(v)
	n.servers.Store(&servers)
	if v != 1 {
		n.soleStart.Store(false)
	}
}

// raftAddrOf is a member's Raft address, or "".
func (n *Node) raftAddrOf(id string) string {
	if m := n.servers.Load(); m != nil {
		return (*m)[id]
	}
	return ""
}

// slogWriter routes hclog lines into slog.
type slogWriter struct{ l *slog.Logger }

func (w slogWriter) Write(p []byte) (int, error) {
	w.l.Warn(strings.TrimSpace(string(p)), "component", "raft")
	return len(p), nil
}
