package server_test

import (
	"bufio"
	"context"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/bfserver/bfserver/command"
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
