package server

import (
	"context"
	"net"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/bfserver/bfserver/acl"
	"github.com/bfserver/bfserver/command"
	"github.com/bfserver/bfserver/internal/ascii"
	"github.com/bfserver/bfserver/internal/evloop"
	"github.com/bfserver/bfserver/keyspace"
	"github.com/bfserver/bfserver/resp"
	"github.com/bfserver/bfserver/scalable"
)

// session is one client connection's state. Only its own goroutine touches
// it, except the fields CLIENT LIST reads, which are atomic or immutable.
type session struct {
	srv *Server
	// nc is the connection of a session served by a goroutine of its own
	// (TLS, MONITOR, or with the event loops off); ev that of one served
	// by an event loop. Exactly one of them is set.
	nc      net.Conn
	ev      *evloop.Conn
	raddr   net.Addr
	id      int64
	created time.Time
	w       resp.Writer
	// stats is the shard of the commands' counters this session adds to:
	// its loop's, or by its id when a goroutine serves it.
	stats []cmdStats

	// lastName and lastSpec remember the latest command name looked up: a
	// pipeline mostly repeats one command, and comparing its name costs
	// less than hashing it.
	lastName [16]byte
	lastLen  int
	lastSpec *spec
	// ahead is prefetchNext's room for the next command's arguments. When
	// that command parsed whole, aheadUsed is its length and aheadAt where
	// it starts in the batch's buffer: the batch takes it from there
	// instead of parsing it again (0: none kept).
	ahead              [][]byte
	aheadAt, aheadUsed int

	db     uint8
	authed bool
	// user is who the client authenticated as (default before AUTH), as
	// of the user table's version aclVer; adm.pub.user publishes it to
	// other goroutines (CLIENT LIST, closing a deleted user's connections).
	user    *acl.User
	aclVer  uint64
	name    atomic.Pointer[string]
	libName string
	libVer  string
	stale   bool // read consistency for this connection
	closing bool

	// MULTI state
	multi bool
	dirty bool
	queue []queued
	watch watchSet // WATCHed keys

	// writes parsed but not yet sent to the backend, and where their
	// replies go: they are flushed before any other reply is written.
	pending  []*command.Cmd
	pendSpec []*spec
	pendNeed int64 // bytes the pending RESERVEs were counted for
	// The pending commands live in cmdArena, their item and key lists in
	// listArena, and their bytes in the query buffer. All three are reused
	// once the backend answered the batch for certain. After an error
	// (an unknown outcome above all) the log may still encode the
	// commands later, so the session lets go of them instead: lostBuf
	// makes the loop move to a fresh query buffer.
	cmdArena  []command.Cmd
	listArena [][]byte
	lostBuf   bool
	// barrierDone: a linearizable read barrier already covers every read
	// in the batch of input being processed; until barrierUntil, when
	// that is not zero (the lease it rests on: see leaseHeld).
	barrierDone  bool
	barrierUntil time.Time
	// part is the progress of a command split across reads.
	part resp.Partial
	// args is the parser's argument list, reused command after command.
	args [][]byte
	// inline: the batch runs on an event loop, which must not wait; a
	// command that could is left for a goroutine (parked, below), and
	// parkNow says one was found after it started (its lease ended).
	inline, parkNow bool
	// turnWrite: the command being run is the last of a loop's input and
	// a write its loop may wait for (turnEnd); turnHeld: it was queued,
	// and the connection waits for the loop's turn to end. turnBuf holds
	// the command's bytes meanwhile: the loop reuses its read buffer.
	turnWrite, turnHeld bool
	turnBuf             []byte
	// detachedOut is output an event loop held when MONITOR took the
	// connection out of it: it goes out first.
	detachedOut []byte
	// readCmd and readRes are reused by every read, so the read path
	// allocates nothing per request.
	readCmd command.Cmd
	readRes keyspace.Result
	// now is read once per batch of input: the time stamped into its
	// commands and the start of their latency.
	now  time.Time
	acct []accounted // commands of this batch, for the stats

	adm sessionAdmin // what the operators' commands see and set (admin.go)
}

