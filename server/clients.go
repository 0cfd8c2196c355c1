package server

import (
	"crypto/tls"
	"math"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"github.com/bfserver/bfserver/acl"
	"github.com/bfserver/bfserver/internal/ascii"
	"github.com/bfserver/bfserver/internal/redisnum"
	"github.com/bfserver/bfserver/resp"
)

// CLIENT: the connection's own settings and the operators' view of every
// connection. A session publishes what others may read of it (clientPub)
// after each command; CLIENT LIST and KILL read only that.

// clientPub is what a session shows other goroutines.
type clientPub struct {
	word    atomic.Uint64 // db | proto<<8 | flags<<16 | (multi+1)<<32
	user    atomic.Pointer[acl.User]
	lastCmd atomic.Pointer[spec] // nil: no command yet, or an unknown one
	lastIO  atomic.Int64         // Unix nanoseconds of the last input
	lib     atomic.Pointer[[2]string]
	qbuf    atomic.Int64 // unparsed bytes in the query buffer
	rbs     atomic.Int64 // the query buffer's size
	rbp     atomic.Int64 // its peak
	omem    atomic.Int64 // bytes waiting to be written (MONITOR output)
	wbuf    atomic.Int64 // the reply buffer's size
	// keyspace_hits and _misses of this connection, added to the server's
	// when it closes: counting them here costs the owner an uncontended add
	hits, misses atomic.Int64
	// negatives are its membership checks answered 0, the same way.
	negatives atomic.Int64
	// io counts this connection's reads and writes and their bytes, the
	// same way (ioNetIn…).
	io [ioCounts]atomic.Int64
}

// The connection's I/O counters, INFO stats' total_net_input_bytes,
// total_net_output_bytes, total_reads_processed and total_writes_processed.
const (
	ioNetIn = iota
	ioNetOut
	ioReads
	ioWrites
	ioCounts
)

// Client flags, as CLIENT LIST prints them.
const (
	cflMulti = 1 << iota
	cflMonitor
	cflBlocked
	cflNoEvict
	cflNoTouch
	cflCloseAfterReply
)

func (a *sessionAdmin) init(nc net.Conn) {
	a.killed = make(chan struct{})
	a.raddr, a.laddr = nc.RemoteAddr().String(), nc.LocalAddr().String()
	a.fd = connFD(nc)
	a.quiet = -1
	a.pub.lastIO.Store(time.Now().UnixNano())
}

// connFD is the socket's file descriptor, or -1.
func connFD(nc net.Conn) int {
	if t, ok := nc.(*tls.Conn); ok {
		nc = t.NetConn()
	}
	sc, ok := nc.(syscall.Conn)
	if !ok {
		return -1
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return -1
	}
	fd := -1
	rc.Control(func(f uintptr) { fd = int(f) })
	return fd
}

// publish makes the session's state visible to CLIENT LIST: once per
// command, a few stores.
func (s *session) publish() {
	a := &s.adm
	var fl uint64
	if s.multi {
		fl |= cflMulti
	}
	if a.mon != nil {
		fl |= cflMonitor
	}
	if a.paused {
		fl |= cflBlocked
	}
	if a.noEvict {
		fl |= cflNoEvict
	}
	if a.noTouch {
		fl |= cflNoTouch
	}
	if s.closing {
		fl |= cflCloseAfterReply
	}
	multi := uint64(0)
	if s.multi {
		multi = uint64(len(s.queue)) + 1
	}
	if w := uint64(s.db) | uint64(s.w.Proto)<<8 | fl<<16 | multi<<32; w != a.word {
		a.word = w
		a.pub.word.Store(w)
	}
	if l := a.pub.lib.Load(); l == nil || l[0] != s.libName || l[1] != s.libVer {
		a.pub.lib.Store(&[2]string{s.libName, s.libVer})
	}
}

// kill closes the connection from another goroutine (CLIENT KILL, SHUTDOWN):
// its reads fail and a CLIENT PAUSE wait ends.
func (s *session) kill() {
	s.adm.kill.Do(func() {
		close(s.adm.killed)
		s.adm.connMu.Lock() // the connection may be leaving its loop (detach)
		defer s.adm.connMu.Unlock()
		if s.ev != nil {
			s.ev.Close()
		} else {
			s.nc.Close()
		}
	})
}

