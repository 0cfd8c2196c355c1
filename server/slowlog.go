package server

import (
	"math"
	"slices"
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

// slowlog keeps its entries in a ring: a pipelined bulk load puts most of
// its commands here (each waits on a commit past the threshold: 13% of a
// million pipelined creations), and a log trimmed by slicing its front off
// had append copy the kept entries into a new array every few pushes (35
// MB of garbage in 12 s of a load).
type slowlog struct {
	mu sync.Mutex
	// ring holds the entries, the oldest at head once it has wrapped
	// (len(ring) == slowlog-max-len); until then head is 0, the oldest
	// first, and pushes append.
	ring   []slowEntry
	head   int
	nextID int64
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
	l.add(e, maxLen)
}

// add puts e in the ring, which keeps the newest maxLen entries (as Redis
// trims its list on each push).
func (l *slowlog) add(e slowEntry, maxLen int64) {
	limit := int(min(max(maxLen, 0), math.MaxInt32))
	if len(l.ring) > limit || len(l.ring) < limit && l.head != 0 {
		// slowlog-max-len changed: keep the newest, oldest first.
		kept := l.newest(limit)
		slices.Reverse(kept)
		l.ring, l.head = kept, 0
	}
	if len(l.ring) < limit {
		l.ring = append(l.ring, e)
		return
	}
	if limit == 0 {
		return
	}
	l.ring[l.head] = e
	l.head = (l.head + 1) % len(l.ring)
}

// newest is up to n of the entries, the newest first, in an array of
// their own.
func (l *slowlog) newest(n int) []slowEntry {
	n = min(n, len(l.ring))
	out := make([]slowEntry, 0, n)
	for i := range n {
		out = append(out, l.ring[(l.head-1-i+2*len(l.ring))%len(l.ring)])
	}
	return out
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
	return int64(len(l.ring))
}

func (l *slowlog) reset() {
	l.mu.Lock()
	l.ring, l.head = nil, 0
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
	n := len(l.ring)
	if count >= 0 {
		n = int(min(int64(n), count))
	}
	out := l.newest(n)
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
