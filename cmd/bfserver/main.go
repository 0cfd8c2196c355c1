// Command bfserver serves RedisBloom-compatible Bloom and Cuckoo filters
// over the Redis protocol. Flags may also be given as environment variables:
// --max-filter-bytes is BFSERVER_MAX_FILTER_BYTES, and so on.
package main

import (
	"crypto/tls"
	"crypto/x509"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	_ "net/http/pprof" // served only on --debug-addr
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/bfserver/bfserver/admin"
	"github.com/bfserver/bfserver/memstore"
	"github.com/bfserver/bfserver/movein"
	"github.com/bfserver/bfserver/replication"
	"github.com/bfserver/bfserver/resp"
)

type config struct {
	addr           string
	raftAddr       string
	dataDir        string
	nodeID         string
	join           string
	fsync          string
	flushInterval  time.Duration
	snapThreshold  uint64
	trailingLogs   uint64
	inMemory       bool
	debugAddr      string
	httpAddr       string
	protected      bool
	tlsCert        string
	tlsKey         string
	tlsCA          string
	tlsAuthClients string
	tlsCluster     bool
	users          userFlags
	requirePass    string
	maxClients     int
	maxFilterBytes uint64
	maxMemory      uint64
	stale          bool
	readLease      bool
	followerLease  bool
	logFormat      string
	limits         resp.Limits
	module         resp.ModuleConfig
}

func parseFlags(args []string) (*config, error) {
	c := &config{module: resp.DefaultModuleConfig()}
	fs := flag.NewFlagSet("bfserver", flag.ContinueOnError)
	fs.StringVar(&c.addr, "addr", "127.0.0.1:6379", "RESP listen address")
	fs.StringVar(&c.raftAddr, "raft-addr", "", "Raft listen address (default: RESP port + 10000)")
	fs.StringVar(&c.dataDir, "data-dir", "bfdata", "directory for the Raft log, snapshots and filter image")
	fs.StringVar(&c.nodeID, "node-id", "", "this member's id (default: the Raft address)")
	fs.StringVar(&c.join, "join", "", "RESP address of any cluster member to join through")
	fs.StringVar(&c.fsync, "fsync", "always", "log durability: always, everysec or no")
	fs.DurationVar(&c.flushInterval, "flush-interval", 30*time.Second, "how often changed filter chunks are written to the image")
	fs.Uint64Var(&c.snapThreshold, "snapshot-threshold", 8192, "log entries between snapshots")
	fs.Uint64Var(&c.trailingLogs, "trailing-logs", 10240, "log entries kept after a snapshot for lagging followers")
	fs.BoolVar(&c.inMemory, "in-memory", false, "keep filters in memory only: no log, no image, no cluster")
	fs.StringVar(&c.debugAddr, "debug-addr", "", "serve Go's pprof profiles on this HTTP address (off by default)")
	fs.StringVar(&c.httpAddr, "http-addr", "", "serve /metrics, /healthz and /readyz on this HTTP address (off by default)")
	fs.StringVar(&c.tlsCert, "tls-cert-file", "", "serve RESP over TLS with this certificate (PEM)")
	fs.StringVar(&c.tlsKey, "tls-key-file", "", "private key of --tls-cert-file (PEM)")
	fs.StringVar(&c.tlsCA, "tls-ca-cert-file", "", "CA that signs client and peer certificates (PEM)")
	fs.StringVar(&c.tlsAuthClients, "tls-auth-clients", "yes", "require client certificates: yes, no or optional (needs --tls-ca-cert-file)")
	fs.BoolVar(&c.tlsCluster, "tls-cluster", false, "mutual TLS for Raft and forwarded traffic; only nodes with a certificate from the CA may join")
	fs.BoolVar(&c.protected, "protected-mode", true, "with no password, refuse clients that are not on loopback")
	fs.Var(&c.users, "user", `an ACL user, as in Redis: "name on >password +@read +@bloom" (repeatable)`)
	fs.StringVar(&c.requirePass, "requirepass", "", "password the default user must AUTH with")
	fs.IntVar(&c.maxClients, "maxclients", 10000, "maximum connected clients")
	fs.Uint64Var(&c.maxFilterBytes, "max-filter-bytes", 512<<20, "largest bit/bucket array one filter may hold")
	fs.Uint64Var(&c.maxMemory, "maxmemory", 0, "total bytes all filters may hold; writes answer OOM beyond it (0: no cap)")
	fs.BoolVar(&c.stale, "stale-reads", false, "serve reads from local state without a linearizable barrier")
	fs.BoolVar(&c.readLease, "read-lease", true, "a leader that confirmed its leadership serves linearizable reads for half a heartbeat timeout without another round (false: a heartbeat round per read batch)")
	fs.BoolVar(&c.followerLease, "follower-read-lease", true, "followers serving linearizable reads hold leases and read locally; each write then waits for a round trip to those followers (false: a read-index request to the leader per read batch)")
	fs.StringVar(&c.logFormat, "log-format", "text", "log format: text or json")
	fs.Int64Var(&c.limits.MaxBulk, "proto-max-bulk-len", 512<<20, "longest argument a client may send")
	fs.Int64Var(&c.limits.MaxArgs, "proto-max-multibulk-len", 1<<20, "most arguments in one command")
	fs.IntVar(&c.limits.MaxInline, "proto-inline-max-size", 64<<10, "longest inline command or length line")
	fs.IntVar(&c.limits.MaxQueryBuffer, "client-query-buffer-limit", 1<<30, "most unparsed bytes buffered per client")
	fs.Float64Var(&c.module.BFErrorRate, "bf-error-rate", c.module.BFErrorRate, "default error rate of auto-created Bloom filters")
	fs.Int64Var(&c.module.BFInitialSize, "bf-initial-size", c.module.BFInitialSize, "default capacity of auto-created Bloom filters")
	fs.Int64Var(&c.module.BFExpansion, "bf-expansion-factor", c.module.BFExpansion, "default Bloom expansion (0 = non-scaling)")
	fs.Int64Var(&c.module.CFBucketSize, "cf-bucket-size", c.module.CFBucketSize, "default Cuckoo bucket size")
	fs.Int64Var(&c.module.CFInitialSize, "cf-initial-size", c.module.CFInitialSize, "capacity of auto-created Cuckoo filters")
	fs.Int64Var(&c.module.CFMaxIterations, "cf-max-iterations", c.module.CFMaxIterations, "default Cuckoo MAXITERATIONS")
	fs.Int64Var(&c.module.CFExpansion, "cf-expansion-factor", c.module.CFExpansion, "default Cuckoo EXPANSION")
	fs.Int64Var(&c.module.CFMaxExpansions, "cf-max-expansions", c.module.CFMaxExpansions, "sub-filters after which Cuckoo inserts are refused")
	fs.String("config", "", "a config file of `name value` lines (redis.conf style, flag names)")
	// One source of truth, in rising precedence: defaults, the config
	// file, BFSERVER_* environment variables, command-line flags.
	if path := configPath(args); path != "" {
		if err := loadConfigFile(fs, path); err != nil {
			return nil, err
		}
	}
	var envErr error
	fs.VisitAll(func(f *flag.Flag) {
		env := "BFSERVER_" + strings.ToUpper(strings.ReplaceAll(f.Name, "-", "_"))
		if v, ok := os.LookupEnv(env); ok && envErr == nil {
			if err := fs.Set(f.Name, v); err != nil {
				envErr = fmt.Errorf("%s: %w", env, err)
			}
		}
	})
	if envErr != nil {
		return nil, envErr
	}
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if c.raftAddr == "" {
		host, port, err := net.SplitHostPort(c.addr)
		if err != nil {
			return nil, err
		}
		p, err := strconv.Atoi(port)
		if err != nil {
			return nil, fmt.Errorf("--addr port: %w", err)
		}
		c.raftAddr = net.JoinHostPort(host, strconv.Itoa(p+10000))
	}
	return c, nil
}

