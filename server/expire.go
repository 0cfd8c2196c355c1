package server

import (
	"time"

	"github.com/bfserver/bfserver/command"
	"github.com/bfserver/bfserver/keyspace"
)

// expireLoop deletes keys whose expiry passed, as Redis's active expiry
// does, by proposing ExpireDue commands: every replica then removes them at
// the same point of the log. In a cluster only the leader proposes.
func (s *Server) expireLoop() {
	hz := s.hz.Load()
	t := time.NewTicker(hzInterval(hz))
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
		}
		if now := s.hz.Load(); now != hz {
			hz = now
			t.Reset(hzInterval(hz))
		}
		if s.cluster != nil && !s.cluster.IsLeader() {
			continue
		}
		if s.adm.pause.active() {
			continue // CLIENT PAUSE stops expiry too, as in Redis
		}
		now := s.opts.Now().UnixMilli()
		var cmds []*command.Cmd
		for db := 0; db < keyspace.NumDBs; db++ {
			if keys := s.backend.State().Due(uint8(db), now, 1000); len(keys) > 0 {
				cmds = append(cmds, &command.Cmd{Op: command.ExpireDue, DB: uint8(db), Now: now, Keys: keys})
			}
		}
		if len(cmds) == 0 {
			continue
		}
		if _, err := s.backend.Write(s.ctx, cmds); err != nil {
			s.opts.Logger.Debug("active expiry", "err", err)
			continue
		}
		for _, c := range cmds {
			s.adm.expired.Add(int64(len(c.Keys)))
		}
	}
}

// Redis's bounds on hz (CONFIG_MIN_HZ, CONFIG_MAX_HZ): CONFIG SET takes
// any int and clamps it, as Redis does.
const minHz, maxHz = 1, 500

func clampHz(hz int64) int64 { return min(max(hz, minHz), maxHz) }

// hzInterval is the pause between active expiry cycles at hz.
func hzInterval(hz int64) time.Duration { return time.Second / time.Duration(hz) }
