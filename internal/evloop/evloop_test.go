//go:build linux

package evloop

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"runtime"
	"runtime/metrics"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// lines is a test handler: each input line is a command. "park" answers
// from a goroutine of its own (the way a write through the log is); "big
// N" answers N bytes; "close" closes after its reply; "panic" panics; any
// other line is echoed.
type lines struct {
	closed  atomic.Int64
	parked  atomic.Int64
	detach  chan net.Conn
	release chan struct{} // if set, a parked connection waits for it
}

func (h *lines) Traffic(c *Conn, in []byte, n int) (int, Action) {
	used := 0
	for {
		i := bytes.IndexByte(in[used:], '\n')
		if i < 0 {
			return used, Continue
		}
		line := string(in[used : used+i])
		switch {
		case line == "park":
			return used, Park // the parked side consumes it
		case line == "close":
			c.Write([]byte("bye\n"))
			return used + i + 1, Close
		case line == "panic":
			panic("asked to")
		case strings.HasPrefix(line, "big "):
			var k int
			fmt.Sscan(line[4:], &k)
			c.Write(bytes.Repeat([]byte("x"), k))
			c.Write([]byte("\n"))
		default:
			c.Write([]byte(line + "\n"))
		}
		used += i + 1
	}
}

func (h *lines) Parked(c *Conn) {
	h.parked.Add(1)
	go func() {
		if h.release != nil {
			<-h.release
		}
		in := c.Input()
		i := bytes.IndexByte(in, '\n')
		if h.detach != nil {
			c.Consume(i+1, false)
			nc, rest, out, err := c.Detach()
			if err != nil {
				panic(err)
			}
			if len(rest) != 0 || len(out) != 0 {
				panic("unexpected buffered data")
			}
			h.detach <- nc
			return
		}
		c.Write([]byte("parked\n"))
		c.Consume(i+1, false)
		c.Resume()
	}()
}

func (h *lines) Closed(c *Conn) { h.closed.Add(1) }

func start(t *testing.T, h Handler, o Options) (*Group, string) {
	t.Helper()
	g, err := Start(h, o)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			nc, err := ln.Accept()
			if err != nil {
				return
			}
			c, err := g.Adopt(nc)
			if err != nil {
				t.Error(err)
				return
			}
			c.Start()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		<-done
		g.Stop()
	})
	return g, ln.Addr().String()
}

type client struct {
	net.Conn
	r *bufio.Reader
}

func dial(t *testing.T, addr string) *client {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	nc.SetDeadline(time.Now().Add(20 * time.Second))
	return &client{nc, bufio.NewReaderSize(nc, 1<<20)}
}

func (c *client) send(t *testing.T, s string) {
	t.Helper()
	if _, err := c.Write([]byte(s)); err != nil {
		t.Fatal(err)
	}
}

func (c *client) expect(t *testing.T, want ...string) {
	t.Helper()
	for _, w := range want {
		got, err := c.r.ReadString('\n')
		if err != nil {
			t.Fatalf("reading %q: %v", w, err)
		}
		if got != w+"\n" {
			t.Fatalf("got %q, want %q", got, w)
		}
	}
}

func TestEchoManyConnections(t *testing.T) {
	_, addr := start(t, &lines{}, Options{Loops: 2, ReadSize: 64})
	var wg sync.WaitGroup
	for i := range 50 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := dial(t, addr)
			for j := range 200 {
				// A line split across writes, and several in one.
				c.send(t, fmt.Sprintf("c%d-%d", i, j))
				c.send(t, fmt.Sprintf("\nq%d\nr%d\n", j, j))
				c.expect(t, fmt.Sprintf("c%d-%d", i, j), fmt.Sprintf("q%d", j), fmt.Sprintf("r%d", j))
			}
		}()
	}
	wg.Wait()
}

// TestParkKeepsOrder: replies come in request order across a park, and
// input sent while the connection is parked is served after it resumes.
func TestParkKeepsOrder(t *testing.T) {
	h := &lines{release: make(chan struct{})}
	_, addr := start(t, h, Options{Loops: 1})
	c := dial(t, addr)
	c.send(t, "a\npark\nb\n")
	c.expect(t, "a")
	c.send(t, "c\n") // arrives while parked
	close(h.release)
	c.expect(t, "parked", "b", "c")
	for i := range 100 {
		c.send(t, fmt.Sprintf("x%d\npark\n", i))
		c.expect(t, fmt.Sprintf("x%d", i), "parked")
	}
}

