package replication

import (
	"context"
	"encoding/binary"
	"sync"
	"sync/atomic"
	"time"

	"github.com/bfserver/bfserver/command"
	"github.com/bfserver/bfserver/internal/wire"
)

// Follower read leases.
//
// Without one, a follower's linearizable read needs the leader's commit
// index at the time the read arrived: one round trip per batch of reads.
// A follower lease replaces the round trip with a promise from the leader:
// while the follower holds it, the leader acknowledges no write until it
// has told that follower the write's index is committed (or the lease
// ended). A read on the follower then waits until it has applied the
// latest index it was told, and so sees every write acknowledged anywhere
// before it arrived.
//
// A follower lease never outlasts the leader's own lease (see renewLease),
// so it ends before another node can be elected and acknowledge writes the
// follower was not told of. The follower times it from before it asked,
// the leader from when it granted, plus a margin for clock rate: the
// follower's lease always ends first.
//
// The price: while a follower holds a lease, a write's reply waits for one
// message to that follower and its answer (concurrent writes share it).
// Followers hold leases only while linearizable reads arrive.

const (
	// leaseIdle: a follower keeps its lease this long after its last
	// linearizable read.
	leaseIdle = time.Second
	// leaseRetry paces a follower's requests after a refusal or failure.
	leaseRetry = 50 * time.Millisecond
	// leaseBackoff: a follower the leader failed to reach gets no lease
	// for this long, so that a follower that can reach the leader but not
	// the other way round cannot hold writes back lease after lease.
	leaseBackoff = 5 * time.Second
)

// holders is the leader's table of follower leases.
type holders struct {
	// tell sends a follower the committed index, and returns once it
	// knows it.
	tell func(id string, index uint64) error

	mu sync.Mutex
	m  map[string]*holder
	// held is len(m), for a write to see without the lock that there is
	// no holder to wait for (the rule, not the exception).
	held    atomic.Int32
	refuse  map[string]time.Time // no lease for these until then
	changed chan struct{}        // closed and replaced whenever a holder changes
}

type holder struct {
	until   time.Time // the follower's lease ends before this
	told    uint64    // the follower knows entries up to here committed
	want    uint64    // the index writes wait to have told it
	sending bool      // a message to it is under way
}

func newHolders(tell func(string, uint64) error) *holders {
	return &holders{tell: tell, m: map[string]*holder{}, refuse: map[string]time.Time{}, changed: make(chan struct{})}
}

// grant records a lease for follower id until the given time, unless the
// leader failed to reach it lately. What the follower was told stays: the
// read index the grant carries does not count as told, because the
// follower may still read under its previous lease before the grant
// reaches it.
func (h *holders) grant(id string, until time.Time) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.refused(id, time.Now()) {
		return false
	}
	x := h.m[id]
	if x == nil {
		x = &holder{}
		h.m[id] = x
		h.held.Store(int32(len(h.m)))
	}
	if until.After(x.until) {
		x.until = until
	}
	h.broadcast()
	return true
}

// refused reports whether the leader failed to reach follower id within
// leaseBackoff: it gets no lease, and its current one is waited out, not
// told again. Called with h.mu held.
func (h *holders) refused(id string, now time.Time) bool {
	r, ok := h.refuse[id]
	if ok && !now.Before(r) {
		delete(h.refuse, id)
		return false
	}
	return ok
}

