package server

import (
	"context"
	"math"
	"slices"
	"strconv"
	"time"

	"github.com/bfserver/bfserver/acl"
	"github.com/bfserver/bfserver/command"
	"github.com/bfserver/bfserver/internal/ascii"
	"github.com/bfserver/bfserver/internal/redisnum"
	"github.com/bfserver/bfserver/keyspace"
	"github.com/bfserver/bfserver/resp"
)

// Identity reported by HELLO, INFO and MODULE LIST. Clients check these.
const (
	RedisVersion  = "8.0.0"
	ModuleVersion = 80800
	ServerName    = "bfserver"
)

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

func conn(name string, arity int, flags []string, cats []string, run func(*session, [][]byte)) *spec {
	return register(&spec{name: name, arity: arity, flags: flags, cats: cats, run: run})
}

func registerConn() {
	fastConn := []string{"@fast", "@connection"}
	conn("ping", -1, []string{"fast"}, fastConn, cmdPing).inline = true
	conn("echo", 2, []string{"fast"}, fastConn, func(s *session, a [][]byte) { s.w.Bulk(a[1]) }).inline = true
	conn("hello", -1, []string{"noscript", "loading", "stale", "fast", "no_auth"}, fastConn, cmdHello).noAuth = true
	conn("auth", -2, []string{"noscript", "loading", "stale", "fast", "no_auth"}, fastConn, cmdAuth).noAuth = true
	conn("select", 2, []string{"loading", "stale", "fast"}, fastConn, cmdSelect).inline = true
	q := conn("quit", -1, []string{"loading", "stale", "fast", "no_auth"}, fastConn, func(s *session, a [][]byte) {
		s.w.Simple("OK")
		s.closing = true
	})
	q.noAuth, q.noMulti, q.inline = true, true, true
	r := conn("reset", 1, []string{"noscript", "loading", "stale", "fast", "no_auth"}, fastConn, cmdReset)
	r.noAuth, r.noMulti = true, true
	conn("multi", 1, []string{"noscript", "loading", "stale", "fast"}, []string{"@fast", "@transaction"}, cmdMulti).noMulti = true
	conn("exec", 1, []string{"noscript", "loading", "stale", "skip_slowlog"}, []string{"@slow", "@transaction"}, cmdExec).noMulti = true
	conn("discard", 1, []string{"noscript", "loading", "stale", "fast"}, []string{"@fast", "@transaction"}, cmdDiscard).noMulti = true
	conn("watch", -2, []string{"noscript", "loading", "stale", "fast"}, []string{"@fast", "@transaction"}, cmdWatch).noMulti = true
	conn("unwatch", 1, []string{"noscript", "loading", "stale", "fast"}, []string{"@fast", "@transaction"}, cmdUnwatch)
	conn("wait", 3, []string{}, []string{"@slow", "@connection"}, cmdWait)
	conn("info", -1, []string{"loading", "stale"}, []string{"@slow", "@dangerous"}, cmdInfo)
	conn("config", -2, nil, []string{"@admin", "@slow", "@dangerous"}, nil).subs = map[string]*spec{
		"get": {name: "get", arity: -3, run: func(s *session, a [][]byte) { cmdConfigGet(s, a[2:]) }},
		"set": {name: "set", arity: -4},
	}
	conn("module", -2, nil, []string{"@admin", "@slow", "@dangerous"}, nil).subs = map[string]*spec{
		"list": {name: "list", arity: 2, run: cmdModuleList},
	}
	conn("client", -2, nil, []string{"@slow", "@connection"}, nil).subs = map[string]*spec{
		"setname": {name: "setname", arity: 3, run: cmdClientSetName},
		"getname": {name: "getname", arity: 2, run: func(s *session, a [][]byte) {
			if n := *s.name.Load(); n != "" {
				s.w.BulkString(n)
			} else {
				s.w.Null()
			}
		}},
		"setinfo":             {name: "setinfo", arity: 4, run: cmdClientSetInfo},
		"id":                  {name: "id", arity: 2, run: func(s *session, a [][]byte) { s.w.Int(s.id) }},
		"info":                {name: "info", arity: 2},
		"list":                {name: "list", arity: -2},
		"no-evict":            {name: "no-evict", arity: 3},
		"no-touch":            {name: "no-touch", arity: 3},
		"reply":               {name: "reply", arity: 3},
		"maint_notifications": {name: "maint_notifications", arity: -3, run: func(s *session, a [][]byte) { s.w.Simple("OK") }},
		"help":                {name: "help", arity: 2},
	}
	conn("command", -1, []string{"loading", "stale"}, []string{"@slow", "@connection"}, cmdCommand)
	conn("readonly", 1, []string{"loading", "stale", "fast"}, fastConn, func(s *session, a [][]byte) { s.w.Simple("OK") }).inline = true
	conn("consistency", -1, []string{"fast"}, fastConn, cmdConsistency)
	conn("time", 1, []string{"loading", "stale", "fast"}, []string{"@fast"}, func(s *session, a [][]byte) {
		now := s.srv.opts.Now()
		s.w.Array(2)
		s.w.BulkString(itoa(now.Unix()))
		s.w.BulkString(itoa(int64(now.Nanosecond() / 1000)))
	})
}

