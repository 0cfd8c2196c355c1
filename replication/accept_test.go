package replication

import (
	"log/slog"
	"net"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// emfileListener fails every accept with EMFILE, as a full descriptor
// table does, counting them, until it is closed.
type emfileListener struct {
	net.Listener
	calls  atomic.Int64
	closed chan struct{}
}

func (l *emfileListener) Accept() (net.Conn, error) {
	select {
	case <-l.closed:
		return nil, net.ErrClosed
	default:
	}
	l.calls.Add(1)
	return nil, &net.OpError{Op: "accept", Net: "tcp", Err: syscall.EMFILE}
}

func (l *emfileListener) Close() error { close(l.closed); return nil }

// TestMuxAcceptBacksOff: on the Raft port, accepts that fail with EMFILE
// are retried after pauses that double from 5ms (a few in the first
// second, never a busy loop), and the loop ends only when the mux closes.
func TestMuxAcceptBacksOff(t *testing.T) {
	ln := &emfileListener{closed: make(chan struct{})}
	began := time.Now()
	m := newMux(ln, nil, 4, nil, slog.New(slog.DiscardHandler))
	deadline := began.Add(5 * time.Second)
	for ln.calls.Load() < 5 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond) // polling the count of accepts
	}
	// Pauses of 5, 10, 20 and 40ms come before the fifth accept.
	if c, took := ln.calls.Load(), time.Since(began); c < 5 || took < 75*time.Millisecond {
		t.Fatalf("%d accepts in %v", c, took)
	}
	done := make(chan struct{})
	go func() { m.wg.Wait(); close(done) }()
	select {
	case <-done:
		t.Fatal("the accept loop ended on EMFILE")
	default:
	}
	m.close()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("the accept loop did not end at close")
	}
}