func newSession(s *Server, nc net.Conn) *session {
	sess := &session{srv: s, nc: nc, raddr: nc.RemoteAddr(), id: s.nextID.Add(1), created: time.Now(), stale: s.stale.Load()}
	sess.stats = s.statShard(sess.id)
	sess.setDefaultAuth()
	sess.w.Proto = 2
	empty := ""
	sess.name.Store(&empty)
	sess.adm.init(nc)
	sess.publish()
	return sess
}

// setDefaultAuth makes the client the default user, authenticated if that
// user is on and needs no password (Redis's clientSetDefaultAuth).
func (s *session) setDefaultAuth() {
	st := s.srv.acl()
	s.setUser(st.def, st.version)
	s.authed = st.open
}

func (s *session) setUser(u *acl.User, version uint64) {
	s.user, s.aclVer = u, version
	s.adm.pub.user.Store(u)
}

// refreshUser picks up changes to the client's user; it reports false when
// the user was deleted, and the connection must close (as Redis closes
// the connections of a user ACL DELUSER removes).
func (s *session) refreshUser() bool {
	st := s.srv.acl()
	if st.version == s.aclVer {
		return true
	}
	u := st.users[s.user.Name]
	if u == nil {
		return false
	}
	s.setUser(u, st.version)
	return true
}

// needAuth: the client must authenticate before most commands (Redis's
// authRequired: not while the default user is on without a password).
func (s *session) needAuth() bool { return !s.authed && !s.srv.acl().open }

// loop serves a connection from its own goroutine, starting with the
// input in buf (what an event loop had not consumed when the session left
// it).
func (s *session) loop(buf []byte) {
	defer func() {
		// A bug must cost one connection, never the server.
		if r := recover(); r != nil {
			s.internalError(r)
		}
	}()
	if cap(buf) < 16<<10 {
		nb := make([]byte, len(buf), 16<<10)
		copy(nb, buf)
		buf = nb
	}
	lim := &s.srv.opts.Limits
	for !s.closing {
		if len(buf) == cap(buf) {
			if cap(buf) >= lim.MaxQueryBuffer {
				s.srv.adm.qbufDrop.Add(1)
				return // Redis closes clients over the query buffer limit
			}
			grow := 2 * cap(buf)
			if need := resp.Needed(buf, lim); need > cap(buf) && need < grow {
				grow = need + 64<<10 // a large argument: room for it and what follows, not twice it
			}
			nb := make([]byte, len(buf), min(grow, lim.MaxQueryBuffer))
			copy(nb, buf)
			buf = nb
		}
		n, err := s.nc.Read(buf[len(buf):cap(buf)])
		if n == 0 && err != nil {
			return
		}
		buf = buf[:len(buf)+n]
		s.noteRead(n, len(buf), cap(buf))
		pos, _ := s.batch(buf, false)
		if s.sendBatch() != nil {
			return
		}
		// Keep the unparsed tail; args alias buf, but every command has run.
		if s.lostBuf {
			// Commands of an unknown outcome still point into buf.
			nb := make([]byte, len(buf)-pos, cap(buf))
			copy(nb, buf[pos:])
			buf, pos, s.lostBuf = nb, 0, false
		}
		rest := copy(buf, buf[pos:])
		buf = buf[:rest]
		s.adm.pub.qbuf.Store(int64(rest))
		s.adm.pub.wbuf.Store(int64(cap(s.w.Buf)))
		if cap(buf) > 1<<20 && rest < 16<<10 {
			nb := make([]byte, rest, 16<<10)
			copy(nb, buf)
			buf = nb
		}
	}
}

