package server

import (
	"errors"
	"net"
	"runtime/debug"
	"sync"
	"time"

	"github.com/bfserver/bfserver/command"
	"github.com/bfserver/bfserver/internal/evloop"
	"github.com/bfserver/bfserver/keyspace"
	"github.com/bfserver/bfserver/resp"
)

// Connections on event loops (internal/evloop). A plain TCP connection is
// served by one of a few loops: each batch of input is run on the loop
// (traffic) as long as no command in it could wait; the first that could
// (a write through the log, a read barrier that asks the leader, a
// command that blocks) parks the connection, and a goroutine serves the
// rest of the batch the ordinary way (parked), then gives the connection
// back. TLS connections, and every connection with the loops off, are
// served by a goroutine each (session.loop). MONITOR takes a connection
// out of its loop for good.

// errParked: the command was not run, and is left for a goroutine.
var errParked = errors.New("parked")

// loopHandler serves the loops' connections for a Server.
type loopHandler struct{ s *Server }

func (h loopHandler) Traffic(c *evloop.Conn, in []byte, n int) (int, evloop.Action) {
	return c.Context.(*session).traffic(in, n)
}

func (h loopHandler) Parked(c *evloop.Conn) {
	s := c.Context.(*session)
	if s.turnHeld {
		t := &h.s.turns[c.Loop()]
		t.held = append(t.held, s)
		return
	}
	h.s.parkers.serve(s)
}

func (h loopHandler) TurnEnd(loop int) { h.s.turnEnd(loop) }

func (h loopHandler) Closed(c *evloop.Conn) { c.Context.(*session).ended() }

// parkers are the goroutines that serve parked connections, each one after
// another: a goroutine started per park (a write through the log, at
// pipeline depth 1 every request) cost its start, and then the copies of
// its stack as it grew to what a write needs, every time. An idle one
// waits on a channel of its own: a select on a shared stop channel too
// locked that channel for every park.
type parkers struct {
	mu      sync.Mutex
	idle    []*parker
	stopped bool
}

type parker struct{ next chan *session } // nil: stop

// maxIdleParkers bounds the parkers kept waiting for work: more than
// the connections that write at once are never needed, and a burst's
// extra ones end.
const maxIdleParkers = 256

// serve hands s to an idle parker, or to a new one; it never waits.
func (ps *parkers) serve(s *session) {
	ps.mu.Lock()
	var p *parker
	if n := len(ps.idle); n > 0 {
		p = ps.idle[n-1]
		ps.idle[n-1] = nil
		ps.idle = ps.idle[:n-1]
	}
	ps.mu.Unlock()
	if p == nil {
		p = &parker{next: make(chan *session, 1)}
		go ps.work(p, s)
		return
	}
	p.next <- s // room for one: p takes nothing else until it is idle again
}

func (ps *parkers) work(p *parker, s *session) {
	for s != nil {
		s.parked()
		ps.mu.Lock()
		if ps.stopped || len(ps.idle) >= maxIdleParkers {
			ps.mu.Unlock()
			return
		}
		ps.idle = append(ps.idle, p)
		ps.mu.Unlock()
		s = <-p.next
	}
}

// stop ends the idle parkers, and those that finish from now on.
func (ps *parkers) stop() {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	ps.stopped = true
	for _, p := range ps.idle {
		close(p.next)
	}
	ps.idle = nil
}

// adopt hands a plain TCP connection to an event loop.
func (s *Server) adopt(nc net.Conn) {
	if s.refuseUnprotected(nc) {
		nc.Close()
		return
	}
	s.mu.Lock()
	if s.closed.Load() {
		// Close has killed the others already: this one is not served.
		s.mu.Unlock()
		nc.Close()
		return
	}
	sess := newSession(s, nc)
	c, err := s.loops.Adopt(nc)
	if err != nil {
		s.mu.Unlock()
		s.opts.Logger.Warn("cannot serve connection from an event loop", "err", err)
		return
	}
	sess.nc, sess.ev = nil, c
	sess.stats = s.statShard(int64(c.Loop()))
	sess.adm.fd = c.Fd()
	c.Context = sess
	s.open.Add(1)
	s.wg.Add(1)
	s.clients[sess.id] = sess
	s.mu.Unlock()
	s.stats.connections.Add(1)
	c.Start() // a Close meanwhile has posted its close first: the loop drops the start
}

