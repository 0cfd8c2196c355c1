package server

import (
	"slices"
	"strings"

	"github.com/bfserver/bfserver/command"
	"github.com/bfserver/bfserver/keyspace"
	"github.com/bfserver/bfserver/resp"
)

// spec describes one command: what COMMAND INFO reports and how it runs.
type spec struct {
	name     string // lower case, as Redis registers it
	full     string // name, or parent|name for a subcommand (ACL, errors)
	parent   *spec  // of a subcommand
	arity    int    // Redis convention: n exact, -n at least n
	flags    []string
	first    int // key positions (COMMAND INFO, GETKEYS)
	last     int
	step     int
	cats     []string
	keyFlags []string // key-spec flags: RW / RO / RW access update
	module   bool     // a BF/CF command: has a key spec block

	// parse turns arguments into a keyspace command, or an error reply.
	parse func(s *session, args [][]byte) (command.Cmd, string)
	// render writes a keyspace result.
	render func(w *resp.Writer, c *command.Cmd, r *keyspace.Result)
	// run executes a command that does not touch the keyspace.
	run func(s *session, args [][]byte)
	// subs are subcommands (CLIENT SETNAME …), looked up by lower-case name.
	subs map[string]*spec
	// noMulti commands run at once even inside MULTI (EXEC, DISCARD, …).
	noMulti bool
	// noAuth commands run before authentication.
	noAuth bool
	// inline: a command that does not touch the keyspace (run) and never
	// waits, so an event loop runs it itself (server/evloop.go).
	inline bool
	// stats counts calls, errors and latency (INFO commandstats, metrics).
	stats *cmdStats
	// denyOOM: refused once MaxMemory is reached (Redis's deny-oom flag).
	denyOOM bool
	// acl is the command as ACL rules see it (its id, categories, keys).
	acl *aclCmd
	// af: the flags the operators' features read (admin.go).
	af adminFlags
}

func (sp *spec) checkArity(n int) bool {
	if sp.arity >= 0 {
		return n == sp.arity
	}
	return n >= -sp.arity
}

var commands = map[string]*spec{}

func register(sp *spec) *spec {
	commands[sp.name] = sp
	return sp
}

// initStats gives every command and subcommand its counters; it runs once
// the table is complete (zz_stats_init.go).
func initStats() {
	for _, sp := range commands {
		sp.stats = new(cmdStats)
		sp.denyOOM = slices.Contains(sp.flags, "denyoom")
		sp.full = sp.name
		for _, sub := range sp.subs {
			sub.stats = new(cmdStats)
			sub.denyOOM = slices.Contains(sub.flags, "denyoom")
			sub.full, sub.parent = sp.name+"|"+sub.name, sp
		}
	}
	initACL()
}

func lookupSpec(name []byte) *spec {
	var buf [32]byte
	if len(name) > len(buf) {
		return commands[strings.ToLower(string(name))]
	}
	for i, c := range name {
		if c >= 'A' && c <= 'Z' {
			c += 'a' - 'A'
		}
		buf[i] = c
	}
	return commands[string(buf[:len(name)])]
}

var (
	flagsWrite    = []string{"write", "denyoom", "module"}
	flagsWriteFst = []string{"write", "module", "fast"}
	flagsRead     = []string{"readonly", "module", "fast"}
)

// module registers a BF/CF command with RedisBloom's COMMAND INFO shape.
func module(name string, arity int, flags []string, cats []string, keyFlags []string,
	parse func(*session, [][]byte) (command.Cmd, string),
	render func(*resp.Writer, *command.Cmd, *keyspace.Result)) {
	register(&spec{name: name, arity: arity, flags: flags, first: 1, last: 1, step: 1,
		cats: cats, keyFlags: keyFlags, module: true, parse: parse, render: render})
}
