package server

import (
	"strconv"
	"sync"
	"time"

	"github.com/bfserver/bfserver/internal/ascii"
	"github.com/bfserver/bfserver/internal/redisnum"
)

// SLOWLOG: the commands that ran at least slowlog-log-slower-than
// microseconds, newest first, at most slowlog-max-len of them. A
// command's time is from when it was read until its result was known: for
// a write, the time its batch took to commit through the log (which Redis,
// writing to memory, does not have), so with fsync on every write a slow
// disk shows here.

// Redis's bounds on what an entry keeps of a command.
const (
	slowlogMaxArgc   = 32
	slowlogMaxString = 128
)

type slowEntry struct {
	id   int64
	at   int64 // Unix seconds
	usec int64
	args []string
	addr string
	name string
}

type slowlog struct {
	mu      sync.Mutex
	entries []slowEntry // oldest first
	nextID  int64
}

// push records a command that ran for d; maxLen is slowlog-max-len.
func (l *slowlog) push(s *session, args [][]byte, d time.Duration, maxLen int64) {
	e := slowEntry{at: time.Now().Unix(), usec: d.Microseconds(), addr: s.adm.raddr, name: *s.name.Load()}
	red := redacted(args)
	n := min(len(args), slowlogMaxArgc)
	e.args = make([]string, n)
	for i := range n {
		switch {
		case i == slowlogMaxArgc-1 && len(args) > slowlogMaxArgc:
			e.args[i] = "... (" + strconv.Itoa(len(args)-slowlogMaxArgc+1) + " more arguments)"
		case red(i):
			e.args[i] = "(redacted)"
		case len(args[i]) > slowlogMaxString:
			e.args[i] = string(args[i][:slowlogMaxString]) + "... (" + strconv.Itoa(len(args[i])-slowlogMaxString) + " more bytes)"
		default:
			e.args[i] = string(args[i])
		}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	e.id = l.nextID
	l.nextID++
	l.entries = append(l.entries, e)
	l.trim(maxLen)
}

func (l *slowlog) trim(maxLen int64) {
	if over := int64(len(l.entries)) - max(maxLen, 0); over > 0 {
		// Dropped from the front: a full log does not move every entry per
		// push; append copies the kept ones when it next grows.
		l.entries = l.entries[over:]
	}
}

// redacted says which arguments the slow log and MONITOR hide, as Redis
// redacts them: AUTH's, HELLO's AUTH pair, CONFIG SET requirepass's value
// and ACL SETUSER's rules.
func redacted(args [][]byte) func(i int) bool {
	none := func(int) bool { return false }
	if len(args) < 2 {
		return none
	}
	switch ascii.ToLower(args[0]) {
	case "auth":
		return func(i int) bool { return i >= 1 }
	case "hello":
		var hide []int
		for i := 2; i < len(args); i++ {
			if ascii.EqualFold(args[i], "auth") && i+2 < len(args) {
				hide = append(hide, i+1, i+2)
				i += 2
			} else if ascii.EqualFold(args[i], "setname") && i+1 < len(args) {
				i++
			} else {
				break // HELLO stops at the option it cannot read
			}
		}
		return func(i int) bool {
			for _, h := range hide {
				if h == i {
					return true
				}
			}
			return false
		}
	case "config":
		if !ascii.EqualFold(args[1], "set") {
			return none
		}
		return func(i int) bool {
			return i >= 3 && i%2 == 1 && ascii.EqualFold(args[i-1], "requirepass")
		}
	case "acl":
		if !ascii.EqualFold(args[1], "setuser") {
			return none
		}
		return func(i int) bool { return i >= 2 }
	}
	return none
}

func registerSlowlog() {
	conn("slowlog", -2, nil, nil, nil).subs = map[string]*spec{
		"get":   {name: "get", arity: -2, run: cmdSlowlogGet},
		"len":   {name: "len", arity: 2, run: func(s *session, a [][]byte) { s.w.Int(s.srv.adm.slowlog.len()) }},
		"reset": {name: "reset", arity: 2, run: func(s *session, a [][]byte) { s.srv.adm.slowlog.reset(); s.w.Simple("OK") }},
		"help":  {name: "help", arity: 2, run: func(s *session, a [][]byte) { writeHelp(&s.w, slowlogHelp) }},
	}
}

func (l *slowlog) len() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return int64(len(l.entries))
}

func (l *slowlog) reset() {
	l.mu.Lock()
	l.entries = nil
	l.mu.Unlock()
}

func cmdSlowlogGet(s *session, a [][]byte) {
	if len(a) > 3 {
		subcommandSyntax(s, a)
		return
	}
	count := int64(10)
	if len(a) == 3 {
		n, ok := redisnum.ParseLL(a[2])
		if !ok || n < -1 {
			s.w.Error("ERR count should be greater than or equal to -1")
			return
		}
		count = n
	}
	l := &s.srv.adm.slowlog
	l.mu.Lock()
	n := int64(len(l.entries))
	if count >= 0 {
		n = min(n, count)
	}
	out := make([]slowEntry, 0, n)
	for i := len(l.entries) - 1; i >= 0 && int64(len(out)) < n; i-- {
		out = append(out, l.entries[i])
	}
	l.mu.Unlock()
	s.w.Array(len(out))
	for _, e := range out {
		s.w.Array(6)
		s.w.Int(e.id)
		s.w.Int(e.at)
		s.w.Int(e.usec)
		s.w.Array(len(e.args))
		for _, x := range e.args {
			s.w.BulkString(x)
		}
		s.w.BulkString(e.addr)
		s.w.BulkString(e.name)
	}
}

var slowlogHelp = []string{
	"SLOWLOG <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
	"GET [<count>]",
	"    Return top <count> entries from the slowlog (default: 10, -1 mean all).",
	"    Entries are made of:",
	"    id, timestamp, time in microseconds, arguments array, client IP and port,",
	"    client name",
	"LEN",
	"    Return the length of the slowlog.",
	"RESET",
	"    Reset the slowlog.",
	"HELP",
	"    Print this help.",
}