// ended runs once a session's connection is closed.
func (s *session) ended() {
	s.releaseNeed() // a batch a panic cut short counts no more
	s.finish()
	srv := s.srv
	srv.mu.Lock()
	s.foldIO()
	delete(srv.clients, s.id)
	srv.mu.Unlock()
	srv.open.Add(-1)
	srv.wg.Done()
}

// traffic runs on the loop: the commands of in that need not wait.
func (s *session) traffic(in []byte, n int) (used int, act evloop.Action) {
	defer func() {
		// A bug must cost one connection, never the server.
		if r := recover(); r != nil {
			s.internalError(r)
			used, act = len(in), evloop.Close
		}
	}()
	if n > 0 {
		s.noteRead(n, len(in), cap(in))
	} else {
		s.adm.t0 = time.Now() // input its parked goroutine left: no read
	}
	pos, park := s.batch(in, true)
	if s.lostBuf {
		s.ev.KeepInput() // commands of an unknown outcome still point into in
		s.lostBuf = false
	}
	if s.sendBatch() != nil || s.closing {
		return pos, evloop.Close
	}
	lim := &s.srv.opts.Limits
	rest := in[pos:]
	if len(rest) >= lim.MaxQueryBuffer {
		s.srv.adm.qbufDrop.Add(1)
		return pos, evloop.Close // Redis closes clients over the query buffer limit
	}
	s.adm.pub.qbuf.Store(int64(len(rest)))
	s.adm.pub.wbuf.Store(int64(cap(s.w.Buf)))
	if park {
		return pos, evloop.Park
	}
	if len(in) == cap(in) {
		// The buffer is full with a command under way: room for it and
		// what follows, as session.loop sizes its buffer, at most twice
		// what arrived (a length claimed is not yet bytes sent).
		if need := resp.Needed(rest, lim); need > len(rest) {
			s.ev.Reserve(min(need+64<<10, 2*cap(in), lim.MaxQueryBuffer))
		}
	}
	return pos, evloop.Continue
}

// internalError logs a panic in a command and tells the client, whose
// connection then closes.
func (s *session) internalError(r any) {
	s.srv.opts.Logger.Error("panic serving client", "client", s.id, "panic", r, "stack", string(debug.Stack()))
	s.w.Buf = append(s.w.Buf[:0], "-ERR internal error\r\n"...)
	s.sendOut()
}

// parked serves a parked connection's input from a goroutine, where
// commands may wait, then gives the connection back to its loop.
func (s *session) parked() {
	c := s.ev
	defer func() {
		if r := recover(); r != nil {
			s.internalError(r)
			if s.ev != nil {
				c.End()
				return
			}
			// Detached by MONITOR: this goroutine serves it, and ends it.
			s.nc.Close()
			s.ended()
		}
	}()
	in := c.Input()
	pos, _ := s.batch(in, false)
	if s.ev != nil && s.killedMeanwhile() {
		c.Resume()
		return
	}
	err := s.sendBatch()
	if s.ev == nil {
		// MONITOR took the connection out of the loop: serve it from
		// here on, from what is left of the input.
		s.loop(append([]byte(nil), in[pos:]...))
		s.nc.Close()
		s.ended()
		return
	}
	c.Consume(pos, s.lostBuf) // commands of an unknown outcome still point into in
	s.lostBuf = false
	s.giveBack(c, err)
}