// batch runs the complete commands at the start of buf, in order, and
// renders their replies; it returns the bytes they took. Inline (on an
// event loop) it stops before a command that could wait and reports
// park: that command and what follows are left for a goroutine.
func (s *session) batch(buf []byte, inline bool) (pos int, park bool) {
	lim := &s.srv.opts.Limits
	s.inline = inline
	s.barrierDone = false
	s.now = s.srv.opts.Now()
	s.aheadUsed = 0
	for !s.closing {
		s.adm.qnow = len(buf) - pos
		var a [][]byte
		var used int
		var perr error
		if s.aheadUsed > 0 && s.aheadAt == pos {
			// The look-ahead parsed it, with the same limits and rights
			// (a lookup changes neither); a complete command leaves
			// s.part untouched.
			a, used = s.ahead, s.aheadUsed
			s.ahead, s.aheadUsed = s.args, 0
		} else {
			a, used, perr = resp.ParseCommand(buf[pos:], lim, !s.needAuth(), s.args, &s.part)
		}
		if perr == resp.ErrIncomplete {
			break
		}
		if perr != nil {
			s.flushPending()
			s.w.Error(perr.Error())
			s.closing = true
			break
		}
		if a == nil {
			pos += used
			continue
		}
		s.args = a
		if inline {
			switch s.onLoop(a, pos+used == len(buf) && used <= maxTurnCommand) {
			case loopPark:
				park = true
			case loopWait:
				// Its bytes move out of the loop's buffer, and it is
				// parsed again from them.
				s.turnBuf = append(s.turnBuf[:0], buf[pos:pos+used]...)
				s.args, _, _ = resp.ParseCommand(s.turnBuf, lim, true, s.args, nil)
				a, s.turnWrite = s.args, true
			}
			if park {
				break
			}
		}
		if next := pos + used; next < len(buf) && s.isLookup(a) {
			s.prefetchNext(buf, next)
		}
		s.dispatch(a)
		s.turnWrite = false
		if s.parkNow {
			s.parkNow, park = false, true
			break
		}
		pos += used
		if s.turnHeld {
			park = true
			break
		}
	}
	if !s.turnHeld {
		s.flushPending()
	}
	if s.aheadUsed > 0 {
		s.aheadUsed = 0
		clear(s.ahead) // it aliases the input
	}
	s.settle()
	s.inline = false
	return pos, park
}

// maxLookAhead bounds the bytes prefetchNext parses.
const maxLookAhead = 512

// isLookup: args are a filter lookup (spec.prefetch) with a key and an
// item.
func (s *session) isLookup(args [][]byte) bool {
	if len(args) < 3 {
		return false
	}
	sp := s.lookup(args[0])
	return sp != nil && sp.prefetch
}

// prefetchNext, called before a filter lookup of a pipeline runs, starts
// loading the bits of the next command's lookup when it is one too
// (keyspace.PrefetchExists): the lookups' cache misses then overlap the
// work between them. The next command is parsed here only to look, and
// only when it is small (a large one is not a lookup worth it, and would
// be parsed twice). A lookup parsed here whole is kept for the batch to
// run when it gets to next, not parsed again. A client yet to
// authenticate gets no look-ahead: its lookups are refused.
func (s *session) prefetchNext(buf []byte, next int) {
	if s.needAuth() {
		return
	}
	rest := buf[next:min(len(buf), next+maxLookAhead)]
	a, used, err := resp.ParseCommand(rest, &s.srv.opts.Limits, true, s.ahead[:0], nil)
	if a != nil {
		s.ahead = a // grown or not, kept for the next look
	}
	if err == nil && s.isLookup(a) {
		s.srv.backend.State().PrefetchExists(s.db, a[1], a[2], s.now.UnixMilli())
		s.aheadAt, s.aheadUsed = next, used
		return
	}
	clear(s.ahead) // it aliases the input
}

// sendBatch writes the replies the batch rendered.
func (s *session) sendBatch() error {
	if len(s.w.Buf) == 0 {
		return nil
	}
	if err := s.sendOut(); err != nil {
		return err
	}
	s.endBatch()
	if cap(s.w.Buf) > 1<<20 {
		s.w.Buf = nil
	} else {
		s.w.Buf = s.w.Buf[:0]
	}
	return nil
}

