package server_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bfserver/bfserver/command"
	"github.com/bfserver/bfserver/internal/golden"
	"github.com/bfserver/bfserver/keyspace"
	"github.com/bfserver/bfserver/memstore"
	"github.com/bfserver/bfserver/server"
)

// heldWrites is a backend whose writes wait until released, as a write
// through the Raft log waits for its commit: an event loop parks them.
type heldWrites struct {
	waiting
	entered, release chan struct{}
}

func (w heldWrites) Write(ctx context.Context, cmds []*command.Cmd) ([]keyspace.Result, error) {
	w.entered <- struct{}{}
	<-w.release
	return w.st.Write(ctx, cmds)
}

// TestKillWhileParked: CLIENT KILL of a connection parked in a write,
// whose pipeline goes on to MONITOR, closes it: it is not turned into a
// monitor, gets no more replies, and the server closes without waiting
// for it.
func TestKillWhileParked(t *testing.T) {
	b := heldWrites{waiting{memstore.New()}, make(chan struct{}, 1), make(chan struct{})}
	srv := newServer(t, server.Options{Addr: "127.0.0.1:0"}, b)
	if err := srv.Listen(); err != nil {
		t.Fatal(err)
	}
	go srv.Serve()
	victim := dial(t, srv)
	id := strings.TrimSpace(strings.TrimPrefix(string(victim.do(t, argv("CLIENT", "ID"))), ":"))
	victim.c.Write([]byte("*3\r\n$6\r\nBF.ADD\r\n$1\r\nk\r\n$1\r\na\r\n*1\r\n$7\r\nMONITOR\r\n"))
	<-b.entered // parked in its write
	if got := string(dial(t, srv).do(t, argv("CLIENT", "KILL", "ID", id))); got != ":1\r\n" {
		t.Fatalf("CLIENT KILL: %q", got)
	}
	close(b.release)
	victim.c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if rest, err := io.ReadAll(victim.r); err != nil || len(rest) != 0 {
		t.Fatalf("the killed client read %q (%v), want nothing and EOF", rest, err)
	}
	closed := make(chan struct{})
	go func() { srv.Close(); close(closed) }()
	select {
	case <-closed:
	case <-time.After(10 * time.Second):
		t.Fatal("Close waits for the killed client")
	}
}

// TestMonitorAfterHeldOutput: replies an event loop still holds for the
// socket when MONITOR takes the connection out of it go out before
// MONITOR's +OK, whole.
func TestMonitorAfterHeldOutput(t *testing.T) {
	srv := startServerIn(t, nil, ioLoop)
	c, err := net.Dial("tcp", srv.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.(*net.TCPConn).SetReadBuffer(64 << 10)
	r := bufio.NewReaderSize(c, 4<<20)
	big := strings.Repeat("x", 1<<20)
	c.Write([]byte("*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$1048576\r\n" + big + "\r\n"))
	c.SetReadDeadline(time.Now().Add(20 * time.Second))
	if l, _ := r.ReadString('\n'); l != "+OK\r\n" {
		t.Fatalf("SET: %q", l)
	}
	const n = 20 // 20 MiB of replies: more than the socket takes at once
	var req strings.Builder
	for i := 0; i < n; i++ {
		req.WriteString("*2\r\n$3\r\nGET\r\n$1\r\nk\r\n")
	}
	req.WriteString("*1\r\n$7\r\nMONITOR\r\n")
	c.Write([]byte(req.String()))
	body := make([]byte, 1<<20+2)
	for i := 0; i < n; i++ {
		if hdr, err := r.ReadString('\n'); err != nil || hdr != "$1048576\r\n" {
			t.Fatalf("reply %d: header %q %v", i, hdr, err)
		}
		if _, err := io.ReadFull(r, body); err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(body), "+OK") {
			t.Fatalf("GET reply %d: MONITOR's +OK inside it", i)
		}
	}
	if ok, _ := r.ReadString('\n'); ok != "+OK\r\n" {
		t.Fatalf("after the GETs: %q", ok)
	}
}

// turnLog is a backend whose writes wait on this node alone, as a single
// node's Raft log: it records the commands of each Write, holds the first
// until released, and answers WritesLocally from local (counting asks).
type turnLog struct {
	waiting
	mu               sync.Mutex
	sizes            []int
	entered, release chan struct{}
	slow             time.Duration // how long each Write takes beyond the store's
	local            func(n int) bool
	asked            atomic.Int32
}

func (l *turnLog) WritesLocally() bool { return l.local(int(l.asked.Add(1))) }

// ReadNow: reads wait for nothing either, as a lone voter's.
func (l *turnLog) ReadNow() (time.Time, bool) { return time.Time{}, true }

func (l *turnLog) Write(ctx context.Context, cmds []*command.Cmd) ([]keyspace.Result, error) {
	l.mu.Lock()
	l.sizes = append(l.sizes, len(cmds))
	first := len(l.sizes) == 1
	l.mu.Unlock()
	if first && l.entered != nil {
		l.entered <- struct{}{}
		<-l.release
	}
	time.Sleep(l.slow) // a slow disk
	return l.st.Write(ctx, cmds)
}

