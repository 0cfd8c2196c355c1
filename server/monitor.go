package server

import (
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// MONITOR: after +OK the connection receives one line for every command
// any client runs, in Redis's format
//
//	+1796115630.068541 [0 127.0.0.1:35668] "PING" "seen-by-monitor"
//
// written once the command ran (a command refused before it ran is not
// shown), EXEC's commands before EXEC itself. As in Redis, commands
// flagged admin (CONFIG, CLIENT LIST, DEBUG, …) are not shown, and AUTH's
// and HELLO AUTH's secrets read "(redacted)". A monitor is a replica to
// Redis: it may still run commands, but not touch the keyspace.
//
// Lines go to a per-monitor queue that its own goroutine writes, so a slow
// monitor never holds up the clients it watches; one that falls more than
// monitorMaxQueued bytes behind is closed (Redis's output buffer limit for
// replicas does the same).

const monitorMaxQueued = 64 << 20

type monitorSet struct {
	n  atomic.Int32
	mu sync.Mutex
	m  map[*monitorOut]bool
}

// monitorOut is a monitor's outgoing queue.
type monitorOut struct {
	s        *session
	mu       sync.Mutex
	queued   []byte
	wake     chan struct{}
	done     chan struct{} // the session ended: write what is queued, then stop
	finished chan struct{} // the writer stopped
	closed   bool
	err      error
}

func (m *monitorSet) add(o *monitorOut) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.m == nil {
		m.m = map[*monitorOut]bool{}
	}
	m.m[o] = true
	m.n.Store(int32(len(m.m)))
}

func (m *monitorSet) remove(o *monitorOut) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.m, o)
	m.n.Store(int32(len(m.m)))
}

// feed sends a command that ran to every monitor.
func (m *monitorSet) feed(s *session, sp *spec, args [][]byte) {
	now := time.Now()
	line := make([]byte, 0, 64+16*len(args))
	line = append(line, '+')
	line = strconv.AppendInt(line, now.Unix(), 10)
	line = append(line, '.')
	us := strconv.AppendInt(nil, int64(now.Nanosecond()/1000), 10)
	for range 6 - len(us) {
		line = append(line, '0')
	}
	line = append(line, us...)
	line = append(line, " ["...)
	line = strconv.AppendInt(line, int64(s.db), 10)
	line = append(line, ' ')
	line = append(line, s.adm.raddr...)
	line = append(line, "] "...)
	red := redacted(args)
	for i, a := range args {
		if i > 0 {
			line = append(line, ' ')
		}
		if red(i) {
			a = []byte("(redacted)")
		}
		line = appendRepr(line, a)
	}
	line = append(line, '\r', '\n')
	m.mu.Lock()
	defer m.mu.Unlock()
	for o := range m.m {
		o.push(line)
	}
}

// appendRepr quotes b as Redis's sdscatrepr does.
func appendRepr(dst, b []byte) []byte {
	const hex = "0123456789abcdef"
	dst = append(dst, '"')
	for _, c := range b {
		switch c {
		case '\\', '"':
			dst = append(dst, '\\', c)
		case '\n':
			dst = append(dst, '\\', 'n')
		case '\r':
			dst = append(dst, '\\', 'r')
		case '\t':
			dst = append(dst, '\\', 't')
		case '\a':
			dst = append(dst, '\\', 'a')
		case '\b':
			dst = append(dst, '\\', 'b')
		default:
			if c >= 0x20 && c < 0x7f {
				dst = append(dst, c)
			} else {
				dst = append(dst, '\\', 'x', hex[c>>4], hex[c&15])
			}
		}
	}
	return append(dst, '"')
}

// push queues bytes for the monitor; it reports the error that ended
// the monitor's writer, if any.
func (o *monitorOut) push(b []byte) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.closed {
		return o.err
	}
	if len(o.queued)+len(b) > monitorMaxQueued {
		o.closed = true
		o.s.srv.adm.obufDrop.Add(1)
		o.s.kill()
		return o.err
	}
	o.queued = append(o.queued, b...)
	o.s.adm.pub.omem.Store(int64(len(o.queued)))
	select {
	case o.wake <- struct{}{}:
	default:
	}
	return nil
}

// run writes the queue until the connection fails or the session ends.
func (o *monitorOut) run() {
	defer close(o.finished)
	var out []byte
	for {
		ending := false
		select {
		case <-o.wake:
		case <-o.done:
			ending = true
		}
		for {
			o.mu.Lock()
			out, o.queued = o.queued, out[:0]
			o.s.adm.pub.omem.Store(0)
			o.mu.Unlock()
			if len(out) == 0 {
				break
			}
			if _, err := o.s.nc.Write(out); err != nil {
				o.mu.Lock()
				o.closed, o.err = true, err
				o.mu.Unlock()
				o.s.kill()
				return
			}
			if cap(out) > 1<<20 {
				out = nil
			}
		}
		if ending {
			return
		}
	}
}

func registerMonitor() {
	conn("monitor", 1, nil, nil, cmdMonitor)
}

// cmdMonitor turns the connection into a monitor. Its +OK and every reply
// before it go out first, through the queue the lines will use.
func cmdMonitor(s *session, a [][]byte) {
	if s.adm.mon != nil {
		return // Redis ignores MONITOR from a monitor, without a reply
	}
	if s.adm.top != nil && s.adm.top.name == "exec" {
		s.w.Error("ERR MONITOR isn't allowed for DENY BLOCKING client")
		return
	}
	// Other goroutines write a monitor's lines: it leaves its event loop.
	if err := s.detach(); err != nil {
		s.w.Error("ERR " + err.Error())
		return
	}
	s.w.Simple("OK")
	if q := s.adm.quiet; q >= 0 {
		s.w.Buf = s.w.Buf[:q] // CLIENT REPLY OFF: the +OK is not sent
	}
	o := &monitorOut{s: s, wake: make(chan struct{}, 1), done: make(chan struct{}), finished: make(chan struct{})}
	// Output its event loop held for the socket goes first (detach), then
	// the replies before the +OK, then the +OK.
	o.queued = append(o.queued, s.detachedOut...)
	s.detachedOut = nil
	o.queued = append(o.queued, s.w.Buf...)
	s.w.Buf = s.w.Buf[:0]
	s.adm.quiet = -1
	s.adm.mon = o
	// Registered before the +OK can go out, as Redis adds a monitor
	// before it replies: a client that reads the +OK and then has another
	// connection run a command sees that command. Registered after the
	// writer started, a command run in between (on another loop) was
	// missed (TestMonitorLines, once in CI).
	s.srv.adm.monitors.add(o)
	go o.run()
	select {
	case o.wake <- struct{}{}:
	default: // a line fed since add woke it already
	}
	s.publish()
}

// endMonitor stops a monitor when its session ends: what is queued is
// written, for at most a second, before the connection closes.
func (s *session) endMonitor() {
	if o := s.adm.mon; o != nil {
		s.srv.adm.monitors.remove(o)
		s.nc.SetWriteDeadline(time.Now().Add(time.Second))
		close(o.done)
		<-o.finished
	}
}
