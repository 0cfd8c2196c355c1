package server

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/bfserver/bfserver/command"
	"github.com/bfserver/bfserver/internal/ascii"
	"github.com/bfserver/bfserver/internal/glob"
	"github.com/bfserver/bfserver/internal/redisnum"
	"github.com/bfserver/bfserver/keyspace"
)

// ModuleConfig holds RedisBloom's bf-*/cf-* settings: the defaults a node
// resolves into commands before proposing them. Its ranges are RedisBloom's
// and the command package's (command.Validate), whether a value comes from
// a flag, the environment, a config file or CONFIG SET.
type ModuleConfig struct {
	// BFErrorRate is bf-error-rate. Default 0.01; (0, 1), capped at 0.25.
	BFErrorRate float64
	// BFInitialSize is bf-initial-size. Default 100; [1, 2^30].
	BFInitialSize int64
	// BFExpansion is bf-expansion-factor. Default 2; [0, 32768], 0 = non-scaling.
	BFExpansion int64
	// CFBucketSize is cf-bucket-size. Default 2; [1, min(255, cf-initial-size/2)].
	CFBucketSize int64
	// CFInitialSize is cf-initial-size. Default 1024; [2×bucket, 2^30].
	CFInitialSize int64
	// CFMaxIterations is cf-max-iterations. Default 20; [1, 65535].
	CFMaxIterations int64
	// CFExpansion is cf-expansion-factor. Default 1; [0, 32768].
	CFExpansion int64
	// CFMaxExpansions is cf-max-expansions. Default 32; [1, 65536].
	CFMaxExpansions int64
}

const maxCapacity = command.MaxCapacity

// DefaultModuleConfig is RedisBloom's defaults.
func DefaultModuleConfig() ModuleConfig {
	return ModuleConfig{BFErrorRate: 0.01, BFInitialSize: 100, BFExpansion: 2, CFBucketSize: 2,
		CFInitialSize: 1024, CFMaxIterations: 20, CFExpansion: 1, CFMaxExpansions: 32}
}

// ModuleSettings are the names Set takes, in CONFIG GET's order.
func ModuleSettings() []string {
	names := make([]string, len(moduleParams))
	for i, p := range moduleParams {
		names[i] = p.name
	}
	return names
}

// Set changes one setting by its RedisBloom name, within its range; the
// error is RedisBloom's text for CONFIG SET.
func (m *ModuleConfig) Set(name, value string) error {
	i := slices.IndexFunc(moduleParams, func(p configParam) bool { return p.name == name })
	if i < 0 {
		return fmt.Errorf("unknown setting %q", name)
	}
	if msg := moduleParams[i].set(m, value); msg != "" {
		return errors.New(msg)
	}
	return nil
}

// Get is one setting's value as CONFIG GET shows it.
func (m *ModuleConfig) Get(name string) string {
	i := slices.IndexFunc(moduleParams, func(p configParam) bool { return p.name == name })
	if i < 0 {
		return ""
	}
	return moduleParams[i].get(m)
}

// Validate checks every setting against its range, as Set would.
func (m *ModuleConfig) Validate() error {
	check := DefaultModuleConfig()
	// cf-bucket-size's bound depends on cf-initial-size, which comes after
	// it and is checked against it in turn.
	check.CFInitialSize = maxCapacity
	for _, name := range ModuleSettings() {
		if err := check.Set(name, m.Get(name)); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
	}
	return nil
}

// moduleState is the server's live copy of ModuleConfig, changed by CONFIG SET.
type moduleState struct {
	mu  sync.Mutex
	cfg ModuleConfig // under mu; store changes with set
	// cur is cfg as last set, for the commands that read it on every call
	// (an auto-creating BF.ADD): one atomic load, where the mutex was a
	// lock every connection shared.
	cur atomic.Pointer[ModuleConfig]
}

// set replaces the settings; mu is held.
func (m *moduleState) set(c ModuleConfig) {
	m.cfg = c
	m.cur.Store(&c)
}

