package server

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/bfserver/bfserver/acl"
	"github.com/bfserver/bfserver/command"
	"github.com/bfserver/bfserver/internal/evloop"
	"github.com/bfserver/bfserver/internal/ratelog"
	"github.com/bfserver/bfserver/keyspace"
	"github.com/bfserver/bfserver/resp"
)

// Backend is the state behind the server: a log that orders writes and a
// keyspace they are applied to.
type Backend interface {
	// Write applies cmds in order as one unit and returns one result each,
	// after they are durable by the configured policy. An error means none
	// of them has a known outcome (ErrNoLeader, ErrUnknownOutcome, …).
	Write(ctx context.Context, cmds []*command.Cmd) ([]keyspace.Result, error)
	// Barrier returns once local state reflects every write acknowledged
	// anywhere before the call (linearizable), or at once when stale.
	// until, when not zero, is when the lease that promise rests on ends:
	// a read is answered only if it still holds once the read is done.
	Barrier(ctx context.Context, stale bool) (until time.Time, err error)
	// State is the local keyspace that reads are served from.
	State() *keyspace.Keyspace
}

// immediateWriter is a Backend whose Write never waits (an in-memory
// store): writes run on the event loops too.
type immediateWriter interface {
	WritesImmediately() bool
}

// localWriter is a Backend that can tell at once that a write now waits
// only on this node's own log (a leader that is its cluster's one voter):
// an event loop may then wait for it itself (see turnEnd).
type localWriter interface {
	WritesLocally() bool
}

// instantReader is a Backend that can tell at once, without a context,
// that a read need not wait (a leader with everything applied): the
// session then builds no timeout for Barrier, once per batch of reads.
type instantReader interface {
	ReadNow() (until time.Time, ok bool)
}

// Cluster is implemented by backends that replicate; the server uses it for
// INFO replication and the operators' membership commands (BFCLUSTER).
// Nodes speak to each other on their own port, not through this one.
type Cluster interface {
	// ReplicationInfo returns the INFO replication fields in order.
	ReplicationInfo() [][2]string
	// Join adds a voter; Remove removes one; Members lists them as id,
	// Raft address, RESP address.
	Join(ctx context.Context, id, raftAddr, respAddr string) error
	Remove(ctx context.Context, id string) error
	Members() ([][3]string, error)
	// IsLeader reports whether this node leads.
	IsLeader() bool
	// Snapshot takes a snapshot of this node (SAVE, BGSAVE); LastSnapshot
	// is when its latest one completed (LASTSAVE); Reload writes the image
	// and loads the state back from it (DEBUG RELOAD).
	Snapshot(ctx context.Context) error
	LastSnapshot() time.Time
	Reload(ctx context.Context) error
	// Backup writes a consistent copy of the node's state to a file on the
	// node (BFBACKUP) and returns the log index it is at; it refuses a
	// path outside where the operator allowed backups.
	Backup(ctx context.Context, path string) (uint64, error)
}

