package server

import (
	"slices"
	"strings"
	"sync"

	"github.com/bfserver/bfserver/acl"
	"github.com/bfserver/bfserver/cmdinfo"
	"github.com/bfserver/bfserver/command"
	"github.com/bfserver/bfserver/internal/ascii"
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
	// lockedRead: a read of a value whose writes hold its lock for a
	// whole command (sketches, sliding windows: a TDIGEST.ADD of a million
	// values holds it for tens of milliseconds), so an event loop does
	// not run it: it would wait for the lock.
	lockedRead bool
	// prefetch: a filter lookup (BF/CF.EXISTS, MEXISTS), whose bits the
	// command before it in a pipeline starts loading when it is one too
	// (session.prefetchNext).
	prefetch bool
	// denyOOM: refused once MaxMemory is reached (Redis's deny-oom flag).
	denyOOM bool
	// acl is the command as ACL rules see it (its id, categories, keys).
	acl *acl.Command
	// meta is what COMMAND INFO and DOCS say of it (cmdinfo.Describe).
	meta *cmdinfo.Command
	// af: the flags the operators' features read (admin.go).
	af adminFlags
}

func (sp *spec) checkArity(n int) bool {
	if sp.arity >= 0 {
		return n == sp.arity
	}
	return n >= -sp.arity
}

// commands is the command table, by name: built once by buildTable, when
// first asked for (commandTable), and read-only from then on. Each file
// registers its commands from a function buildTable calls in a fixed
// order, not from init functions, so nothing depends on the order Go runs
// those in; what changes at run time (counters) is each Server's.
var (
	commands  map[string]*spec
	tableOnce sync.Once
)

// commandTable is the command table, built if need be.
func commandTable() map[string]*spec {
	tableOnce.Do(buildTable)
	return commands
}

func buildTable() {
	commands = map[string]*spec{}
	registerConn()
	registerFilters()
	registerKeys()
	registerWindows()
	registerCMS()
	registerTopK()
	registerTDigest()
	registerStrlen()
	registerIntrospect()
	registerACLCommands()
	registerCluster()
	// The operators' commands extend containers registered above.
	registerAdmin()
	initSpecs()
	initAdmin()
}

func register(sp *spec) *spec {
	commands[sp.name] = sp
	return sp
}

// initSpecs completes every command and subcommand once the table is:
// full names, flags, ACL ids and categories.
func initSpecs() {
	for _, sp := range commands {
		sp.denyOOM = slices.Contains(sp.flags, "denyoom")
		sp.full = sp.name
		for _, p := range []string{"cms.", "topk.", "tdigest.", "bfx.w"} {
			sp.lockedRead = sp.lockedRead || strings.HasPrefix(sp.name, p)
		}
		var subs []*cmdinfo.Command
		for _, sub := range sp.subs {
			sub.denyOOM = slices.Contains(sub.flags, "denyoom")
			sub.full, sub.parent = sp.name+"|"+sub.name, sp
			sub.meta = cmdinfo.Describe(sub.declared(), nil)
			subs = append(subs, sub.meta)
		}
		sp.meta = cmdinfo.Describe(sp.declared(), subs)
	}
	initACL()
}

// declared is what the registration says of a command, for cmdinfo.
func (sp *spec) declared() cmdinfo.Declared {
	return cmdinfo.Declared{Full: sp.full, Arity: sp.arity, Flags: sp.flags, First: sp.first, Last: sp.last, Step: sp.step,
		Categories: sp.cats, KeyFlags: sp.keyFlags, Module: sp.module}
}

func lookupSpec(name []byte) *spec {
	commandTable()
	var buf [32]byte
	if len(name) > len(buf) {
		return commands[ascii.ToLower(name)]
	}
	for i, c := range name {
		buf[i] = ascii.Lower(c)
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
	render func(*resp.Writer, *command.Cmd, *keyspace.Result)) *spec {
	return register(&spec{name: name, arity: arity, flags: flags, first: 1, last: 1, step: 1,
		cats: cats, keyFlags: keyFlags, module: true, parse: parse, render: render})
}
