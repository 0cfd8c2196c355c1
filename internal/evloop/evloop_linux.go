//go:build linux

package evloop

import (
	"errors"
	"net"
	"os"
	"runtime"
	"runtime/metrics"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Supported reports whether this platform has the event loop.
const Supported = true

// Group is a set of event loops sharing the connections given to them.
type Group struct {
	h     Handler
	turns TurnEnder // h, when it is one
	opts  Options
	loops []*loop
	next  atomic.Uint32
	wg    sync.WaitGroup
}

// loop is one epoll instance and the goroutine that waits on it. Its
// connections' state is touched only by that goroutine, but for a parked
// connection, which belongs to whoever parked it until Resume.
type loop struct {
	g     *Group
	index int // in g.loops (Conn.Loop)
	epfd  int
	efd   int // eventfd: requests are waiting
	mu    sync.Mutex
	reqs  []request
	woken atomic.Bool
	conns fdTable
	rbuf  []byte
	// stopping: Stop was called; the loop ends once its last connection
	// is closed (a parked one when it is resumed).
	stopping bool
	// done (under mu): the loop has ended; its eventfd is closed, and
	// nothing may be posted to it.
	done bool
	// held: the connections whose replies wait in their out for the end
	// of the turn (Conn.Write); spare is the list's other half.
	held, spare []*Conn
	// runnable reads the runtime's count of goroutines waiting for a core
	// (othersWait); lastYield is when the loop last yielded its core.
	runnable  [1]metrics.Sample
	lastYield time.Time
}

type reqKind uint8

const (
	reqAdd reqKind = iota
	reqResume
	reqClose
	reqEnd
	reqForget
	reqStop
)

type request struct {
	kind reqKind
	c    *Conn
}

// Conn is one connection of a loop.
type Conn struct {
	// Context is the handler's, set before Start.
	Context any

	fd  int
	l   *loop
	in  []byte // input not consumed yet, owned
	out []byte // output the socket has not taken yet
	// want is a capacity the handler asked the input buffer to have.
	want int
	// keep: the handler still refers to the input it was given, so the
	// loop must not reuse that memory (KeepInput).
	keep bool

	// closing: Close was called; the loop closes the connection as soon
	// as it owns it.
	closing atomic.Bool

	// parked: the connection belongs to whoever it was parked with; the
	// loop ignores its readiness (edge-triggered: the edges it misses are
	// made up for on Resume). Set by the loop, cleared by the owner.
	parked atomic.Bool
	// missed: the socket may hold input, or an end, that the loop has not
	// seen and no edge will report again: one came while the connection
	// was parked, or it was parked before its input was read to the end.
	// Whichever of the loop and Resume swaps it back takes it up, so
	// Resume need not ask the socket (a system call per parked write).
	missed atomic.Bool

	// loop-only state
	closed bool
	// inTraffic: the handler runs on the loop (Traffic), so Write holds
	// what it is given for the end of the turn. queued: the connection is
	// in the loop's held list.
	inTraffic, queued bool
	endOnDrain        bool // close once out is written (Action Close with output pending)
	// drained: the last read found the socket empty (a short read), and
	// no edge has come since.
	drained bool
	// hup: the peer shut its side (an edge with RDHUP, HUP or ERR). The
	// data before the end and the end itself come with one edge, so the
	// loop reads on past a short read until it sees the end (a client
	// that sends its last command and shuts its write side, as nc -N
	// does, is answered and then closed, as Redis does).
	hup bool
}

// Start runs o.Loops event loops for h.
func Start(h Handler, o Options) (*Group, error) {
	o.ensureDefaults()
	g := &Group{h: h, opts: o}
	g.turns, _ = h.(TurnEnder)
	for i := range o.Loops {
		l, err := newLoop(g)
		if err != nil {
			g.Stop()
			return nil, err
		}
		l.index = i
		g.loops = append(g.loops, l)
		g.wg.Add(1)
		go func() {
			defer g.wg.Done()
			l.run()
		}()
	}
	return g, nil
}

func newLoop(g *Group) (*loop, error) {
	epfd, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		return nil, os.NewSyscallError("epoll_create1", err)
	}
	efd, err := unix.Eventfd(0, unix.EFD_NONBLOCK|unix.EFD_CLOEXEC)
	if err != nil {
		unix.Close(epfd)
		return nil, os.NewSyscallError("eventfd", err)
	}
	if err := unix.EpollCtl(epfd, unix.EPOLL_CTL_ADD, efd, &unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(efd)}); err != nil {
		unix.Close(epfd)
		unix.Close(efd)
		return nil, os.NewSyscallError("epoll_ctl", err)
	}
	l := &loop{g: g, epfd: epfd, efd: efd, rbuf: make([]byte, g.opts.ReadSize)}
	l.runnable[0].Name = "/sched/goroutines/runnable:goroutines"
	return l, nil
}

