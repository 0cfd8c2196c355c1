package server

import (
	"math/bits"
	"runtime"
	"sort"
	"sync/atomic"
	"time"
)

// LatencyBuckets are the upper bounds (seconds) of the command latency
// histograms.
var LatencyBuckets = []float64{0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10}

// cmdStats counts one command's calls, error replies and latency.
//
// calls and errors count every run (the metrics); INFO commandstats shows
// them, usec (time running) and rejected (refused before running) since
// the last CONFIG RESETSTAT, which records the counts then in base rather
// than clearing them, so the metrics' counters never go down.
//
// A server keeps one set per shard (statShards): a session adds to its
// shard's only, so the adds stay atomic (INFO reads them meanwhile) but
// no other core writes the same cache lines. Readers sum the shards.
type cmdStats struct {
	calls, errors, nanos atomic.Int64
	buckets              [17]atomic.Int64 // one per bound, then +Inf
	usec, rejected       atomic.Int64
	base                 [4]atomic.Int64 // calls, errors, usec, rejected at RESETSTAT
	hist                 atomic.Pointer[latencyHist]
}

// maxStatShards bounds the counters' memory on a machine of many cores:
// past it, loops share shards.
const maxStatShards = 64

// newStatShards is a set of every command's counters per shard: one per
// P (the loops' default is one fewer, at least one). Each shard is an
// allocation of its own with a spare entry at the end, so no cache line
// holds two shards' counters.
func newStatShards() [][]cmdStats {
	n := len(aclTable.List)
	shards := make([][]cmdStats, min(max(runtime.GOMAXPROCS(0), 1), maxStatShards))
	for i := range shards {
		shards[i] = make([]cmdStats, n+1)[:n:n]
	}
	return shards
}

// statShard is shard i's counters (a loop's index, or a session's id for
// a session served by a goroutine).
func (s *Server) statShard(i int64) []cmdStats {
	return s.statShards[uint64(i)%uint64(len(s.statShards))]
}

// statsOf is a command's or subcommand's counters in the session's shard.
func (s *session) statsOf(sp *spec) *cmdStats { return &s.stats[sp.acl.ID] }

// sinceReset is INFO commandstats's view of a command, over every shard:
// calls, failed, usec, rejected.
func (s *Server) sinceReset(sp *spec) (calls, failed, usec, rejected int64) {
	for _, sh := range s.statShards {
		c, f, u, r := sh[sp.acl.ID].sinceReset()
		calls, failed, usec, rejected = calls+c, failed+f, usec+u, rejected+r
	}
	return calls, failed, usec, rejected
}

// histOf is a command's latency histogram since start or CONFIG RESETSTAT,
// merged from every shard: nil when no run is in it.
func (s *Server) histOf(sp *spec) *latencyHist {
	var m *latencyHist
	for _, sh := range s.statShards {
		h := sh[sp.acl.ID].hist.Load()
		if h == nil {
			continue
		}
		if m == nil {
			m = new(latencyHist)
		}
		for i := range h.counts {
			if v := h.counts[i].Load(); v != 0 {
				m.counts[i].Add(v)
			}
		}
	}
	if m == nil || m.count() == 0 {
		return nil
	}
	return m
}

// resetCmdStats starts every shard's INFO commandstats and latency
// histograms over (CONFIG RESETSTAT).
func (s *Server) resetCmdStats() {
	for _, sh := range s.statShards {
		for i := range sh {
			sh[i].reset()
		}
	}
}

// ranN counts n runs that took d each, failed of them with an error.
func (c *cmdStats) ranN(d time.Duration, n, failed int) {
	c.calls.Add(int64(n))
	if failed > 0 {
		c.errors.Add(int64(failed))
	}
	c.usec.Add(d.Microseconds() * int64(n))
	h := c.hist.Load()
	if h == nil {
		h = new(latencyHist)
		if !c.hist.CompareAndSwap(nil, h) {
			h = c.hist.Load()
		}
	}
	h.addN(d, n)
}

// observeN adds n latencies of d as the client saw them (the metrics' histogram).
func (c *cmdStats) observeN(d time.Duration, n int) {
	c.nanos.Add(int64(d) * int64(n))
	sec := d.Seconds()
	i := sort.SearchFloat64s(LatencyBuckets, sec)
	c.buckets[i].Add(int64(n))
}

// sinceReset is INFO commandstats's view: calls, failed, usec, rejected.
func (c *cmdStats) sinceReset() (calls, failed, usec, rejected int64) {
	return c.calls.Load() - c.base[0].Load(), c.errors.Load() - c.base[1].Load(),
		c.usec.Load() - c.base[2].Load(), c.rejected.Load() - c.base[3].Load()
}

func (c *cmdStats) reset() {
	c.base[0].Store(c.calls.Load())
	c.base[1].Store(c.errors.Load())
	c.base[2].Store(c.usec.Load())
	c.base[3].Store(c.rejected.Load())
	c.hist.Store(nil)
}

// latencyHist is a log-linear histogram of run times in nanoseconds: 16
// buckets per power of two (about 4% apart), as precise as INFO
// latencystats's three decimals need at the scale commands run.
type latencyHist struct {
	counts [64 * 16]atomic.Int64
}

