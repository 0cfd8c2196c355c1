package replication

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/bfserver/bfserver/command"
	"github.com/bfserver/bfserver/internal/wire"
	"github.com/bfserver/bfserver/keyspace"
	"github.com/hashicorp/raft"
)

type proposal struct {
	cmds []*command.Cmd
	done chan proposed
	t    proposalTimes // stages.go
	// timer is the proposer's (patient), kept with the proposal.
	timer *time.Timer
}

// proposalPool keeps proposals, with their channel and timer, from one
// write to the next: at pipeline depth 1 every request is a proposal, and
// each was three allocations and a timer's. A proposal goes back only once
// its result was received: one given up on may still be answered.
var proposalPool = sync.Pool{New: func() any { return &proposal{done: make(chan proposed, 1)} }}

// inflightEntry is an entry handed to Raft, for the finisher.
type inflightEntry struct {
	fut   raft.ApplyFuture
	batch []*proposal
	size  int
}

type proposed struct {
	index   uint64
	results []keyspace.Result
	err     error
}

// maxBatch bounds the commands group-committed into one log entry, and
// maxInflight the entries handed to Raft and not yet committed. Raft itself
// writes every entry waiting in its queue with one fsync, so several
// entries in flight keep the log busy; measured with redis-benchmark
// (50 clients), 16 beat 1, 2, 4, 64 and 256.
//
// maxInflightBytes bounds the bytes of those entries: Raft holds each in
// memory until it is applied, and on its way the log store copies it twice
// more (its encoding, its pages), so sixteen 16 MiB LOADCHUNKs would hold
// most of a gigabyte. An entry larger than the bound is sent alone; 16 MiB
// is still 256 full entries of BF.ADDs.
const (
	maxBatch         = 4096
	maxInflight      = 16
	maxInflightBytes = 16 << 20
	// applyBacklog: the entry being built stays open while this many
	// entries before it are handed to Raft and not yet answered, even with
	// the log idle. One being applied and one stored behind it keep both
	// the log and the state machine busy; handing more over only made the
	// entries smaller, each paying its way through Raft and the state
	// machine: with the log fast (everysec) an entry carried 68 BF.ADDs
	// at P32 instead of 240, and the node took 338k writes a second instead
	// of 540k (docs/BENCHMARKS.md, The group commit waits for the state
	// machine).
	applyBacklog = 2
	// raftMaxAppend is Raft's MaxAppendEntries, and with BatchApplyCh
	// the room in its queue of proposals, which only the batcher fills.
	raftMaxAppend = 256
)

// The batcher's entries always fit Raft's queue: handing one over never
// waits, so it needs no timer (see batcher).
var _ [raftMaxAppend - maxInflight]struct{}

// inflight counts the bytes of entries handed to Raft and not yet applied.
type inflight struct {
	mu    sync.Mutex
	cond  *sync.Cond
	bytes int
}

// acquire waits until n more bytes fit (or nothing else is in flight);
// waited says it had to.
func (f *inflight) acquire(n int, stop <-chan struct{}) (ok, waited bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for f.bytes > 0 && f.bytes+n > maxInflightBytes {
		select {
		case <-stop:
			return false, waited
		default:
		}
		waited = true
		f.cond.Wait()
	}
	f.bytes += n
	return true, waited
}

// held reports the bytes in flight.
func (f *inflight) held() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.bytes
}

func (f *inflight) release(n int) {
	f.mu.Lock()
	f.bytes -= n
	f.mu.Unlock()
	f.cond.Broadcast()
}