const sessionSize = int64(unsafe.Sizeof(session{}))

// clientLine is one CLIENT LIST line, in Redis's fields and order. For the
// calling session (self) it reports the command being run.
func (s *session) clientLine(self bool) string {
	a := &s.adm
	p := &a.pub
	w := p.word.Load()
	db, proto, fl, multi := int(w&0xff), int(w>>8&0xff), w>>16&0xffff, int64(w>>32)-1
	now := time.Now()
	var flags []byte
	if fl&cflMonitor != 0 {
		flags = append(flags, 'O')
	}
	if fl&cflMulti != 0 {
		flags = append(flags, 'x')
	}
	if fl&cflBlocked != 0 {
		flags = append(flags, 'b')
	}
	if fl&cflCloseAfterReply != 0 {
		flags = append(flags, 'c')
	}
	if fl&cflNoEvict != 0 {
		flags = append(flags, 'e')
	}
	if fl&cflNoTouch != 0 {
		flags = append(flags, 'T')
	}
	if len(flags) == 0 {
		flags = append(flags, 'N')
	}
	qbuf, rbs, argv, obl := p.qbuf.Load(), p.rbs.Load(), int64(0), int64(0)
	if self {
		qbuf, rbs, obl = int64(a.qnow), int64(a.qcap), int64(len(s.w.Buf))
		for _, x := range a.args {
			argv += int64(len(x))
		}
	}
	qfree := max(rbs-qbuf, 0)
	omem := p.omem.Load()
	multiMem := int64(0)
	if self && s.multi {
		for _, q := range s.queue {
			for _, x := range q.args {
				multiMem += int64(len(x))
			}
		}
	}
	events := "r"
	if omem > 0 {
		events = "rw"
	}
	cmd := "NULL"
	if sp := p.lastCmd.Load(); sp != nil {
		cmd = sp.full
	}
	user := "default"
	if u := p.user.Load(); u != nil {
		user = u.Name
	}
	lib := [2]string{}
	if l := p.lib.Load(); l != nil {
		lib = *l
	}
	idle := now.Sub(time.Unix(0, p.lastIO.Load()))
	if self {
		idle = 0
	}
	totMem := sessionSize + rbs + p.wbuf.Load() + omem + argv + multiMem
	var b strings.Builder
	b.Grow(320)
	field := func(k, v string) {
		if b.Len() > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(k)
		b.WriteByte('=')
		b.WriteString(v)
	}
	num := func(k string, v int64) { field(k, strconv.FormatInt(v, 10)) }
	num("id", s.id)
	field("addr", a.raddr)
	field("laddr", a.laddr)
	num("fd", int64(a.fd))
	field("name", *s.name.Load())
	num("age", int64(now.Sub(s.created)/time.Second))
	num("idle", int64(idle/time.Second))
	field("flags", string(flags))
	num("db", int64(db))
	num("sub", 0)
	num("psub", 0)
	num("ssub", 0)
	num("multi", multi)
	num("watch", 0)
	num("qbuf", qbuf)
	num("qbuf-free", qfree)
	num("argv-mem", argv)
	num("multi-mem", multiMem)
	num("rbs", rbs)
	num("rbp", max(p.rbp.Load(), rbs))
	num("obl", obl)
	num("oll", 0)
	num("omem", omem)
	num("tot-mem", totMem)
	field("events", events)
	field("cmd", cmd)
	field("user", user)
	num("redir", -1)
	num("resp", int64(proto))
	field("lib-name", lib[0])
	field("lib-ver", lib[1])
	return b.String()
}

// sessions lists the connected clients by id, as Redis's client list
// runs in connection order.
func (s *Server) sessions() []*session {
	l := s.clientList()
	slices.SortFunc(l, func(a, b *session) int { return int(a.id - b.id) })
	return l
}