// Options configure a Server. Zero values take the documented defaults.
type Options struct {
	// Addr is the RESP listen address. Default "127.0.0.1:6379".
	Addr string
	// Limits bound client input (Redis's defaults).
	Limits resp.Limits
	// MaxClients refuses connections beyond this count. Default 10,000.
	MaxClients int
	// ClientFDs is how many clients the process's descriptor limit leaves
	// room for (cmd/bfserver lowers MaxClients to it at start, as Redis
	// does): CONFIG SET maxclients above it is refused with Redis's
	// error. Default 0: no bound.
	ClientFDs int
	// RequirePass, if set, makes the default user need AUTH.
	RequirePass string
	// ProtectedMode refuses clients from outside Local with Redis's DENIED
	// reply while the default user has no password. Default false here;
	// cmd/bfserver turns it on, as Redis does.
	ProtectedMode bool
	// Local says which client addresses protected mode lets in. Default:
	// loopback addresses.
	Local func(net.Addr) bool
	// Users are ACL users besides "default" (see ParseUser). A client that
	// authenticates as one of them may run only what its rules allow. With
	// a backend that keeps a user table (UserTable), each is written into
	// the table once, when the table does not have it; from then on the
	// table's rules win (ACL SETUSER changes them, ACL DELUSER removes the
	// user until a restart with the flag writes it again). Otherwise they
	// are fixed.
	Users []*acl.User
	// Module holds the bf-*/cf-* settings (CONFIG GET/SET). Default
	// DefaultModuleConfig().
	Module *ModuleConfig
	// MaxFilterBytes caps one filter's bit and bucket arrays. Default 512 MiB;
	// at most command.MaxFilterBytes.
	MaxFilterBytes uint64
	// MaxMemory caps the memory of all values together (maxmemory): write
	// commands flagged deny-oom answer OOM once it is reached, and a
	// RESERVE that would pass it is refused before it is proposed.
	// CONFIG SET maxmemory changes it. Default 0: no cap.
	MaxMemory uint64
	// Stale makes reads serve local state by default instead of
	// linearizable reads. Default false.
	Stale bool
	// ACLFile is Redis's aclfile: ACL LOAD replaces the users by its
	// users, ACL SAVE writes them to it. At start its users are written
	// into the user table when the table lacks them, as Users are (the
	// two cannot be given together). Default: none.
	ACLFile string
	// ReadTimeout bounds how long a read waits to be made consistent (a
	// read index, this node catching up). Writes wait as the backend
	// decides. Default 10s.
	ReadTimeout time.Duration
	// TLS, if set, serves TLS instead of plain TCP.
	TLS *tls.Config
	// Logger receives connection-level events. Default slog.Default().
	Logger *slog.Logger
	// Now is the clock stamped into commands. Default time.Now.
	Now func() time.Time
	// ExpireInterval is how often keys whose expiry passed are deleted
	// through the log (reads already ignore them), Redis's 1/hz: between
	// 2ms and 1s. Default 100ms (hz 10); CONFIG SET hz changes it.
	ExpireInterval time.Duration
	// ConfigFile is the file the settings were read from, which CONFIG
	// REWRITE rewrites; "" (none) makes it answer Redis's error.
	ConfigFile string
	// Slowlog is slowlog-log-slower-than and slowlog-max-len. Default
	// (nil) Redis's: 10000 microseconds, 128 entries.
	Slowlog *SlowlogConfig
	// LatencyMonitorThreshold is latency-monitor-threshold in
	// milliseconds: commands that run at least this long are LATENCY
	// samples. Default 0: off.
	LatencyMonitorThreshold int64
	// EnableDebugCommand is enable-debug-command: "no" (the default, as in
	// Redis), "yes", or "local" (loopback clients only).
	EnableDebugCommand string
	// NoEventLoop serves every connection from a goroutine of its own.
	// Default false: plain TCP connections are served by event loops
	// where the platform has them (Linux), one per GOMAXPROCS but one; TLS
	// connections always have a goroutine each.
	NoEventLoop bool
}