// batcher is the group commit: proposals that arrive while the log is
// being written (see loggedStore), while the state machine is behind
// (applyBacklog), or while maxInflight entries are being committed, share
// the next entry; and Raft stores every queued entry with one fsync.
func (n *Node) batcher() {
	defer n.wg.Done()
	slots := make(chan struct{}, maxInflight)
	bytes := &n.inflight
	bytes.cond = sync.NewCond(&bytes.mu)
	go func() { <-n.stop; bytes.cond.Broadcast() }()
	// One goroutine answers the entries in flight, in the order they were
	// handed over, which is the order Raft resolves them in (it commits
	// and applies in index order; a failed one resolves no later than
	// those before it): a goroutine per entry cost its start and its
	// stack's growth.
	finished := make(chan inflightEntry, maxInflight) // a slot is held for each
	defer close(finished)
	applied := make(chan struct{}, 1) // an entry was applied since the batcher last looked
	go func() {
		for e := range finished {
			finish(e.fut, e.batch)
			bytes.release(e.size)
			<-slots
			select {
			case applied <- struct{}{}:
			default:
			}
		}
	}()
	// hold is what an entry still waits on once the log was idle: an
	// entry answered, while the state machine is behind; the log's write,
	// when one began meanwhile; nil when it may close (from then on it
	// takes only what is queued). A stale signal on applied only makes it
	// look again.
	hold := func() <-chan struct{} {
		if len(slots) > applyBacklog {
			return applied
		}
		if l := n.logged.idleCh(); !closedNow(l) {
			return l
		}
		return nil
	}
	// Each proposal is encoded as it joins, while the log is busy with the
	// entry before, so the entry is ready the moment the log is free.
	var enc command.Encoder
	for {
		var p *proposal
		select {
		case <-n.stop:
			return
		case p = <-n.proposals:
			p.t.taken = stageNow()
		case <-n.nudges:
			// An entry that commits must reach the followers now, not at
			// Raft's next idle tick: any entry appended after it carries
			// the commit index to them, an empty one if nothing else.
			select {
			case p = <-n.proposals:
			default:
				p = &proposal{done: make(chan proposed, 1)}
			}
		}
		select {
		case slots <- struct{}{}:
		case <-n.stop:
			p.done <- proposed{err: command.ErrNoLeader}
			return
		}
		batch := []*proposal{p}
		for _, c := range p.cmds {
			enc.Add(c)
		}
		// While the log is being written, or the state machine has
		// entries waiting behind the one it applies, keep the entry open;
		// once neither, take only what is already queued.
		idle := n.logged.idleCh()
		for enc.Len() < maxBatch {
			var q *proposal
			select {
			case q = <-n.proposals:
			case <-idle:
				if h := hold(); h != nil {
					idle = h
					continue
				}
				idle = closedCh // from here on, take what is queued
				select {
				case q = <-n.proposals:
				default:
				}
			case <-n.stop:
				for _, q := range batch {
					q.done <- proposed{err: command.ErrNoLeader}
				}
				return
			}
			if q == nil {
				break
			}
			q.t.taken = stageNow()
			batch = append(batch, q)
			for _, c := range q.cmds {
				enc.Add(c)
			}
		}
		data := enc.Entry()
		closed := stageNow()
		handed := closed
		ok, waited := bytes.acquire(len(data), n.stop)
		if !ok {
			for _, q := range batch {
				q.done <- proposed{err: command.ErrNoLeader}
			}
			return
		}
		if waited {
			handed = stageNow()
		}
		cmds := 0
		for _, q := range batch {
			q.t.closed, q.t.handed = closed, handed
			cmds += len(q.cmds)
		}
		n.stages.proposed.Add(1)
		n.stages.batched.Add(uint64(cmds))
		// No enqueue timeout (a timer per entry): Raft's queue has room
		// for every entry in flight, so the hand-over cannot wait, and
		// ErrEnqueueTimeout could not come.
		fut := n.raft.Apply(data, 0)
		finished <- inflightEntry{fut, batch, len(data)}
	}
}