func (h *holders) broadcast() {
	close(h.changed)
	h.changed = make(chan struct{})
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

// wait returns once every follower holding a lease knows that index i is
// committed, or its lease has ended; context.DeadlineExceeded after
// longest. The deadline is a duration, not a context's, and counts from
// the first holder found: most writes find no holder to wait for, and a
// timeout context per write cost a timer and the parent context's lock,
// shared by every connection; a clock read, the lock, little.
func (h *holders) wait(ctx context.Context, i uint64, longest time.Duration) error {
	if h.held.Load() == 0 {
		return nil // a grant after this load is one after the commit was checked
	}
	var deadline time.Time
	for {
		h.mu.Lock()
		now := time.Now()
		if deadline.IsZero() {
			deadline = now.Add(longest)
		}
		var first time.Time
		for id, x := range h.m {
			if !now.Before(x.until) {
				delete(h.m, id)
				h.held.Store(int32(len(h.m)))
				continue
			}
			if x.told >= i {
				continue
			}
			if first.IsZero() || x.until.Before(first) {
				first = x.until
			}
			x.want = max(x.want, i)
			if !x.sending && !h.refused(id, now) {
				x.sending = true
				go h.send(id, x)
			}
		}
		ch := h.changed
		h.mu.Unlock()
		if first.IsZero() {
			return nil
		}
		if !now.Before(deadline) {
			return context.DeadlineExceeded
		}
		until := first
		if deadline.Before(until) {
			until = deadline
		}
		t := time.NewTimer(time.Until(until))
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

// send tells follower id of commits until it knows what writes wait for;
// one message at a time, so concurrent writes share each.
func (h *holders) send(id string, x *holder) {
	for {
		h.mu.Lock()
		target := x.want
		if target <= x.told {
			x.sending = false
			h.mu.Unlock()
			return
		}
		h.mu.Unlock()
		err := h.tell(id, target)
		h.mu.Lock()
		if err != nil {
			// Writes wait for the lease to end; none is granted meanwhile.
			x.sending = false
			h.refuse[id] = time.Now().Add(leaseBackoff)
			h.broadcast()
			h.mu.Unlock()
			return
		}
		x.told = max(x.told, target)
		h.broadcast()
		h.mu.Unlock()
	}
}

// tell implements holders.tell over the peer protocol.
func (n *Node) tell(id string, index uint64) error {
	addr := n.raftAddrOf(id)
	if addr == "" {
		return errNotMember
	}
	ctx, cancel := context.WithTimeout(n.ctx, n.leaseTerm())
	defer cancel()
	_, err := n.peers.call(ctx, addr, reqCommitted, binary.AppendUvarint(nil, index))
	return err
}

// Committed is, on a follower, the leader's word that entries up to index
// are committed. Reads under a lease wait for them, so it is taken only
// for entries this node holds: the leader tells a follower of an entry it
// committed without it (a quorum of others stored it) only just after
// sending it, so an index beyond this node's log is waited for, for as long
// as the lease the notice serves lasts, and then refused, never kept. A
// notice of entries nobody sent (a damaged or hostile peer) would
// otherwise hold every lease read until it timed out.
func (n *Node) Committed(index uint64) error {
	if index > n.raft.LastIndex() {
		deadline := time.Now().Add(n.leaseTerm())
		t := time.NewTicker(time.Millisecond)
		defer t.Stop()
		for index > n.raft.LastIndex() {
			if time.Now().After(deadline) {
				n.noticeRefused.Warn(n.log, "refusing a commit notice beyond this node's log", "index", index, "last_log_index", n.raft.LastIndex())
				return errTellAhead
			}
			select {
			case <-t.C:
			case <-n.stop:
				return errTellAhead
			}
		}
	}
	for {
		old := n.told.Load()
		if index <= old || n.told.CompareAndSwap(old, index) {
			return nil
		}
	}
}

// committedFrom is a commit notice from peer from (the id it gave when it
// authenticated, "" without the secret's handshake): only the leader this
// node follows tells it what is committed.
func (n *Node) committedFrom(from string, index uint64) error {
	if from != "" {
		if leader, _ := n.leaderRaft(); leader != from {
			n.noticeRefused.Warn(n.log, "refusing a commit notice from a node that is not the leader", "from", from, "leader", leader, "index", index)
			return errNotLeader
		}
	}
	return n.Committed(index)
}

// Lease is, on the leader, follower id's request for a read lease. It
// returns the lease's length (0: none now; ask again) and the read index
// the follower must reach before it reads under it.
func (n *Node) Lease(id string) (time.Duration, uint64, error) {
	if !n.followerLeases() {
		return 0, 0, errLeaseRefused
	}
	if !n.IsLeader() || n.readyGen.Load() != n.leaderGen.Load() {
		return 0, 0, command.ErrNoLeader
	}
	if id == n.opts.NodeID || n.raftAddrOf(id) == "" {
		return 0, 0, errNotMember
	}
	if !n.leaseHeld() {
		n.renewLease()
		return 0, 0, nil
	}
	now := time.Now()
	d := min(time.Until(n.lease.Load().until), n.leaseTerm())
	if d <= 0 {
		return 0, 0, nil
	}
	// The follower counts from before it asked; the margin covers clocks
	// that run at slightly different rates. Recorded before the commit
	// index is read: a write whose wait missed this lease committed before
	// it, so the read index covers it.
	if !n.holders.grant(id, now.Add(d+d/32+time.Millisecond)) {
		return 0, 0, nil
	}
	return d, n.fsm.readIndex(n.raft.CommitIndex()), nil
}

// followerLeases reports whether this node's options allow follower
// leases: they rest on the leader's own lease.
func (n *Node) followerLeases() bool { return !n.opts.NoReadLease && !n.opts.NoFollowerLease }

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
// holds one, until it ends; ok is false when the read must take a
// read-index round.
func (n *Node) localRead(ctx context.Context) (until time.Time, ok bool, err error) {
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
		return time.Time{}, false, nil
	}
	return l.until, true, n.fsm.waitApplied(ctx, max(l.need, n.told.Load()))
}

// leaseLoop runs on every node: as a follower serving linearizable reads
// it holds a lease, renewed once half of it is gone.
func (n *Node) leaseLoop() {
	defer n.wg.Done()
	var renewAt time.Time
	for {
		now := time.Now()
		active := now.UnixNano()-n.lastRead.Load() < int64(leaseIdle) && !n.IsLeader()
		if !active {
			n.flease.Store(nil)
		}
		// Ask only once caught up: a lease is for serving reads now.
		if !active || now.Before(renewAt) || n.fsm.applied.Load() < n.fsm.readIndex(n.raft.CommitIndex()) {
			var timer <-chan time.Time
			var advance <-chan struct{}
			if active {
				timer = time.After(time.Until(renewAt))
				advance = n.fsm.advanceCh()
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
		asked := time.Now()
		d, need, err := n.askLease()
		if err != nil || d <= 0 {
			n.flease.Store(nil)
			renewAt = time.Now().Add(leaseRetry)
			continue
		}
		n.flease.Store(&followerLease{until: asked.Add(d), need: need})
		renewAt = asked.Add(d / 2)
	}
}

// askLease asks the leader for a lease.
func (n *Node) askLease() (time.Duration, uint64, error) {
	id, addr := n.leaderRaft()
	if id == "" || id == n.opts.NodeID {
		return 0, 0, command.ErrNoLeader
	}
	ctx, cancel := context.WithTimeout(n.ctx, n.leaseTerm())
	defer cancel()
	n.leaseAsks.Add(1)
	out, err := n.peers.call(ctx, addr, reqLease, wire.AppendBytes(nil, []byte(n.opts.NodeID)))
	if err != nil {
		return 0, 0, command.ErrNoLeader
	}
	r := wire.Reader{B: out}
	us, idx := r.Uvarint(), r.Uvarint()
	if r.Bad || us > uint64(time.Hour/time.Microsecond) {
		return 0, 0, errBadFrame
	}
	return time.Duration(us) * time.Microsecond, idx, nil
}
