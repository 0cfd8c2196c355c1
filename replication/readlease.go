package replication

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/bfserver/bfserver/command"
)

// Follower read leases.
//
// Without one, a follower's linearizable read needs the leader's commit
// index at the time the read arrived: one round trip per batch of reads.
// A follower lease replaces the round trip with a promise from the leader:
// while the follower holds it, the leader acknowledges no write until that
// follower has applied it (or the lease ended). Everything acknowledged
// anywhere is then already in the follower's state, and it reads locally.
//
// A follower lease never outlasts the leader's own lease (see renewLease),
// so it ends before another node can be elected and acknowledge writes the
// follower has not seen. The follower times it from before it asked, the
// leader from when it granted, plus a margin for clock rate: the
// follower's lease always ends first.
//
// The price: while a follower holds a lease, writes wait for it to apply
// them, that is for the commit index to reach it. Followers hold leases
// only while linearizable reads arrive, and report every index they apply.

// Errors a leader answers lease requests with.
var (
	// errLeaseRefused: this leader grants no leases (NoReadLease or
	// NoFollowerLease).
	errLeaseRefused = errors.New("read leases are off on this leader")
	// errNotMember: the requester is not a member of the cluster.
	errNotMember = errors.New("unknown node id")
)

const (
	// leaseIdle: a follower keeps its lease this long after its last
	// linearizable read.
	leaseIdle = time.Second
	// leaseRetry paces a follower's requests after a refusal or failure.
	leaseRetry = 50 * time.Millisecond
)

// holders is the leader's table of follower leases.
type holders struct {
	mu      sync.Mutex
	m       map[string]*holder
	changed chan struct{} // closed and replaced on every report
}

type holder struct {
	until   time.Time // the follower's lease ends before this
	applied uint64    // the latest index it reported applied
}

func newHolders() *holders {
	return &holders{m: map[string]*holder{}, changed: make(chan struct{})}
}

// report records a follower's applied index and, if until is later, the
// new end of its lease.
func (h *holders) report(id string, applied uint64, until time.Time) {
	h.mu.Lock()
	x := h.m[id]
	if x == nil {
		x = &holder{}
		h.m[id] = x
	}
	x.until = later(x.until, until)
	x.applied = max(x.applied, applied)
	close(h.changed)
	h.changed = make(chan struct{})
	h.mu.Unlock()
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// count returns the followers whose lease has not ended.
func (h *holders) count() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := 0
	now := time.Now()
	for _, x := range h.m {
		if now.Before(x.until) {
			n++
		}
	}
	return n
}

// wait returns once every follower holding a lease has applied index i,
// or its lease has ended. It calls blocked before it first waits.
func (h *holders) wait(ctx context.Context, i uint64, blocked func()) error {
	for {
		h.mu.Lock()
		now := time.Now()
		var first time.Time
		for id, x := range h.m {
			if !now.Before(x.until) {
				delete(h.m, id)
				continue
			}
			if x.applied < i && (first.IsZero() || x.until.Before(first)) {
				first = x.until
			}
		}
		ch := h.changed
		h.mu.Unlock()
		if first.IsZero() {
			return nil
		}
		if blocked != nil {
			blocked()
			blocked = nil
		}
		t := time.NewTimer(time.Until(first))
		select {
		case <-ch:
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		}
		t.Stop()
	}
}

// Lease implements resp.Cluster on the leader: follower id reports the
// index it has applied, and, if want, asks for a lease. It returns the
// lease's length (0: none now; ask again) and the read index the follower
// must reach before it reads under it.
func (n *Node) Lease(ctx context.Context, id string, applied uint64, want bool) (time.Duration, uint64, error) {
	if n.opts.NoReadLease || n.opts.NoFollowerLease {
		return 0, 0, errLeaseRefused
	}
	if !n.IsLeader() || n.readyGen.Load() != n.leaderGen.Load() {
		return 0, 0, command.ErrNoLeader
	}
	if id == n.opts.NodeID || n.fsm.memberAddr(id) == "" {
		return 0, 0, errNotMember
	}
	var d time.Duration
	now := time.Now()
	if want && n.leaseHeld() {
		l := n.lease.Load()
		d = min(l.until.Sub(now), n.leaseTerm())
	} else if want {
		n.renewLease()
	}
	var until time.Time
	if d > 0 {
		// The follower counts from before it asked; the margin covers
		// clocks that run at slightly different rates.
		until = now.Add(d + d/32 + time.Millisecond)
	}
	// Recorded before the commit index is read: a write whose wait missed
	// this lease committed before it, so the read index covers it.
	n.holders.report(id, applied, until)
	return d, n.fsm.readIndex(n.raft.CommitIndex()), nil
}