// Stop closes every connection and ends the loops; a parked connection
// is closed when it is resumed, and Stop waits for that.
func (g *Group) Stop() {
	for _, l := range g.loops {
		l.post(request{kind: reqStop})
	}
	g.wg.Wait()
}

// Adopt takes over a TCP connection: the loop serves its descriptor (a
// duplicate; nc itself is closed). The connection is served once Start
// is called on the result.
func (g *Group) Adopt(nc net.Conn) (*Conn, error) {
	sc, ok := nc.(syscall.Conn)
	if !ok {
		return nil, ErrNotSocket
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return nil, err
	}
	fd := -1
	var derr error
	if err := rc.Control(func(f uintptr) { fd, derr = unix.FcntlInt(f, unix.F_DUPFD_CLOEXEC, 0) }); err != nil {
		return nil, err
	}
	nc.Close()
	if derr != nil {
		return nil, os.NewSyscallError("fcntl", derr)
	}
	if err := unix.SetNonblock(fd, true); err != nil {
		unix.Close(fd)
		return nil, os.NewSyscallError("fcntl", err)
	}
	l := g.loops[g.next.Add(1)%uint32(len(g.loops))]
	return &Conn{fd: fd, l: l}, nil
}

// Start hands the connection to its loop.
func (c *Conn) Start() { c.l.post(request{kind: reqAdd, c: c}) }

// Loop is the index of the loop serving the connection, from 0: state
// kept per loop (counters) is written by one core at a time.
func (c *Conn) Loop() int { return c.l.index }

// Fd is the connection's descriptor (CLIENT LIST's fd=).
func (c *Conn) Fd() int { return c.fd }

// Write sends b, or keeps what the socket does not take to send when it
// can; meanwhile the loop reads nothing more from the connection. Only
// the connection's owner calls it: the handler in Traffic, or whoever
// parked it. In Traffic, a small b is held for the end of the loop's
// turn, as Redis writes its replies before it waits again (beforeSleep):
// a client served by several connections then wakes once for the
// turn's replies, not once for each, and each wake-up costs the server
// its share of the write (measured: docs/BENCHMARKS.md, "Replies at the
// end of the turn").
func (c *Conn) Write(b []byte) error {
	if c.inTraffic && len(c.out)+len(b) <= maxHeld {
		if !c.queued {
			c.queued = true
			c.l.held = append(c.l.held, c)
		}
		c.out = append(c.out, b...)
		return nil
	}
	if c.queued && len(c.out) > 0 {
		// what is held goes first; a large b does not wait for the turn
		if err := c.writeOut(); err != nil {
			return err
		}
	}
	if len(c.out) == 0 {
		n, err := write(c.fd, b)
		if err != nil {
			return err
		}
		b = b[n:]
	}
	if len(b) > 0 {
		c.out = append(c.out, b...)
	}
	return nil
}

// writeOut writes what out holds, as far as the socket takes it, and
// keeps the rest; a buffer grown past keptOut is let go once empty.
func (c *Conn) writeOut() error {
	n, err := write(c.fd, c.out)
	c.out = c.out[:copy(c.out, c.out[n:])]
	if len(c.out) == 0 && cap(c.out) > keptOut {
		c.out = nil
	}
	return err
}

// Buffered is how many bytes of output wait for the socket.
func (c *Conn) Buffered() int { return len(c.out) }

// Reserve asks that the input buffer hold at least n bytes (a large
// argument on its way): from the next read on it is read into directly.
func (c *Conn) Reserve(n int) { c.want = n }

// KeepInput, called in Traffic, says that the input passed to it is
// still referred to after the call: the loop reads into new memory from
// then on and leaves that memory as it is.
func (c *Conn) KeepInput() { c.keep = true }

// Input is the unconsumed input of a parked connection.
func (c *Conn) Input() []byte { return c.in }