// dispatch runs one command. It is where Redis's checks happen, in Redis's
// order (resolve), then MULTI queueing: a command refused here flags an
// open transaction, so its EXEC answers EXECABORT, as Redis's does.
func (s *session) dispatch(args [][]byte) {
	if !s.refreshUser() {
		s.flushPending()
		s.closing = true
		return
	}
	s.quietStart()
	defer s.quietEnd()
	s.adm.args = args
	sp, msg := s.resolve(args)
	if msg == "" {
		s.setLastCmd(sp)
	} else {
		s.setLastCmd(lookedUp(args))
	}
	if msg == "" {
		msg = s.admit(sp)
	}
	if msg == "" && s.multi && !sp.noMulti && sp.denyOOM && s.overLimit() {
		msg = msgOOM // Redis refuses deny-oom commands at queue time too
	}
	if msg != "" {
		s.flushPending()
		if sp := lookupSpec(args[0]); sp != nil && sp.name == "exec" {
			// Redis's execCommandAbort: a refused EXEC discards the
			// transaction, and says why.
			s.multi, s.dirty, s.queue = false, false, nil
			from := len(s.w.Buf)
			s.w.Error("EXECABORT Transaction discarded because of: " + strings.TrimPrefix(msg, "ERR "))
			s.rejected(args, from)
			s.publish()
			return
		}
		if s.multi {
			s.dirty = true
		}
		from := len(s.w.Buf)
		s.w.Error(msg)
		s.rejected(args, from)
		s.publish()
		return
	}
	s.pauseGate(sp)
	defer s.publish()
	if s.multi && !sp.noMulti {
		q := make([][]byte, len(args))
		for i, a := range args {
			q[i] = slices.Clone(a)
		}
		s.queue = append(s.queue, queued{sp, q})
		s.w.Simple("QUEUED")
		return
	}
	s.adm.top = sp
	s.execute(sp, args)
	s.adm.top = nil
}

// lookup is lookupSpec with the session's one-entry cache.
func (s *session) lookup(name []byte) *spec {
	if s.lastSpec != nil && string(name) == string(s.lastName[:s.lastLen]) {
		return s.lastSpec
	}
	sp := lookupSpec(name)
	if sp != nil && len(name) <= len(s.lastName) {
		s.lastLen = copy(s.lastName[:], name)
		s.lastSpec = sp
	}
	return sp
}

// queued is a command waiting in MULTI, already resolved and allowed.
type queued struct {
	sp   *spec
	args [][]byte
}

// resolve finds the command, or subcommand, args name, and checks that
// this client may run it, in Redis's order: unknown command,
// authentication, arity, unknown subcommand and its arity, then ACL (the
// command, or subcommand by its own categories, then the keys it names,
// found from its key specs); a denial goes to the ACL LOG.
func (s *session) resolve(args [][]byte) (*spec, string) {
	sp := s.lookup(args[0])
	if sp == nil {
		return nil, unknownCommand(args)
	}
	if !sp.noAuth && s.needAuth() {
		return nil, msgNoAuth
	}
	if !sp.checkArity(len(args)) {
		return nil, arityError(sp.name)
	}
	if sp.subs != nil && len(args) > 1 {
		sub := sp.subs[ascii.ToLower(args[1])]
		if sub == nil {
			return nil, "ERR unknown subcommand '" + sanitize(string(args[1]), 128) + "'. Try " + ascii.ToUpper(sp.name) + " HELP."
		}
		if !sub.checkArity(len(args)) {
			return nil, arityError(sub.full)
		}
		sp = sub
	}
	if r, pos := s.user.Check(sp.acl, args); r != acl.OK {
		s.logDenial(r, deniedObject(r, sp, args[pos]), s.user.Name)
		return nil, "NOPERM " + acl.Denial(r, s.user, sp.acl, args[pos], false)
	}
	return sp, ""
}

// deniedObject is what the ACL LOG names for a denial: the command's full
// name, or the key or channel.
func deniedObject(r acl.Result, sp *spec, arg []byte) string {
	if r == acl.DeniedCmd {
		return sp.acl.Full
	}
	return string(arg)
}