// count is how many runs the histogram holds.
func (h *latencyHist) count() int64 {
	var n int64
	for i := range h.counts {
		n += h.counts[i].Load()
	}
	return n
}

func histIndex(ns uint64) int {
	if ns < 16 {
		return int(ns)
	}
	e := bits.Len64(ns) - 5 // ns >> e is in [16, 32)
	return (e+1)*16 + int(ns>>e) - 16
}

// histUpper is the largest value bucket i holds.
func histUpper(i int) uint64 {
	if i < 16 {
		return uint64(i)
	}
	e := i/16 - 1
	m := uint64(i%16 + 16)
	return (m+1)<<e - 1
}

func (h *latencyHist) addN(d time.Duration, n int) {
	ns := uint64(max(d, 0))
	h.counts[min(histIndex(ns), len(h.counts)-1)].Add(int64(n))
}

// percentile is the upper bound, in nanoseconds, of the bucket holding the
// p-th percentile (0 < p <= 100).
func (h *latencyHist) percentile(p float64) uint64 {
	total := h.count()
	if total == 0 {
		return 0
	}
	want := int64(float64(total)*p/100 + 0.5)
	want = max(want, 1)
	var cum int64
	for i := range h.counts {
		cum += h.counts[i].Load()
		if cum >= want {
			return histUpper(i)
		}
	}
	return histUpper(len(h.counts) - 1)
}

// powersOfTwo is LATENCY HISTOGRAM's view: cumulative counts at upper
// bounds of 1, 2, 4, … microseconds, where the count grows.
func (h *latencyHist) powersOfTwo() (calls int64, bounds []int64, cum []int64) {
	calls = h.count()
	var c int64
	next := 0
	bound := int64(1)
	for next < len(h.counts) {
		for next < len(h.counts) && int64(histUpper(next)) < bound*1000 {
			c += h.counts[next].Load()
			next++
		}
		if len(cum) == 0 || c > cum[len(cum)-1] {
			bounds = append(bounds, bound)
			cum = append(cum, c)
		}
		if c == calls {
			break
		}
		bound *= 2
	}
	return calls, bounds, cum
}

// CommandStat is a snapshot of one command's counters.
type CommandStat struct {
	Name          string
	Calls, Errors int64
	Seconds       float64
	BucketCounts  []int64 // cumulative, one per LatencyBuckets bound, then +Inf
}

// CommandStats snapshots every command that has been called, summed
// over the shards.
func (s *Server) CommandStats() []CommandStat {
	var out []CommandStat
	eachStat(func(name string, sp *spec) {
		cs := CommandStat{Name: name}
		for _, sh := range s.statShards {
			cs.Calls += sh[sp.acl.ID].calls.Load()
		}
		if cs.Calls == 0 {
			return
		}
		cs.BucketCounts = make([]int64, len(LatencyBuckets)+1)
		var nanos int64
		for _, sh := range s.statShards {
			st := &sh[sp.acl.ID]
			cs.Errors += st.errors.Load()
			nanos += st.nanos.Load()
			for i := range st.buckets {
				cs.BucketCounts[i] += st.buckets[i].Load()
			}
		}
		cs.Seconds = float64(nanos) / 1e9
		for i := 1; i < len(cs.BucketCounts); i++ {
			cs.BucketCounts[i] += cs.BucketCounts[i-1] // cumulative
		}
		out = append(out, cs)
	})
	return out
}

// eachStat calls fn for every command and subcommand by full name, in
// name order.
func eachStat(fn func(full string, sp *spec)) {
	for _, name := range sortedKeys(commands) {
		sp := commands[name]
		fn(name, sp)
		for _, sub := range sortedKeys(sp.subs) {
			fn(name+"|"+sub, sp.subs[sub])
		}
	}
}

// Clients is the number of connected clients.
func (s *Server) Clients() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.clients)
}

// Negatives is how many membership checks answered "definitely not".
// It is asked for by a scrape, not kept per check: each connection counts
// its own, and the closed ones' are added up here.
func (s *Server) Negatives() int64 {
	s.mu.Lock() // with the removal of a closed one (foldIO): counted once
	defer s.mu.Unlock()
	n := s.negatives.Load()
	for _, c := range s.clients {
		n += c.adm.pub.negatives.Load()
	}
	return n
}

// Rejected is how many connections were refused (maxclients).
func (s *Server) Rejected() int64 { return s.stats.rejected.Load() }

type accounted struct{ sp *spec }

// endBatch records every command of the batch just written: each waited
// from the batch's arrival until now, when its reply went out.
func (s *session) endBatch() {
	if len(s.acct) == 0 {
		return
	}
	d := s.srv.opts.Now().Sub(s.now)
	for i := 0; i < len(s.acct); {
		j := i + 1
		for j < len(s.acct) && s.acct[j].sp == s.acct[i].sp {
			j++
		}
		s.statsOf(s.acct[i].sp).observeN(d, j-i)
		i = j
	}
	s.acct = s.acct[:0]
}