// TestCloseFromAnywhere: Close from another goroutine ends a connection
// the loop holds at once, and a parked one when it is resumed, with
// Closed called once each.
func TestCloseFromAnywhere(t *testing.T) {
	h := &lines{release: make(chan struct{})}
	var mu sync.Mutex
	var conns []*Conn
	g, err := Start(h, Options{Loops: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Stop()
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	defer ln.Close()
	go func() {
		for {
			nc, err := ln.Accept()
			if err != nil {
				return
			}
			c, _ := g.Adopt(nc)
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			c.Start()
		}
	}()
	a := dial(t, ln.Addr().String())
	a.send(t, "hi\n")
	a.expect(t, "hi")
	b := dial(t, ln.Addr().String())
	b.send(t, "park\n")
	// Parked, not only adopted: a Close before the loop reads "park"
	// ends the connection at once (CI saw that, as a reset).
	waitFor(t, func() bool { mu.Lock(); defer mu.Unlock(); return len(conns) == 2 && h.parked.Load() == 1 })
	mu.Lock()
	ca, cb := conns[0], conns[1]
	mu.Unlock()
	ca.Close()
	if _, err := a.r.ReadByte(); err != io.EOF {
		t.Fatalf("read after Close: %v, want EOF", err)
	}
	cb.Close() // parked: closed once resumed
	b.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
	if _, err := b.r.ReadByte(); !isTimeout(err) {
		t.Fatalf("a parked connection was touched: %v", err)
	}
	b.SetReadDeadline(time.Now().Add(10 * time.Second))
	close(h.release)
	// The parked side's reply was written before the loop closed it.
	b.expect(t, "parked")
	if _, err := b.r.ReadByte(); err != io.EOF {
		t.Fatalf("read after resume: %v, want EOF", err)
	}
	waitFor(t, func() bool { return h.closed.Load() == 2 })
}

// TestSlowReaderHoldsInput: while a reply waits for the socket, the loop
// reads nothing more from that connection, and everything arrives once
// the client reads.
func TestSlowReaderHoldsInput(t *testing.T) {
	_, addr := start(t, &lines{}, Options{Loops: 1})
	c := dial(t, addr)
	const big = 64 << 20 // far more than socket buffers hold
	c.send(t, fmt.Sprintf("big %d\nafter\n", big))
	other := dial(t, addr) // the loop serves others meanwhile
	other.send(t, "ping\n")
	other.expect(t, "ping")
	buf := make([]byte, big+1)
	if _, err := io.ReadFull(c.r, buf); err != nil {
		t.Fatal(err)
	}
	if buf[big-1] != 'x' || buf[big] != '\n' {
		t.Fatal("reply damaged")
	}
	c.expect(t, "after")
}

func TestCloseAfterReply(t *testing.T) {
	h := &lines{}
	_, addr := start(t, h, Options{Loops: 1})
	c := dial(t, addr)
	c.send(t, "big 8000000\nclose\nnever\n")
	buf := make([]byte, 8000001)
	if _, err := io.ReadFull(c.r, buf); err != nil {
		t.Fatal(err)
	}
	c.expect(t, "bye")
	if _, err := c.r.ReadByte(); err != io.EOF {
		t.Fatalf("after close: %v", err)
	}
}

func TestPanicCostsTheConnection(t *testing.T) {
	var panics atomic.Int64
	_, addr := start(t, &lines{}, Options{Loops: 1, OnPanic: func(*Conn, any) { panics.Add(1) }})
	a := dial(t, addr)
	b := dial(t, addr)
	a.send(t, "panic\n")
	if _, err := a.r.ReadByte(); err != io.EOF {
		t.Fatalf("after panic: %v", err)
	}
	b.send(t, "still\n")
	b.expect(t, "still")
	if panics.Load() != 1 {
		t.Fatalf("OnPanic called %d times", panics.Load())
	}
}

func TestDetach(t *testing.T) {
	h := &lines{detach: make(chan net.Conn, 1)}
	_, addr := start(t, h, Options{Loops: 1})
	c := dial(t, addr)
	c.send(t, "one\npark\n")
	c.expect(t, "one")
	nc := <-h.detach
	defer nc.Close()
	c.send(t, "two\n")
	got := make([]byte, 4)
	nc.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.ReadFull(nc, got); err != nil || string(got) != "two\n" {
		t.Fatalf("detached read: %q %v", got, err)
	}
	nc.Write([]byte("from go\n"))
	c.expect(t, "from go")
	if h.closed.Load() != 0 {
		t.Fatal("Closed called for a detached connection")
	}
}

// TestStopWaitsForParked: Stop closes what the loop holds and waits for
// a parked connection until it is resumed.
func TestStopWaitsForParked(t *testing.T) {
	h := &lines{release: make(chan struct{})}
	g, err := Start(h, Options{Loops: 1})
	if err != nil {
		t.Fatal(err)
	}
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	defer ln.Close()
	go func() {
		for {
			nc, err := ln.Accept()
			if err != nil {
				return
			}
			c, _ := g.Adopt(nc)
			c.Start()
		}
	}()
	a := dial(t, ln.Addr().String())
	a.send(t, "x\n")
	a.expect(t, "x")
	b := dial(t, ln.Addr().String())
	b.send(t, "park\n")
	waitFor(t, func() bool { return h.parked.Load() == 1 })
	stopped := make(chan struct{})
	go func() { g.Stop(); close(stopped) }()
	if _, err := a.r.ReadByte(); err != io.EOF {
		t.Fatalf("held connection after Stop: %v", err)
	}
	select {
	case <-stopped:
		t.Fatal("Stop returned while a connection was parked")
	case <-time.After(100 * time.Millisecond):
	}
	close(h.release)
	<-stopped
	if h.closed.Load() != 2 {
		t.Fatalf("Closed %d times, want 2", h.closed.Load())
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met in 10s")
		}
		time.Sleep(time.Millisecond)
	}
}

func isTimeout(err error) bool {
	ne, ok := err.(net.Error)
	return ok && ne.Timeout()
}

// TestCloseBeforeStart: a connection closed between Adopt and Start (a
// CLIENT KILL or Close landing just after the server registered it) is
// closed once, never served, and does not keep Stop waiting.
func TestCloseBeforeStart(t *testing.T) {
	h := &lines{}
	g, err := Start(h, Options{Loops: 1})
	if err != nil {
		t.Fatal(err)
	}
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	defer ln.Close()
	client, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	nc, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	c, err := g.Adopt(nc)
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	c.Start()
	waitFor(t, func() bool { return h.closed.Load() == 1 })
	client.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := client.Read(make([]byte, 1)); err != io.EOF {
		t.Fatalf("read on a connection closed before it started: %v", err)
	}
	stopped := make(chan struct{})
	go func() { g.Stop(); close(stopped) }()
	select {
	case <-stopped:
	case <-time.After(10 * time.Second):
		t.Fatal("Stop still waits for a connection closed before it started")
	}
	if h.closed.Load() != 1 {
		t.Fatalf("Closed called %d times", h.closed.Load())
	}
}

// TestConsumeShrinks: once a large command is consumed, what is left of
// a parked connection's input moves to a buffer its size, so an idle
// connection does not keep the command's memory.
func TestConsumeShrinks(t *testing.T) {
	l := &loop{rbuf: make([]byte, 64<<10)}
	c := &Conn{l: l, in: make([]byte, 32<<20)}
	c.Consume(32<<20-10, false)
	if len(c.in) != 10 || cap(c.in) > 1<<20 {
		t.Fatalf("after consuming a 32 MiB command: len %d cap %d", len(c.in), cap(c.in))
	}
	c.in = append(make([]byte, 0, 4<<10), "abcdef"...)
	c.Consume(2, false)
	if string(c.in) != "cdef" {
		t.Fatalf("small input consumed: %q", c.in)
	}
}

// TestDetachClosed: a connection closed while parked is not detached: it
// stays parked, to be closed when it is resumed.
func TestDetachClosed(t *testing.T) {
	l := &loop{rbuf: make([]byte, 64)}
	c := &Conn{l: l, fd: -1}
	c.closing.Store(true)
	if _, _, _, err := c.Detach(); err != ErrClosed {
		t.Fatalf("Detach of a closed connection: %v", err)
	}
}

// TestParkStress: many connections parking and resuming while their
// next input is already on its way (some of it arriving while they are
// parked, some split across writes): every line is answered, in order,
// and none stalls (edges missed while parked are made up for on Resume).
func TestParkStress(t *testing.T) {
	_, addr := start(t, &lines{}, Options{Loops: 2, ReadSize: 256})
	var wg sync.WaitGroup
	for i := range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := dial(t, addr)
			for j := range 300 {
				msg := fmt.Sprintf("a%d-%d\npark\nb%d\n", i, j, j)
				cut := j % len(msg)
				c.send(t, msg[:cut])
				c.send(t, msg[cut:])
				c.expect(t, fmt.Sprintf("a%d-%d", i, j), "parked", fmt.Sprintf("b%d", j))
			}
		}()
	}
	wg.Wait()
}