// closedNow reports whether ch is closed.
func closedNow(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// nudge asks the batcher to carry the commit index to the followers with
// the next entry, appending an empty one if none is waiting: a follower
// learns of commits only from appended entries, or from Raft's tick
// (CommitTimeout) when none come.
func (n *Node) nudge() {
	select {
	case n.nudges <- struct{}{}:
	default:
	}
}

// snapshotDue reports whether the log since the latest snapshot calls for
// another. Raft's own trigger (an entry count) is off: a snapshot copied
// the whole image then, so by count alone a node holding 1 GiB of filters
// under a steady stream of small writes copied a gigabyte every few
// seconds, and its writes slowed tenfold. A snapshot now refers to the
// image (snapshotStore) and costs a flush; the rule stays, since a
// follower that needs a snapshot is still streamed the whole image. Due
// when:
//   - SnapshotThreshold entries were applied and they hold at least a
//     sixteenth of the filters' bytes (for small filters the count
//     decides);
//   - SnapshotLogBytes were logged, whatever the count: Raft decodes every
//     entry after the snapshot when it starts, and raft-boltdb decodes a
//     large entry slowly (16 MB at 90 MB/s, against 600 MB/s for 1 MB);
//   - an eighth of that was logged and the log has been quiet for two
//     seconds (a bulk load has ended).
func (n *Node) snapshotDue() bool {
	if t := n.snapFailed.Load(); t != 0 && time.Since(time.Unix(0, t)) < snapshotRetry {
		return false
	}
	logged := n.fsm.logged.Load()
	if logged > n.opts.SnapshotLogBytes {
		return true
	}
	if n.fsm.entries.Load() >= n.opts.SnapshotThreshold && logged >= n.fsm.ks.Load().Bytes()/16 {
		return true
	}
	return logged > n.opts.SnapshotLogBytes/8 && n.fsm.quiet()
}

// snapshot asks Raft for a snapshot, leaving behind it as many of the
// newest entries as TrailingLogBytes holds at the average size of those
// since the last one (at least one, at most TrailingLogs).
func (n *Node) snapshot() raft.SnapshotFuture {
	trailing := n.opts.TrailingLogs
	if avg := n.fsm.avgEntry(); avg > 0 {
		trailing = min(trailing, max(1, n.opts.TrailingLogBytes/avg))
	}
	n.trailMu.Lock()
	if rc := n.raft.ReloadableConfig(); rc.TrailingLogs != trailing {
		rc.TrailingLogs = trailing
		if err := n.raft.ReloadConfig(rc); err != nil {
			n.log.Warn("trailing logs", "err", err)
		}
	}
	n.trailMu.Unlock()
	return n.raft.Snapshot()
}

// snapshotRetry is how long a failed snapshot by log size waits before
// the next try.
const snapshotRetry = 30 * time.Second

// snapshotAsync asks Raft for a snapshot unless one is already under way.
func (n *Node) snapshotAsync() {
	if !n.snapping.CompareAndSwap(false, true) {
		return
	}
	go func() {
		defer n.snapping.Store(false)
		err := n.snapshot().Error()
		if errors.Is(err, raft.ErrNothingNewToSnapshot) {
			n.fsm.reset() // the latest snapshot has it all
			return
		}
		if err != nil {
			// Not again for a while: each try may stream the whole image.
			n.snapFailed.Store(time.Now().UnixNano())
			n.log.Warn("snapshot by log size", "err", err)
			return
		}
		n.snapFailed.Store(0)
		n.lastSave.Store(time.Now().Unix())
	}()
}

func finish(fut raft.ApplyFuture, batch []*proposal) {
	err := mapRaftError(fut.Error())
	woke := stageNow()
	for _, q := range batch {
		q.t.woke = woke
	}
	var results []keyspace.Result
	if err == nil {
		res, _ := fut.Response().(applyResult)
		results = res.results
	}
	off := 0
	for _, q := range batch {
		r := proposed{index: fut.Index(), err: err}
		if err == nil && off+len(q.cmds) <= len(results) {
			r.results = results[off : off+len(q.cmds)]
		} else if err == nil && len(q.cmds) > 0 {
			// Committed, but this node's state machine did not apply it:
			// it halted at an entry it cannot apply.
			r.err = command.ErrLogTimeout
		}
		off += len(q.cmds)
		q.done <- r
	}
}

// mapRaftError classifies Raft's answer to a proposal.
func mapRaftError(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, raft.ErrNotLeader):
		return command.ErrNoLeader // never appended
	case errors.Is(err, raft.ErrEnqueueTimeout):
		return command.ErrNotAccepted // never appended
	}
	return command.ErrLeadershipLost // appended; may or may not commit
}