// Consume drops the first n bytes of a parked connection's input. With
// fresh, the rest moves to new memory and the old is left as it is (its
// bytes are still referred to).
func (c *Conn) Consume(n int, fresh bool) {
	rest := c.in[n:]
	if fresh || cap(c.in) > 1<<20 && len(rest) < len(c.l.rbuf) {
		// new memory: the old is still referred to, or too large to keep
		// for what is left (a large command went through)
		c.in = append([]byte(nil), rest...)
		return
	}
	c.in = c.in[:copy(c.in, rest)]
}

// Resume gives a parked connection back to its loop. The connection
// stays registered (edge-triggered) while parked, so the loop hears of
// input that arrives from now on by itself; only what the loop must do
// at once (output the socket did not take, a close asked for, input that
// arrived while it was parked, whose edge the loop let pass) goes to it
// as a request.
func (c *Conn) Resume() {
	out := len(c.out) > 0 || len(c.in) > 0 // output to write, or input left to run
	c.parked.Store(false)                  // the loop owns it from here: no more of c's buffers
	// closing and missed are read after the store: a Close or an edge the
	// loop ignored while the connection was parked is seen here, and one
	// after it finds it not parked (see loop.missedEdge).
	if out || c.closing.Load() || c.missed.Swap(false) {
		c.l.post(request{kind: reqResume, c: c})
	}
}

// End gives a parked connection back to its loop to be closed once its
// output is written.
func (c *Conn) End() {
	c.closing.Store(true)
	c.l.post(request{kind: reqEnd, c: c})
}

// Close closes the connection, from any goroutine: at once if the loop
// holds it, when it is resumed if it is parked.
func (c *Conn) Close() {
	if !c.closing.Swap(true) {
		c.l.post(request{kind: reqClose, c: c})
	}
}

// Detach takes a parked connection out of the loop for good: it returns
// the connection as a net.Conn served by Go's poller, with the input and
// output the loop held. The loop forgets it without calling Closed.
func (c *Conn) Detach() (nc net.Conn, in, out []byte, err error) {
	if c.closing.Load() {
		return nil, nil, nil, ErrClosed // Close was called: it stays parked, to be closed on Resume
	}
	// FileConn duplicates the descriptor it is given; f is closed here,
	// not later by its finalizer, when the number may be another
	// connection's. c.fd stays as it is until the loop forgets it.
	dup, err := unix.FcntlInt(uintptr(c.fd), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return nil, nil, nil, os.NewSyscallError("fcntl", err)
	}
	f := os.NewFile(uintptr(dup), "")
	nc, err = net.FileConn(f)
	f.Close()
	if err != nil {
		return nil, nil, nil, err
	}
	in, out = c.in, c.out
	c.in, c.out = nil, nil
	c.l.post(request{kind: reqForget, c: c})
	return nc, in, out, nil
}

// mustYield reports whether the loop, idle, yields its core before it
// blocks: when goroutines wait for a core (othersWait), and at least every
// yieldEvery, so that a timer due on the loop's P (which a yield runs,
// and a runnable count does not show) waits no longer than that.
func (l *loop) mustYield() bool {
	now := time.Now()
	if now.Sub(l.lastYield) < yieldEvery && !l.othersWait() {
		return false
	}
	l.lastYield = now
	return true
}

// othersWait reports whether goroutines wait for a core, on any P: the
// runtime counts them under its scheduler's lock, walking every P (54 ns
// at GOMAXPROCS 2). Past countedProcs Ps the count is not taken, and
// they may: the loop yields as it always did (the cost of the count
// there, against a yield's, is not measured). Where the runtime cannot
// say, they may too.
func (l *loop) othersWait() bool {
	if runtime.GOMAXPROCS(0) > countedProcs {
		return true
	}
	metrics.Read(l.runnable[:])
	v := l.runnable[0].Value
	return v.Kind() != metrics.KindUint64 || v.Uint64() > 0
}

const (
	// yieldEvery bounds the time between an idle loop's yields.
	yieldEvery = time.Millisecond
	// countedProcs is the most Ps at which othersWait asks the runtime.
	countedProcs = 4
)

// maxHeld bounds the output a connection holds for the end of a turn;
// keptOut, the room it keeps for the next turn's once it is written.
const (
	maxHeld = 64 << 10
	keptOut = 2 << 10
)

func write(fd int, b []byte) (int, error) {
	done := 0
	for done < len(b) {
		n, err := unix.Write(fd, b[done:])
		switch {
		case err == unix.EINTR:
			continue
		case err == unix.EAGAIN:
			return done, nil
		case err != nil:
			return done, err
		}
		done += n
	}
	return done, nil
}