// TestResumeAfterFullRead: a connection parked by a read that filled the
// loop's buffer, with more input still in the socket and no edge to come
// for it, is read on once resumed although its owner left no input.
func TestResumeAfterFullRead(t *testing.T) {
	_, addr := start(t, &lines{}, Options{Loops: 1, ReadSize: 64})
	c := dial(t, addr)
	first := strings.Repeat("x", 64-len("park\n")-1) + "\n"
	c.send(t, first+"park\ntail\n") // the first read takes exactly up to park
	c.expect(t, first[:len(first)-1], "parked", "tail")
}

// TestInputWhileParked: input that arrives while its connection is
// parked (its edge let pass by the loop) is answered once resumed.
func TestInputWhileParked(t *testing.T) {
	h := &lines{release: make(chan struct{})}
	_, addr := start(t, h, Options{Loops: 1})
	c := dial(t, addr)
	for i := range 50 {
		c.send(t, "park\n")
		for h.parked.Load() != int64(i+1) {
			time.Sleep(time.Millisecond)
		}
		c.send(t, fmt.Sprintf("after%d\n", i))
		h.release <- struct{}{}
		c.expect(t, "parked", fmt.Sprintf("after%d", i))
	}
}

func TestDefaultLoops(t *testing.T) {
	for procs, want := range map[int]int{1: 1, 2: 1, 3: 2, 8: 7} {
		if got := defaultLoops(procs); got != want {
			t.Errorf("defaultLoops(%d) = %d, want %d", procs, got, want)
		}
	}
}

