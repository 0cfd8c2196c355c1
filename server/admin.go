package server

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/bfserver/bfserver/command"
	"github.com/bfserver/bfserver/internal/ascii"
	"github.com/bfserver/bfserver/keyspace"
)

// The operators' side of the server: what INFO, SLOWLOG, LATENCY, CLIENT,
// MONITOR, CONFIG RESETSTAT/REWRITE, SAVE and SHUTDOWN report on and act
// on. Every command is accounted once its reply is rendered (account):
// INFO commandstats and errorstats, the slow log, the latency monitor and
// MONITOR all take it from there, so a command counts the same whether it
// ran alone, pipelined or in EXEC. Commands refused before they ran
// (unknown, arity, NOAUTH, NOPERM, OOM in MULTI, …) are counted as
// rejected, as Redis counts them (rejected).

// SlowlogConfig is slowlog-log-slower-than and slowlog-max-len.
type SlowlogConfig struct {
	// LogSlowerThan: commands that ran at least this many microseconds are
	// logged; 0 logs every command, -1 none. Redis's default 10000.
	LogSlowerThan int64
	// MaxLen is how many entries the log keeps. Redis's default 128.
	MaxLen int64
}

// DefaultSlowlog is Redis's slow log settings.
func DefaultSlowlog() SlowlogConfig { return SlowlogConfig{LogSlowerThan: 10000, MaxLen: 128} }

// validateAdmin fills the operators' defaults and checks their ranges, the
// same as CONFIG SET's.
func (o *Options) validateAdmin() error {
	switch o.EnableDebugCommand {
	case "":
		o.EnableDebugCommand = "no"
	case "no", "yes", "local":
	default:
		return fmt.Errorf("enable-debug-command %q: must be no, yes or local", o.EnableDebugCommand)
	}
	if o.Slowlog != nil {
		if o.Slowlog.LogSlowerThan < -1 {
			return fmt.Errorf("slowlog-log-slower-than %d: must be at least -1", o.Slowlog.LogSlowerThan)
		}
		if o.Slowlog.MaxLen < 0 {
			return fmt.Errorf("slowlog-max-len %d: must be at least 0", o.Slowlog.MaxLen)
		}
	}
	if o.LatencyMonitorThreshold < 0 {
		return fmt.Errorf("latency-monitor-threshold %d: must be at least 0", o.LatencyMonitorThreshold)
	}
	return nil
}

// adminFlags are the COMMAND INFO flags the operators' features look at,
// worked out once per command (initAdmin).
type adminFlags struct {
	fast, admin, skipMonitor, skipSlowlog, noMulti bool
	write, read, mayReplicate                      bool
}

// initAdmin reads every command's flags; it runs once the table is
// complete, after initStats.
func initAdmin() {
	set := func(full string, sp *spec) {
		f := sp.meta.Info.Flags
		has := func(n string) bool { return slices.Contains(f, n) }
		sp.af = adminFlags{fast: has("fast"), admin: has("admin"), skipMonitor: has("skip_monitor"),
			skipSlowlog: has("skip_slowlog"), noMulti: has("no_multi"), write: has("write"),
			read: has("readonly"), mayReplicate: has("may_replicate")}
	}
	for name, sp := range commands {
		set(name, sp)
		for sub, ssp := range sp.subs {
			set(name+"|"+sub, ssp)
		}
	}
}

// serverAdmin is the server's share of the operators' state.
type serverAdmin struct {
	runID     string // 40 hex characters, new for every process
	startHeap uint64 // used_memory once the server was created

	slowlog  slowlog
	latency  latencyMonitor
	pause    pauser
	monitors monitorSet
	errs     errorStats
	saves    saveState
	inst     instMetrics

	// runtime settings (CONFIG SET)
	slowlogSlower atomic.Int64
	slowlogMax    atomic.Int64
	latencyMs     atomic.Int64
	maxClients    atomic.Int64
	protected     atomic.Bool

	// cfgMu orders CONFIG SET and REWRITE; changed names the settings
	// CONFIG SET changed since start, which REWRITE writes.
	cfgMu   sync.Mutex
	changed map[string]bool

	io       [ioCounts]atomic.Int64 // of the connections that closed
	qbufDrop atomic.Int64           // clients closed over client-query-buffer-limit
	obufDrop atomic.Int64           // MONITOR clients closed over their output limit
	hits     atomic.Int64           // of the connections that closed
	misses   atomic.Int64
	expired  atomic.Int64
	errors   atomic.Int64 // total_error_replies
	peakMem  atomic.Uint64
	changes  atomic.Int64    // writes applied through this server since its last save
	denied   [4]atomic.Int64 // ACL denials: auth, command, key, channel
	// INFO's counts of connections and refusals since CONFIG RESETSTAT:
	// the metrics' own counters are never reset.
	connBase, rejBase atomic.Int64
	loadedKeys        int64 // keys the keyspace held when the server was created

	shutdown     chan struct{}
	shutdownOnce sync.Once
}