// post queues a request for the loop and wakes it.
func (l *loop) post(r request) {
	l.mu.Lock()
	if l.done {
		l.mu.Unlock()
		if r.kind == reqAdd {
			unix.Close(r.c.fd) // a connection started after Stop: never served
		}
		return
	}
	l.reqs = append(l.reqs, r)
	l.mu.Unlock()
	if !l.woken.Swap(true) {
		var one = [8]byte{1}
		for {
			_, err := unix.Write(l.efd, one[:])
			if err != unix.EINTR {
				break // EAGAIN: the counter is full, so the loop is woken anyway
			}
		}
	}
}

func (l *loop) run() {
	defer func() {
		l.mu.Lock()
		l.done = true
		l.mu.Unlock()
		unix.Close(l.epfd)
		unix.Close(l.efd)
	}()
	events := make([]unix.EpollEvent, 256)
	var reqs []request
	msec := -1
	for {
		n, err := unix.EpollWait(l.epfd, events, msec)
		if n <= 0 {
			if err != nil && err != unix.EINTR {
				panic(os.NewSyscallError("epoll_wait", err)) // EBADF, EFAULT: a bug, not a condition
			}
			// Nothing ready after a busy round: let other goroutines
			// in once, then wait. An unlock or a channel send on the
			// loop (a writer waiting on a filter's lock, a MONITOR feed)
			// readies a goroutine on this P, which the loop would keep
			// in epoll_wait until the runtime's monitor takes it back,
			// up to 10 ms when the other cores are busy (measured:
			// BENCHMARKS.md, "Tried and dropped: the loop's yield only
			// after a hand-off"). But only when a goroutine is waiting
			// for a core, or a millisecond passed (mustYield): a yield
			// with none hands the loop's own goroutine to another thread
			// (a futex call to wake it, one to sleep, the loop on the
			// other core), a tenth of a read's CPU at pipeline depth 1
			// (BENCHMARKS.md, "Replies at the end of the turn, a lone
			// slow write, the loop's yield").
			msec = -1
			if l.mustYield() {
				runtime.Gosched()
			}
			continue
		}
		msec = 0
		for i := range n {
			ev := &events[i]
			fd := int(ev.Fd)
			if fd == l.efd {
				var b [8]byte
				unix.Read(l.efd, b[:])
				l.woken.Store(false)
				l.mu.Lock()
				reqs, l.reqs = l.reqs, reqs[:0]
				l.mu.Unlock()
				for _, r := range reqs {
					if l.handle(r) {
						return
					}
				}
				clear(reqs)
				continue
			}
			c := l.conns.get(fd)
			if c == nil || c.closed {
				continue
			}
			if c.parked.Load() {
				l.missedEdge(c, ev.Events)
				continue
			}
			l.event(c, ev.Events)
		}
		l.flush()
		if l.g.turns != nil {
			l.g.turns.TurnEnd(l.index)
		}
		if l.stopping && l.conns.n == 0 {
			return
		}
	}
}

// flush writes the replies the turn's connections hold (Conn.Write), and
// goes on reading each whose input was not read to the end.
func (l *loop) flush() {
	for len(l.held) > 0 {
		q := l.held
		l.held = l.spare[:0]
		for i, c := range q {
			q[i] = nil
			if c.parked.Load() {
				continue // written when it was parked (after); its owner's now
			}
			if !c.queued {
				continue // parked and resumed within the turn: listed twice
			}
			c.queued = false
			if !c.closed {
				l.serve(c)
			}
		}
		l.spare = q[:0]
	}
}

