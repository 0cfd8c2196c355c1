// Command bfserver serves RedisBloom-compatible Bloom and Cuckoo filters
// over the Redis protocol. Flags may also be given as environment variables
// (--max-filter-bytes is BFSERVER_MAX_FILTER_BYTES) and as lines of a
// --config file; see settings.go.
package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"net/http"
	_ "net/http/pprof" // served only on --debug-addr
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/bfserver/bfserver/acl"
	"github.com/bfserver/bfserver/admin"
	"github.com/bfserver/bfserver/command"
	"github.com/bfserver/bfserver/internal/memtune"
	"github.com/bfserver/bfserver/memstore"
	"github.com/bfserver/bfserver/replication"
	"github.com/bfserver/bfserver/resp"
	"github.com/bfserver/bfserver/server"
)

type config struct {
	addr           string
	raftAddr       string
	advertise      string
	raftAdvertise  string
	dataDir        string
	backupDir      string
	nodeID         string
	join           string
	fsync          string
	logStore       string
	writeTimeout   time.Duration
	flushInterval  time.Duration
	snapThreshold  uint64
	trailingLogs   uint64
	trailingBytes  uint64
	inMemory       bool
	hugeHeap       bool
	debugAddr      string
	httpAddr       string
	protected      bool
	tlsCert        string
	tlsKey         string
	tlsCA          string
	tlsAuthClients string
	tlsCluster     bool
	cluster        clusterAuth
	users          userFlags
	aclFile        string
	requirePass    string
	maxClients     int64
	maxPeerConns   int64
	maxFilterBytes uint64
	maxMemory      uint64
	stale          bool
	readLease      bool
	eventLoops     bool
	imageBase      bool
	followerLease  bool
	logFormat      string
	maxBulk        uint64
	maxArgs        int64
	maxInline      int64
	maxQueryBuffer uint64
	module         server.ModuleConfig
	metrics        metricsConfig
	slowlog        server.SlowlogConfig
	latency        int64
	debugCommand   string
	configFile     string // the --config file, absolute (CONFIG REWRITE)

	set *settings
}