// clientType is a client's class for CLIENT LIST/KILL TYPE: MONITOR
// clients are replicas to Redis, every other one is normal.
func (s *session) clientType() string {
	if s.adm.pub.word.Load()>>16&cflMonitor != 0 {
		return "replica"
	}
	return "normal"
}

// parseClientType is Redis's getClientTypeByName.
func parseClientType(v []byte) (string, bool) {
	switch ascii.ToLower(v) {
	case "normal":
		return "normal", true
	case "slave", "replica":
		return "replica", true
	case "pubsub":
		return "pubsub", true
	case "master":
		return "master", true
	}
	return "", false
}

// registerClient completes CLIENT's subcommands (conn.go registers the
// container).
func registerClient() {
	cl := commands["client"].subs
	cl["info"].run = func(s *session, a [][]byte) {
		s.publish()
		s.w.Verbatim(s.clientLine(true) + "\n")
	}
	cl["list"].run = cmdClientList
	cl["kill"] = &spec{name: "kill", arity: -3, run: cmdClientKill}
	cl["no-evict"].run = func(s *session, a [][]byte) { cmdClientOnOff(s, a, &s.adm.noEvict) }
	cl["no-touch"].run = func(s *session, a [][]byte) { cmdClientOnOff(s, a, &s.adm.noTouch) }
	cl["pause"] = &spec{name: "pause", arity: -3, run: cmdClientPause}
	cl["unpause"] = &spec{name: "unpause", arity: 2, run: func(s *session, a [][]byte) {
		s.srv.adm.pause.unpause()
		s.w.Simple("OK")
	}}
	cl["reply"].run = cmdClientReply
	cl["getredir"] = &spec{name: "getredir", arity: 2, run: func(s *session, a [][]byte) { s.w.Int(-1) }}
	cl["trackinginfo"] = &spec{name: "trackinginfo", arity: 2, run: cmdClientTrackingInfo}
	cl["caching"] = &spec{name: "caching", arity: 3, run: func(s *session, a [][]byte) {
		s.w.Error("ERR CLIENT CACHING can be called only when the client is in tracking mode with OPTIN or OPTOUT mode enabled")
	}}
	cl["tracking"] = &spec{name: "tracking", arity: -3, run: func(s *session, a [][]byte) {
		s.w.Error("ERR bfserver does not support client-side caching (CLIENT TRACKING)")
	}}
	cl["unblock"] = &spec{name: "unblock", arity: -3, run: cmdClientUnblock}
	cl["help"].run = func(s *session, a [][]byte) { writeHelp(&s.w, clientHelp) }
}

func cmdClientList(s *session, a [][]byte) {
	var b strings.Builder
	s.publish()
	line := func(c *session) {
		b.WriteString(c.clientLine(c == s))
		b.WriteByte('\n')
	}
	switch {
	case len(a) == 2:
		for _, c := range s.srv.sessions() {
			line(c)
		}
	case len(a) == 4 && ascii.EqualFold(a[2], "type"):
		typ, ok := parseClientType(a[3])
		if !ok {
			s.w.Error("ERR Unknown client type '" + sanitize(string(a[3]), 128) + "'")
			return
		}
		for _, c := range s.srv.sessions() {
			if c.clientType() == typ {
				line(c)
			}
		}
	case len(a) > 3 && ascii.EqualFold(a[2], "id"):
		ids := make([]int64, 0, len(a)-3)
		for _, x := range a[3:] {
			id, ok := redisnum.ParseLL(x)
			if !ok {
				s.w.Error("ERR Invalid client ID")
				return
			}
			ids = append(ids, id)
		}
		byID := map[int64]*session{}
		for _, c := range s.srv.clientList() {
			byID[c.id] = c
		}
		for _, id := range ids {
			if c := byID[id]; c != nil {
				line(c)
			}
		}
	default:
		s.w.Error(msgSyntax)
		return
	}
	s.w.Verbatim(b.String())
}