func (a *serverAdmin) init(o *Options) {
	var b [20]byte
	rand.Read(b[:])
	a.runID = hex.EncodeToString(b[:])
	sl := DefaultSlowlog()
	if o.Slowlog != nil {
		sl = *o.Slowlog
	}
	a.slowlogSlower.Store(sl.LogSlowerThan)
	a.slowlogMax.Store(sl.MaxLen)
	a.latencyMs.Store(o.LatencyMonitorThreshold)
	a.maxClients.Store(int64(o.MaxClients))
	a.protected.Store(o.ProtectedMode)
	a.changed = map[string]bool{}
	a.shutdown = make(chan struct{})
	a.startHeap = readMem().heap
	a.peakMem.Store(a.startHeap)
}

// ShutdownRequested is closed once a client ran SHUTDOWN (and its SAVE,
// if asked, succeeded): the owner of the server should Close it and exit
// with status 0.
func (s *Server) ShutdownRequested() <-chan struct{} { return s.adm.shutdown }

// RunID is this process's run_id (INFO server).
func (s *Server) RunID() string { return s.adm.runID }

// sessionAdmin is a session's share: what other clients may read of it
// (CLIENT LIST, KILL) and its reply mode.
type sessionAdmin struct {
	pub    clientPub
	fd     int
	raddr  string
	laddr  string
	killed chan struct{}
	kill   sync.Once
	// deleting: the session runs an ACL DELUSER; aclLoop leaves it be,
	// for it closes itself once its reply is sent (cmdACLDelUser).
	deleting atomic.Bool
	// connMu orders kill (any goroutine) against detach (the session's
	// own), which swaps its connection from a loop's to a net.Conn.
	connMu sync.Mutex

	top  *spec     // the command being run (EXEC while its commands run)
	t0   time.Time // when the command being run started
	args [][]byte  // its arguments (CLIENT INFO's argv-mem)
	qnow int       // unparsed bytes when it was read (CLIENT INFO's qbuf)
	qcap int       // the query buffer's size

	// CLIENT REPLY: off, or skipping this command's reply / the next's.
	// quiet is where the reply of a command that must not answer begins
	// in the output, or -1.
	replyOff, skipThis, skipNext bool
	quiet                        int

	noEvict, noTouch bool
	paused           bool // held by CLIENT PAUSE
	mon              *monitorOut

	pendArgs [][][]byte // the arguments of the pending writes (slow log, MONITOR)
	run      []timedCmd // commands run since the clock was last read (see settle)
	runArgs  [][]byte   // their argument lists: the parser reuses its own
	word     uint64     // the last published pub.word
	lastCmd  *spec      // the last published pub.lastCmd
}

// account notes a command once its reply, starting at offset from, is
// rendered: INFO commandstats and errorstats, the slow log, the latency
// monitor and MONITOR. Its latency for the metrics is known when the
// batch's replies are written (endBatch).
func (s *session) account(sp *spec, args [][]byte, from int) {
	failed := s.note(sp, args, from)
	// The argument list is the parser's, which the next command reuses;
	// the bytes it points at stay until the run is settled.
	a := &s.adm
	n := len(a.runArgs)
	a.runArgs = append(a.runArgs, args...)
	a.run = append(a.run, timedCmd{sp, a.runArgs[n:len(a.runArgs):len(a.runArgs)], failed})
	// A fast command's time is settled with the run it belongs to: one
	// clock read for up to maxRun of them (a clock read costs as much as a
	// BF.EXISTS).
	if !sp.af.fast || len(s.adm.run) >= maxRun || s.adm.mon != nil {
		s.settle()
	}
}