// handle carries out one request; it reports whether the loop is done.
func (l *loop) handle(r request) bool {
	c := r.c
	switch r.kind {
	case reqAdd:
		if c.closed {
			return false // closed before it was started (Close, then Start)
		}
		l.conns.put(c)
		if c.closing.Load() || l.stopping {
			l.close(c)
			return false
		}
		// Edge-triggered, for the connection's life: the loop is told
		// when input arrives or the socket takes output again, and reads
		// and writes until it would wait. An input already there is
		// reported at once.
		if err := unix.EpollCtl(l.epfd, unix.EPOLL_CTL_ADD, c.fd, &unix.EpollEvent{
			Events: unix.EPOLLIN | unix.EPOLLOUT | unix.EPOLLRDHUP | unix.EPOLLET, Fd: int32(c.fd)}); err != nil {
			l.close(c)
		}
	case reqResume:
		if c.closed || c.parked.Load() {
			return false // closed meanwhile, or parked again already
		}
		if c.closing.Load() {
			l.close(c)
			return false
		}
		c.drained = false // perhaps resumed for an edge missed while parked
		if len(c.in) > 0 && len(c.out) == 0 {
			// Input the owner left: the handler sees it again before
			// anything new is read (n = 0: nothing just read).
			l.deliver(c, c.in, 0, false)
		}
		if !c.closed && !c.parked.Load() {
			l.serve(c)
		}
	case reqClose:
		if !c.parked.Load() {
			l.close(c)
		}
	case reqEnd:
		c.parked.Store(false)
		if len(c.out) == 0 {
			l.close(c)
			return false
		}
		c.endOnDrain = true
		l.serve(c)
	case reqForget:
		l.conns.del(c.fd)
		// Detach's net.Conn duplicates the descriptor: the open file
		// stays in the epoll set until taken out.
		unix.EpollCtl(l.epfd, unix.EPOLL_CTL_DEL, c.fd, nil)
		unix.Close(c.fd)
		c.closed = true
	case reqStop:
		l.stopping = true
		for _, c := range l.conns.byFD {
			if c == nil {
				continue
			}
			c.closing.Store(true)
			if !c.parked.Load() {
				if c.queued && len(c.out) > 0 {
					c.writeOut() // the turn's held replies, as far as the socket takes them
				}
				l.close(c)
			}
		}
	}
	return l.stopping && l.conns.n == 0
}

// missedEdge notes an edge of a parked connection, which the loop lets
// pass: Resume makes up for it. The store comes before the second look
// at parked, and Resume's store of parked before its swap of missed, so
// whichever of the two comes second sees the other's: a Resume that
// missed the flag left the connection to the loop, which serves it here.
func (l *loop) missedEdge(c *Conn, ev uint32) {
	if ev&^unix.EPOLLOUT == 0 {
		return // room in the socket: its owner writes, and waits for nothing
	}
	noteHup(c, ev)
	c.missed.Store(true)
	if !c.parked.Load() && c.missed.Swap(false) {
		c.drained = false
		l.serve(c)
	}
}

// noteHup notes an edge that says the peer shut its side.
func noteHup(c *Conn, ev uint32) {
	if ev&(unix.EPOLLRDHUP|unix.EPOLLHUP|unix.EPOLLERR) != 0 {
		c.hup = true
	}
}

// event serves readiness of a connection the loop holds. An edge says
// something changed; what the connection can do now, serve works out.
func (l *loop) event(c *Conn, ev uint32) {
	noteHup(c, ev)
	if ev&^unix.EPOLLOUT != 0 {
		c.drained = false
	} else if len(c.out) == 0 {
		return // room in the socket, and nothing to write
	}
	l.serve(c)
}

// serve writes what output waits, then reads and runs input, until the
// socket would block either way (or the last read found it empty), the
// handler parks or closes the connection, or its replies wait: for the
// socket, or held for the end of the turn (flush, which serves it
// again). Each of those ends with a later edge, with Resume or with the
// turn's end to go on from.
func (l *loop) serve(c *Conn) {
	if len(c.out) > 0 {
		if err := c.writeOut(); err != nil {
			l.close(c)
			return
		}
		if len(c.out) > 0 {
			return // the socket is full: its next edge says when it is not
		}
		if c.endOnDrain {
			l.close(c)
			return
		}
	}
	if c.endOnDrain {
		return
	}
	for !c.closed && !c.parked.Load() && len(c.out) == 0 && !c.endOnDrain && !c.drained {
		if !l.read(c) {
			return
		}
	}
}