// tlsConfigs builds the client-facing TLS config and, with --tls-cluster,
// the mutual-TLS configs between nodes. TLS 1.2 is the minimum.
func tlsConfigs(c *config) (*tls.Config, *replication.TLS, error) {
	if c.tlsCert == "" && c.tlsKey == "" {
		if c.tlsCluster {
			return nil, nil, fmt.Errorf("--tls-cluster needs --tls-cert-file, --tls-key-file and --tls-ca-cert-file")
		}
		return nil, nil, nil
	}
	cert, err := tls.LoadX509KeyPair(c.tlsCert, c.tlsKey)
	if err != nil {
		return nil, nil, err
	}
	server := &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	var pool *x509.CertPool
	if c.tlsCA != "" {
		pem, err := os.ReadFile(c.tlsCA)
		if err != nil {
			return nil, nil, err
		}
		pool = x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, nil, fmt.Errorf("%s: no certificate", c.tlsCA)
		}
		server.ClientCAs = pool
		switch c.tlsAuthClients {
		case "yes":
			server.ClientAuth = tls.RequireAndVerifyClientCert
		case "optional":
			server.ClientAuth = tls.VerifyClientCertIfGiven
		case "no":
		default:
			return nil, nil, fmt.Errorf("--tls-auth-clients must be yes, no or optional")
		}
	}
	if !c.tlsCluster {
		return server, nil, nil
	}
	if pool == nil {
		return nil, nil, fmt.Errorf("--tls-cluster needs --tls-ca-cert-file")
	}
	peerServer := server.Clone()
	peerServer.ClientAuth = tls.RequireAndVerifyClientCert
	peerClient := &tls.Config{Certificates: []tls.Certificate{cert}, RootCAs: pool, MinVersion: tls.VersionTLS12}
	return server, &replication.TLS{Server: peerServer, Client: peerClient}, nil
}