// accountTook is account for a command whose time is known: a write,
// which took its batch's time through the log.
func (s *session) accountTook(sp *spec, args [][]byte, from int, d time.Duration) {
	s.timed(sp, args, d, s.note(sp, args, from))
}

// maxRun bounds a run of fast commands that share one clock read.
const maxRun = 64

// timedCmd is a command of the run not yet timed.
type timedCmd struct {
	sp     *spec
	args   [][]byte
	failed bool
}

// note records what does not depend on a command's time: errorstats, the
// MONITOR feed, the changes since the last save. It reports whether the
// reply, at offset from, is an error.
func (s *session) note(sp *spec, args [][]byte, from int) bool {
	failed := from < len(s.w.Buf) && s.w.Buf[from] == '-'
	s.acct = append(s.acct, accounted{sp})
	a := &s.srv.adm
	if failed {
		s.srv.countError(s.w.Buf[from:])
	}
	if a.monitors.n.Load() > 0 && !sp.af.admin && !sp.af.skipMonitor {
		if s.adm.mon != nil {
			s.sendOut() // a monitor gets its own reply before the line, as in Redis
		}
		a.monitors.feed(s, sp, args)
	}
	if sp.af.write && !failed {
		a.changes.Add(1)
	}
	return failed
}

// settle reads the clock once for the run of commands since the last
// read, shares the time between them, and records it. Each command's time
// runs from the end of the one before (or the batch's arrival). It runs
// before the arguments it holds are reused: at the end of a batch, before
// a write and before a pause.
func (s *session) settle() {
	run := s.adm.run
	if len(run) == 0 {
		return
	}
	now := time.Now()
	d := now.Sub(s.adm.t0) / time.Duration(len(run))
	s.adm.t0 = now
	for i := 0; i < len(run); {
		// Consecutive runs of one command count together.
		j, failed := i, 0
		for ; j < len(run) && run[j].sp == run[i].sp; j++ {
			if run[j].failed {
				failed++
			}
		}
		s.statsOf(run[i].sp).ranN(d, j-i, failed)
		for k := i; k < j; k++ {
			s.slow(run[k].sp, run[k].args, d)
		}
		i = j
	}
	clear(run)
	clear(s.adm.runArgs)
	s.adm.run, s.adm.runArgs = run[:0], s.adm.runArgs[:0]
}

// timed records one command that took d.
func (s *session) timed(sp *spec, args [][]byte, d time.Duration, failed bool) {
	f := 0
	if failed {
		f = 1
	}
	s.statsOf(sp).ranN(d, 1, f)
	s.slow(sp, args, d)
}

// slow puts a command that took d in the slow log and the latency
// monitor, when it took long enough.
func (s *session) slow(sp *spec, args [][]byte, d time.Duration) {
	a := &s.srv.adm
	if t := a.slowlogSlower.Load(); t >= 0 && d.Microseconds() >= t && !sp.af.skipSlowlog {
		a.slowlog.push(s, args, d, a.slowlogMax.Load())
	}
	if t := a.latencyMs.Load(); t > 0 && d.Milliseconds() >= t {
		event := "command"
		if sp.af.fast {
			event = "fast-command"
		}
		a.latency.add(event, time.Now().Unix(), d.Milliseconds())
	}
}

// rejected notes a command refused before it ran: the error reply (at
// offset from) counts in errorstats, and in the command's rejected_calls
// when the command or subcommand was found, as in Redis.
func (s *session) rejected(args [][]byte, from int) {
	if from < len(s.w.Buf) {
		s.srv.countError(s.w.Buf[from:])
	}
	if sp := lookedUp(args); sp != nil {
		s.statsOf(sp).rejected.Add(1)
	}
}

// lookedUp is the command or subcommand args name, as Redis's
// lookupCommand finds it: nil for an unknown command or subcommand.
func lookedUp(args [][]byte) *spec {
	sp := lookupSpec(args[0])
	if sp == nil || sp.subs == nil || len(args) < 2 {
		return sp
	}
	return sp.subs[ascii.ToLower(args[1])]
}