func (l *turnLog) writes() []int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.sizes)
}

// oneLoop runs the test's servers with one event loop, as on two cores.
func oneLoop(t *testing.T) {
	prev := runtime.GOMAXPROCS(2)
	t.Cleanup(func() { runtime.GOMAXPROCS(prev) })
}

// TestTurnWritesTogether: the writes that connections of one event loop
// send at depth 1 while the loop waits go to the log together, as one
// write at the end of the loop's next turn, each answered in its place
// after the replies before it in its pipeline.
func TestTurnWritesTogether(t *testing.T) {
	oneLoop(t)
	b := &turnLog{waiting: waiting{memstore.New()}, entered: make(chan struct{}, 1), release: make(chan struct{}),
		local: func(int) bool { return true }}
	srv := startWith(t, server.Options{}, b)
	first := dial(t, srv)
	first.c.SetDeadline(time.Now().Add(20 * time.Second))
	first.c.Write(golden.Encode(argv("BF.ADD", "k", "first")))
	<-b.entered // the loop waits in its turn's write
	const n = 8
	var cls []*client
	for i := range n {
		cl := dial(t, srv)
		cl.c.SetDeadline(time.Now().Add(20 * time.Second))
		var req []byte
		if i == 0 {
			req = append(golden.Encode(argv("PING")), golden.Encode(argv("BF.EXISTS", "k", "x0"))...)
		}
		cl.c.Write(append(req, golden.Encode(argv("BF.ADD", "k", fmt.Sprintf("x%d", i)))...))
		cls = append(cls, cl)
	}
	waitFor(t, "the server to hold every connection", func() bool { return server.Sessions(srv) == n+1 })
	close(b.release)
	if got, err := golden.ReadFrame(first.r); err != nil || string(got) != ":1\r\n" {
		t.Fatalf("the first write: %q %v", got, err)
	}
	for i, cl := range cls {
		want := []string{":1\r\n"}
		if i == 0 {
			want = []string{"+PONG\r\n", ":0\r\n", ":1\r\n"}
		}
		for _, w := range want {
			if got, err := golden.ReadFrame(cl.r); err != nil || string(got) != w {
				t.Fatalf("client %d: %q %v, want %q", i, got, err, w)
			}
		}
	}
	if got := b.writes(); !slices.Equal(got, []int{1, n}) {
		t.Fatalf("writes of %v commands, want [1 %d]", got, n)
	}
	for i, cl := range cls {
		if got := cl.run(t, "BF.EXISTS", "k", fmt.Sprintf("x%d", i)); got != ":1\r\n" {
			t.Fatalf("client %d reads its own write: %q", i, got)
		}
	}
	// Two writes in one read are not the last command alone: parked, and
	// sent together from the parked goroutine.
	first.c.Write(append(golden.Encode(argv("BF.ADD", "k", "p")), golden.Encode(argv("BF.ADD", "k", "q"))...))
	for _, w := range []string{":1\r\n", ":1\r\n"} {
		if got, err := golden.ReadFrame(first.r); err != nil || string(got) != w {
			t.Fatalf("a pipeline of two writes: %q %v", got, err)
		}
	}
	if got := b.writes(); !slices.Equal(got, []int{1, n, 2}) {
		t.Fatalf("writes of %v commands, want [1 %d 2]", got, n)
	}
}

// TestTurnWriteWhenNoLongerAlone: a write queued for the loop's turn goes
// to a parked goroutine when, by the turn's end, the node no longer
// writes alone (it lost its leadership, or gained a voter): answered
// once, and applied.
func TestTurnWriteWhenNoLongerAlone(t *testing.T) {
	b := &turnLog{waiting: waiting{memstore.New()}, local: func(n int) bool { return n%2 == 1 }} // yes at the command, no at the turn's end
	srv := startWith(t, server.Options{}, b)
	cl := dial(t, srv)
	for i := range 3 {
		if got := cl.run(t, "BF.ADD", "k", fmt.Sprint(i)); got != ":1\r\n" {
			t.Fatalf("write %d: %q", i, got)
		}
	}
	if got := cl.run(t, "BF.CARD", "k"); got != ":3\r\n" {
		t.Fatalf("BF.CARD %q", got)
	}
	if got, asked := b.writes(), b.asked.Load(); !slices.Equal(got, []int{1, 1, 1}) || asked != 6 {
		t.Fatalf("writes %v, WritesLocally asked %d times; want [1 1 1] and 6", got, asked)
	}
}

// TestSlowTurnParksWrites: after a turn's write took longer than a log
// write should (an image flush's sync, a busy disk), the loops park the
// writes for a while, so reads on the loop do not wait behind them.
func TestSlowTurnParksWrites(t *testing.T) {
	b := &turnLog{waiting: waiting{memstore.New()}, slow: 30 * time.Millisecond, local: func(int) bool { return true }}
	srv := startWith(t, server.Options{}, b)
	cl := dial(t, srv)
	if got := cl.run(t, "BF.ADD", "k", "a"); got != ":1\r\n" {
		t.Fatalf("the slow write: %q", got)
	}
	if asked := b.asked.Load(); asked != 2 {
		t.Fatalf("WritesLocally asked %d times for the first write, want 2 (the command, the turn)", asked)
	}
	if got := cl.run(t, "BF.ADD", "k", "b"); got != ":1\r\n" {
		t.Fatalf("the write after it: %q", got)
	}
	if asked := b.asked.Load(); asked != 2 {
		t.Fatalf("WritesLocally asked again (%d) after a slow turn: the write was not parked", asked)
	}
}