func cmdPing(s *session, a [][]byte) {
	switch len(a) {
	case 1:
		s.w.Simple("PONG")
	case 2:
		s.w.Bulk(a[1])
	default:
		s.w.Error(arityError("ping"))
	}
}

func validName(b []byte) bool {
	for _, c := range b {
		if c < '!' || c > '~' {
			return false
		}
	}
	return true
}

// checkAuth validates a user and password and, on success, makes the
// session that user; a failure goes to the ACL LOG under the command the
// client sent (AUTH, HELLO).
//
// In a cluster, a failure is checked again once this node has applied
// everything acknowledged before (a read barrier): a user ACL SETUSER
// created or changed on another node authenticates here as soon as the
// change was acknowledged there.
func (s *session) checkAuth(cmd, user, pass []byte) bool {
	st := s.srv.acl()
	u := st.users[string(user)]
	if (u == nil || !u.CheckPassword(pass)) && s.srv.cluster != nil && s.authBarrier() == nil {
		st = s.srv.acl()
		u = st.users[string(user)]
	}
	if u == nil || !u.CheckPassword(pass) {
		s.logDenial(acl.DeniedAuth, string(cmd), string(user))
		return false
	}
	s.setUser(u, st.version)
	return true
}

// authBarrier is the read barrier of a failed authentication, bounded
// more tightly than a read's: without a leader a wrong password is
// answered within authBarrierTimeout.
func (s *session) authBarrier() error {
	ctx, cancel := context.WithTimeout(s.srv.ctx, min(s.srv.opts.ReadTimeout, authBarrierTimeout))
	defer cancel()
	_, err := s.srv.backend.Barrier(ctx, false)
	return err
}

const authBarrierTimeout = 2 * time.Second

func cmdAuth(s *session, a [][]byte) {
	switch len(a) {
	case 2:
		if s.srv.acl().def.NoPass() {
			s.w.Error("ERR AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?")
			return
		}
		a = [][]byte{a[0], []byte("default"), a[1]}
	case 3:
	default:
		s.w.Error(msgSyntax)
		return
	}
	if !s.checkAuth(a[0], a[1], a[2]) {
		s.w.Error(msgWrongPass)
		return
	}
	s.authed = true
	s.w.Simple("OK")
}

func cmdHello(s *session, a [][]byte) {
	proto := s.w.Proto
	if len(a) > 1 {
		v, ok := redisnum.ParseLL(a[1])
		if !ok {
			s.w.Error("ERR Protocol version is not an integer or out of range")
			return
		}
		if v != 2 && v != 3 {
			s.w.Error("NOPROTO unsupported protocol version")
			return
		}
		proto = int(v)
	}
	var name []byte
	setName, authed := false, s.authed
	for i := 2; i < len(a); i++ {
		more := len(a) - i - 1
		switch {
		case ascii.EqualFold(a[i], "AUTH") && more >= 2:
			if !s.checkAuth(a[0], a[i+1], a[i+2]) {
				s.w.Error(msgWrongPass)
				return
			}
			authed = true
			i += 2
		case ascii.EqualFold(a[i], "SETNAME") && more >= 1:
			name, setName = a[i+1], true
			if !validName(name) {
				s.w.Error("ERR Client names cannot contain spaces, newlines or special characters.")
				return
			}
			i++
		default:
			s.w.Error("ERR Syntax error in HELLO option '" + sanitize(string(a[i]), 128) + "'")
			return
		}
	}
	if !authed {
		s.w.Error("NOAUTH HELLO must be called with the client already authenticated, otherwise the HELLO <proto> AUTH <user> <pass> option can be used to authenticate the client and select the RESP protocol version at the same time")
		return
	}
	s.authed = true
	if setName {
		n := string(name)
		s.name.Store(&n)
	}
	s.w.Proto = proto
	role := "master"
	if s.srv.cluster != nil && !s.srv.cluster.IsLeader() {
		role = "replica" // as INFO replication's role:slave, in HELLO's word
	}
	s.w.Map(7)
	s.w.BulkString("server")
	s.w.BulkString("redis")
	s.w.BulkString("version")
	s.w.BulkString(RedisVersion)
	s.w.BulkString("proto")
	s.w.Int(int64(proto))
	s.w.BulkString("id")
	s.w.Int(s.id)
	s.w.BulkString("mode")
	s.w.BulkString("standalone")
	s.w.BulkString("role")
	s.w.BulkString(role)
	s.w.BulkString("modules")
	s.w.Array(1)
	writeModule(&s.w)
}