// configPath finds --config on the command line before the flags are
// parsed, since the file must apply first.
func configPath(args []string) string {
	for i, a := range args {
		name, val, hasVal := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if name != "config" || !strings.HasPrefix(a, "-") {
			continue
		}
		if hasVal {
			return val
		}
		if i+1 < len(args) {
			return args[i+1]
		}
	}
	return ""
}

// loadConfigFile applies "name value" lines; # starts a comment, and a
// value may be double-quoted. Names are the flag names.
func loadConfigFile(fs *flag.FlagSet, path string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	for i, line := range strings.Split(string(data), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		name, val, _ := strings.Cut(line, " ")
		val = strings.TrimSpace(val)
		if uq, err := strconv.Unquote(val); err == nil {
			val = uq
		}
		if name == "config" || fs.Lookup(name) == nil {
			return fmt.Errorf("%s:%d: unknown setting %q", path, i+1, name)
		}
		if err := fs.Set(name, val); err != nil {
			return fmt.Errorf("%s:%d: %s: %w", path, i+1, name, err)
		}
	}
	return nil
}

// userFlags collects repeated --user flags.
type userFlags []*resp.User

func (u *userFlags) String() string { return fmt.Sprint(len(*u), " users") }

func (u *userFlags) Set(v string) error {
	user, err := resp.ParseUser(v)
	if err != nil {
		return err
	}
	*u = append(*u, user)
	return nil
}

func main() {
	if len(os.Args) > 1 && (os.Args[1] == "migrate" || os.Args[1] == "load") {
		os.Exit(movein.Run(os.Args[1], os.Args[2:]))
	}
	c, err := parseFlags(os.Args[1:])
	if err != nil {
		os.Exit(2)
	}
	var h slog.Handler = slog.NewTextHandler(os.Stderr, nil)
	if c.logFormat == "json" {
		h = slog.NewJSONHandler(os.Stderr, nil)
	}
	log := slog.New(h)
	if c.debugAddr != "" {
		go func() { log.Error("pprof", "err", http.ListenAndServe(c.debugAddr, nil)) }()
	}
	serverTLS, clusterTLS, err := tlsConfigs(c)
	if err != nil {
		fmt.Fprintln(os.Stderr, "bfserver:", err)
		os.Exit(2)
	}
	var backend resp.Backend
	var node *replication.Node
	if c.inMemory {
		backend = memstore.New()
	} else {
		var err error
		node, err = replication.Open(replication.Options{
			NodeID: c.nodeID, RaftAddr: c.raftAddr, RESPAddr: c.addr, DataDir: c.dataDir,
			Join: c.join, Password: c.requirePass, Fsync: c.fsync, FlushInterval: c.flushInterval,
			TLS:               clusterTLS,
			SnapshotThreshold: c.snapThreshold, TrailingLogs: c.trailingLogs, MaxFilterBytes: c.maxFilterBytes, Logger: log,
			NoReadLease: !c.readLease, NoFollowerLease: !c.followerLease,
		})
		if err != nil {
			fmt.Fprintln(os.Stderr, "bfserver:", err)
			os.Exit(1)
		}
		backend = node
	}
	srv := resp.New(resp.Options{
		Addr: c.addr, RequirePass: c.requirePass, MaxClients: c.maxClients, Limits: c.limits,
		ProtectedMode: c.protected, Users: c.users, TLS: serverTLS,
		MaxFilterBytes: c.maxFilterBytes, MaxMemory: c.maxMemory, Stale: c.stale, Module: &c.module, Logger: log,
	}, backend)
	if err := srv.Listen(); err != nil {
		fmt.Fprintln(os.Stderr, "bfserver:", err)
		os.Exit(1)
	}
	if c.httpAddr != "" {
		src := admin.Sources{Server: srv, State: backend.State}
		if node != nil {
			src.Replication, src.Ready = node.ReplicationInfo, node.Ready
		}
		ln, err := net.Listen("tcp", c.httpAddr)
		if err != nil {
			fmt.Fprintln(os.Stderr, "bfserver:", err)
			os.Exit(1)
		}
		go func() { log.Error("http", "err", http.Serve(ln, admin.Handler(src))) }()
	}
	log.Info("bfserver ready", "addr", srv.Addr().String(), "raft", c.raftAddr, "data", c.dataDir, "in_memory", c.inMemory)
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	go func() {
		s := <-sig
		log.Info("shutting down", "signal", s.String())
		srv.Close()
	}()
	err = srv.Serve()
	if node != nil {
		if cerr := node.Close(); cerr != nil {
			log.Error("closing the node", "err", cerr)
		}
	}
	if err != nil {
		log.Error("serve", "err", err)
		os.Exit(1)
	}
}