// TestHungTurnWriteFreesTheLoop: a turn's write that does not come back
// (a hung disk) holds its loop for turnSlow only: a read on another
// connection of that loop is answered meanwhile, from the state before
// the write; the write is answered once it is done.
func TestHungTurnWriteFreesTheLoop(t *testing.T) {
	oneLoop(t)
	b := &turnLog{waiting: waiting{memstore.New()}, entered: make(chan struct{}, 1), release: make(chan struct{}),
		local: func(int) bool { return true }}
	srv := startWith(t, server.Options{}, b)
	writer, reader := dial(t, srv), dial(t, srv)
	if got := reader.run(t, "PING"); got != "+PONG\r\n" {
		t.Fatal(got)
	}
	writer.c.SetDeadline(time.Now().Add(20 * time.Second))
	writer.c.Write(golden.Encode(argv("BF.ADD", "k", "a")))
	<-b.entered
	reader.c.SetDeadline(time.Now().Add(5 * time.Second))
	reader.c.Write(golden.Encode(argv("BF.EXISTS", "k", "a")))
	got, err := golden.ReadFrame(reader.r)
	close(b.release)
	if err != nil || string(got) != ":0\r\n" {
		t.Fatalf("a read while the loop's write hangs: %q %v, want :0", got, err)
	}
	if got, err := golden.ReadFrame(writer.r); err != nil || string(got) != ":1\r\n" {
		t.Fatalf("the hung write once done: %q %v", got, err)
	}
	if got := reader.run(t, "BF.EXISTS", "k", "a"); got != ":1\r\n" {
		t.Fatalf("after the write: %q", got)
	}
}

// keepingLog fails its first write the way a proposal given up on does
// (the log may still encode it later) and keeps what it was given.
type keepingLog struct {
	turnLog
	keptMu            sync.Mutex // the test reads what the loop's writer kept
	kept              []*command.Cmd
	keptKey, keptItem string
}

func (l *keepingLog) Write(ctx context.Context, cmds []*command.Cmd) ([]keyspace.Result, error) {
	l.keptMu.Lock()
	first := l.kept == nil
	if first {
		l.kept = cmds
		l.keptKey, l.keptItem = string(cmds[0].Key), string(cmds[0].Items[0])
	}
	l.keptMu.Unlock()
	if first {
		return nil, command.ErrLogTimeout
	}
	return l.st.Write(ctx, cmds)
}

// TestTurnWriteErrorKeepsItsCommands: after a turn's write fails with an
// unknown outcome, neither its list of commands nor the command's bytes
// are reused by the next turns: the log may still encode them.
func TestTurnWriteErrorKeepsItsCommands(t *testing.T) {
	b := &keepingLog{turnLog: turnLog{waiting: waiting{memstore.New()}, local: func(int) bool { return true }}}
	srv := startWith(t, server.Options{}, b)
	cl := dial(t, srv)
	if got := cl.run(t, "BF.ADD", "first", "a"); !strings.HasPrefix(got, "-") {
		t.Fatalf("the failed write: %q", got)
	}
	b.keptMu.Lock()
	first := b.kept[0]
	b.keptMu.Unlock()
	for i := range 3 {
		if got := cl.run(t, "BF.ADD", "other", fmt.Sprintf("item%d", i)); got != ":1\r\n" {
			t.Fatalf("write %d after the failure: %q", i, got)
		}
	}
	b.keptMu.Lock()
	defer b.keptMu.Unlock()
	if b.kept[0] != first || string(first.Key) != b.keptKey || string(first.Items[0]) != b.keptItem {
		t.Fatalf("the failed write's command became %q %q (list reused: %v), want %q %q",
			b.kept[0].Key, b.kept[0].Items, b.kept[0] != first, b.keptKey, b.keptItem)
	}
}

// TestSlowLogParksWrites: when a loop's turns' writes take milliseconds
// each (a slow disk's sync), though none takes turnSlow, the loops park
// the writes for a while instead of holding their reads that long every
// turn.
func TestSlowLogParksWrites(t *testing.T) {
	b := &turnLog{waiting: waiting{memstore.New()}, slow: 4 * time.Millisecond, local: func(int) bool { return true }}
	srv := startWith(t, server.Options{}, b)
	cl := dial(t, srv)
	const n = 40 // the average passes 2 ms from the 22nd
	for i := range n {
		if got := cl.run(t, "BF.ADD", "k", fmt.Sprint(i)); got != ":1\r\n" {
			t.Fatalf("write %d: %q", i, got)
		}
	}
	if asked := b.asked.Load(); asked >= 2*n {
		t.Fatalf("WritesLocally asked %d times for %d writes of 4 ms each: every one waited on the loop", asked, n)
	}
}