// Validate fills the defaults and refuses settings outside their ranges.
func (o *Options) Validate() error {
	if o.Addr == "" {
		o.Addr = "127.0.0.1:6379"
	}
	if err := o.Limits.Validate(command.MaxArgBytes, command.MaxItems); err != nil {
		return err
	}
	if o.MaxClients <= 0 {
		o.MaxClients = 10000
	}
	if o.MaxFilterBytes == 0 {
		o.MaxFilterBytes = 512 << 20
	}
	if o.MaxFilterBytes > command.MaxFilterBytes {
		return fmt.Errorf("max-filter-bytes %d over %d", o.MaxFilterBytes, uint64(command.MaxFilterBytes))
	}
	if o.ReadTimeout <= 0 {
		o.ReadTimeout = 10 * time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Local == nil {
		o.Local = isLoopback
	}
	if o.ExpireInterval <= 0 {
		o.ExpireInterval = 100 * time.Millisecond
	}
	if o.Module == nil {
		m := DefaultModuleConfig()
		o.Module = &m
	}
	if err := o.validateAdmin(); err != nil {
		return err
	}
	for _, u := range o.Users {
		if u.Name == command.DefaultUser {
			return errors.New("the default user is configured by requirepass")
		}
	}
	if o.ACLFile != "" && len(o.Users) > 0 {
		return errors.New("users given with --user and an --aclfile at once: define users in one place only")
	}
	return o.Module.Validate()
}

// acceptBackoff is the longest pause between failed accepts.
const acceptBackoff = time.Second

// Server accepts RESP connections.
type Server struct {
	opts    Options
	backend Backend
	cluster Cluster // nil for a backend that does not replicate
	module  moduleState
	// userTable is the backend's replicated ACL users (nil if it keeps
	// none: then staticUsers are the users, fixed); aclCache holds them
	// parsed; aclLog is ACL LOG.
	userTable   UserTable
	seeds       []*acl.User // Options.Users, or the users of Options.ACLFile
	staticUsers []*acl.User
	seeding     atomic.Bool // seedUsers is writing the --user users into the table
	aclCache    aclCache
	aclLog      aclLog
	stale       atomic.Bool // default read consistency of new connections
	// inflight is what accepted RESERVEs will add once applied: the
	// recount cannot see them yet.
	inflight  atomic.Int64
	maxMemory atomic.Uint64 // maxmemory, 0: none; CONFIG SET changes it
	hz        atomic.Int64  // active expiry runs per second (CONFIG SET hz)
	start     time.Time
	// ctx ends at Close: writes waiting on the backend give up then.
	ctx    context.Context
	cancel context.CancelFunc

	ln      net.Listener
	stop    chan struct{}
	mu      sync.Mutex
	clients map[int64]*session
	nextID  atomic.Int64
	wg      sync.WaitGroup
	closed  atomic.Bool

	stats struct {
		connections, rejected atomic.Int64
	}
	open         atomic.Int64  // connections being served (maxclients)
	refusing     chan struct{} // TLS connections being refused (maxRefusing)
	acceptFailed ratelog.Log   // accept errors, logged at most once a second
	negatives    atomic.Int64  // membership checks answered 0 by closed connections
	adm          serverAdmin   // the operators' state (admin.go)
	// loops serve plain TCP connections (nil: a goroutine each);
	// inlineWrites says the backend's writes never wait, so they run on
	// the loops too.
	loops        *evloop.Group
	inlineWrites bool
	parkers      parkers // serve the loops' parked connections
	// localWrites is the backend, when it can say its writes wait on this
	// node alone; turns are the writes each loop holds for its turn's end.
	localWrites localWriter
	turns       []loopTurn
	// turnsOffUntil (Unix ns): no loop waits for a write before then
	// (turnSlow). Under slowMu, lastSlow is when a turn's write was last
	// found slower than turnSlow, and slowPaused the pause that followed
	// (Server.slowPause).
	turnsOffUntil atomic.Int64
	slowMu        sync.Mutex
	lastSlow      time.Time
	slowPaused    time.Duration
	// statShards are the commands' counters (INFO commandstats, metrics):
	// per shard (stats.go), by ACL id.
	statShards [][]cmdStats
}

// New creates a server; call Serve. Options must Validate.
func New(opts Options, b Backend) (*Server, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	commandTable()
	s := &Server{opts: opts, backend: b, clients: map[int64]*session{}, start: time.Now(), stop: make(chan struct{}),
		refusing: make(chan struct{}, maxRefusing), statShards: newStatShards()}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	s.maxMemory.Store(opts.MaxMemory)
	s.hz.Store(clampHz(int64(time.Second / opts.ExpireInterval)))
	s.module.set(*opts.Module)
	s.stale.Store(opts.Stale)
	if c, ok := b.(Cluster); ok {
		s.cluster = c
	}
	if w, ok := b.(immediateWriter); ok {
		s.inlineWrites = w.WritesImmediately()
	}
	s.localWrites, _ = b.(localWriter)
	s.seeds = opts.Users
	if opts.ACLFile != "" {
		users, err := fileUsers(opts.ACLFile)
		if err != nil {
			return nil, fmt.Errorf("aclfile: %w", err)
		}
		s.seeds = users
	}
	if t, ok := b.(UserTable); ok {
		s.userTable = t
		if s.cluster == nil && !s.seedOnce() {
			return nil, errors.New("cannot write the --user users into the user table")
		}
		s.seeding.Store(s.cluster != nil && len(s.seeds) > 0)
	} else {
		s.staticUsers = s.seeds
		s.aclCache.state.Store(s.buildACL(0, nil))
	}
	s.adm.init(&s.opts)
	for db := range keyspace.NumDBs {
		keys, _ := b.State().Count(uint8(db), s.opts.Now().UnixMilli())
		s.adm.loadedKeys += int64(keys)
	}
	return s, nil
}

// Listen binds the RESP address.
func (s *Server) Listen() error {
	ln, err := net.Listen("tcp", s.opts.Addr)
	if err != nil {
		return err
	}
	if s.opts.TLS != nil {
		ln = tls.NewListener(ln, s.opts.TLS)
	}
	s.ln = ln
	return nil
}

// Addr is the bound address.
func (s *Server) Addr() net.Addr { return s.ln.Addr() }

// Serve accepts connections until Close.
func (s *Server) Serve() error {
	if !s.opts.NoEventLoop && s.opts.TLS == nil && evloop.Supported {
		lo := evloop.Options{}.WithDefaults()
		s.turns = make([]loopTurn, lo.Loops)
		g, err := evloop.Start(loopHandler{s}, lo)
		if err != nil {
			return err
		}
		s.mu.Lock()
		s.loops = g
		s.mu.Unlock()
	}
	s.wg.Add(2)
	go func() {
		defer s.wg.Done()
		s.expireLoop()
	}()
	go func() {
		defer s.wg.Done()
		s.sampleLoop()
	}()
	if s.userTable != nil {
		s.wg.Add(2)
		go func() {
			defer s.wg.Done()
			s.aclLoop()
		}()
		go func() {
			defer s.wg.Done()
			if s.cluster != nil {
				s.seedUsers()
			}
		}()
	}
	// An accept that fails (out of descriptors: EMFILE, ENFILE; a
	// connection aborted) is retried after a pause that starts at 5ms and
	// doubles up to a second, as net/http's server does: the clients
	// already connected go on being served, and new ones are taken again
	// once descriptors are free. Only Close ends the loop.
	var pause time.Duration
	for {
		nc, err := s.ln.Accept()
		if err != nil {
			if s.closed.Load() || errors.Is(err, net.ErrClosed) {
				return nil
			}
			pause = min(max(2*pause, 5*time.Millisecond), acceptBackoff)
			s.acceptFailed.Warn(s.opts.Logger, "accept failed; retrying", "err", err, "retry_in", pause)
			select {
			case <-s.stop:
				return nil
			case <-time.After(pause):
			}
			continue
		}
		pause = 0
		// maxclients is checked here, before a goroutine is started, so
		// that a flood of connections never holds more descriptors than
		// maxclients plus the few being refused.
		if s.open.Load() >= s.adm.maxClients.Load() {
			s.refuse(nc, "-ERR max number of clients reached\r\n")
			continue
		}
		if s.loops != nil {
			s.adopt(nc)
			continue
		}
		s.open.Add(1)
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			defer s.open.Add(-1)
			s.serveConn(nc)
		}()
	}
}