func writeModule(w *resp.Writer) {
	w.Map(4)
	w.BulkString("name")
	w.BulkString("bf")
	w.BulkString("ver")
	w.Int(ModuleVersion)
	w.BulkString("path")
	w.BulkString("builtin:bfserver")
	w.BulkString("args")
	w.Array(0)
}

func cmdModuleList(s *session, a [][]byte) {
	s.w.Array(1)
	writeModule(&s.w)
}

func cmdSelect(s *session, a [][]byte) {
	v, ok := redisnum.ParseLL(a[1])
	if !ok {
		s.w.Error(msgNotInteger)
		return
	}
	if v < math.MinInt32 || v > math.MaxInt32 { // Redis's getIntFromObjectOrReply
		s.w.Error("ERR value is out of range, value must between -2147483648 and 2147483647")
		return
	}
	if v < 0 || v >= keyspace.NumDBs {
		s.w.Error("ERR DB index is out of range")
		return
	}
	s.db = uint8(v)
	s.w.Simple("OK")
}

func cmdReset(s *session, a [][]byte) {
	s.multi, s.dirty, s.queue = false, false, nil
	s.watch.reset()
	s.db = 0
	s.w.Proto = 2
	empty := ""
	s.name.Store(&empty)
	s.stale = s.srv.stale.Load()
	s.setDefaultAuth()
	s.w.Simple("RESET")
}

func cmdMulti(s *session, a [][]byte) {
	if s.multi {
		s.w.Error("ERR MULTI calls can not be nested")
		return
	}
	s.multi, s.dirty, s.queue = true, false, nil
	s.w.Simple("OK")
}

func cmdDiscard(s *session, a [][]byte) {
	if !s.multi {
		s.w.Error("ERR DISCARD without MULTI")
		return
	}
	s.multi, s.dirty, s.queue = false, false, nil
	s.watch.reset()
	s.w.Simple("OK")
}

