package server

import (
	"net"
	"strconv"
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
		s.w.Buf = s.w.Buf[:0]
		s.barrierDone = false
		s.dispatch(args)
		s.endBatch()
	}
	run()
	return testing.AllocsPerRun(runs, run)
}

// LogDeniedCommand adds the ACL LOG entry a top-level command refused to
// user would add: replays use it for the commands Redis has and this
// server does not (PUBLISH), so that the log groups entries as Redis's.
func LogDeniedCommand(srv *Server, object, user string) {
	now := srv.opts.Now().UnixMilli()
	srv.aclLog.add(&aclLogEntry{count: 1, reason: "command", context: aclCtxTopLevel, object: object, user: user,
		created: now, updated: now})
}

// WrapListener replaces a listening server's listener by wrap's, before
// Serve: tests make accepts fail.
func WrapListener(srv *Server, wrap func(net.Listener) net.Listener) { srv.ln = wrap(srv.ln) }

// PipelineKeepsArenas dispatches n pipelined BF.ADD through a session,
// answers them, and reports whether the session kept its command and
// list arenas for the next batch.
func PipelineKeepsArenas(srv *Server, n int) bool {
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	s := newSession(srv, a)
	for i := range n {
		s.dispatch([][]byte{[]byte("BF.ADD"), []byte("tenant:" + strconv.Itoa(i)), []byte("x")})
	}
	s.flushPending()
	return cap(s.cmdArena) >= n && cap(s.listArena) >= 4*n
}

// ShardCalls is, per shard of the commands' counters, the calls of the
// command or subcommand name since CONFIG RESETSTAT.
func ShardCalls(srv *Server, name string) []int64 {
	sp, _ := lookupFull([]byte(name))
	out := make([]int64, len(srv.statShards))
	for i, sh := range srv.statShards {
		out[i], _, _, _ = sh[sp.acl.ID].sinceReset()
	}
	return out
}

// Sessions is how many connections the server holds.
func Sessions(srv *Server) int {
	srv.mu.Lock()
	defer srv.mu.Unlock()
	return len(srv.clients)
}