// Close stops accepting, closes every connection and waits for them.
func (s *Server) Close() error {
	if s.closed.Swap(true) {
		return nil
	}
	close(s.stop)
	s.cancel()
	var err error
	if s.ln != nil {
		err = s.ln.Close()
	}
	s.mu.Lock()
	for _, c := range s.clients {
		c.kill()
	}
	loops := s.loops
	s.mu.Unlock()
	s.wg.Wait()
	if loops != nil {
		loops.Stop()
	}
	s.parkers.stop()
	return err
}

// refuseUnprotected answers a client protected mode keeps out.
func (s *Server) refuseUnprotected(nc net.Conn) bool {
	if s.adm.protected.Load() && s.acl().def.NoPass() && !s.opts.Local(nc.RemoteAddr()) {
		s.stats.rejected.Add(1)
		nc.Write([]byte("-" + msgDenied + "\r\n"))
		return true
	}
	return false
}

func (s *Server) serveConn(nc net.Conn) {
	defer nc.Close()
	if s.refuseUnprotected(nc) {
		return
	}
	s.mu.Lock()
	sess := newSession(s, nc)
	s.clients[sess.id] = sess
	s.mu.Unlock()
	s.stats.connections.Add(1)
	defer func() {
		sess.finish()
		s.mu.Lock()
		sess.foldIO()
		delete(s.clients, sess.id)
		s.mu.Unlock()
	}()
	sess.loop(nil)
}

// refuse answers a connection beyond maxclients with Redis's error and
// closes it. A plain connection is answered at once (a fresh socket's
// buffer takes the line); a TLS one needs a handshake first, so it is
// answered by one of maxRefusing goroutines, within refuseTimeout, or,
// when they are all busy, closed without a word.
func (s *Server) refuse(nc net.Conn, msg string) {
	s.stats.rejected.Add(1)
	if _, ok := nc.(*tls.Conn); !ok {
		nc.SetWriteDeadline(time.Now().Add(refuseTimeout))
		nc.Write([]byte(msg))
		nc.Close()
		return
	}
	select {
	case s.refusing <- struct{}{}:
	default:
		nc.Close()
		return
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		defer func() { <-s.refusing }()
		nc.SetDeadline(time.Now().Add(refuseTimeout))
		nc.Write([]byte(msg))
		nc.Close()
	}()
}

const (
	// maxRefusing bounds the TLS connections being refused at once: the
	// descriptors a flood holds beyond maxclients.
	maxRefusing = 16
	// refuseTimeout bounds answering one.
	refuseTimeout = time.Second
)

func isLoopback(a net.Addr) bool {
	if t, ok := a.(*net.TCPAddr); ok {
		return t.IP.IsLoopback()
	}
	return a.Network() == "unix"
}

// clientList snapshots the connected sessions.
func (s *Server) clientList() []*session {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]*session, 0, len(s.clients))
	for _, c := range s.clients {
		out = append(out, c)
	}
	return out
}