func (m *moduleState) snapshot() ModuleConfig {
	if c := m.cur.Load(); c != nil {
		return *c
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.cfg
}

type configParam struct {
	name string
	get  func(m *ModuleConfig) string
	set  func(m *ModuleConfig, v string) string // error text or ""
}

func intParam(name string, field func(*ModuleConfig) *int64, lo func(*ModuleConfig) int64, hi int64) configParam {
	return configParam{
		name: name,
		get:  func(m *ModuleConfig) string { return strconv.FormatInt(*field(m), 10) },
		set: func(m *ModuleConfig, v string) string {
			n, ok := redisnum.ParseLL([]byte(v))
			if !ok {
				return "Invalid value for `" + name + "`"
			}
			if l := lo(m); n < l || n > hi {
				return fmt.Sprintf("Value for `%s` must be in the range [%d, %d]", name, l, hi)
			}
			*field(m) = n
			return ""
		},
	}
}

func constLo(v int64) func(*ModuleConfig) int64 { return func(*ModuleConfig) int64 { return v } }

var moduleParams = []configParam{
	{
		name: "bf-error-rate",
		get:  func(m *ModuleConfig) string { return strconv.FormatFloat(m.BFErrorRate, 'g', -1, 64) },
		set: func(m *ModuleConfig, v string) string {
			f, ok := redisnum.ParseDouble([]byte(v))
			if !ok {
				return "Invalid value for `bf-error-rate`"
			}
			if !(f > 0) || f >= 1 {
				return "Value for `bf-error-rate` must be in the range (0.000000, 1.000000)"
			}
			m.BFErrorRate = math.Min(f, command.MaxErrorRate)
			return ""
		},
	},
	intParam("bf-initial-size", func(m *ModuleConfig) *int64 { return &m.BFInitialSize }, constLo(1), maxCapacity),
	intParam("bf-expansion-factor", func(m *ModuleConfig) *int64 { return &m.BFExpansion }, constLo(0), command.MaxExpansion),
	{
		name: "cf-bucket-size",
		get:  func(m *ModuleConfig) string { return strconv.FormatInt(m.CFBucketSize, 10) },
		set: func(m *ModuleConfig, v string) string {
			// The upper bound is min(255, cf-initial-size/2), as RedisBloom 8 checks.
			hi := min(command.MaxBucketSize, m.CFInitialSize/2)
			return intParam("cf-bucket-size", func(m *ModuleConfig) *int64 { return &m.CFBucketSize }, constLo(1), hi).set(m, v)
		},
	},
	intParam("cf-initial-size", func(m *ModuleConfig) *int64 { return &m.CFInitialSize },
		func(m *ModuleConfig) int64 { return 2 * m.CFBucketSize }, maxCapacity),
	intParam("cf-max-iterations", func(m *ModuleConfig) *int64 { return &m.CFMaxIterations }, constLo(1), command.MaxIterations),
	intParam("cf-expansion-factor", func(m *ModuleConfig) *int64 { return &m.CFExpansion }, constLo(0), command.MaxExpansion),
	intParam("cf-max-expansions", func(m *ModuleConfig) *int64 { return &m.CFMaxExpansions }, constLo(1), command.MaxMaxExpansions),
}

// serverParam is one of the server's own settings: CONFIG GET shows it;
// CONFIG SET changes it at run time when it has a set (the rest answer
// Redis's "can't set immutable config"). flag names the cmd/bfserver
// setting CONFIG REWRITE writes it as, with value's text; "" for none.
type serverParam struct {
	name string
	get  func(s *Server) string
	// set checks v and returns what applies it, or the error text after
	// Redis's "CONFIG SET failed (possibly related to argument …) - ".
	set  func(s *Server, v string) (func(), string)
	flag string
	file func(s *Server) string
}

// The settings CONFIG SET may change at run time, and why the others may
// not: bind/port/TLS need a new listener, databases is the keyspace's
// shape, the protocol limits are read by every connection's parser without
// a lock, requirepass is the ACL's (it changes the default user, which
// every node must agree on), and save/appendonly describe the log, which
// is always on.
var serverParams = []serverParam{
	{name: "maxmemory", get: func(s *Server) string { return strconv.FormatUint(s.maxMemory.Load(), 10) },
		set: func(s *Server, v string) (func(), string) {
			n, ok := configMemory(v)
			if !ok {
				return nil, "argument must be a memory value"
			}
			return func() { s.maxMemory.Store(n) }, ""
		}, flag: "maxmemory", file: func(s *Server) string { return strconv.FormatUint(s.maxMemory.Load(), 10) }},
	{name: "maxmemory-policy", get: func(*Server) string { return "noeviction" },
		set: func(s *Server, v string) (func(), string) {
			switch ascii.ToLower(v) {
			case "noeviction":
				return func() {}, ""
			case "volatile-lru", "volatile-lfu", "volatile-random", "volatile-ttl", "allkeys-lru", "allkeys-lfu", "allkeys-random":
				return nil, "bfserver never evicts filters (an evicted filter would answer false negatives): only noeviction is supported"
			}
			return nil, "argument(s) must be one of the following: volatile-lru, volatile-lfu, volatile-random, volatile-ttl, allkeys-lru, allkeys-lfu, allkeys-random, noeviction"
		}},
	maxClientsParam(),
	intServerParam("slowlog-log-slower-than", -1, math.MaxInt64, func(s *Server) *atomic.Int64 { return &s.adm.slowlogSlower }),
	intServerParam("slowlog-max-len", 0, math.MaxInt64, func(s *Server) *atomic.Int64 { return &s.adm.slowlogMax }),
	intServerParam("latency-monitor-threshold", 0, math.MaxInt64, func(s *Server) *atomic.Int64 { return &s.adm.latencyMs }),
	{name: "protected-mode", get: func(s *Server) string { return yesNo(s.adm.protected.Load()) },
		set: func(s *Server, v string) (func(), string) {
			b, ok := parseYesNo(v)
			if !ok {
				return nil, "argument must be 'yes' or 'no'"
			}
			return func() { s.adm.protected.Store(b) }, ""
		}, flag: "protected-mode", file: func(s *Server) string { return strconv.FormatBool(s.adm.protected.Load()) }},
	{name: "read-consistency", get: func(s *Server) string {
		if s.stale.Load() {
			return "stale"
		}
		return "linearizable"
	}, set: func(s *Server, v string) (func(), string) {
		switch ascii.ToLower(v) {
		case "linearizable":
			return func() { s.stale.Store(false) }, ""
		case "stale":
			return func() { s.stale.Store(true) }, ""
		}
		return nil, "argument must be 'linearizable' or 'stale'"
	}, flag: "stale-reads", file: func(s *Server) string { return strconv.FormatBool(s.stale.Load()) }},
	{name: "save", get: func(*Server) string { return "" }},
	{name: "appendonly", get: func(*Server) string { return "no" }},
	{name: "databases", get: func(*Server) string { return strconv.Itoa(keyspace.NumDBs) }},
	{name: "port", get: func(s *Server) string { return portOf(s.boundAddr()) }},
	{name: "bind", get: func(s *Server) string { return hostOf(s.boundAddr()) }},
	{name: "timeout", get: func(*Server) string { return "0" }},
	{name: "proto-max-bulk-len", get: func(s *Server) string { return strconv.FormatInt(s.opts.Limits.MaxBulk, 10) }},
	{name: "client-query-buffer-limit", get: func(s *Server) string { return strconv.Itoa(s.opts.Limits.MaxQueryBuffer) }},
	{name: "enable-debug-command", get: func(s *Server) string { return s.opts.EnableDebugCommand }},
	{name: "hz", get: func(s *Server) string { return strconv.FormatInt(s.hz.Load(), 10) },
		set: func(s *Server, v string) (func(), string) {
			n, ok := redisnum.ParseLL([]byte(v))
			if !ok {
				return nil, "argument couldn't be parsed into an integer"
			}
			if n < 0 || n > math.MaxInt32 {
				return nil, "argument must be between 0 and 2147483647 inclusive"
			}
			return func() { s.hz.Store(clampHz(n)) }, ""
		}},
	// Go's allocator has no active defragmentation: "yes" is refused as
	// Redis refuses it when built without a defragmenting jemalloc.
	{name: "activedefrag", get: func(*Server) string { return "no" },
		set: func(s *Server, v string) (func(), string) {
			on, ok := parseYesNo(v)
			switch {
			case !ok:
				return nil, "argument must be 'yes' or 'no'"
			case on:
				return nil, "Active defragmentation cannot be enabled: it requires a Redis server compiled with a modified Jemalloc like the one shipped by default with the Redis source distribution"
			}
			return func() {}, ""
		}},
	{name: "requirepass"}, // never shown, never set here
}

// maxClientsParam is maxclients: within its range, and, as in Redis, no
// more than the process's descriptor limit leaves room for
// (Options.ClientFDs).
func maxClientsParam() serverParam {
	p := intServerParam("maxclients", 1, 1<<20, func(s *Server) *atomic.Int64 { return &s.adm.maxClients })
	set := p.set
	p.set = func(s *Server, v string) (func(), string) {
		apply, msg := set(s, v)
		if msg != "" {
			return nil, msg
		}
		if n, _ := redisnum.ParseLL([]byte(v)); s.opts.ClientFDs > 0 && n > int64(s.opts.ClientFDs) {
			return nil, fmt.Sprintf("The operating system is not able to handle the specified number of clients, try with %d", s.opts.ClientFDs)
		}
		return apply, ""
	}
	return p
}

func intServerParam(name string, lo, hi int64, field func(s *Server) *atomic.Int64) serverParam {
	return serverParam{name: name,
		get: func(s *Server) string { return strconv.FormatInt(field(s).Load(), 10) },
		set: func(s *Server, v string) (func(), string) {
			n, ok := redisnum.ParseLL([]byte(v))
			if !ok {
				return nil, "argument couldn't be parsed into an integer"
			}
			if n < lo || n > hi {
				return nil, fmt.Sprintf("argument must be between %d and %d inclusive", lo, hi)
			}
			return func() { field(s).Store(n) }, ""
		}, flag: name, file: func(s *Server) string { return strconv.FormatInt(field(s).Load(), 10) }}
}

// configMemory reads a maxmemory value as Redis 8's CONFIG SET does
// (memtoull): digits, then an optional unit (b, k, kb, m, mb, g, gb, any
// case; k is 1000, kb 1024); no digits is 0, and a value past 64 bits is
// the largest one.
func configMemory(v string) (uint64, bool) {
	u := strings.IndexFunc(v, func(r rune) bool { return r < '0' || r > '9' })
	if u < 0 {
		u = len(v)
	}
	mul := uint64(0)
	switch ascii.ToLower(v[u:]) {
	case "", "b":
		mul = 1
	case "k":
		mul = 1000
	case "kb":
		mul = 1 << 10
	case "m":
		mul = 1000 * 1000
	case "mb":
		mul = 1 << 20
	case "g":
		mul = 1000 * 1000 * 1000
	case "gb":
		mul = 1 << 30
	default:
		return 0, false
	}
	if u == 0 {
		return 0, true
	}
	n, err := strconv.ParseUint(v[:u], 10, 64)
	if err != nil || n > math.MaxUint64/mul {
		return math.MaxUint64, true
	}
	return n * mul, true
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

func parseYesNo(v string) (bool, bool) {
	switch ascii.ToLower(v) {
	case "yes":
		return true, true
	case "no":
		return false, true
	}
	return false, false
}

func lookupServerParam(name string) *serverParam {
	for i := range serverParams {
		if ascii.EqualFold(serverParams[i].name, name) {
			return &serverParams[i]
		}
	}
	return nil
}

// configGet returns name/value pairs matching the glob patterns.
func (s *Server) configGet(patterns [][]byte) [][2]string {
	s.module.mu.Lock()
	defer s.module.mu.Unlock()
	m := &s.module.cfg
	var out [][2]string
	seen := map[string]bool{}
	add := func(name string, val func() string) {
		for _, p := range patterns {
			if !seen[name] && globMatchFold(string(p), name) {
				seen[name] = true
				out = append(out, [2]string{name, val()})
			}
		}
	}
	for _, p := range moduleParams {
		add(p.name, func() string { return p.get(m) })
	}
	for _, p := range serverParams {
		if p.get != nil {
			add(p.name, func() string { return p.get(s) })
		}
	}
	// A name that is not a pattern answers under the caller's spelling,
	// as Redis does (CONFIG GET MAXMEMORY).
	for i, pair := range out {
		for _, p := range patterns {
			if ascii.EqualFold(p, pair[0]) && !strings.ContainsAny(string(p), "[*?") {
				out[i][0] = string(p)
				break
			}
		}
	}
	return out
}

func portOf(addr string) string {
	if i := strings.LastIndexByte(addr, ':'); i >= 0 {
		return addr[i+1:]
	}
	return addr
}

func hostOf(addr string) string {
	if i := strings.LastIndexByte(addr, ':'); i >= 0 {
		return strings.Trim(addr[:i], "[]")
	}
	return ""
}

// boundAddr is the listening address, or the configured one before Listen.
func (s *Server) boundAddr() string {
	if s.ln != nil {
		return s.ln.Addr().String()
	}
	return s.opts.Addr
}

// configSet applies name/value pairs atomically, all or none, checked in
// Redis's order: every name is looked up first (unknown, immutable and
// duplicate names answer before any value is read), then the values are
// checked in turn, and only then applied.
func (s *Server) configSet(pairs [][]byte) string {
	s.adm.cfgMu.Lock()
	defer s.adm.cfgMu.Unlock()
	type item struct {
		name, value string
		sp          *serverParam
		module      bool
	}
	var items []item
	seen := map[string]bool{}
	for i := 0; i+1 < len(pairs); i += 2 {
		arg := string(pairs[i])
		name := ascii.ToLower(arg)
		it := item{name: name, value: string(pairs[i+1])}
		if slices.ContainsFunc(moduleParams, func(p configParam) bool { return p.name == name }) {
			it.module = true
		} else if it.sp = lookupServerParam(name); it.sp == nil {
			return "ERR Unknown option or number of arguments for CONFIG SET - '" + sanitize(arg, 128) + "'"
		} else if it.sp.set == nil {
			return "ERR CONFIG SET failed (possibly related to argument '" + sanitize(arg, 128) + "') - can't set immutable config"
		}
		if seen[name] {
			return "ERR CONFIG SET failed (possibly related to argument '" + sanitize(arg, 128) + "') - duplicate parameter"
		}
		seen[name] = true
		items = append(items, it)
	}
	s.module.mu.Lock()
	defer s.module.mu.Unlock()
	m := s.module.cfg
	var apply []func()
	for _, it := range items {
		if it.module {
			idx := slices.IndexFunc(moduleParams, func(p configParam) bool { return p.name == it.name })
			if msg := moduleParams[idx].set(&m, it.value); msg != "" {
				return "ERR CONFIG SET failed (possibly related to argument '" + it.name + "') - " + msg
			}
			continue
		}
		f, msg := it.sp.set(s, it.value)
		if msg != "" {
			return "ERR CONFIG SET failed (possibly related to argument '" + it.sp.name + "') - " + msg
		}
		apply = append(apply, f)
	}
	s.module.set(m)
	for _, f := range apply {
		f()
	}
	for _, it := range items {
		s.adm.changed[it.name] = true
	}
	return ""
}

func globMatchFold(p, s string) bool {
	return glob.Match([]byte(ascii.ToLower(p)), []byte(ascii.ToLower(s)))
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