// admit applies the checks Redis makes after ACL and before running or
// queueing a command: a command flagged no_multi inside MULTI, and a
// MONITOR client touching the keyspace (Redis treats it as a replica).
func (s *session) admit(sp *spec) string {
	if sp.name == "debug" && !s.debugAllowed() {
		return msgDebugNotAllowed
	}
	if s.multi && sp.af.noMulti {
		return "ERR Command not allowed inside a transaction"
	}
	if s.adm.mon != nil && (sp.af.read || sp.af.write || sp.af.mayReplicate) {
		return "ERR Replica can't interact with the keyspace"
	}
	return ""
}

// countError counts an error reply (raw bytes from its '-') in
// total_error_replies and errorstats, by its code: the first word, as
// Redis takes it (up to 32 bytes; "ERR" when there is no space).
func (s *Server) countError(reply []byte) {
	s.adm.errors.Add(1)
	line := reply[1:]
	code := "ERR"
	if i := strings.IndexByte(string(line[:min(len(line), 32)]), ' '); i > 0 {
		code = string(line[:i])
	}
	s.adm.errs.add(code)
	switch code {
	case "WRONGPASS":
		s.adm.denied[0].Add(1)
	case "NOPERM":
		text, _, _ := strings.Cut(string(line), "\r")
		switch {
		case strings.Contains(text, " key"):
			s.adm.denied[2].Add(1)
		case strings.Contains(text, " channel"):
			s.adm.denied[3].Add(1)
		default:
			s.adm.denied[1].Add(1)
		}
	}
}

// errorStats counts error replies by code (INFO errorstats). Like Redis it
// tracks at most 128 codes: a new code past them is not tracked.
type errorStats struct {
	mu     sync.Mutex
	counts map[string]int64
}

const maxErrorCodes = 128

func (e *errorStats) add(code string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.counts == nil {
		e.counts = map[string]int64{}
	}
	if _, ok := e.counts[code]; !ok && len(e.counts) >= maxErrorCodes {
		return
	}
	e.counts[code]++
}

func (e *errorStats) snapshot() [][2]any {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out [][2]any
	for _, k := range sortedKeys(e.counts) {
		out = append(out, [2]any{k, e.counts[k]})
	}
	return out
}

func (e *errorStats) reset() {
	e.mu.Lock()
	e.counts = nil
	e.mu.Unlock()
}

// quietStart begins a command under CLIENT REPLY OFF or SKIP: earlier
// replies are rendered, and this one's will be dropped (quietEnd).
func (s *session) quietStart() {
	a := &s.adm
	if !a.replyOff && !a.skipThis {
		a.quiet = -1
		return
	}
	s.flushPending()
	a.quiet = len(s.w.Buf)
}

// quietEnd drops the reply of a command that must not answer and moves
// CLIENT REPLY SKIP on to the next command.
func (s *session) quietEnd() {
	a := &s.adm
	if a.quiet >= 0 && (a.replyOff || a.skipThis) {
		s.flushPending()
		if a.quiet <= len(s.w.Buf) {
			s.w.Buf = s.w.Buf[:a.quiet]
		}
	}
	a.quiet = -1
	a.skipThis = false
	if a.skipNext {
		a.skipThis, a.skipNext = true, false
	}
}

// sendOut writes the rendered replies to the client (through its MONITOR
// queue when it monitors): all of them, or under CLIENT REPLY the part
// before the reply being dropped, which stays.
func (s *session) sendOut() error {
	n := len(s.w.Buf)
	if q := s.adm.quiet; q >= 0 && q <= n {
		n = q
		s.adm.quiet = 0
	}
	if n == 0 {
		return nil
	}
	var err error
	switch {
	case s.adm.mon != nil:
		err = s.adm.mon.push(s.w.Buf[:n])
	case s.ev != nil:
		err = s.ev.Write(s.w.Buf[:n])
	default:
		_, err = s.nc.Write(s.w.Buf[:n])
	}
	s.adm.pub.io[ioNetOut].Add(int64(n))
	s.adm.pub.io[ioWrites].Add(1)
	rest := copy(s.w.Buf, s.w.Buf[n:])
	s.w.Buf = s.w.Buf[:rest]
	return err
}