// execute runs a resolved command.
func (s *session) execute(sp *spec, args [][]byte) {
	if sp.run != nil {
		s.flushPending()
		from := len(s.w.Buf)
		sp.run(s, args)
		s.account(sp, args, from)
		return
	}
	// Prepared in place: a command is some 200 bytes, and reads, the most
	// of them, are served from this one.
	c := &s.readCmd
	errMsg := s.prepare(sp, args, c)
	if errMsg != "" {
		s.flushPending()
		from := len(s.w.Buf)
		s.w.Error(errMsg)
		if errMsg == msgOOM {
			s.rejected(args, from) // Redis refuses it before it runs
		} else {
			s.account(sp, args, from)
		}
		return
	}
	if c.Op.IsWrite() {
		if s.turnWrite && !command.Splits(c) {
			s.queueWrite(sp, c, args) // for the loop's turn
			s.turnHeld = true
			return
		}
		if s.inline && !s.srv.inlineWrites {
			// A write the loop cannot wait for (onLoop goes by the
			// command's flags; this goes by what it parsed to).
			s.releaseNeed()
			s.parkNow = true
			return
		}
		s.queueWrite(sp, c, args)
		return
	}
	s.flushPending()
	from := len(s.w.Buf)
	if err := s.leasedRead(func() { s.srv.backend.State().ReadInto(c, &s.readRes) }); err != nil {
		if err == errParked {
			return // served again from a goroutine
		}
		s.w.Error(wireError(err))
		s.account(sp, args, from)
		return
	}
	if s.readRes.Err == keyspace.ErrNeedsLog {
		// A t-digest query (or DUMP) that would compress the digest's
		// buffer changes it: it takes the log's order like a write, and
		// every replica applies the same compression (CONSISTENCY.md).
		if s.inline && !s.srv.inlineWrites {
			s.parkNow = true // through the log, which the loop cannot wait for
			return
		}
		s.queueWrite(sp, c, args)
		return
	}
	s.countLookups(c, &s.readRes)
	if c.Op == command.BFExists || c.Op == command.CFExists {
		for _, v := range s.readRes.Ints {
			if v == 0 {
				s.adm.pub.negatives.Add(1) // the owner's counter: uncontended
			}
		}
	}
	s.renderResult(sp, c, &s.readRes)
	s.account(sp, args, from)
}

// queueWrite adds a command to the batch of writes the next flushPending
// sends to the log. The parser reuses its argument slice for the next
// command; a command that waits in the batch keeps its own copy of the
// list (the bytes themselves stay put until the batch is answered).
// Appending to an arena never moves what earlier commands point at: a
// grown arena is a new array, and the old one stays as it was for them.
func (s *session) queueWrite(sp *spec, c *command.Cmd, args [][]byte) {
	c.Items, c.Keys = s.keepList(c.Items), s.keepList(c.Keys)
	s.cmdArena = append(s.cmdArena, *c)
	pc := &s.cmdArena[len(s.cmdArena)-1]
	s.pending = append(s.pending, pc)
	s.pendSpec = append(s.pendSpec, sp)
	s.adm.pendArgs = append(s.adm.pendArgs, s.keepList(args))
}

// prepare turns a command's arguments into the typed command the keyspace
// takes, in c, and returns the error to answer instead, if any: parse
// (RedisBloom's checks, in its order); stamp the database and the batch's
// clock, and for a write this node's per-filter byte cap; check the log's
// contract (command.Validate); and for a deny-oom write the memory limit. Every command that reaches the keyspace takes this one
// path, alone, pipelined or in EXEC.
func (s *session) prepare(sp *spec, args [][]byte, c *command.Cmd) string {
	var msg string
	if *c, msg = sp.parse(s, args); msg != "" {
		return msg
	}
	c.DB = s.db
	c.Now = s.now.UnixMilli()
	if c.Op.IsWrite() {
		c.MaxBytes = s.srv.opts.MaxFilterBytes
	}
	if err := command.Validate(c); err != nil {
		return wireError(err)
	}
	if c.Op.IsWrite() && sp.denyOOM && s.overMemory(c) {
		return msgOOM
	}
	return ""
}

// overLimit reports whether the memory limit is reached.
func (s *session) overLimit() bool {
	limit := s.srv.maxMemory.Load()
	return limit != 0 && s.srv.backend.State().Bytes()+uint64(max(0, s.srv.inflight.Load())) >= limit
}

// overMemory reports whether a deny-oom write must be refused: the total
// cap is reached, or the filter a RESERVE creates would pass it.
func (s *session) overMemory(c *command.Cmd) bool {
	limit := s.srv.maxMemory.Load()
	if limit == 0 {
		return false
	}
	used := s.srv.backend.State().Bytes() + uint64(max(0, s.srv.inflight.Load()))
	if used >= limit {
		return true
	}
	var need uint64
	switch c.Op {
	case command.BFReserve:
		need, _ = scalable.ChainBytes(c.Capacity, c.ErrorRate, c.NonScaling || c.Expansion == 0)
	case command.CFReserve:
		need = scalable.CuckooBytes(scalable.CuckooParams{Capacity: c.Capacity, BucketSize: c.BucketSize})
	}
	if need > limit-used {
		return true
	}
	// Count it until it is applied: the keyspace's total cannot see it before.
	s.srv.inflight.Add(int64(need))
	s.pendNeed += int64(need)
	return false
}

