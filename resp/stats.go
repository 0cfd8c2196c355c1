package resp

import (
	"sort"
	"sync/atomic"
	"time"
)

// LatencyBuckets are the upper bounds (seconds) of the command latency
// histograms.
var LatencyBuckets = []float64{0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10}

// cmdStats counts one command's calls, error replies and latency.
type cmdStats struct {
	calls, errors, nanos atomic.Int64
	buckets              [17]atomic.Int64 // one per bound, then +Inf
}

func (c *cmdStats) observe(d time.Duration, failed bool) {
	c.calls.Add(1)
	if failed {
		c.errors.Add(1)
	}
	c.nanos.Add(int64(d))
	sec := d.Seconds()
	i := sort.SearchFloat64s(LatencyBuckets, sec)
	c.buckets[i].Add(1)
}

// CommandStat is a snapshot of one command's counters.
type CommandStat struct {
	Name          string
	Calls, Errors int64
	Seconds       float64
	BucketCounts  []int64 // cumulative, one per LatencyBuckets bound, then +Inf
}

// CommandStats snapshots every command that has been called.
func (s *Server) CommandStats() []CommandStat {
	var out []CommandStat
	add := func(name string, st *cmdStats) {
		if st == nil || st.calls.Load() == 0 {
			return
		}
		cs := CommandStat{Name: name, Calls: st.calls.Load(), Errors: st.errors.Load(),
			Seconds: float64(st.nanos.Load()) / 1e9, BucketCounts: make([]int64, len(st.buckets))}
		var cum int64
		for i := range st.buckets {
			cum += st.buckets[i].Load()
			cs.BucketCounts[i] = cum
		}
		out = append(out, cs)
	}
	for _, name := range sortedKeys(commands) {
		sp := commands[name]
		add(name, sp.stats)
		for _, sub := range sortedKeys(sp.subs) {
			add(name+"|"+sub, sp.subs[sub].stats)
		}
	}
	return out
}

// Clients is the number of connected clients.
func (s *Server) Clients() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.clients)
}

// Negatives is how many membership checks answered "definitely not".
func (s *Server) Negatives() int64 { return s.negatives.Load() }

// Rejected is how many connections were refused (maxclients).
func (s *Server) Rejected() int64 { return s.stats.rejected.Load() }

// account notes a command once its reply is rendered: whether the reply
// starting at offset from is an error. Its latency is known when the
// batch's replies are written (endBatch).
func (s *session) account(sp *spec, from int) {
	failed := from < len(s.w.buf) && s.w.buf[from] == '-'
	s.acct = append(s.acct, accounted{sp, failed})
}

type accounted struct {
	sp     *spec
	failed bool
}

// endBatch records every command of the batch just written: each waited
// from the batch's arrival until now, when its reply went out.
func (s *session) endBatch() {
	if len(s.acct) == 0 {
		return
	}
	d := s.srv.opts.Now().Sub(s.now)
	for _, a := range s.acct {
		a.sp.stats.observe(d, a.failed)
	}
	s.acct = s.acct[:0]
}