// propose submits commands on the leader and waits for their results.
// It waits as long as the log makes progress: a long command (CF.INSERT of
// a million items) is answered when it is applied, not when a timer runs
// out. The outcome is unknown only when leadership changed, or the log
// stood still for a whole WriteTimeout.
func (n *Node) propose(ctx context.Context, cmds []*command.Cmd) (uint64, []keyspace.Result, error) {
	if len(cmds) > 0 {
		if err := n.disk.err(); err != nil {
			return 0, nil, err
		}
	}
	p := proposalPool.Get().(*proposal)
	p.cmds, p.t = cmds, proposalTimes{queued: stageNow()}
	t := p.timer
	if t == nil {
		t = time.NewTimer(n.opts.WriteTimeout)
		p.timer = t
	} else {
		t.Reset(n.opts.WriteTimeout) // stopped: no stale tick (Go 1.23 timers)
	}
	var err error
	select {
	case <-n.stop:
		err = command.ErrNoLeader // the batcher is gone: nothing would take it
	default:
		// Two selects of one case each, not one of four: the queue has
		// room (the rule), and a select locks every channel it names.
		select {
		case n.proposals <- p:
		default:
			select {
			case n.proposals <- p:
			case <-t.C:
				err = command.ErrNotAccepted
			case <-ctx.Done():
				err = command.ErrNotAccepted
			case <-n.stop:
				err = command.ErrNoLeader
			}
		}
	}
	if err != nil {
		t.Stop()
		p.cmds = nil
		proposalPool.Put(p) // never queued: nothing will answer it
		return 0, nil, err
	}
	var r proposed
	err = n.patient(ctx, t, func() <-chan struct{} { return nil }, p.done, &r)
	t.Stop()
	if err != nil {
		return 0, nil, err // p stays out of the pool: its answer may come
	}
	pt := p.t
	pt.got = stageNow()
	p.cmds = nil
	proposalPool.Put(p)
	if r.err == nil && len(cmds) > 0 {
		// Followers holding read leases must know of the commit before
		// the client does; that wait ends with their leases at the latest.
		end := pt.got
		if n.holders.held.Load() != 0 {
			if err := n.holders.wait(ctx, r.index, 2*n.leaseTerm()+time.Second); err != nil {
				return 0, nil, command.ErrLeadershipLost
			}
			end = stageNow()
		}
		n.stages.record(&pt, r.index, end)
	}
	return r.index, r.results, r.err
}

// patient waits for done to deliver into *out. Every time t fires it
// checks that the log moved on (something was committed or applied, or an
// entry is being applied right now), and gives up with ErrLogTimeout when
// it did not; moved, when it fires, means the leader it waits on changed.
func (n *Node) patient(ctx context.Context, t *time.Timer, moved func() <-chan struct{}, done <-chan proposed, out *proposed) error {
	last := n.progress()
	for {
		select {
		case *out = <-done:
			return nil
		case <-moved():
			return command.ErrLeadershipLost
		case <-ctx.Done():
			return command.ErrLogTimeout
		case <-n.stop:
			// The node is closing: a proposal the batcher had not taken
			// when it stopped is never answered. One answered by now (or
			// within a second, as Raft shuts down) keeps its answer; the
			// rest may or may not have been appended.
			select {
			case *out = <-done:
				return nil
			case <-time.After(time.Second):
				return command.ErrLeadershipLost
			}
		case <-t.C:
			now := n.progress()
			if now == last && !n.fsm.busy() {
				return command.ErrLogTimeout
			}
			last = now
			t.Reset(n.opts.WriteTimeout)
		}
	}
}

// progress is a figure that moves whenever the log does.
func (n *Node) progress() uint64 { return n.raft.CommitIndex() + n.fsm.applied.Load() }

// WritesLocally reports whether a write now waits on this node alone: it
// leads, and is its configuration's one member (a non-voter would hold
// read leases that writes wait on).
func (n *Node) WritesLocally() bool {
	if n.voters.Load() != 1 || !n.IsLeader() {
		return false
	}
	m := n.servers.Load()
	return m == nil || len(*m) == 1
}

// Write implements server.Backend: propose on the leader, or forward to it;
// either way reply only once this node has applied the entry.
func (n *Node) Write(ctx context.Context, cmds []*command.Cmd) ([]keyspace.Result, error) {
	if err := n.HaltErr(); err != nil {
		return nil, command.ErrNoLeader
	}
	if err := n.disk.err(); err != nil {
		return nil, err // this node could not store the entry either
	}
	for {
		var res []keyspace.Result
		var err error
		if n.IsLeader() {
			_, res, err = n.propose(ctx, cmds)
		} else {
			res, err = n.forward(ctx, cmds)
		}
		if !errors.Is(err, command.ErrNoLeader) {
			return res, err
		}
		// Known not applied, and no leader right now: wait for one.
		if err := n.waitLeaderChange(ctx); err != nil {
			return nil, command.ErrNoLeader
		}
	}
}