func (s *session) readBarrier() error {
	if s.barrierDone || s.stale {
		return nil
	}
	if r, ok := s.srv.backend.(instantReader); ok {
		if until, ok := r.ReadNow(); ok {
			s.barrierDone, s.barrierUntil = true, until
			return nil
		}
	}
	ctx, cancel := context.WithTimeout(s.srv.ctx, s.srv.opts.ReadTimeout)
	defer cancel()
	until, err := s.srv.backend.Barrier(ctx, s.stale)
	if err != nil {
		return err
	}
	s.barrierDone, s.barrierUntil = true, until
	return nil
}

// leaseHeld reports whether the lease the batch's barrier rests on, if
// any, still holds.
func (s *session) leaseHeld() bool {
	return s.barrierUntil.IsZero() || time.Now().Before(s.barrierUntil)
}

// maxLeaseRetries bounds how often a read is served again because its
// lease ended while it was served (a pause of the process, mostly): the
// next barrier takes a round, which needs no lease.
const maxLeaseRetries = 3

// leasedRead runs read after the read barrier, and again after a new
// barrier if the lease the barrier rested on ended meanwhile: a read under
// a lease is answered only if the lease still holds after the read, so
// that a pause between the barrier and the reply (a GC, a stopped VM)
// cannot answer from a state a new leader has moved past.
func (s *session) leasedRead(read func()) error {
	for try := 0; ; try++ {
		if s.inline && !s.barrierDone && !s.stale {
			s.parkNow = true // the barrier would wait: not on the loop
			return errParked
		}
		if err := s.readBarrier(); err != nil {
			return err
		}
		read()
		if s.leaseHeld() {
			return nil
		}
		if s.inline {
			s.parkNow = true
			return errParked
		}
		if try == maxLeaseRetries {
			return command.ErrReadTimeout
		}
		s.barrierDone, s.barrierUntil = false, time.Time{}
	}
}

func (s *session) renderResult(sp *spec, c *command.Cmd, r *keyspace.Result) {
	if r.Err != nil {
		s.w.Error(wireError(r.Err))
		return
	}
	sp.render(&s.w, c, r)
}

// flushPending sends the batched writes as one backend call and renders
// their replies in order.
func (s *session) flushPending() {
	if len(s.pending) == 0 {
		return
	}
	s.settle()
	s.pauseGate(nil) // CLIENT PAUSE holds writes before they reach the log
	start := time.Now()
	res, err := s.writePieces(s.pending)
	s.answerPending(res, err, start, time.Since(start))
}

// answerPending renders the pending writes' replies from what the backend
// answered (res nil: err for all), each having taken the batch's time
// through the log, and lets go of them.
func (s *session) answerPending(res []keyspace.Result, err error, start time.Time, took time.Duration) {
	cmds, specs := s.pending, s.pendSpec
	for i, c := range cmds {
		from := len(s.w.Buf)
		if res == nil {
			s.w.Error(wireError(err))
		} else {
			s.renderResult(specs[i], c, &res[i])
		}
		s.accountTook(specs[i], s.adm.pendArgs[i], from, took)
	}
	s.adm.t0 = start.Add(took)
	if err == nil && cap(s.cmdArena) <= keptCommands && cap(s.listArena) <= keptLists {
		s.pending, s.pendSpec = s.pending[:0], s.pendSpec[:0]
		s.cmdArena, s.listArena = s.cmdArena[:0], s.listArena[:0]
		s.adm.pendArgs = s.adm.pendArgs[:0]
	} else {
		// After an error the log may still encode these commands; after
		// a very long pipeline their memory is not worth keeping.
		s.pending, s.pendSpec, s.cmdArena, s.listArena = nil, nil, nil, nil
		s.adm.pendArgs = nil
		s.lostBuf = err != nil
		if s.lostBuf {
			s.turnBuf = nil // a loop's turn write's bytes, likewise
		}
	}
	// A write that this node applied is visible to its later reads.
	s.barrierDone, s.barrierUntil = err == nil, time.Time{}
}