// cmdExec runs the queued commands as one unit: each takes the same
// prepare step as outside MULTI, and every keyspace command of the
// transaction goes to the backend in a single Write, so they are applied
// together at one point of the log, on every node (reads included: their
// results are the state at that point). With keys WATCHed, their check
// goes first in that Write (server/watch.go); the transaction is left out,
// and EXEC answers the null reply, when one of them was touched. EXEC
// unwatches every key, whatever it answers.
func cmdExec(s *session, a [][]byte) {
	if !s.multi {
		s.w.Error("ERR EXEC without MULTI")
		return
	}
	queue, dirty := s.queue, s.dirty
	s.multi, s.dirty, s.queue = false, false, nil
	if dirty {
		s.watch.reset()
		s.w.Error(msgExecAbort)
		return
	}
	type item struct {
		q   queued
		cmd *command.Cmd
		err string
	}
	items := make([]item, len(queue))
	var cmds []*command.Cmd
	anyWrite := false
	for i, q := range queue {
		items[i].q = q
		// The user's rules may have changed since the command was queued.
		if r, pos := s.user.Check(q.sp.acl, q.args); r != acl.OK {
			s.logDenialIn(r, aclCtxMulti, deniedObject(r, q.sp, q.args[pos]), s.user.Name)
			items[i].err = acl.DenialAtExec(r)
			continue
		}
		if q.sp.run != nil {
			continue
		}
		pc := new(command.Cmd)
		if msg := s.prepare(q.sp, q.args, pc); msg != "" {
			items[i].err = msg
			continue
		}
		items[i].cmd = pc
		cmds = append(cmds, pc)
		anyWrite = anyWrite || pc.Op.IsWrite()
	}
	watch := s.takeWatch(len(cmds))
	if watch != nil {
		if err := command.Validate(watch); err != nil {
			s.releaseNeed() // nothing prepared will be written
			s.w.Error(wireError(err))
			return
		}
	}
	var results []keyspace.Result
	var err error
	aborted := false
	if !anyWrite && (len(cmds) > 0 || watch != nil) {
		var rerr error
		err = s.leasedRead(func() {
			aborted, rerr, results = false, nil, results[:0]
			if watch != nil {
				aborted, rerr = s.srv.backend.State().WatchMoved(watch)
			}
			if rerr == nil && !aborted {
				for _, c := range cmds {
					results = append(results, s.srv.backend.State().Read(c))
				}
			}
		})
		if err == nil {
			err = rerr
		}
		// A read that would change state (a t-digest query that
		// compresses) makes the whole transaction go through the log,
		// read at one point of it as before: the reads above changed
		// nothing.
		anyWrite = err == nil && !aborted && slices.ContainsFunc(results, func(r keyspace.Result) bool {
			return r.Err == keyspace.ErrNeedsLog
		})
	}
	if anyWrite {
		if watch != nil {
			cmds = append([]*command.Cmd{watch}, cmds...)
		}
		results, err = s.write(cmds)
		if err == nil && watch != nil {
			// An invalid check (never one this node built) left the
			// transaction out too: say so rather than "touched".
			aborted, err = results[0].Int != 0, results[0].Err
			results = results[1:]
		}
	}
	if err != nil {
		s.w.Error(wireError(err))
		return
	}
	if aborted {
		s.w.NullArray()
		return
	}
	s.w.Array(len(items))
	j := 0
	for _, it := range items {
		from := len(s.w.Buf)
		switch {
		case it.err != "":
			s.w.Error(it.err)
		case it.cmd != nil:
			if !it.cmd.Op.IsWrite() {
				s.countLookups(it.cmd, &results[j])
			}
			s.renderResult(it.q.sp, it.cmd, &results[j])
			j++
		default:
			it.q.sp.run(s, it.q.args)
		}
		s.account(it.q.sp, it.q.args, from)
	}
	s.settle() // the queue's arguments go with the transaction
}

func cmdWait(s *session, a [][]byte) {
	if _, ok := redisnum.ParseLL(a[1]); !ok {
		s.w.Error(msgNotInteger)
		return
	}
	if t, ok := redisnum.ParseLL(a[2]); !ok || t < 0 {
		s.w.Error("ERR timeout is negative")
		return
	}
	// Writes are acknowledged only once a majority stored them; report the
	// other voters that must have them.
	n := int64(0)
	if s.srv.cluster != nil {
		if m, err := s.srv.cluster.Members(); err == nil && len(m) > 1 {
			n = int64(len(m) / 2)
		}
	}
	s.w.Int(n)
}

func cmdConfigGet(s *session, patterns [][]byte) {
	pairs := s.srv.configGet(patterns)
	s.w.Map(len(pairs))
	for _, p := range pairs {
		s.w.BulkString(p[0])
		s.w.BulkString(p[1])
	}
}

func cmdClientSetName(s *session, a [][]byte) {
	if !validName(a[2]) {
		s.w.Error("ERR Client names cannot contain spaces, newlines or special characters.")
		return
	}
	n := string(a[2])
	s.name.Store(&n)
	s.w.Simple("OK")
}

func cmdClientSetInfo(s *session, a [][]byte) {
	opt := ascii.ToUpper(a[2])
	if opt != "LIB-NAME" && opt != "LIB-VER" {
		s.w.Error("ERR Unrecognized option '" + sanitize(string(a[2]), 128) + "'")
		return
	}
	if !validName(a[3]) {
		s.w.Error("ERR " + sanitize(string(a[2]), 128) + " cannot contain spaces, newlines or special characters.")
		return
	}
	if opt == "LIB-NAME" {
		s.libName = string(a[3])
	} else {
		s.libVer = string(a[3])
	}
	s.w.Simple("OK")
}

// cmdConsistency reads or sets this connection's read consistency:
// CONSISTENCY [LINEARIZABLE|STALE].
func cmdConsistency(s *session, a [][]byte) {
	switch {
	case len(a) == 1:
	case len(a) == 2 && ascii.EqualFold(a[1], "linearizable"):
		s.stale = false
	case len(a) == 2 && ascii.EqualFold(a[1], "stale"):
		s.stale = true
	default:
		s.w.Error(msgSyntax)
		return
	}
	if s.stale {
		s.w.Simple("stale")
	} else {
		s.w.Simple("linearizable")
	}
}