// killedMeanwhile reports whether CLIENT KILL (or the server closing) came
// while the connection was away from its loop: nothing more is sent to
// it, and its loop, given it back, closes it, closing already asked.
func (s *session) killedMeanwhile() bool {
	select {
	case <-s.adm.killed:
		return true
	default:
		return false
	}
}

// giveBack returns a connection served away from its loop (parked, or
// answered after its loop's turn) once its replies are sent: sent is how
// sending them went. It is ended when that failed or a command closes it.
func (s *session) giveBack(c *evloop.Conn, sent error) {
	if sent != nil || s.closing {
		c.End()
		return
	}
	c.Resume()
}

// detach takes the session's connection out of its event loop for good
// (MONITOR, whose lines other goroutines write): from then on a goroutine
// serves it. It runs on the parked goroutine, which owns the connection.
func (s *session) detach() error {
	s.adm.connMu.Lock() // against kill, from another goroutine
	defer s.adm.connMu.Unlock()
	if s.ev == nil {
		return nil
	}
	nc, _, out, err := s.ev.Detach() // refused once killed
	if err != nil {
		return err
	}
	s.nc, s.ev = nc, nil
	s.detachedOut = out
	return nil
}

// loopMode is where a command of a loop's connection runs.
type loopMode uint8

const (
	loopRun  loopMode = iota // on the loop: nothing about it can wait
	loopPark                 // from a goroutine, with what follows it
	loopWait                 // a write queued for the loop's turn (turnEnd)
)

// onLoop decides where the command in args runs; last says it is the
// last of the input, and small enough to be copied out of it
// (maxTurnCommand). It decides before the command has any effect, so one
// that is parked is run from the start by the goroutine.
func (s *session) onLoop(args [][]byte, last bool) loopMode {
	sp := s.lookup(args[0])
	switch {
	case sp == nil:
		return loopRun // an error reply
	case s.adm.replyOff || s.adm.skipThis || s.adm.skipNext || s.adm.mon != nil:
		return loopPark
	case s.srv.adm.pause.maybe.Load():
		return loopPark
	case s.multi:
		if sp.noMulti {
			return loopPark // EXEC, WATCH…: run, not queued
		}
		return loopRun
	case sp.run != nil || sp.subs != nil:
		if sp.inline {
			return loopRun
		}
		return loopPark
	case sp.parse == nil || sp.lockedRead:
		return loopPark
	case sp.af.write || sp.af.mayReplicate:
		switch {
		case s.srv.inlineWrites:
			return loopRun
		case last && sp.af.write && s.srv.turnWrites():
			return loopWait
		}
		return loopPark
	}
	if s.barrierReady() {
		return loopRun
	}
	return loopPark
}

// loopTurn are the connections whose last command, a write, waits for
// their loop's turn to end: a loop's own.
type loopTurn struct {
	held  []*session
	cmds  []*command.Cmd
	done  chan turnResult // the turn's write's answer
	timer *time.Timer     // turnSlow
	avg   time.Duration   // the turns' writes' time, a moving average
}

// turnResult is the answer to a turn's write.
type turnResult struct {
	res  []keyspace.Result
	err  error
	took time.Duration
}