// read reads what is ready once and gives it to the handler with what was
// left; it reports whether there may be more to read (the read filled
// its buffer).
func (l *loop) read(c *Conn) bool {
	buf, shared := l.rbuf, true
	if len(c.in) > 0 || c.want > 0 {
		need := max(len(c.in)+len(l.rbuf), c.want)
		if cap(c.in) < need {
			if c.want == 0 {
				need = max(need, 2*cap(c.in)) // amortized growth
			}
			nb := make([]byte, len(c.in), need)
			copy(nb, c.in)
			c.in = nb
		}
		c.want = 0
		buf, shared = c.in[len(c.in):cap(c.in)], false
	}
	var n int
	var err error
	for {
		n, err = unix.Read(c.fd, buf)
		if err != unix.EINTR {
			break
		}
	}
	if n <= 0 {
		if err == unix.EAGAIN {
			c.drained = true
			return false
		}
		l.close(c) // end of stream, or a reset
		return false
	}
	// A short read took all there was; what comes after it brings an edge
	// (unless the peer has shut its side: then only the end comes).
	c.drained = n < len(buf) && !c.hup

	var data []byte
	if shared {
		data = l.rbuf[:n]
	} else {
		c.in = c.in[:len(c.in)+n]
		data = c.in
	}
	l.deliver(c, data, n, shared)
	return n == len(buf) || c.hup
}

// deliver gives the handler data (in the loop's shared buffer when
// shared, else c.in), n of it just read, and keeps what it leaves.
func (l *loop) deliver(c *Conn, data []byte, n int, shared bool) {
	used, act := l.traffic(c, data, n)
	if c.closed {
		return
	}
	rest := data[used:]
	switch {
	case c.keep:
		c.keep = false
		c.in = append([]byte(nil), rest...)
		if shared {
			l.rbuf = make([]byte, len(l.rbuf))
		}
	case shared:
		c.in = append(c.in[:0], rest...)
	default:
		c.in = c.in[:copy(c.in, rest)]
		if cap(c.in) > 1<<20 && len(c.in) < len(l.rbuf) {
			c.in = append([]byte(nil), c.in...)
		}
	}
	l.after(c, act)
}

// traffic calls the handler; a panic in it costs the connection, not the
// loop.
func (l *loop) traffic(c *Conn, data []byte, n int) (used int, act Action) {
	c.inTraffic = true
	defer func() {
		c.inTraffic = false
		if r := recover(); r != nil {
			l.g.opts.OnPanic(c, r)
			used, act = len(data), Close
		}
	}()
	return l.g.h.Traffic(c, data, n)
}

// after applies what the handler asked for.
func (l *loop) after(c *Conn, act Action) {
	switch act {
	case Close:
		if len(c.out) == 0 {
			l.close(c)
			return
		}
		c.endOnDrain = true // the socket's next edge writes the rest, then closes
	case Park:
		if c.queued && len(c.out) > 0 {
			// The replies before the park go now: its owner's would wait
			// behind them. After an error what is left stays, and the
			// loop finds the error again when it writes it after Resume.
			c.writeOut()
		}
		c.queued = false
		// Input the loop did not read to the end brings no new edge:
		// Resume must hand it back to the loop.
		c.missed.Store(!c.drained)
		c.parked.Store(true)
		l.g.h.Parked(c)
	}
}

func (l *loop) close(c *Conn) {
	if c.closed {
		return
	}
	c.closed = true
	c.closing.Store(true)
	l.conns.del(c.fd)
	unix.Close(c.fd) // leaves the epoll set with its last descriptor
	c.in, c.out = nil, nil
	l.g.h.Closed(c)
}

var (
	// ErrNotSocket: Adopt was given a connection without a descriptor.
	ErrNotSocket = errors.New("evloop: not a socket connection")
	// ErrClosed: the connection was closed.
	ErrClosed = errors.New("evloop: connection closed")
	// ErrStopped: the group was stopped.
	ErrStopped = errors.New("evloop: stopped")
)

// fdTable is a loop's connections by descriptor: a slice, as Redis keeps
// its clients, where a map lookup for every event was 1.6% of the
// server's CPU for BF.EXISTS at depth 1 (perf). Descriptors are small
// integers the kernel reuses from the lowest free one, so the slice is as
// long as the highest descriptor the loop has served.
type fdTable struct {
	byFD []*Conn
	n    int
}

func (t *fdTable) get(fd int) *Conn {
	if uint(fd) < uint(len(t.byFD)) {
		return t.byFD[fd]
	}
	return nil
}

func (t *fdTable) put(c *Conn) {
	if c.fd >= len(t.byFD) {
		t.byFD = append(t.byFD, make([]*Conn, c.fd+1-len(t.byFD))...)
	}
	if t.byFD[c.fd] == nil {
		t.n++
	}
	t.byFD[c.fd] = c
}

func (t *fdTable) del(fd int) {
	if uint(fd) < uint(len(t.byFD)) && t.byFD[fd] != nil {
		t.byFD[fd] = nil
		t.n--
	}
}
