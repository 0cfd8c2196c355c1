package resp

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/bfserver/bfserver/command"
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
	cfg ModuleConfig
}

func (m *moduleState) snapshot() ModuleConfig {
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
			n, ok := parseInt([]byte(v))
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
			f, ok := parseFloat([]byte(v))
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

// serverParams are answered for tools that probe them (redis-benchmark
// reads save and appendonly); they are fixed.
var serverParams = map[string]string{
	"save":        "",
	"appendonly":  "no",
	"databases":   "16",
	"maxmemory":   "",
	"port":        "",
	"requirepass": "",
	"maxclients":  "",

	"read-consistency":          "",
	"proto-max-bulk-len":        "",
	"client-query-buffer-limit": "",
}

// configGet returns name/value pairs matching the glob patterns.
func (s *Server) configGet(patterns [][]byte) [][2]string {
	s.module.mu.Lock()
	defer s.module.mu.Unlock()
	m := &s.module.cfg
	var out [][2]string
	seen := map[string]bool{}
	add := func(name, val string) {
		for _, p := range patterns {
			if !seen[name] && globMatchFold(string(p), name) {
				seen[name] = true
				out = append(out, [2]string{name, val})
			}
		}
	}
	for _, p := range moduleParams {
		add(p.name, p.get(m))
	}
	names := make([]string, 0, len(serverParams))
	for n := range serverParams {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		v := serverParams[n]
		switch n {
		case "port":
			v = portOf(s.opts.Addr)
		case "maxclients":
			v = strconv.Itoa(s.opts.MaxClients)
		case "maxmemory":
			v = strconv.FormatUint(s.maxMemory.Load(), 10)
		case "proto-max-bulk-len":
			v = strconv.FormatInt(s.opts.Limits.MaxBulk, 10)
		case "client-query-buffer-limit":
			v = strconv.Itoa(s.opts.Limits.MaxQueryBuffer)
		case "requirepass":
			continue // never echoed
		case "read-consistency":
			v = "linearizable"
			if s.stale.Load() {
				v = "stale"
			}
		}
		add(n, v)
	}
	return out
}

func portOf(addr string) string {
	if i := strings.LastIndexByte(addr, ':'); i >= 0 {
		return addr[i+1:]
	}
	return addr
}

// configSet applies name/value pairs atomically: all or nothing.
func (s *Server) configSet(pairs [][]byte) string {
	stale, maxMem := -1, int64(-1)
	rest := pairs[:0:0]
	for i := 0; i+1 < len(pairs); i += 2 {
		switch strings.ToLower(string(pairs[i])) {
		case "read-consistency": // the server's default for new connections
			switch strings.ToLower(string(pairs[i+1])) {
			case "linearizable":
				stale = 0
			case "stale":
				stale = 1
			default:
				return "ERR CONFIG SET failed (possibly related to argument 'read-consistency') - argument must be 'linearizable' or 'stale'"
			}
		case "maxmemory":
			v, err := ParseMemory(string(pairs[i+1]))
			if err != nil || v > math.MaxInt64 {
				return "ERR CONFIG SET failed (possibly related to argument 'maxmemory') - argument must be a memory value"
			}
			maxMem = int64(v)
		default:
			rest = append(rest, pairs[i], pairs[i+1])
		}
	}
	if msg := s.setModule(rest); msg != "" {
		return msg
	}
	if stale >= 0 {
		s.stale.Store(stale == 1)
	}
	if maxMem >= 0 {
		s.maxMemory.Store(uint64(maxMem))
	}
	return ""
}

// setModule applies bf-*/cf-* pairs, all or none.
func (s *Server) setModule(pairs [][]byte) string {
	s.module.mu.Lock()
	defer s.module.mu.Unlock()
	m := &s.module.cfg
	backup := *m
	for i := 0; i+1 < len(pairs); i += 2 {
		name := strings.ToLower(string(pairs[i]))
		idx := slices.IndexFunc(moduleParams, func(p configParam) bool { return p.name == name })
		if idx < 0 {
			*m = backup
			return "ERR Unknown option or number of arguments for CONFIG SET - '" + sanitize(string(pairs[i]), 128) + "'"
		}
		if msg := moduleParams[idx].set(m, string(pairs[i+1])); msg != "" {
			*m = backup
			return "ERR CONFIG SET failed (possibly related to argument '" + name + "') - " + msg
		}
	}
	return ""
}

func globMatchFold(p, s string) bool {
	return keyspace.Match([]byte(strings.ToLower(p)), []byte(strings.ToLower(s)))
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