// cmdClientKill is CLIENT KILL addr (the old form, which may kill the
// caller) or CLIENT KILL <filter value>..., with Redis's checks in its
// order. Other clients are closed at once; the caller after its reply.
func cmdClientKill(s *session, a [][]byte) {
	var (
		addr, laddr, typ string
		id, maxAge       int64
		user             *acl.User
		skipMe           = true
	)
	if len(a) == 3 {
		addr, skipMe = string(a[2]), false
	} else {
		for i := 2; i < len(a); i += 2 {
			opt := ascii.ToLower(a[i])
			if i+1 >= len(a) {
				s.w.Error(msgSyntax)
				return
			}
			v := a[i+1]
			switch opt {
			case "id":
				n, ok := redisnum.ParseLL(v)
				if !ok || n < 1 {
					s.w.Error("ERR client-id should be greater than 0")
					return
				}
				id = n
			case "maxage":
				n, ok := redisnum.ParseLL(v)
				if !ok {
					s.w.Error("ERR maxage is not an integer or out of range")
					return
				}
				if n <= 0 {
					s.w.Error("ERR maxage should be greater than 0")
					return
				}
				maxAge = n
			case "type":
				t, ok := parseClientType(v)
				if !ok {
					s.w.Error("ERR Unknown client type '" + sanitize(string(v), 128) + "'")
					return
				}
				typ = t
			case "addr":
				addr = string(v)
			case "laddr":
				laddr = string(v)
			case "user":
				user = s.srv.acl().users[string(v)]
				if user == nil {
					s.w.Error("ERR No such user '" + sanitize(string(v), 128) + "'")
					return
				}
			case "skipme":
				switch ascii.ToLower(v) {
				case "yes":
					skipMe = true
				case "no":
					skipMe = false
				default:
					s.w.Error(msgSyntax)
					return
				}
			default:
				s.w.Error(msgSyntax)
				return
			}
		}
	}
	s.publish()
	now := time.Now()
	var victims []*session
	for _, c := range s.srv.sessions() {
		switch {
		case addr != "" && c.adm.raddr != addr,
			laddr != "" && c.adm.laddr != laddr,
			typ != "" && c.clientType() != typ,
			id != 0 && c.id != id,
			user != nil && (c.adm.pub.user.Load() == nil || c.adm.pub.user.Load().Name != user.Name),
			skipMe && c == s,
			maxAge != 0 && int64(now.Sub(c.created)/time.Second) < maxAge:
			continue
		}
		victims = append(victims, c)
	}
	if len(a) == 3 {
		if len(victims) == 0 {
			s.w.Error("ERR No such client")
			return
		}
		s.w.Simple("OK")
	} else {
		s.w.Int(int64(len(victims)))
	}
	for _, c := range victims {
		if c == s {
			s.closing = true
		} else {
			c.kill()
		}
	}
}

func cmdClientOnOff(s *session, a [][]byte, flag *bool) {
	switch ascii.ToLower(a[2]) {
	case "on":
		*flag = true
	case "off":
		*flag = false
	default:
		s.w.Error(msgSyntax)
		return
	}
	s.w.Simple("OK")
}

// cmdClientReply is CLIENT REPLY ON|OFF|SKIP, as Redis: OFF and SKIP
// answer nothing, ON answers +OK.
func cmdClientReply(s *session, a [][]byte) {
	switch ascii.ToLower(a[2]) {
	case "on":
		s.adm.replyOff, s.adm.skipThis, s.adm.skipNext = false, false, false
		s.w.Simple("OK")
	case "off":
		s.adm.replyOff = true
	case "skip":
		if !s.adm.replyOff {
			s.adm.skipNext = true
		}
	default:
		s.w.Error(msgSyntax)
	}
}

func cmdClientTrackingInfo(s *session, a [][]byte) {
	s.w.Map(3)
	s.w.BulkString("flags")
	s.w.Set(1)
	s.w.BulkString("off")
	s.w.BulkString("redirect")
	s.w.Int(-1)
	s.w.BulkString("prefixes")
	s.w.Array(0)
}

