//go:build linux

package evloop

import (
	"io"
	"net"
	"testing"
	"time"
)

// TestHalfClose: a client that sends its last command and shuts its write
// side (nc -N, a script's shutdown(SHUT_WR)) is answered and then closed,
// as Redis does, whether its command is served on the loop or parked.
func TestHalfClose(t *testing.T) {
	for _, tc := range []struct{ cmd, reply string }{{"hello\n", "hello\n"}, {"park\n", "parked\n"}} {
		_, addr := start(t, &lines{}, Options{Loops: 1})
		for i := range 20 {
			nc, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			nc.Write([]byte(tc.cmd))
			nc.(*net.TCPConn).CloseWrite()
			nc.SetReadDeadline(time.Now().Add(5 * time.Second))
			b, err := io.ReadAll(nc)
			nc.Close()
			if err != nil {
				t.Fatalf("%q try %d: got %q then %v: the server never closed a half-closed connection", tc.cmd, i, b, err)
			}
			if string(b) != tc.reply {
				t.Fatalf("%q try %d: got %q, want %q", tc.cmd, i, b, tc.reply)
			}
		}
	}
}
