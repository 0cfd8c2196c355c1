package resp

import (
	"net"
	"testing"
)

// ReadAllocs measures allocations per run of one read command through a
// session (the reply is discarded), after a warm-up.
func ReadAllocs(srv *Server, args [][]byte, runs int) float64 {
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	s := newSession(srv, a)
	s.dispatch([][]byte{[]byte("BF.ADD"), []byte("k"), []byte("a")})
	s.flushPending()
	run := func() {
		s.w.buf = s.w.buf[:0]
		s.barrierDone = false
		s.dispatch(args)
		s.endBatch()
	}
	run()
	return testing.AllocsPerRun(runs, run)
}