// write sends commands to the backend as one unit. The RESERVEs among them
// stop counting against the memory limit once it returns: applied (or
// failed), they are in the keyspace's total.
func (s *session) write(cmds []*command.Cmd) ([]keyspace.Result, error) {
	defer s.releaseNeed()
	return s.srv.backend.Write(s.srv.ctx, cmds)
}

// writePieces writes a batch as write does, but a large LOADCHUNK in it
// as its pieces (command.Pieces), each through the log on its own, and the
// commands before and after it as batches of their own. res is nil when
// nothing was written (err says why); otherwise each command has its
// result, and err is the first error that left later commands unwritten
// (they carry it as their result).
func (s *session) writePieces(cmds []*command.Cmd) (res []keyspace.Result, err error) {
	i := slices.IndexFunc(cmds, command.Splits)
	if i < 0 {
		return s.write(cmds)
	}
	res = make([]keyspace.Result, 0, len(cmds))
	fail := func(e error) ([]keyspace.Result, error) {
		if len(res) == 0 {
			return nil, e
		}
		for len(res) < len(cmds) {
			res = append(res, keyspace.Result{Err: e})
		}
		return res, e
	}
	if i > 0 {
		r, err := s.write(cmds[:i])
		if err != nil {
			return fail(err)
		}
		res = append(res, r...)
	}
	var r keyspace.Result
	for _, p := range command.Pieces(cmds[i]) {
		out, err := s.write([]*command.Cmd{&p})
		if err != nil {
			return fail(err)
		}
		if r = out[0]; r.Err != nil {
			break // the chunk's error, as LOADCHUNK would give it
		}
	}
	res = append(res, r)
	if rest := cmds[i+1:]; len(rest) > 0 {
		r, err := s.writePieces(rest)
		if r == nil {
			return fail(err)
		}
		return append(res, r...), err
	}
	return res, nil
}

// releaseNeed stops counting the prepared RESERVEs against the memory
// limit: they were written, or will not be.
func (s *session) releaseNeed() {
	if s.pendNeed != 0 {
		s.srv.inflight.Add(-s.pendNeed)
		s.pendNeed = 0
	}
}

// keptCommands and keptLists bound the arenas a session keeps between
// batches (at most 832 KiB and 384 KiB). A command keeps about four lists
// entries (its items, keys and arguments: BF.ADD key item is 1+0+3), so
// lists are allowed four times the commands: with one bound for both, a
// pipeline of 1,000 BF.ADD (bench/stall's creation phase) passed it and
// regrew both arenas from nothing at every batch, 58% of what the node
// allocated while it created a million filters.
const (
	keptCommands = 4096
	keptLists    = 4 * keptCommands
)

// keepList copies a parsed list of arguments into listArena.
func (s *session) keepList(l [][]byte) [][]byte {
	if l == nil {
		return nil
	}
	from := len(s.listArena)
	s.listArena = append(s.listArena, l...)
	return s.listArena[from:len(s.listArena):len(s.listArena)]
}

func arityError(name string) string {
	return "ERR wrong number of arguments for '" + name + "' command"
}

// unknownCommand renders Redis's reply for an unknown command: the
// arguments are quoted until 128 characters are used.
func unknownCommand(args [][]byte) string {
	var b strings.Builder
	for _, a := range args[1:] {
		if b.Len() >= 128 {
			break
		}
		v := string(a)
		if room := 128 - b.Len(); len(v) > room {
			v = v[:room]
		}
		b.WriteString("'" + v + "' ")
	}
	return "ERR unknown command '" + sanitize(string(args[0]), 128) + "', with args beginning with: " + sanitize(b.String(), 1<<20)
}

// sanitize truncates and replaces CR/LF so an echoed string cannot break
// the reply framing.
func sanitize(s string, n int) string {
	if len(s) > n {
		s = s[:n]
	}
	return strings.Map(func(r rune) rune {
		if r == '\r' || r == '\n' {
			return ' '
		}
		return r
	}, s)
}