// parseFlags reads every setting, each checked against its range as it is
// set; an error names the setting and where its value came from.
func parseFlags(args []string) (*config, error) {
	c := &config{module: server.DefaultModuleConfig(), set: newSettings()}
	fs := c.set.fs
	fs.StringVar(&c.addr, "addr", "127.0.0.1:6379", "RESP listen address")
	fs.StringVar(&c.raftAddr, "raft-addr", "", "Raft and peer listen address (default: RESP port + 10000)")
	fs.StringVar(&c.advertise, "advertise-addr", "", "the RESP address clients and INFO are told for this node (default: --addr)")
	fs.StringVar(&c.raftAdvertise, "raft-advertise-addr", "", "the Raft address peers reach this node at (default: --raft-addr)")
	fs.StringVar(&c.dataDir, "data-dir", "bfdata", "directory for the Raft log, snapshots and filter image")
	fs.StringVar(&c.backupDir, "backup-dir", "", "the only directory BFBACKUP writes into (a path is taken inside it; it must exist and not be in --data-dir); unset, BFBACKUP is refused")
	fs.StringVar(&c.nodeID, "node-id", "", "this member's id (default: the Raft address)")
	fs.StringVar(&c.join, "join", "", "RESP address of any cluster member to join through")
	c.fsync = replication.FsyncAlways
	fs.Var(choiceValue{&c.fsync, []string{replication.FsyncAlways, replication.FsyncEverySec, replication.FsyncNo}}, "fsync", "log durability: always, everysec or no")
	c.logStore = replication.LogStoreWAL
	fs.Var(choiceValue{&c.logStore, []string{replication.LogStoreWAL, replication.LogStoreBolt}}, "raft-log-store",
		"the Raft log's store: wal (raft-wal, one fsync per batch) or bolt (raft-boltdb, two); a data directory holding the other kind has its log moved at start")
	c.writeTimeout = 10 * time.Second
	fs.Var(durationValue{&c.writeTimeout}, "write-timeout", "how long a write may wait for the log without progress before its outcome is unknown (a write being applied waits for its result however long it runs)")
	c.flushInterval = 30 * time.Second
	fs.Var(durationValue{&c.flushInterval}, "flush-interval", "how often changed filter chunks are written to the image")
	fs.Uint64Var(&c.snapThreshold, "snapshot-threshold", 8192, "log entries between snapshots (once they also hold a sixteenth of the filters' bytes)")
	fs.Uint64Var(&c.trailingLogs, "trailing-logs", 10240, "log entries kept after a snapshot for lagging followers")
	c.trailingBytes = 64 << 20
	fs.Var(memoryValue{&c.trailingBytes}, "trailing-log-bytes", "most bytes of log kept after a snapshot, by the average entry since the one before (at least one entry, at most --trailing-logs; units as Redis: 64mb)")
	fs.BoolVar(&c.imageBase, "image-base", true, "keep a flat copy of the large filters (up to their bytes more disk), which a start reads at disk speed (false: none, and a start reads the image through Pebble)")
	fs.BoolVar(&c.inMemory, "in-memory", false, "keep filters in memory only: no log, no image, no cluster")
	fs.BoolVar(&c.hugeHeap, "huge-heap", true, "advise the Go heap's memory as transparent huge pages as it grows: fewer page faults for many small filters (false: the kernel's default pages; docs/OPERATIONS.md)")
	fs.StringVar(&c.debugAddr, "debug-addr", "", "serve Go's pprof profiles on this HTTP address (off by default)")
	fs.StringVar(&c.httpAddr, "http-addr", "", "serve /metrics, /healthz and /readyz on this HTTP address (off by default)")
	fs.StringVar(&c.tlsCert, "tls-cert-file", "", "serve RESP over TLS with this certificate (PEM)")
	fs.StringVar(&c.tlsKey, "tls-key-file", "", "private key of --tls-cert-file (PEM)")
	fs.StringVar(&c.tlsCA, "tls-ca-cert-file", "", "CA that signs client and peer certificates (PEM)")
	c.tlsAuthClients = "yes"
	fs.Var(choiceValue{&c.tlsAuthClients, []string{"yes", "no", "optional"}}, "tls-auth-clients", "require client certificates: yes, no or optional (needs --tls-ca-cert-file)")
	fs.BoolVar(&c.tlsCluster, "tls-cluster", false, "mutual TLS on the Raft port (Raft and the peer protocol): only nodes with a certificate from the cluster's CA, carrying an allowed name, take part")
	addClusterFlags(fs, &c.cluster)
	fs.BoolVar(&c.protected, "protected-mode", true, "with no password, refuse clients that are not on loopback")
	fs.Var(&c.users, "user", `an ACL user, as in Redis: "name on >password ~app:* +@read +@bloom" (repeatable); written into the replicated user table at start if the table lacks it`)
	fs.StringVar(&c.aclFile, "aclfile", "", "Redis's ACL file: ACL LOAD replaces the users by its own, ACL SAVE writes them to it; at start its users are written into the user table if the table lacks them")
	fs.StringVar(&c.requirePass, "requirepass", "", "password the default user must AUTH with")
	c.maxClients = 10000
	fs.Var(rangeValue{&c.maxClients, 1, 1 << 20}, "maxclients", "maximum connected clients (lowered at start to what the open files limit, ulimit -n, leaves, as Redis does)")
	c.maxPeerConns = 256
	fs.Var(rangeValue{&c.maxPeerConns, 8, 1 << 16}, "max-peer-conns", "most connections the Raft port holds open, authenticated or not (each peer opens up to about 52); the open files limit keeps twice this for the Raft port's connections in and out")
	fs.Var(memoryValue{&c.maxFilterBytes}, "max-filter-bytes", "largest bit/bucket array one filter may hold, refused before it is allocated (units as Redis: 512mb, 1gb; at most 1tb; 0: the node's memory, which is --maxmemory if set, else the machine's or its cgroup's limit)")
	fs.Var(memoryValue{&c.maxMemory}, "maxmemory", "total bytes all filters may hold; deny-oom writes answer OOM beyond it (0: no cap; units as Redis: 100mb)")
	fs.BoolVar(&c.stale, "stale-reads", false, "serve reads from local state without a linearizable barrier")
	fs.BoolVar(&c.eventLoops, "event-loops", true, "serve plain TCP clients from epoll event loops, one per core but one (Linux), as Redis does (false: a goroutine per connection; TLS clients always have one)")
	fs.BoolVar(&c.readLease, "read-lease", true, "a leader that confirmed its leadership serves linearizable reads for half a heartbeat timeout without another round (false: a heartbeat round per read batch)")
	fs.BoolVar(&c.followerLease, "follower-read-lease", true, "followers serving linearizable reads hold leases and read locally; each write then waits for a round trip to those followers (false: a read-index request to the leader per read batch)")
	c.logFormat = "text"
	fs.Var(choiceValue{&c.logFormat, []string{"text", "json"}}, "log-format", "log format: text or json")
	c.maxBulk = 512 << 20
	fs.Var(memoryValue{&c.maxBulk}, "proto-max-bulk-len", "longest argument a client may send")
	c.maxArgs = command.MaxItems
	fs.Var(rangeValue{&c.maxArgs, 1, command.MaxItems}, "proto-max-multibulk-len", "most arguments in one command")
	c.maxInline = 64 << 10
	fs.Var(rangeValue{&c.maxInline, 1024, 1 << 30}, "proto-inline-max-size", "longest inline command or length line")
	c.maxQueryBuffer = 1 << 30
	fs.Var(memoryValue{&c.maxQueryBuffer}, "client-query-buffer-limit", "most unparsed bytes buffered per client")
	c.slowlog = server.DefaultSlowlog()
	fs.Var(rangeValue{&c.slowlog.LogSlowerThan, -1, math.MaxInt64}, "slowlog-log-slower-than", "SLOWLOG keeps commands that ran at least this many microseconds (0: every command, -1: none)")
	fs.Var(rangeValue{&c.slowlog.MaxLen, 0, math.MaxInt64}, "slowlog-max-len", "how many SLOWLOG entries are kept")
	fs.Var(rangeValue{&c.latency, 0, math.MaxInt64}, "latency-monitor-threshold", "LATENCY records commands that ran at least this many milliseconds (0: off)")
	c.debugCommand = "no"
	fs.Var(choiceValue{&c.debugCommand, []string{"no", "yes", "local"}}, "enable-debug-command", "allow DEBUG (SLEEP, RELOAD): no, yes, or local (loopback clients only)")
	for _, name := range server.ModuleSettings() {
		fs.Var(moduleValue{&c.module, name}, name, "RedisBloom's "+name+" (CONFIG GET "+name+")")
	}
	fs.String("config", "", "a config file of `name value` lines (redis.conf style, flag names)")
	addMetricsFlags(fs, &c.metrics)
	if err := c.set.parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return c, err
		}
		return nil, err
	}
	if c.raftAddr == "" {
		ra, err := defaultRaftAddr(c.addr, "addr")
		if err != nil {
			return nil, c.set.blame(err)
		}
		c.raftAddr = ra
	}
	if c.advertise == "" {
		c.advertise = c.addr
	}
	if path := configPath(args); path != "" {
		abs, err := filepath.Abs(path)
		if err != nil {
			return nil, fmt.Errorf("config file: %w", err)
		}
		c.configFile = abs
	}
	if err := c.cluster.resolve(); err != nil {
		return nil, c.set.blame(err)
	}
	if c.maxQueryBuffer > 1<<40 || c.maxBulk > c.maxQueryBuffer {
		return nil, c.set.blame(fmt.Errorf("proto-max-bulk-len %d must be at most client-query-buffer-limit %d", c.maxBulk, c.maxQueryBuffer))
	}
	return c, nil
}