// waitLeaderChange polls briefly for a leader to be known: a second, or
// the write timeout for a lone voter, which will elect itself (a loaded
// machine may take longer than a second to).
func (n *Node) waitLeaderChange(ctx context.Context) error {
	t := time.NewTicker(20 * time.Millisecond)
	defer t.Stop()
	wait := time.Second
	if n.voters.Load() == 1 {
		wait = n.opts.WriteTimeout
	}
	deadline := time.Now().Add(wait)
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-n.stop:
			return command.ErrNoLeader
		case <-t.C:
		}
		if id, _ := n.leaderRaft(); id != "" {
			return nil
		}
		if time.Now().After(deadline) {
			return command.ErrNoLeader
		}
	}
}

// forward sends a batch to the leader over the peer protocol and waits,
// as long as that leader leads and the log makes progress, for its
// results; then until this node applied the entry, so the client reads
// its own write here.
func (n *Node) forward(ctx context.Context, cmds []*command.Cmd) ([]keyspace.Result, error) {
	moved := n.leaderMovedCh()
	id, addr := n.leaderRaft()
	if id == "" || id == n.opts.NodeID {
		return nil, command.ErrNoLeader
	}
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan proposed, 1)
	go func() {
		out, err := n.peers.call(cctx, addr, reqForward, command.EncodeBatch(cmds))
		var r proposed
		switch {
		case errors.Is(err, errDial):
			r.err = command.ErrNoLeader // never sent
		case err != nil:
			r.err = err
		default:
			rd := wire.Reader{B: out}
			r.index = rd.Uvarint()
			raw := rd.Bytes()
			var derr error
			if r.results, derr = keyspace.DecodeResults(raw); rd.Bad || derr != nil || len(r.results) != len(cmds) {
				r.err = command.ErrConnLost
			}
		}
		done <- r
	}()
	t := time.NewTimer(n.opts.WriteTimeout)
	defer t.Stop()
	var r proposed
	if err := n.patient(ctx, t, func() <-chan struct{} { return moved }, done, &r); err != nil {
		return nil, err
	}
	if r.err != nil {
		if errors.Is(r.err, context.Canceled) {
			return nil, command.ErrLeadershipLost
		}
		return nil, r.err
	}
	if err := n.waitApplied(ctx, r.index); err != nil {
		return nil, err
	}
	return r.results, nil
}

// waitApplied waits until this node applied index i, as long as its log
// makes progress.
func (n *Node) waitApplied(ctx context.Context, i uint64) error {
	for {
		wctx, cancel := context.WithTimeout(ctx, n.opts.WriteTimeout)
		last := n.progress()
		err := n.fsm.waitApplied(wctx, i)
		cancel()
		if err == nil {
			return nil
		}
		if ctx.Err() != nil || (n.progress() == last && !n.fsm.busy()) {
			return command.ErrLogTimeout
		}
	}
}

// Forward proposes a batch a follower forwarded (on the leader) and
// returns its index and encoded results. Every command must pass
// command.Validate, and be one a RESP layer proposes. A per-filter byte cap
// above this leader's is lowered to it: by default each node's cap follows
// its own memory, and a write from a node with more must not fail for it,
// nor create a filter this leader would refuse its own clients.
func (n *Node) Forward(ctx context.Context, batch []byte) (uint64, []byte, error) {
	cmds, err := command.DecodeBatch(batch)
	if err != nil {
		return 0, nil, errBadFrame
	}
	for _, c := range cmds {
		if err := command.Validate(c); err != nil {
			return 0, nil, err
		}
		if c.Op == command.SetMember || c.Op == command.DelMember {
			return 0, nil, errForbidden
		}
		c.MaxBytes = min(c.MaxBytes, n.opts.MaxFilterBytes)
	}
	if !n.IsLeader() {
		return 0, nil, command.ErrNoLeader
	}
	idx, res, err := n.propose(ctx, cmds)
	if err != nil {
		return 0, nil, err
	}
	n.nudge() // the follower replies once it has applied the entry
	return idx, keyspace.EncodeResults(res), nil
}