// followerLease is a lease this follower holds.
type followerLease struct {
	until time.Time // by this node's monotonic clock
	need  uint64    // the read index it was granted at
}

// holdsLease reports whether this node holds a follower lease now.
func (n *Node) holdsLease() bool {
	l := n.flease.Load()
	return l != nil && time.Now().Before(l.until)
}

// localRead serves a linearizable read on a follower from its lease, if it
// holds one; ok is false when the read must take a read-index round.
func (n *Node) localRead(ctx context.Context) (ok bool, err error) {
	now := time.Now()
	if last := n.lastRead.Load(); now.UnixNano()-last > int64(10*time.Millisecond) {
		n.lastRead.Store(now.UnixNano())
		if now.UnixNano()-last > int64(leaseIdle) {
			select {
			case n.leaseWake <- struct{}{}:
			default:
			}
		}
	}
	l := n.flease.Load()
	if l == nil || !now.Before(l.until) {
		return false, nil
	}
	return true, n.fsm.waitApplied(ctx, l.need)
}

// leaseLoop runs on every node: as a follower serving linearizable reads
// it holds a lease, and while it may still be counted as a holder it
// reports each index it applies.
func (n *Node) leaseLoop() {
	defer n.wg.Done()
	var (
		reported  uint64
		reportEnd time.Time // the leader may count us as a holder until then
		renewAt   time.Time
	)
	for {
		now := time.Now()
		active := now.UnixNano()-n.lastRead.Load() < int64(leaseIdle) && !n.IsLeader()
		reporting := now.Before(reportEnd)
		if !active {
			n.flease.Store(nil)
		}
		applied := n.fsm.applied.Load()
		due := (active && !now.Before(renewAt)) || (reporting && applied > reported)
		if !due {
			var timer <-chan time.Time
			switch {
			case active:
				timer = time.After(time.Until(renewAt))
			case reporting:
				timer = time.After(time.Until(reportEnd))
			}
			var advance <-chan struct{}
			if active || reporting {
				advance = n.fsm.advanceCh()
				if n.fsm.applied.Load() != applied {
					continue
				}
			}
			select {
			case <-n.stop:
				return
			case <-n.leaseWake:
			case <-advance:
			case <-timer:
			}
			continue
		}
		// Ask only once caught up: otherwise writes would wait for this
		// node to replay its backlog.
		want := active && applied >= n.fsm.readIndex(n.raft.CommitIndex())
		asked := time.Now()
		d, need, err := n.askLease(applied, want)
		reported = applied
		if err != nil || d <= 0 {
			n.flease.Store(nil)
			renewAt = time.Now().Add(leaseRetry)
			if err != nil {
				if want {
					// A grant may have been lost on the way: report
					// until it has surely ended.
					reportEnd = later(reportEnd, time.Now().Add(n.leaseTerm()+n.leaseTerm()/16))
				}
				select {
				case <-n.stop:
					return
				case <-time.After(leaseRetry):
				}
			}
			continue
		}
		n.flease.Store(&followerLease{until: asked.Add(d), need: need})
		renewAt = asked.Add(d / 2)
		// The leader counts this node as a holder a little longer.
		reportEnd = later(reportEnd, time.Now().Add(d+d/16+2*time.Millisecond))
	}
}

// askLease reports to the leader and asks it for a lease.
func (n *Node) askLease(applied uint64, want bool) (time.Duration, uint64, error) {
	id, addr := n.leaderRESP()
	if id == "" || addr == "" || id == n.opts.NodeID {
		return 0, 0, command.ErrNoLeader
	}
	ctx, cancel := context.WithTimeout(context.Background(), n.leaseTerm())
	defer cancel()
	w := 0
	if want {
		w = 1
	}
	v, err := n.peers.get(addr).Do(ctx, "BFRAFT.LEASE", n.opts.NodeID, applied, w).Slice()
	if err != nil || len(v) != 2 {
		return 0, 0, command.ErrNoLeader
	}
	us, _ := v[0].(int64)
	idx, _ := v[1].(int64)
	n.leaseAsks.Add(1)
	return time.Duration(us) * time.Microsecond, uint64(idx), nil
}