const (
	// maxTurnCommand bounds the command a loop's turn waits for: its
	// bytes are copied out of the loop's buffer and kept by the session.
	// A larger one is parked, as before (its write outweighs a hand-off).
	maxTurnCommand = 16 << 10
	// keptTurnBuf bounds the copy a session keeps for its next write (a
	// BF.ADD of a short item takes some 40 bytes).
	keptTurnBuf = 512
	// turnSlow is the longest a loop waits for its turn's write (a log
	// write takes well under a millisecond; an image flush's sync or a
	// busy disk, a hung one, can take far longer): past it a goroutine
	// waits for the write and answers it, and the loops park their writes
	// for a while after that write is answered (slowPause): turnPauseMin
	// after a lone slow write, twice the last pause after one that came
	// within turnPause of the last pause's end, up to turnPause. So the
	// reads a loop serves wait at most turnSlow, a few times at first and
	// then at most once in turnPause, while a disk stays slow; and one
	// slow sync (this VM's fdatasync reaches 100 ms some seconds apart)
	// does not cost the turns a second each (docs/BENCHMARKS.md,
	// "Replies at the end of the turn, a lone slow write, the loop's
	// yield").
	turnSlow     = 10 * time.Millisecond
	turnPause    = time.Second
	turnPauseMin = 100 * time.Millisecond
	// turnSlowAvg: the same, when a loop's turns' writes take this long
	// on average (a disk whose every sync takes some milliseconds): each
	// would hold the loop's reads that long, turn after turn.
	turnSlowAvg = 2 * time.Millisecond
)

// turnWrites reports whether a loop may wait for a write itself: the
// backend's writes wait on this node alone, and none was slow lately.
func (srv *Server) turnWrites() bool {
	return srv.localWrites != nil && time.Now().UnixNano() >= srv.turnsOffUntil.Load() && srv.localWrites.WritesLocally()
}

// pauseTurns keeps the loops from waiting for writes until t at least.
func (srv *Server) pauseTurns(t time.Time) {
	for {
		old := srv.turnsOffUntil.Load()
		if old >= t.UnixNano() || srv.turnsOffUntil.CompareAndSwap(old, t.UnixNano()) {
			return
		}
	}
}

// turnEnd writes the writes the loop's connections left for the end of
// its turn (Redis's beforeSleep, where appendfsync always syncs the
// turn's writes) through the log as one batch, waits for them, and
// answers them. It runs on the loop: while the node is its cluster's one
// voter a write waits only on this node's log, for about one log write,
// and a connection at pipeline depth 1 is served with no goroutine woken
// for it but the one that proposes the turn's batch (a parked write woke
// one to propose it and again to answer it). The loop reads nothing
// meanwhile, as Redis's does not while it syncs, but for turnSlow at
// most. When the node no longer writes alone, or CLIENT PAUSE may hold
// writes, the connections go to parked goroutines as any other write.
func (srv *Server) turnEnd(loop int) {
	t := &srv.turns[loop]
	if len(t.held) == 0 {
		return
	}
	held := t.held
	if srv.adm.pause.maybe.Load() || !srv.localWrites.WritesLocally() {
		for _, s := range held {
			s.turnHeld = false
			srv.parkers.serve(s) // its pending write goes first
		}
		clear(t.held)
		t.held = t.held[:0]
		return
	}
	t.cmds = t.cmds[:0]
	for _, s := range held {
		t.cmds = append(t.cmds, s.pending...)
	}
	if t.done == nil {
		t.done = make(chan turnResult, 1)
		t.timer = time.NewTimer(turnSlow)
	} else {
		t.timer.Reset(turnSlow)
	}
	done, cmds, start := t.done, t.cmds, time.Now()
	go func() {
		res, err := srv.turnWrite(cmds)
		done <- turnResult{res, err, time.Since(start)}
	}()
	select {
	case r := <-done:
		t.timer.Stop()
		// Each write counts for at most twice the bound: one outlier (a
		// page fault, a collection) must not pause the turns.
		if t.avg += (min(r.took, 2*turnSlowAvg) - t.avg) / 32; t.avg > turnSlowAvg {
			t.avg = 0 // measured afresh once the pause is over
			srv.pauseTurns(time.Now().Add(turnPause))
		}
		if r.err != nil {
			// The log may still encode these commands (a proposal given
			// up on stays queued): their list is not reused.
			t.cmds = nil
		} else {
			clear(t.cmds)
		}
		srv.answerTurn(held, r, start)
		clear(held)
		t.held = held[:0]
	case <-t.timer.C:
		// The log is slow: a goroutine takes the turn's connections
		// (parked, they are whoever's holds them) and the loop goes on.
		t.held, t.cmds, t.done = nil, nil, make(chan turnResult, 1)
		pause := srv.slowPause(start)
		srv.pauseTurns(start.Add(turnSlow + pause))
		go func() {
			r := <-done
			srv.pauseTurns(time.Now().Add(pause))
			srv.answerTurn(held, r, start)
		}()
	}
}

