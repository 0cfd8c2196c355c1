package replication

import (
	"context"
	"errors"
	"time"

	"github.com/bfserver/bfserver/command"
	"github.com/bfserver/bfserver/internal/wire"
)

// leaderReads: the only voter, or a leader holding a lease, leading and
// ready, knows its commit index is current: no round to share, so no
// hand-off to the coalescer's goroutine. until is when the lease ends
// (zero for the only voter, which needs none).
func (n *Node) leaderReads() (until time.Time, ok bool) {
	if !n.IsLeader() || n.readyGen.Load() != n.leaderGen.Load() {
		return time.Time{}, false
	}
	if n.voters.Load() == 1 {
		return time.Time{}, true
	}
	return n.leaseUntil()
}

// soleReads: started as the only voter, its whole log applied, and no
// leadership seen yet, nothing can have been committed that this node does
// not hold.
func (n *Node) soleReads() bool {
	return n.soleStart.Load() && n.voters.Load() == 1 && !n.IsLeader() && n.leaderGen.Load() == 1
}

// ReadNow reports whether Barrier would return at once without waiting:
// a leader's read with everything it must see applied, or a lone voter's
// at start; and until when, as Barrier does. The client side asks first,
// and builds a timeout for Barrier only when it is false (per batch of
// pipelined reads, the timer was 4% of the server's CPU).
func (n *Node) ReadNow() (until time.Time, ok bool) {
	if until, ok := n.leaderReads(); ok {
		if n.fsm.applied.Load() >= n.fsm.readIndex(n.raft.CommitIndex()) {
			failpoint("lease-read")
			return until, true
		}
		return time.Time{}, false
	}
	return time.Time{}, n.soleReads()
}

// Barrier implements server.Backend: a linearizable read waits until this
// node has applied everything committed before it was asked. until is when
// the lease the read rests on ends, zero when it rests on none (a round
// confirmed it, or this node is the only voter): a read served under a
// lease is answered only if the lease still holds once the read is done,
// and is served again otherwise (docs/CONSISTENCY.md).
func (n *Node) Barrier(ctx context.Context, stale bool) (until time.Time, err error) {
	if stale {
		return time.Time{}, nil
	}
	if until, ok := n.leaderReads(); ok {
		if err := n.fsm.waitApplied(ctx, n.fsm.readIndex(n.raft.CommitIndex())); err != nil {
			return time.Time{}, command.ErrReadTimeout
		}
		failpoint("lease-read")
		return until, nil
	}
	if n.soleReads() {
		return time.Time{}, nil
	}
	if n.followerLeases() {
		if until, ok, err := n.localRead(ctx); ok {
			if err != nil {
				return time.Time{}, command.ErrReadTimeout
			}
			failpoint("lease-read")
			return until, nil
		}
	}
	for {
		idx, err := n.reads.do(ctx)
		if err == nil {
			if err := n.fsm.waitApplied(ctx, idx); err != nil {
				return time.Time{}, command.ErrReadTimeout
			}
			return time.Time{}, nil
		}
		if ctx.Err() != nil {
			return time.Time{}, command.ErrReadTimeout
		}
		if !errors.Is(err, command.ErrNoLeader) {
			return time.Time{}, err
		}
		// An election may be under way: wait for a leader, briefly.
		if err := n.waitLeaderChange(ctx); err != nil {
			return time.Time{}, command.ErrNoLeader
		}
	}
}

// readIndexRound obtains one read index for every read waiting on it.
func (n *Node) readIndexRound(ctx context.Context) (uint64, error) {
	if n.IsLeader() {
		return n.ReadIndex(ctx)
	}
	id, addr := n.leaderRaft()
	if id == "" || id == n.opts.NodeID {
		return 0, command.ErrNoLeader
	}
	n.readRPCs.Add(1)
	// A leader answers in a heartbeat round; one that does not answer in
	// two election timeouts is gone, and the read finds the next one.
	ctx, cancel := context.WithTimeout(ctx, 2*n.opts.ElectionTimeout)
	defer cancel()
	idx, err := n.callIndex(ctx, addr, reqReadIndex, nil)
	if err != nil {
		return 0, command.ErrNoLeader
	}
	return idx, nil
}

// callIndex is a peer request answered by one index.
func (n *Node) callIndex(ctx context.Context, addr string, typ byte, payload []byte) (uint64, error) {
	out, err := n.peers.call(ctx, addr, typ, payload)
	if err != nil {
		return 0, err
	}
	r := wire.Reader{B: out}
	idx := r.Uvarint()
	if r.Bad {
		return 0, errBadFrame
	}
	return idx, nil
}

// ReadIndex is the leader's commit index, once leadership is confirmed
// by a quorum: what a follower's read must reach.
func (n *Node) ReadIndex(ctx context.Context) (uint64, error) {
	if !n.IsLeader() || n.readyGen.Load() != n.leaderGen.Load() {
		return 0, command.ErrNoLeader
	}
	idx := n.fsm.readIndex(n.raft.CommitIndex())
	if _, held := n.leaseUntil(); n.voters.Load() == 1 || held {
		return idx, nil
	}
	if err := n.confirmLeader(); err != nil {
		return 0, err
	}
	return idx, nil
}

// lease is a confirmation of leadership: valid in leadership generation
// gen until until (a monotonic reading).
type lease struct {
	gen   uint64
	until time.Time
}

// leaseUntil reports whether this leader's lease is valid now, and until
// when; it renews the lease in the background once half of it is gone,
// so that steady reads never wait for a round.
func (n *Node) leaseUntil() (time.Time, bool) {
	l := n.lease.Load()
	if l == nil || l.gen != n.leaderGen.Load() {
		return time.Time{}, false
	}
	left := time.Until(l.until)
	if left <= 0 {
		return time.Time{}, false
	}
	if left < n.leaseTerm()/2 {
		n.renewLease()
	}
	return l.until, true
}

// leaseHeld reports whether this leader's lease is valid now.
func (n *Node) leaseHeld() bool {
	_, ok := n.leaseUntil()
	return ok
}

func (n *Node) leaseTerm() time.Duration { return n.opts.HeartbeatTimeout / 2 }

// renewLease commits an empty entry in the background and starts a lease
// from the moment it was proposed. A quorum stored the entry, so each of
// those followers heard from this leader after that moment (a heartbeat's
// answer can be older than the question it is counted for; an entry that
// did not exist yet cannot be), and will refuse other candidates for a
// heartbeat timeout after. Under writes the entry shares their group
// commit.
func (n *Node) renewLease() {
	if n.opts.NoReadLease || !n.renewing.CompareAndSwap(false, true) {
		return
	}
	go func() {
		defer n.renewing.Store(false)
		gen := n.leaderGen.Load()
		asked := time.Now()
		ctx, cancel := context.WithTimeout(n.ctx, n.leaseTerm())
		defer cancel()
		n.renewals.Add(1)
		if _, _, err := n.propose(ctx, nil); err != nil {
			return
		}
		if n.leaderGen.Load() == gen && n.IsLeader() {
			n.lease.Store(&lease{gen: gen, until: asked.Add(n.leaseTerm())})
		}
	}()
}

// confirmLeader runs a heartbeat round for reads that found no lease, and
// starts renewing one for the reads after them.
func (n *Node) confirmLeader() error {
	n.rounds.Add(1)
	if err := n.raft.VerifyLeader().Error(); err != nil {
		return command.ErrNoLeader
	}
	n.renewLease()
	return nil
}