// held records how much output its connection held when Traffic
// returned.
type held struct {
	lines
	buffered atomic.Int64
}

func (h *held) Traffic(c *Conn, in []byte, n int) (int, Action) {
	used, act := h.lines.Traffic(c, in, n)
	h.buffered.Store(int64(c.Buffered()))
	return used, act
}

// TestRepliesHeldToTurnEnd: a small reply written in Traffic waits for
// the end of the loop's turn (Redis's beforeSleep), and is then written;
// a large one is not held, and replies keep their order around it; held
// replies before a close are written before the connection ends.
func TestRepliesHeldToTurnEnd(t *testing.T) {
	h := &held{}
	_, addr := start(t, h, Options{Loops: 1})
	c := dial(t, addr)
	c.send(t, "a\nb\n")
	c.expect(t, "a", "b")
	if got := h.buffered.Load(); got != 4 {
		t.Fatalf("Traffic returned with %d bytes held, want 4", got)
	}
	big := 3 * maxHeld
	c.send(t, fmt.Sprintf("s1\nbig %d\ns2\n", big))
	c.expect(t, "s1", strings.Repeat("x", big), "s2")
	for i := range 100 {
		c.send(t, fmt.Sprintf("p%d\nbig 10\n", i))
		c.expect(t, fmt.Sprintf("p%d", i), "xxxxxxxxxx")
	}
	// Held replies, then a close: written, then the connection ends.
	d := dial(t, addr)
	d.send(t, "last\nclose\nnever\n")
	d.expect(t, "last", "bye")
	if _, err := d.r.ReadByte(); err != io.EOF {
		t.Fatalf("after close: %v", err)
	}
}

// TestOthersWait: a goroutine readied on the loop's P counts as waiting
// for a core (the runtime's metric by that name exists and says so), so
// an idle loop yields to it before it blocks.
func TestOthersWait(t *testing.T) {
	prev := runtime.GOMAXPROCS(1) // the readied goroutine stays on this P
	defer runtime.GOMAXPROCS(prev)
	l := &loop{}
	l.runnable[0].Name = "/sched/goroutines/runnable:goroutines"
	// A goroutine started here waits on this P's queue until this one
	// yields: with no other P, nothing else can run it. (Readying one
	// through a channel first needs a yield for it to reach the receive,
	// and a yield may run this goroutine again first: 1 in 61 turns
	// takes the global queue ahead of the local one.)
	done := make(chan struct{})
	go func() { close(done) }()
	waits := l.othersWait()
	if k := l.runnable[0].Value.Kind(); k != metrics.KindUint64 {
		t.Fatalf("the runtime's runnable count has kind %v", k)
	}
	if !waits {
		t.Fatal("a goroutine readied on this P does not count as waiting")
	}
	<-done
}