// noteRead counts n bytes read into a query buffer now holding size bytes
// of cap; the batch's commands start now.
func (s *session) noteRead(n, size, cap int) {
	p := &s.adm.pub
	p.io[ioNetIn].Add(int64(n))
	p.io[ioReads].Add(1)
	s.adm.t0 = time.Now()
	p.lastIO.Store(s.adm.t0.UnixNano())
	p.qbuf.Store(int64(size))
	if s.adm.qcap != cap {
		s.adm.qcap = cap
		p.rbs.Store(int64(cap))
		if int64(cap) > p.rbp.Load() {
			p.rbp.Store(int64(cap))
		}
	}
}

// countLookups counts a read's key lookups in keyspace_hits and
// keyspace_misses, as Redis counts the reads that look a key up (a key of
// the wrong type is a hit). A membership check that found an item has
// found its key; otherwise the key is looked up again.
func (s *session) countLookups(c *command.Cmd, r *keyspace.Result) {
	switch c.Op {
	case command.Exists:
		s.adm.pub.hits.Add(r.Int)
		s.adm.pub.misses.Add(int64(len(c.Keys)) - r.Int)
		return
	case command.BFExists, command.CFExists, command.CFCount:
		if r.Err == nil {
			if r.Found {
				s.adm.pub.hits.Add(1)
			} else {
				s.adm.pub.misses.Add(1)
			}
			return
		}
	case command.BFInfo, command.BFCard, command.BFScanDump, command.BFDebug,
		command.CFInfo, command.CFScanDump, command.CFDebug, command.Type, command.TTL, command.Get, command.Dump:
	default:
		return
	}
	if s.srv.backend.State().Lookup(c.DB, c.Key, c.Now) != nil {
		s.adm.pub.hits.Add(1)
	} else {
		s.adm.pub.misses.Add(1)
	}
}

// registerAdmin adds the operators' commands to the table.
func registerAdmin() {
	registerClient()
	registerConfig()
	registerSlowlog()
	registerLatency()
	registerMonitor()
	registerPersist()
}

// setLastCmd publishes the command being run (CLIENT LIST's cmd=).
func (s *session) setLastCmd(sp *spec) {
	if sp != s.adm.lastCmd {
		s.adm.lastCmd = sp
		s.adm.pub.lastCmd.Store(sp)
	}
}

// finish ends a session: a monitor's queue is written out, and its
// counters join the server's.
func (s *session) finish() {
	s.endMonitor()
	s.srv.adm.hits.Add(s.adm.pub.hits.Load())
	s.srv.adm.misses.Add(s.adm.pub.misses.Load())
}

// foldIO adds the session's I/O counters (and its negatives) to the server's; under the
// server's mu, with the session's removal, so that ioTotals counts them
// once.
func (s *session) foldIO() {
	for i := range s.adm.pub.io {
		s.srv.adm.io[i].Add(s.adm.pub.io[i].Load())
	}
	s.srv.negatives.Add(s.adm.pub.negatives.Load())
}

// ioTotals is the I/O counters (ioNetIn…): the closed connections' and
// the open ones'.
func (s *Server) ioTotals() (t [ioCounts]int64) {
	for i := range t {
		t[i] = s.adm.io[i].Load()
	}
	s.mu.Lock() // INFO's sampler asks ten times a second: no copy of the list
	defer s.mu.Unlock()
	for _, c := range s.clients {
		for i := range t {
			t[i] += c.adm.pub.io[i].Load()
		}
	}
	return t
}

// lookups is keyspace_hits and keyspace_misses: the closed connections'
// and the open ones'.
func (s *Server) lookups() (hits, misses int64) {
	hits, misses = s.adm.hits.Load(), s.adm.misses.Load()
	for _, c := range s.clientList() {
		hits += c.adm.pub.hits.Load()
		misses += c.adm.pub.misses.Load()
	}
	return hits, misses
}

// processed is total_commands_processed: the commands that ran since
// CONFIG RESETSTAT.
func (s *Server) processed() int64 {
	var n int64
	for _, sp := range commands {
		c, _, _, _ := s.sinceReset(sp)
		n += c
		for _, sub := range sp.subs {
			c, _, _, _ := s.sinceReset(sub)
			n += c
		}
	}
	return n
}