// tlsConfigs builds the client-facing TLS config and, with --tls-cluster,
// the mutual-TLS configs between nodes. TLS 1.2 is the minimum.
func tlsConfigs(c *config) (*tls.Config, *replication.TLS, error) {
	var server *tls.Config
	var pool *x509.CertPool
	if c.tlsCert != "" || c.tlsKey != "" {
		cert, err := tls.LoadX509KeyPair(c.tlsCert, c.tlsKey)
		if err != nil {
			return nil, nil, fmt.Errorf("tls-cert-file, tls-key-file: %w", err)
		}
		server = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
		if c.tlsCA != "" {
			if pool, err = loadPool("tls-ca-cert-file", c.tlsCA); err != nil {
				return nil, nil, err
			}
			server.ClientCAs = pool
			switch c.tlsAuthClients {
			case "yes":
				server.ClientAuth = tls.RequireAndVerifyClientCert
			case "optional":
				server.ClientAuth = tls.VerifyClientCertIfGiven
			}
		}
	}
	if !c.tlsCluster {
		return server, nil, nil
	}
	peer, err := c.cluster.tls(server, pool)
	return server, peer, err
}

// loadPool reads a PEM file of CA certificates; setting names it.
func loadPool(setting, path string) (*x509.CertPool, error) {
	pem, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", setting, err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("%s: %s holds no certificate", setting, path)
	}
	return pool, nil
}