// cmdClientUnblock: no client here is ever blocked in a way UNBLOCK can
// end (a CLIENT PAUSE wait is not, in Redis either).
func cmdClientUnblock(s *session, a [][]byte) {
	if len(a) > 4 {
		subcommandSyntax(s, a)
		return
	}
	if len(a) == 4 {
		if r := ascii.ToLower(a[3]); r != "timeout" && r != "error" {
			s.w.Error("ERR CLIENT UNBLOCK reason should be TIMEOUT or ERROR")
			return
		}
	}
	if _, ok := redisnum.ParseLL(a[2]); !ok {
		s.w.Error(msgNotInteger)
		return
	}
	s.w.Int(0)
}

// subcommandSyntax is Redis's addReplySubcommandSyntaxError.
func subcommandSyntax(s *session, a [][]byte) {
	s.w.Error("ERR unknown subcommand or wrong number of arguments for '" + sanitize(string(a[1]), 128) +
		"'. Try " + ascii.ToUpper(a[0]) + " HELP.")
}

// CLIENT PAUSE <timeout> [WRITE|ALL] holds, until the timeout or CLIENT
// UNPAUSE, every command (ALL, the default) or the commands that may write
// (WRITE: writes, and EXEC of a transaction that writes). A held command
// waits before it runs; a write already parsed waits before it goes to the
// log, so nothing is written while the pause lasts. Expiry stops too.
func cmdClientPause(s *session, a [][]byte) {
	if len(a) > 4 {
		subcommandSyntax(s, a)
		return
	}
	all := true
	if len(a) == 4 {
		switch ascii.ToLower(a[3]) {
		case "write":
			all = false
		case "all":
		default:
			s.w.Error("ERR CLIENT PAUSE mode must be WRITE or ALL")
			return
		}
	}
	ms, ok := redisnum.ParseLL(a[2])
	if !ok {
		s.w.Error("ERR timeout is not an integer or out of range")
		return
	}
	if ms < 0 {
		s.w.Error("ERR timeout is negative")
		return
	}
	now := time.Now().UnixMilli()
	if ms > math.MaxInt64-now {
		s.w.Error("ERR timeout is out of range")
		return
	}
	s.srv.adm.pause.set(time.UnixMilli(now+ms), all)
	s.w.Simple("OK")
}

// pauser is the CLIENT PAUSE state.
type pauser struct {
	maybe atomic.Bool // a pause may be on: the one load commands pay otherwise
	mu    sync.Mutex
	end   time.Time
	all   bool
	on    bool
	wake  chan struct{} // closed when the pause ends or changes
}

// set pauses until end (or a later end already set), as Redis keeps the
// later of the two.
func (p *pauser) set(end time.Time, all bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.on || end.After(p.end) {
		p.end = end
	}
	p.all, p.on = all, true
	p.maybe.Store(true)
	p.signal()
}

func (p *pauser) unpause() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.on = false
	p.maybe.Store(false)
	p.signal()
}

func (p *pauser) signal() {
	if p.wake != nil {
		close(p.wake)
		p.wake = nil
	}
}

