package server_test

import (
	"net"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/bfserver/bfserver/memstore"
	"github.com/bfserver/bfserver/server"
)

// failingListener, once fails is set, takes the next connection and then
// fails that many accepts with EMFILE before it hands it over, as a full
// descriptor table does. Accept is called from one goroutine.
type failingListener struct {
	net.Listener
	fails   atomic.Int64
	pending net.Conn
}

func (l *failingListener) Accept() (net.Conn, error) {
	if l.pending == nil {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		l.pending = c
	}
	if l.fails.Add(-1) >= 0 {
		return nil, &net.OpError{Op: "accept", Net: "tcp", Err: syscall.EMFILE}
	}
	c := l.pending
	l.pending = nil
	return c, nil
}

// TestAcceptErrorRetried: accepts that fail with EMFILE do not end Serve;
// a client already connected is served meanwhile, and a new one is taken
// once accepts succeed again.
func TestAcceptErrorRetried(t *testing.T) {
	srv := newServer(t, server.Options{Addr: "127.0.0.1:0"}, memstore.New())
	if err := srv.Listen(); err != nil {
		t.Fatal(err)
	}
	fl := &failingListener{}
	server.WrapListener(srv, func(ln net.Listener) net.Listener { fl.Listener = ln; return fl })
	served := make(chan error, 1)
	go func() { served <- srv.Serve() }()
	t.Cleanup(func() { srv.Close() })
	first := dial(t, srv)
	if got := first.run(t, "PING"); got != "+PONG\r\n" {
		t.Fatalf("PING: %q", got)
	}
	fl.fails.Store(8) // 5+10+20+40+80+160+320+640ms of pauses at most
	nc, err := net.Dial("tcp", srv.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	if got := first.run(t, "PING"); got != "+PONG\r\n" {
		t.Fatalf("PING while accepts fail: %q", got)
	}
	nc.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := nc.Write([]byte("PING\r\n")); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 7)
	if n, err := nc.Read(buf); err != nil || string(buf[:n]) != "+PONG\r\n" {
		t.Fatalf("a client connected while accepts failed: %q, %v", buf[:n], err)
	}
	if fl.fails.Load() >= 0 {
		t.Fatalf("%d failing accepts left", fl.fails.Load()+1)
	}
	select {
	case err := <-served:
		t.Fatalf("Serve returned %v", err)
	default:
	}
	srv.Close()
	if err := <-served; err != nil {
		t.Fatalf("Serve after Close: %v", err)
	}
}

// TestMaxClientsFDBound: CONFIG SET maxclients above what the descriptor
// limit leaves room for is refused with Redis's error, and changes nothing.
func TestMaxClientsFDBound(t *testing.T) {
	srv := newServer(t, server.Options{Addr: "127.0.0.1:0", MaxClients: 100, ClientFDs: 100}, memstore.New())
	if err := srv.Listen(); err != nil {
		t.Fatal(err)
	}
	go srv.Serve()
	t.Cleanup(func() { srv.Close() })
	cl := dial(t, srv)
	for _, c := range []struct{ args, want string }{
		{"CONFIG SET maxclients 101", "-ERR CONFIG SET failed (possibly related to argument 'maxclients') - The operating system is not able to handle the specified number of clients, try with 100\r\n"},
		{"CONFIG GET maxclients", "*2\r\n$10\r\nmaxclients\r\n$3\r\n100\r\n"},
		{"CONFIG SET maxclients 50", "+OK\r\n"},
		{"CONFIG GET maxclients", "*2\r\n$10\r\nmaxclients\r\n$2\r\n50\r\n"},
		{"CONFIG SET maxclients 100", "+OK\r\n"},
	} {
		if got := cl.run(t, strings.Fields(c.args)...); got != c.want {
			t.Errorf("%s: %q, want %q", c.args, got, c.want)
		}
	}
}
