package replication

import (
	"math/bits"
	"strconv"
	"sync/atomic"
	"time"
)

// The durable path's hand-offs, timed per write proposed on this node (the
// leader; a follower's forwarded write is timed on the leader, and its
// round trip is not): for INFO writestages, so that a slow durable write
// says where it waited. Each stage is the time from the end of the one
// before:
//
//	queued         propose handed the write to the batcher, which took it
//	batching       the batcher held the entry open for more and encoded it
//	inflight_wait  the entry waited for room among the entries in flight
//	raft_to_store  Raft's leader loop took the entry and the log store began writing it
//	store          the log store wrote and synced it (the batch it is in)
//	commit         a majority stored it, and Raft handed it to the state machine
//	fsm_apply      the state machine applied it
//	reply_wake     the goroutine waiting on Raft's future for the entry saw it resolved
//	handoff        the proposer's goroutine received its result from it
//	lease_wait     followers holding read leases were told of the commit
//	total          propose to reply
//
// A stage whose end is not known (an entry stored by an earlier log write
// than the one timed, or a leader that changed) is left out; total never
// is. The counters are atomic adds on a log₂ histogram of microseconds, so
// timing costs a few clock reads per write.
const (
	stQueued = iota
	stBatching
	stInflight
	stToStore
	stStore
	stCommit
	stApply
	stWake
	stHandoff
	stLease
	stTotal
	numStages
)

var stageNames = [numStages]string{"queued", "batching", "inflight_wait", "raft_to_store", "store", "commit",
	"fsm_apply", "reply_wake", "handoff", "lease_wait", "total"}

// histBuckets: bucket b counts durations of less than 2^b µs (the last
// takes the rest).
const histBuckets = 28

type histogram struct {
	n, sum atomic.Uint64 // sum in ns
	max    atomic.Int64
	bucket [histBuckets]atomic.Uint64
}

func (h *histogram) add(d time.Duration) {
	if d < 0 {
		d = 0
	}
	h.n.Add(1)
	h.sum.Add(uint64(d))
	for m := h.max.Load(); int64(d) > m && !h.max.CompareAndSwap(m, int64(d)); m = h.max.Load() {
	}
	h.bucket[min(bits.Len64(uint64(d/time.Microsecond)), histBuckets-1)].Add(1)
}

// quantile is the upper bound of the bucket holding the q-th of the
// durations, in µs: within a factor of two.
func (h *histogram) quantile(q float64, n uint64) uint64 {
	if n == 0 {
		return 0
	}
	want := uint64(q*float64(n) + 0.5)
	seen := uint64(0)
	for b := range h.bucket {
		seen += h.bucket[b].Load()
		if seen >= max(want, 1) {
			return 1 << b
		}
	}
	return 1 << (histBuckets - 1)
}

func (h *histogram) reset() {
	h.n.Store(0)
	h.sum.Store(0)
	h.max.Store(0)
	for b := range h.bucket {
		h.bucket[b].Store(0)
	}
}

// stageTimes is the per-node record: a histogram per stage, the log
// store's writes, and when each recent entry was stored and applied,
// by index, for the proposer to read once its entry is applied.
type stageTimes struct {
	hist    [numStages]histogram
	appends atomic.Uint64 // log store writes (StoreLogs calls)
	entries atomic.Uint64 // entries they wrote
	syncs   atomic.Uint64 // Sync calls (everysec, before the image moves)
	// proposed counts the entries the batcher proposed, and batched the
	// commands they carried.
	proposed, batched atomic.Uint64
	recent            [recentEntries]entryTimes
}

// recentEntries is how many entries' times are kept: far more than are
// ever in flight (maxInflight).
const recentEntries = 1024

// entryTimes is one entry's times (stageNow), for index.
type entryTimes struct {
	index                                 atomic.Uint64
	storeBegan, stored, applying, applied atomic.Int64
}

func (st *stageTimes) slot(index uint64) *entryTimes { return &st.recent[index%recentEntries] }