// userFlags collects repeated --user flags.
type userFlags []*acl.User

func (u *userFlags) String() string { return fmt.Sprint(len(*u), " users") }

func (u *userFlags) Set(v string) error {
	user, err := server.ParseUser(v)
	if err != nil {
		return err
	}
	*u = append(*u, user)
	return nil
}

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

// run is the server's life: every start-up error is printed with its
// source and ends it with status 1.
func run(args []string, stdout, stderr io.Writer) int {
	if code, ok := subcommand(args, stdout, stderr); ok {
		return code
	}
	fail := func(err error) int {
		fmt.Fprintln(stderr, "bfserver:", err)
		return 1
	}
	c, err := parseFlags(args)
	if errors.Is(err, flag.ErrHelp) {
		c.set.usage(stdout)
		return 0
	}
	if err != nil {
		return fail(err)
	}
	var h slog.Handler = slog.NewTextHandler(stderr, nil)
	if c.logFormat == "json" {
		h = slog.NewJSONHandler(stderr, nil)
	}
	logger := slog.New(h)
	// Every log line goes through slog: the standard log package's too.
	slog.SetDefault(logger)
	routeLibraryLogs(logger)
	// Garbage may cost 64 MiB or a tenth of the live heap, not as much
	// again as the filters (GOGC's default).
	tuneCtx, stopTuning := context.WithCancel(context.Background())
	defer stopTuning()
	go memtune.Run(tuneCtx, memtune.Options{HugeHeap: c.hugeHeap})
	if c.debugAddr != "" {
		go func() { logger.Error("pprof", "err", http.ListenAndServe(c.debugAddr, nil)) }()
	}
	filterBytes, from := filterCap(c.maxFilterBytes, c.maxMemory, nodeMemory)
	c.maxFilterBytes = filterBytes
	logger.Info("per-filter cap", "max_filter_bytes", filterBytes, "from", from)
	serverTLS, clusterTLS, err := tlsConfigs(c)
	if err != nil {
		return fail(c.set.blame(err))
	}
	fds, err := fitDescriptors(osNofile{}, int(c.maxClients), int(c.maxPeerConns), c.inMemory, logger)
	if err != nil {
		return fail(err)
	}
	srvOpts := server.Options{
		Addr: c.addr, RequirePass: c.requirePass, MaxClients: fds.maxClients, ClientFDs: fds.clientFDs, ProtectedMode: c.protected,
		Limits: resp.Limits{MaxBulk: int64(c.maxBulk), MaxArgs: c.maxArgs, MaxInline: int(c.maxInline), MaxQueryBuffer: int(c.maxQueryBuffer)},
		Users:  c.users, ACLFile: c.aclFile, TLS: serverTLS, MaxFilterBytes: c.maxFilterBytes, MaxMemory: c.maxMemory, Stale: c.stale,
		Module: &c.module, Logger: logger,
		ConfigFile: c.configFile, Slowlog: &c.slowlog, LatencyMonitorThreshold: c.latency, EnableDebugCommand: c.debugCommand,
		NoEventLoop: !c.eventLoops,
	}
	if err := srvOpts.Validate(); err != nil {
		return fail(c.set.blame(err))
	}
	var backend server.Backend
	var node *replication.Node
	if c.inMemory {
		backend = memstore.New()
	} else {
		nodeOpts := replication.Options{
			NodeID: c.nodeID, RaftAddr: c.raftAddr, RaftAdvertise: c.raftAdvertise, RESPAddr: c.advertise, DataDir: c.dataDir,
			Join: c.join, Fsync: c.fsync, LogStore: c.logStore, WriteTimeout: c.writeTimeout, FlushInterval: c.flushInterval,
			TLS: clusterTLS, ClusterSecret: c.cluster.secretBytes, SecretTransition: c.cluster.transition, InsecurePeers: c.cluster.insecure,
			SnapshotThreshold: c.snapThreshold, TrailingLogs: c.trailingLogs, TrailingLogBytes: c.trailingBytes,
			MaxFilterBytes: c.maxFilterBytes, Logger: logger, MaxPeerConns: int(c.maxPeerConns), ImageMaxOpenFiles: fds.imageFiles,
			BackupDir:   c.backupDir,
			NoReadLease: !c.readLease, NoFollowerLease: !c.followerLease, NoImageBase: !c.imageBase,
		}
		if c.join != "" {
			nodeOpts.Joiner = &joiner{password: c.requirePass, tls: serverTLS, log: logger}
		}
		if err := nodeOpts.Validate(); err != nil {
			if errors.Is(err, replication.ErrNoPeerAuth) {
				err = fmt.Errorf("%w: set cluster-secret (or cluster-secret-file) to a secret every node shares, or tls-cluster; "+
					"cluster-insecure lets any host that reaches the Raft port in, for a network where every host is trusted (docs/OPERATIONS.md, Security)", err)
			}
			return fail(c.set.blame(err))
		}
		if node, err = replication.Open(nodeOpts); err != nil {
			return fail(fmt.Errorf("opening the node in %s: %w", c.dataDir, err))
		}
		backend = node
	}
	srv, err := server.New(srvOpts, backend)
	if err != nil {
		return fail(c.set.blame(err))
	}
	if err := srv.Listen(); err != nil {
		if node != nil {
			node.Close()
		}
		return fail(c.set.blame(fmt.Errorf("addr: %w", err)))
	}
	if c.httpAddr != "" {
		src := admin.Sources{Server: srv, State: backend.State}
		src.Filters = c.metrics.series()
		if node != nil {
			src.Replication, src.Ready = node.ReplicationInfo, node.Ready
		}
		ln, err := net.Listen("tcp", c.httpAddr)
		if err != nil {
			srv.Close()
			if node != nil {
				node.Close()
			}
			return fail(c.set.blame(fmt.Errorf("http-addr: %w", err)))
		}
		hs := &http.Server{Handler: admin.Handler(src), ErrorLog: slog.NewLogLogger(h, slog.LevelError)}
		go func() { logger.Error("http", "err", hs.Serve(ln)) }()
	}
	logger.Info("bfserver ready", "addr", srv.Addr().String(), "raft", c.raftAddr, "data", c.dataDir, "in_memory", c.inMemory)
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	var status atomic.Int32
	var halted <-chan struct{}
	if node != nil {
		halted = node.Halted()
	}
	go func() {
		select {
		case s := <-sig:
			logger.Info("shutting down", "signal", s.String())
		case <-halted:
			logger.Error("stopping: the node cannot apply its log", "err", node.HaltErr())
			status.Store(1)
		case <-srv.ShutdownRequested():
			logger.Info("shutting down", "by", "SHUTDOWN")
		}
		srv.Close()
	}()
	err = srv.Serve()
	if node != nil {
		if cerr := node.Close(); cerr != nil {
			logger.Error("closing the node", "err", cerr)
		}
		if herr := node.HaltErr(); herr != nil {
			fmt.Fprintln(stderr, "bfserver:", herr)
			return 1
		}
	}
	if err != nil {
		logger.Error("serve", "err", err)
		return 1
	}
	return int(status.Load())
}

// defaultRaftAddr is the Raft address a node takes unless told: its RESP
// address's port + 10000. name is the setting's, for the error.
func defaultRaftAddr(addr, name string) (string, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", fmt.Errorf("%s: %w", name, err)
	}
	p, err := strconv.Atoi(port)
	if err != nil {
		return "", fmt.Errorf("%s port: %w", name, err)
	}
	return net.JoinHostPort(host, strconv.Itoa(p+10000)), nil
}
