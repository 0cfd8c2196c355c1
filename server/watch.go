package server

import (
	"github.com/bfserver/bfserver/command"
	"github.com/bfserver/bfserver/keyspace"
)

// WATCH, as Redis: EXEC answers the null reply when a key watched by the
// connection was touched after WATCH, by any client on any node, by expiry
// or a flush too. The keyspace keeps a version per key, replicated like
// the rest of its state (keyspace/watch.go); WATCH reads the versions here
// after a linearizable read barrier, and EXEC puts a Watch command with
// them first in its transaction's log entry, where every replica checks
// them at the same point of the log and leaves the transaction out when
// one moved. A transaction of no keyspace write checks them here, after a
// read barrier, as its reads are served.

// watchSet is a connection's watched keys, each once, with the version it
// had when first watched (a later WATCH of the same key keeps it, as
// Redis keeps its dirty flag).
type watchSet struct {
	keys [][]byte
	data []byte // keyspace.AppendWatch entries, one per key
	seen map[string]struct{}
}

func (w *watchSet) reset() { *w = watchSet{} }

func cmdWatch(s *session, a [][]byte) {
	if s.multi {
		s.w.Error("ERR WATCH inside MULTI is not allowed")
		return
	}
	if !s.srv.backend.State().Versioned() {
		// Versions are tracked from the first Watch in the log on: an
		// empty one turns tracking on, on every replica at once.
		c := &command.Cmd{Op: command.Watch, DB: s.db, Now: s.now.UnixMilli()}
		if _, err := s.write([]*command.Cmd{c}); err != nil {
			s.w.Error(wireError(err))
			return
		}
	}
	if err := s.readBarrier(); err != nil {
		s.w.Error(wireError(err))
		return
	}
	st := s.srv.backend.State()
	now := s.now.UnixMilli()
	w := &s.watch
	if w.seen == nil {
		w.seen = make(map[string]struct{}, len(a)-1)
	}
	for _, key := range a[1:] {
		id := string(rune(s.db)) + string(key)
		if _, ok := w.seen[id]; ok {
			continue
		}
		ver, err := st.Version(s.db, key, now)
		if err != nil {
			s.w.Error(wireError(err))
			return
		}
		w.seen[id] = struct{}{}
		w.keys = append(w.keys, []byte(string(key)))
		w.data = keyspace.AppendWatch(w.data, s.db, ver)
	}
	s.w.Simple("OK")
}

func cmdUnwatch(s *session, a [][]byte) {
	s.watch.reset()
	s.w.Simple("OK")
}

// takeWatch unwatches every key and returns the check EXEC makes of them
// (nil when none is watched), guarding the n commands after it.
func (s *session) takeWatch(n int) *command.Cmd {
	w := s.watch
	s.watch.reset()
	if len(w.keys) == 0 {
		return nil
	}
	return &command.Cmd{Op: command.Watch, DB: s.db, Now: s.now.UnixMilli(), Keys: w.keys, Data: w.data, Count: int64(n)}
}