// slowPause is how long the turns pause after a turn's write that began
// at start took longer than turnSlow (turnSlow says why). Each loop's
// turn write that one slow sync held finds it slow: one that began before
// the last was found slow met the same sync, and the pause stays as it
// is (no new turn write begins while the turns pause).
func (srv *Server) slowPause(start time.Time) time.Duration {
	now := time.Now()
	srv.slowMu.Lock()
	defer srv.slowMu.Unlock()
	p := srv.slowPaused
	switch {
	case p != 0 && !start.After(srv.lastSlow):
		return p
	case p == 0 || now.Sub(srv.lastSlow) > p+turnPause:
		p = turnPauseMin
	default:
		p = min(2*p, turnPause)
	}
	srv.lastSlow, srv.slowPaused = now, p
	return p
}

// answerTurn answers each connection of a turn from its part of r. A
// panic costs the connections not yet answered (closed), not the loop.
func (srv *Server) answerTurn(held []*session, r turnResult, start time.Time) {
	defer func() {
		if p := recover(); p != nil {
			srv.opts.Logger.Error("panic answering a loop's turn", "panic", p, "stack", string(debug.Stack()))
			for _, s := range held {
				if s.turnHeld {
					s.turnHeld = false
					s.releaseNeed()
					s.ev.End()
				}
			}
		}
	}()
	res := r.res
	for _, s := range held {
		n := len(s.pending)
		var mine []keyspace.Result
		if res != nil {
			mine, res = res[:n], res[n:]
		}
		s.turnHeld = false
		s.releaseNeed()
		s.turnAnswered(mine, r.err, start, r.took)
	}
}

// errTurnPanic answers a turn's writes when writing them panicked.
var errTurnPanic = errors.New("internal error")

// turnWrite writes a turn's commands; a panic in it costs the turn's
// connections (closed after the error), not the loop.
func (srv *Server) turnWrite(cmds []*command.Cmd) (res []keyspace.Result, err error) {
	defer func() {
		if r := recover(); r != nil {
			srv.opts.Logger.Error("panic writing a loop's turn", "panic", r, "stack", string(debug.Stack()))
			res, err = nil, errTurnPanic
		}
	}()
	return srv.backend.Write(srv.ctx, cmds)
}

// turnAnswered answers a connection's write from its loop's turn and
// gives the connection back to the loop.
func (s *session) turnAnswered(res []keyspace.Result, err error, start time.Time, took time.Duration) {
	c := s.ev
	defer func() {
		if r := recover(); r != nil {
			s.internalError(r)
			c.End()
		}
	}()
	s.answerPending(res, err, start, took)
	s.closing = s.closing || err == errTurnPanic
	// After an error answerPending let go of the command's bytes (the
	// log may still encode them); the loop's own input never held them.
	s.lostBuf = false
	if cap(s.turnBuf) > keptTurnBuf {
		s.turnBuf = nil // large: an idle connection keeps no more
	}
	if s.killedMeanwhile() {
		c.Resume()
		return
	}
	s.giveBack(c, s.sendBatch())
}

// barrierReady reports whether this batch's reads can be served without
// waiting, and takes the barrier when it can be taken at once.
func (s *session) barrierReady() bool {
	if s.barrierDone || s.stale {
		return true
	}
	if r, ok := s.srv.backend.(instantReader); ok {
		if until, ok := r.ReadNow(); ok {
			s.barrierDone, s.barrierUntil = true, until
			return true
		}
	}
	return false
}