// storing records a log store write of entries first..last, from began
// to now.
func (st *stageTimes) storing(first, last uint64, began, done int64) {
	st.appends.Add(1)
	st.entries.Add(last - first + 1)
	if last-first >= recentEntries {
		first = last - recentEntries + 1
	}
	for i := first; i <= last; i++ {
		e := st.slot(i)
		e.index.Store(i)
		e.storeBegan.Store(began)
		e.stored.Store(done)
		e.applying.Store(0)
		e.applied.Store(0)
	}
}

// applying records that the state machine began (applied false) or
// finished applying the entry at index.
func (st *stageTimes) applyAt(index uint64, done bool) {
	e := st.slot(index)
	if e.index.Load() != index {
		return
	}
	if done {
		e.applied.Store(stageNow())
	} else {
		e.applying.Store(stageNow())
	}
}

// stageEpoch and stageNow time the stages on the monotonic clock alone:
// time.Now reads the wall clock too, and the write path reads the clock a
// few times per write.
var stageEpoch = time.Now()

// stageNow is nanoseconds since stageEpoch, from 1 (0 is a time not known).
func stageNow() int64 { return int64(time.Since(stageEpoch)) + 1 }

// proposalTimes are one proposal's own times (stageNow).
type proposalTimes struct {
	queued, taken, closed, handed, woke, got int64
}

// record adds a proposal's stages, its entry at index, and its reply at
// now.
func (st *stageTimes) record(p *proposalTimes, index uint64, now int64) {
	span := func(s int, from, to int64) {
		if from != 0 && to != 0 && to >= from {
			st.hist[s].add(time.Duration(to - from))
		}
	}
	span(stQueued, p.queued, p.taken)
	span(stBatching, p.taken, p.closed)
	span(stInflight, p.closed, p.handed)
	if e := st.slot(index); index != 0 && e.index.Load() == index {
		began, stored, applying, applied := e.storeBegan.Load(), e.stored.Load(), e.applying.Load(), e.applied.Load()
		if began >= p.handed {
			// Stored by a write that began after the entry was handed
			// over, so this write's times are the entry's.
			span(stToStore, p.handed, began)
			span(stStore, began, stored)
		}
		span(stCommit, stored, applying)
		span(stApply, applying, applied)
		span(stWake, applied, p.woke)
	}
	span(stHandoff, p.woke, p.got)
	span(stLease, p.got, now)
	span(stTotal, p.queued, now)
}

// info is INFO writestages: the log store's writes, then per stage its
// count and average, median, 99th percentile (log₂ buckets: within a
// factor of two) and maximum in microseconds.
func (st *stageTimes) info(kind string) [][2]string {
	u := func(v uint64) string { return strconv.FormatUint(v, 10) }
	appends, entries := st.appends.Load(), st.entries.Load()
	per := "0.00"
	if appends > 0 {
		per = strconv.FormatFloat(float64(entries)/float64(appends), 'f', 2, 64)
	}
	proposed, batched := st.proposed.Load(), st.batched.Load()
	cmds := "0.00"
	if proposed > 0 {
		cmds = strconv.FormatFloat(float64(batched)/float64(proposed), 'f', 2, 64)
	}
	out := [][2]string{{"raft_log_store", kind}, {"entries_proposed", u(proposed)}, {"commands_per_entry", cmds},
		{"log_appends", u(appends)}, {"log_entries_appended", u(entries)},
		{"log_entries_per_append", per}, {"log_syncs", u(st.syncs.Load())}}
	for s := range st.hist {
		h := &st.hist[s]
		n := h.n.Load()
		avg := uint64(0)
		if n > 0 {
			avg = h.sum.Load() / n / 1000
		}
		out = append(out, [2]string{"stage_" + stageNames[s], "count=" + u(n) + ",avg_usec=" + u(avg) +
			",p50_usec=" + u(h.quantile(0.5, n)) + ",p99_usec=" + u(h.quantile(0.99, n)) +
			",max_usec=" + u(uint64(h.max.Load()/1000))})
	}
	return out
}

func (st *stageTimes) reset() {
	for s := range st.hist {
		st.hist[s].reset()
	}
	st.appends.Store(0)
	st.entries.Store(0)
	st.syncs.Store(0)
	st.proposed.Store(0)
	st.batched.Store(0)
}