// holds reports whether a command is held now (write: it may write), the
// time the pause ends and a channel closed when it changes.
func (p *pauser) holds(write bool) (bool, time.Time, chan struct{}) {
	if !p.maybe.Load() {
		return false, time.Time{}, nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.on {
		return false, time.Time{}, nil
	}
	if !time.Now().Before(p.end) {
		p.on = false
		p.maybe.Store(false)
		p.signal()
		return false, time.Time{}, nil
	}
	if !p.all && !write {
		return false, time.Time{}, nil
	}
	if p.wake == nil {
		p.wake = make(chan struct{})
	}
	return true, p.end, p.wake
}

// active reports whether writes are paused (expiry checks it).
func (p *pauser) active() bool {
	held, _, _ := p.holds(true)
	return held
}

// mayWrite is Redis's "may replicate" test for CLIENT PAUSE WRITE: a write,
// or EXEC of a transaction holding one.
func (s *session) mayWrite(sp *spec) bool {
	if sp == nil || sp.af.write || sp.af.mayReplicate {
		return true
	}
	if sp.name == "exec" && s.multi {
		for _, q := range s.queue {
			if q.sp.af.write || q.sp.af.mayReplicate {
				return true
			}
		}
	}
	return false
}

// pauseGate holds the session while CLIENT PAUSE holds this command (nil:
// a write about to go to the log). Replies already rendered are sent
// first, as Redis sends them before it blocks the client.
func (s *session) pauseGate(sp *spec) {
	p := &s.srv.adm.pause
	if !p.maybe.Load() {
		return // no pause: nothing to work out (mayWrite scans EXEC's queue)
	}
	if s.inline {
		return // admitted before the pause began (onLoop): an event loop never waits
	}
	for {
		held, end, wake := p.holds(s.mayWrite(sp))
		if !held {
			break
		}
		if !s.adm.paused {
			s.settle()
			s.sendOut()
			s.adm.paused = true
			s.publish()
		}
		t := time.NewTimer(time.Until(end))
		select {
		case <-wake:
		case <-t.C:
		case <-s.adm.killed:
		case <-s.srv.stop:
		}
		t.Stop()
		select {
		case <-s.adm.killed:
			s.closing = true
		case <-s.srv.stop:
			s.closing = true
		default:
			continue
		}
		break
	}
	if s.adm.paused {
		s.adm.paused = false
		s.adm.t0 = time.Now()
		s.publish()
	}
}

func writeHelp(w *resp.Writer, lines []string) {
	w.Array(len(lines))
	for _, l := range lines {
		w.Simple(l)
	}
}

var clientHelp = []string{
	"CLIENT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
	"CACHING (YES|NO)",
	"    Enable/disable tracking of the keys for next command in OPTIN/OPTOUT modes.",
	"GETREDIR",
	"    Return the client ID we are redirecting to when tracking is enabled.",
	"GETNAME",
	"    Return the name of the current connection.",
	"ID",
	"    Return the ID of the current connection.",
	"INFO",
	"    Return information about the current client connection.",
	"KILL <ip:port>",
	"    Kill connection made from <ip:port>.",
	"KILL <option> <value> [<option> <value> [...]]",
	"    Kill connections. Options are:",
	"    * ADDR (<ip:port>|<unixsocket>:0)",
	"      Kill connections made from the specified address",
	"    * LADDR (<ip:port>|<unixsocket>:0)",
	"      Kill connections made to specified local address",
	"    * TYPE (NORMAL|MASTER|REPLICA|PUBSUB)",
	"      Kill connections by type.",
	"    * USER <username>",
	"      Kill connections authenticated by <username>.",
	"    * SKIPME (YES|NO)",
	"      Skip killing current connection (default: yes).",
	"    * ID <client-id>",
	"      Kill connections by client id.",
	"    * MAXAGE <maxage>",
	"      Kill connections older than the specified age.",
	"LIST [options ...]",
	"    Return information about client connections. Options:",
	"    * TYPE (NORMAL|MASTER|REPLICA|PUBSUB)",
	"      Return clients of specified type.",
	"UNPAUSE",
	"    Stop the current client pause, resuming traffic.",
	"PAUSE <timeout> [WRITE|ALL]",
	"    Suspend all, or just write, clients for <timeout> milliseconds.",
	"REPLY (ON|OFF|SKIP)",
	"    Control the replies sent to the current connection.",
	"SETNAME <name>",
	"    Assign the name <name> to the current connection.",
	"SETINFO <option> <value>",
	"    Set client meta attr. Options are:",
	"    * LIB-NAME: the client lib name.",
	"    * LIB-VER: the client lib version.",
	"UNBLOCK <clientid> [TIMEOUT|ERROR]",
	"    Unblock the specified blocked client.",
	"TRACKING (ON|OFF) [REDIRECT <id>] [BCAST] [PREFIX <prefix> [...]]",
	"         [OPTIN] [OPTOUT] [NOLOOP]",
	"    Control server assisted client side caching.",
	"TRACKINGINFO",
	"    Report tracking status for the current connection.",
	"NO-EVICT (ON|OFF)",
	"    Protect current client connection from eviction.",
	"NO-TOUCH (ON|OFF)",
	"    Will not touch LRU/LFU stats when this mode is on.",
	"HELP",
	"    Print this help.",
}
