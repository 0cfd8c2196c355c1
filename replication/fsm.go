package replication

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/bfserver/bfserver/command"
	"github.com/bfserver/bfserver/internal/memtune"
	"github.com/bfserver/bfserver/keyspace"
	"github.com/bfserver/bfserver/persistence"
	"github.com/hashicorp/raft"
)

// fsm is the replicated state machine: it decodes log entries and applies
// them to the keyspace, skipping those its stored image already covers.
// Apply is a pure function of the log: every command is validated again
// (command.Validate) and an invalid one answers the same error on every
// replica; an entry this build cannot read (a newer command level, an op
// it does not know, bytes that do not decode) halts the node before it,
// so that no replica applies part of the log differently.
//
// Locks: mu excludes Apply from taking a cut of the image (an O(1) swap;
// the cut is written beside Apply, keyspace.Cut) and from swapping in a
// restored keyspace; readers never take it. cutMu orders cuts, flushMu
// commits (taken before cutMu is let go), so an older table can never land
// after a newer one, and a cut can be walked while the one before commits.
type fsm struct {
	// self is this node's id, which its snapshots name (reference).
	self string
	mu   sync.Mutex
	// cutMu is held while a cut is open (taken and not yet written);
	// flushMu from then until its table is committed.
	cutMu, flushMu sync.Mutex
	// walking is the flush's cut while it is written, which a snapshot
	// may give up (lockCut).
	walking atomic.Pointer[keyspace.Cut]
	// snapWaiting is set while a snapshot waits for cutMu, so that a
	// flush that takes its cut meanwhile gives it up at once (lockCut).
	snapWaiting atomic.Bool
	// A cut's table commits with cutMu let go, so the next cut may be
	// taken, and walked, before it is known whether that table landed.
	// gen numbers the cuts taken (f.mu); a cut whose commit failed goes
	// into restores (f.mu), put back into the change record when the next
	// cut is taken (take: cutMu held, so no walk is swapping the records
	// the restore merges into), and every cut taken before that failure
	// and after the failed one, numbered below doomBelow (flushMu), lacks
	// its changes: its table is not committed either (commit).
	gen, doomBelow uint64
	restores       []*keyspace.Cut
	ks             atomic.Pointer[keyspace.Keyspace]
	store          *persistence.Store
	log            *slog.Logger
	// persisted is the index the stored image covered at load: entries at
	// or below it are already in the keyspace and must not apply twice
	// (CF.ADD and CF.DEL are not idempotent).
	persisted uint64
	applied   atomic.Uint64
	// inKS is the latest entry applied to the keyspace, set under mu
	// (applied moves just after mu is let go): the index a cut is at.
	inKS uint64
	// cutCopies, cutLines and cutPeak are the latest cut's copy-on-write, cutWaits
	// and cutSpills the budget waits and spilled chunks of all cuts
	// (keyspace.Cut.Copied), for INFO persistence.
	cutCopies, cutLines, cutPeak, cutWaits, cutSpills atomic.Uint64
	// changed is the index of the latest applied entry that may have
	// changed state; entries after it carried no command (lease renewals,
	// a new leader's first entry, membership), so a read needs nothing
	// past it. Stored before applied.
	changed atomic.Uint64
	// applying: an entry is being applied; a write waiting on a long
	// entry knows the log is moving.
	applying atomic.Bool
	// logTally counts the log since the latest snapshot, and lastEntry
	// is when the latest entry arrived (Unix ns).
	logTally
	lastEntry atomic.Int64
	members   map[string]string // node id → RESP address; under mu
	// voters are the voters of the latest membership applied (ids), kept
	// in the image with the state: a restarting node learns from it whether
	// it is the only voter before Raft starts. Under mu.
	voters []string
	// users is the replicated ACL user table (ACL SETUSER, DELUSER), kept
	// in the image like members; each change stores a new table, so
	// readers (the RESP layer, every command) need no lock.
	users command.UserTable
	dec   command.Decoder // Apply's; its commands last until the next entry
	// halt is why the state machine stopped, once it met an entry it
	// cannot apply; halted is closed then.
	halt     atomic.Pointer[error]
	halted   chan struct{}
	haltOnce sync.Once

	wmu      sync.Mutex
	advance  chan struct{}            // closed and replaced whenever applied moves, once taken
	syncLog  func() error             // forces the raft log to disk before an image write
	stages   *stageTimes              // when each entry is applied (stages.go); nil in tests
	onConfig func(raft.Configuration) // told every committed membership
	onHalt   func(error)              // told once, when the state machine halts
	onDisk   func(fault, error)       // told how each write to disk went
	// advanceTaken (under wmu): advanceCh handed advance out since it was
	// made; an index applied with no one waiting costs no new channel.
	advanceTaken bool
	// installed and refused count the snapshots Restore installed and
	// those it refused as damaged, for INFO persistence.
	installed, refused atomic.Uint64
}

const (
	membersKey = "members"
	votersKey  = "voters"
	usersKey   = "users"
)

func newFSM(store *persistence.Store, log *slog.Logger) (*fsm, error) {
	f := &fsm{store: store, log: log, advance: make(chan struct{}), members: map[string]string{}, halted: make(chan struct{})}
	if err := f.load(); err != nil {
		return nil, err
	}
	return f, nil
}

// load replaces the state with the stored image.
func (f *fsm) load() error {
	ks, applied, err := f.store.Load()
	if err != nil {
		return err
	}
	members := map[string]string{}
	if raw, err := f.store.Extra(membersKey); err != nil {
		return err
	} else if raw != nil {
		if err := json.Unmarshal(raw, &members); err != nil {
			return fmt.Errorf("stored members: %w", err)
		}
	}
	var voters []string
	if raw, err := f.store.Extra(votersKey); err != nil {
		return err
	} else if raw != nil {
		if err := json.Unmarshal(raw, &voters); err != nil {
			return fmt.Errorf("stored voters: %w", err)
		}
	}
	users := command.Users{}
	if raw, err := f.store.Extra(usersKey); err != nil {
		return err
	} else if raw != nil {
		if err := json.Unmarshal(raw, &users); err != nil {
			return fmt.Errorf("stored ACL users: %w", err)
		}
	}
	ks.TrackChanges()
	f.mu.Lock()
	f.ks.Store(ks)
	f.persisted = applied
	f.inKS = applied
	f.members = members
	f.voters = voters
	f.users.Set(users)
	f.mu.Unlock()
	f.changed.Store(applied)
	f.setApplied(applied)
	return nil
}

// quiet reports whether no entry has arrived for two seconds: a bulk load
// has ended, or none was under way.
func (f *fsm) quiet() bool {
	return time.Since(time.Unix(0, f.lastEntry.Load())) > 2*time.Second
}

func (f *fsm) setApplied(i uint64) {
	f.applied.Store(i)
	f.wmu.Lock()
	if f.advanceTaken {
		close(f.advance)
		f.advance, f.advanceTaken = make(chan struct{}), false
	}
	f.wmu.Unlock()
}

// advanceCh is closed when the applied index next moves.
func (f *fsm) advanceCh() <-chan struct{} {
	f.wmu.Lock()
	defer f.wmu.Unlock()
	f.advanceTaken = true
	return f.advance
}

// waitApplied returns once the local state includes index i.
func (f *fsm) waitApplied(ctx context.Context, i uint64) error {
	if f.applied.Load() >= i {
		return nil
	}
	for {
		ch := f.advanceCh()
		if f.applied.Load() >= i {
			return nil
		}
		select {
		case <-ch:
		case <-f.halted:
			return errHalted
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// busy reports whether an entry is being applied right now.
func (f *fsm) busy() bool { return f.applying.Load() }

// readIndex narrows a commit index to what a read must wait for: when
// everything up to it is applied here, the latest entry that changed
// state, so that a replica need not wait for entries that changed nothing.
func (f *fsm) readIndex(commit uint64) uint64 {
	if f.applied.Load() >= commit {
		return min(commit, f.changed.Load())
	}
	return commit
}

// applyResult is what Apply returns through raft's future.
type applyResult struct {
	results []keyspace.Result
}

// Apply implements raft.FSM.
func (f *fsm) Apply(l *raft.Log) any {
	if l.Type != raft.LogCommand {
		return f.apply(l)
	}
	// Counted here, as Raft hands each entry over, and not in
	// replayTail's early apply of the same entries.
	f.count(len(l.Data))
	f.lastEntry.Store(time.Now().UnixNano())
	if f.stages == nil {
		return f.apply(l)
	}
	f.stages.applyAt(l.Index, false)
	r := f.apply(l)
	f.stages.applyAt(l.Index, true)
	return r
}

// apply is Apply without the log's byte count.
func (f *fsm) apply(l *raft.Log) any {
	if l.Type != raft.LogCommand || f.halt.Load() != nil {
		return nil // after a halt nothing applies, and applied stays put
	}
	if err := checkEntry(l); err != nil {
		f.stop(l.Index, err)
		return nil
	}
	if l.Index <= f.persisted {
		if l.Index > f.applied.Load() {
			f.changed.Store(l.Index)
			f.setApplied(l.Index)
		}
		return applyResult{}
	}
	cmds, err := f.dec.Decode(l.Data)
	if err == nil {
		for _, c := range cmds {
			if !c.Op.Known() {
				err = &unknownOpError{op: c.Op}
				break
			}
		}
	}
	if err != nil {
		f.stop(l.Index, err)
		return nil
	}
	f.applying.Store(true)
	out := make([]keyspace.Result, len(cmds))
	f.mu.Lock()
	ks := f.ks.Load()
	users := ks.ApplyEntry(cmds, out, f.users.Users, func(c *command.Cmd) bool {
		switch c.Op {
		case command.SetMember:
			f.members[string(c.Key)] = string(c.Data)
		case command.DelMember:
			delete(f.members, string(c.Key))
		default:
			return false
		}
		return true
	})
	if users != nil {
		f.users.Set(users)
	}
	f.inKS = l.Index
	f.mu.Unlock()
	f.applying.Store(false)
	if len(cmds) > 0 {
		f.changed.Store(l.Index)
	}
	f.setApplied(l.Index)
	return applyResult{results: out}
}

type unknownOpError struct{ op command.Op }

func (e *unknownOpError) Error() string { return fmt.Sprintf("op code %d", e.op) }

// stop halts the state machine at entry index: nothing at or after it is
// applied, and the image is never written past the entry before it.
func (f *fsm) stop(index uint64, cause error) {
	var lv *command.LevelError
	var uo *unknownOpError
	var err error
	switch {
	case errors.Is(cause, errDamaged):
		err = damagedLog(index, cause)
	case errors.As(cause, &lv):
		err = fmt.Errorf("log entry %d needs command level %d, and this bfserver knows levels up to %d: "+
			"upgrade this node to a bfserver that knows level %d; nothing from entry %d on was applied",
			index, lv.Need, command.Level, lv.Need, index)
	case errors.As(cause, &uo):
		err = fmt.Errorf("log entry %d holds %v, which this bfserver (command level %d) does not know: "+
			"a newer bfserver wrote it, or the log is damaged; upgrade this node; nothing from entry %d on was applied",
			index, uo, command.Level, index)
	default:
		err = fmt.Errorf("log entry %d does not decode (%v): this bfserver (command level %d) cannot apply it; "+
			"nothing from entry %d on was applied", index, cause, command.Level, index)
	}
	f.haltOnce.Do(func() {
		f.halt.Store(&err)
		close(f.halted)
		if f.onHalt != nil {
			f.onHalt(err)
		}
	})
}

// replayTail applies the entries after the image at start-up, before Raft
// runs, when this node is the only voter (as of the image) and the tail
// changes no membership: every entry a lone voter stored was committed
// (one copy is a majority), so applying them now is what Raft would do
// after electing it, only without waiting for the election. Raft's own
// Apply then skips them. It reports whether the node may serve reads at
// once: it is the only voter and holds everything committed.
func (f *fsm) replayTail(logs raft.LogStore, self string) (bool, error) {
	f.mu.Lock()
	sole := len(f.voters) == 1 && f.voters[0] == self
	f.mu.Unlock()
	if !sole {
		return false, nil
	}
	last, err := logs.LastIndex()
	if err != nil {
		return false, err
	}
	// Whatever was replayed is in the keyspace: Raft must not apply it again.
	defer func() {
		f.mu.Lock()
		f.persisted = max(f.persisted, f.applied.Load())
		f.mu.Unlock()
	}()
	for i := f.applied.Load() + 1; i <= last; i++ {
		var l raft.Log
		if err := logs.GetLog(i, &l); err != nil {
			return false, nil // a gap (a truncated log): leave it to Raft
		}
		if l.Type == raft.LogConfiguration {
			return false, nil
		}
		f.apply(&l)
		if f.halt.Load() != nil {
			return false, nil
		}
		if l.Index > f.applied.Load() {
			f.setApplied(l.Index) // an entry of Raft's own: nothing to apply
		}
	}
	return true, nil
}

// StoreConfiguration implements raft.ConfigurationStore. Membership
// entries carry no data for the keyspace, but they take log indexes that a
// read may wait for, so applied must move past them too.
func (f *fsm) StoreConfiguration(index uint64, c raft.Configuration) {
	if f.onConfig != nil {
		f.onConfig(c)
	}
	var voters []string
	for _, s := range c.Servers {
		if s.Suffrage == raft.Voter {
			voters = append(voters, string(s.ID))
		}
	}
	f.mu.Lock()
	// An entry the image covers is delivered again after a start or an
	// install (the image may be past Raft's snapshot): the image's list
	// is as of its index, and an older one, were it flushed meanwhile,
	// could let replayTail take this node for the only voter.
	if index > f.persisted {
		f.voters = voters
	}
	f.mu.Unlock()
	if f.halt.Load() == nil && index > f.applied.Load() {
		f.setApplied(index)
	}
}

// flush writes every change since the last flush, and the index it
// reaches, to the image. On failure the changes stay recorded for the next
// flush, so the image never records an index whose changes it lacks.
func (f *fsm) flush() error {
	f.cutMu.Lock()
	p, err := f.take()
	if err != nil {
		f.cutMu.Unlock()
		return err
	}
	f.walking.Store(p.cut) // a snapshot may give it up (lockCut)
	if f.snapWaiting.Load() {
		p.cut.Abort() // one came while this cut was taken
	}
	t, err := f.write(p)
	f.walking.Store(nil)
	if err != nil {
		f.cutMu.Unlock()
		if errors.Is(err, keyspace.ErrCutAborted) {
			return nil // restored: the snapshot's cut carries it
		}
		return err
	}
	// The next cut may be taken (and walked) while this one commits; its
	// commit waits for this one.
	f.flushMu.Lock()
	f.cutMu.Unlock()
	defer f.flushMu.Unlock()
	return f.commit(t, p)
}

// lockCut takes cutMu for a snapshot, on Raft's FSM goroutine, where
// waiting holds every Apply: a flush still walking its cut is given up
// (restored into the change record, which the snapshot's cut then
// takes), so the wait is for the walk to notice and the restore, not for
// the walk. A flush already committing has let cutMu go. A flush that
// is still taking its cut (syncing the log) sees snapWaiting once it has
// published it in walking, and gives it up then: one of the two sees the
// other's store.
func (f *fsm) lockCut() {
	if f.cutMu.TryLock() {
		return
	}
	f.snapWaiting.Store(true)
	if c := f.walking.Load(); c != nil {
		c.Abort()
	}
	f.cutMu.Lock()
	f.snapWaiting.Store(false)
}

// lockAll excludes every other image write: cuts and commits.
func (f *fsm) lockAll() {
	f.cutMu.Lock()
	f.flushMu.Lock()
}

func (f *fsm) unlockAll() {
	f.flushMu.Unlock()
	f.cutMu.Unlock()
}

// report tells the node how a write to disk went.
func (f *fsm) report(kind fault, err error) error {
	if f.onDisk != nil {
		f.onDisk(kind, err)
	}
	return err
}

// pendingCut is a cut taken and not yet written: the keyspace's, and the
// applied index and replicated metadata at the same point.
type pendingCut struct {
	cut     *keyspace.Cut
	gen     uint64             // fsm.gen when it was taken
	spill   *persistence.Spill // removed once the cut is written
	applied uint64
	extra   map[string][]byte
}

// take takes a cut, with Apply excluded for O(1) (and the marshalling of
// the replicated metadata, a few kilobytes). Snapshot calls it from Raft's
// FSM goroutine, where no Apply can run either. The caller holds cutMu
// until the cut is written.
func (f *fsm) take() (*pendingCut, error) {
	if f.syncLog != nil {
		// The image must never be ahead of the log it was built from.
		// A failure is a fault of the log's; a success proves only that
		// syncing works, not appending, so it clears nothing.
		if err := f.syncLog(); err != nil {
			return nil, f.report(faultLog, err)
		}
	}
	// The spill is ready before the cut, so that Apply never waits on
	// the cut's budget.
	spill := f.store.NewSpill()
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.halt.Load(); err != nil {
		spill.Close()
		return nil, *err
	}
	members, _ := json.Marshal(f.members)
	voters, _ := json.Marshal(f.voters)
	users, _ := json.Marshal(f.users.Users())
	// Cuts whose tables failed to commit go back into the record first:
	// this cut carries their changes.
	for _, c := range f.restores {
		c.Restore()
	}
	f.restores = nil
	// The keyspace holds every entry up to inKS (set under mu); applied
	// may be past it by entries that changed nothing in it, or behind it
	// by the entry whose Apply just released mu.
	cut := f.ks.Load().Cut()
	spill.Attach(cut)
	f.gen++
	return &pendingCut{cut: cut, gen: f.gen, spill: spill, applied: max(f.applied.Load(), f.inKS),
		extra: map[string][]byte{membersKey: members, votersKey: voters, usersKey: users}}, nil
}

// write writes a taken cut into a table, beside Apply. On failure the cut
// goes back into the change record.
func (f *fsm) write(p *pendingCut) (*persistence.Table, error) {
	t, err := f.store.WriteCut(p.cut, p.applied, p.extra)
	p.spill.Close() // the walk is over: Apply puts nothing more in it
	if err != nil {
		f.mu.Lock()
		p.cut.Restore()
		f.mu.Unlock()
		if errors.Is(err, keyspace.ErrCutAborted) {
			return nil, err // given up, not a fault
		}
		return nil, f.report(faultImage, err)
	}
	f.noteCut(p.cut)
	return t, nil
}

// noteCut keeps what a written cut's copy-on-write cost, for INFO.
func (f *fsm) noteCut(c *keyspace.Cut) {
	copies, lines, peak, waits := c.Copied()
	f.cutCopies.Store(copies)
	f.cutLines.Store(lines)
	f.cutPeak.Store(peak)
	f.cutWaits.Add(waits)
	f.cutSpills.Add(c.Spilled())
}

// commit makes a cut's table durable; the caller holds flushMu. If that
// fails, the cut goes back into the change record (at the next take).
// A cut taken while an earlier one's table was committing, when that
// commit failed, lacks the earlier one's changes: committing its table
// would record an index whose changes the image (and every snapshot sent
// from it) lacks, so it goes back too.
func (f *fsm) commit(t *persistence.Table, p *pendingCut) error {
	if p.gen < f.doomBelow {
		t.Abort()
		f.restoreLater(p.cut)
		return f.report(faultImage, errEarlierCommit)
	}
	if err := t.Commit(); err != nil {
		f.restoreLater(p.cut)
		return f.report(faultImage, err)
	}
	return f.report(faultImage, nil)
}

// restoreLater queues a cut for the next take to restore, and dooms the
// cuts taken since it (commit).
func (f *fsm) restoreLater(cut *keyspace.Cut) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.restores = append(f.restores, cut)
	f.doomBelow = f.gen + 1
}

func (f *fsm) memberAddr(id string) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.members[id]
}

// userTable is the ACL user table (not to be modified), its version and a
// channel closed when it next changes.
func (f *fsm) userTable() (uint64, map[string][]string, <-chan struct{}) { return f.users.Load() }

func (f *fsm) memberList() map[string]string {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make(map[string]string, len(f.members))
	for k, v := range f.members {
		out[k] = v
	}
	return out
}

// Snapshot implements raft.FSM. Raft calls it between Applies, so the cut
// brings the image exactly to the applied index; it only takes the cut
// (O(1)): the table is written and committed in Persist, on Raft's
// snapshot goroutine, while Apply goes on. cutMu stays held from here
// until the cut is written, and flushMu from then until it is committed,
// so no later flush lands first. A flush walking its cut when Raft asks
// is given up for this cut (lockCut): Apply waits on the restore, not on
// the flush. A halted
// state machine takes no snapshot: Raft's applied index is past its own.
func (f *fsm) Snapshot() (raft.FSMSnapshot, error) {
	if err := f.halt.Load(); err != nil {
		return nil, *err
	}
	f.lockCut()
	p, err := f.take()
	if err != nil {
		f.cutMu.Unlock()
		return nil, err
	}
	return &snapshot{f: f, pending: p, logged: f.logged.Load(), entries: f.entries.Load()}, nil
}

// Restore implements raft.FSM: the stream replaces the image atomically,
// the old keyspace is let go (reads answer LOADING meanwhile, never a
// false "not found"), and a fresh one is loaded from the image, so a node
// never holds two copies of its filters.
func (f *fsm) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	f.lockAll()
	defer f.unlockAll()
	if err := f.store.ReadSnapshot(rc); err != nil {
		if errors.Is(err, persistence.ErrCorrupt) {
			// Damaged after its writer summed it (persistence: Snapshot
			// format), not a fault of this node's disk. Raft answers the
			// leader with the error, and the leader sends it again.
			f.refused.Add(1)
			id := ""
			if s, ok := rc.(*storedSnapshot); ok {
				id = s.id
				s.discard(f.log)
			}
			f.log.Warn("refused a damaged snapshot: nothing of it was installed", "id", id, "err", err)
			return err
		}
		return f.report(faultImage, err)
	}
	f.installed.Add(1)
	f.mu.Lock()
	f.ks.Store(keyspace.NewLoading())
	f.restores = nil // cuts of the keyspace let go: the image holds the snapshot's state
	f.mu.Unlock()
	memtune.Release()
	if err := f.load(); err != nil {
		return err
	}
	f.reset() // the log before the snapshot no longer counts
	return nil
}

// backup writes the image (so it is exactly at the applied index) and
// streams a frozen view of it to w: a consistent copy of this node's state
// while Apply goes on. It returns the index the copy is at.
func (f *fsm) backup(w io.Writer) (uint64, error) {
	f.lockAll()
	p, err := f.take()
	if err != nil {
		f.unlockAll()
		return 0, err
	}
	idx := p.applied
	t, err := f.write(p)
	if err == nil {
		err = f.commit(t, p)
	}
	if err != nil {
		f.unlockAll()
		return 0, err
	}
	snap := f.store.NewSnapshot()
	f.unlockAll()
	defer snap.Close()
	return idx, snap.Stream(w)
}

// reload writes the image and loads the keyspace back from it, with Apply
// excluded throughout (DEBUG RELOAD): what a restart would load. The old
// keyspace is let go first, so a node never holds two copies.
func (f *fsm) reload() error {
	f.lockAll()
	defer f.unlockAll()
	p, err := f.take()
	if err != nil {
		return err
	}
	t, err := f.write(p)
	if err != nil {
		return err
	}
	if err := f.commit(t, p); err != nil {
		return err
	}
	f.mu.Lock()
	f.ks.Store(keyspace.NewLoading())
	memtune.Release()
	ks, _, err := f.store.Load()
	if err != nil {
		f.mu.Unlock()
		f.stop(f.applied.Load()+1, fmt.Errorf("reloading the image: %w", err))
		return err
	}
	ks.TrackChanges()
	f.ks.Store(ks)
	f.mu.Unlock()
	return nil
}

type snapshot struct {
	f       *fsm
	pending *pendingCut // the cut Snapshot took, written by write
	logged  uint64      // fsm.logged when it was taken
	entries uint64      // and fsm.entries

	once sync.Once
	err  error
}

// write writes and commits the cut's table and lets the next flush go.
// Persist calls it first; Release calls it too, so that the changes cut
// are written even if Raft never persists the snapshot.
func (s *snapshot) write() error {
	s.once.Do(func() {
		p := s.pending
		t, err := s.f.write(p)
		s.pending = nil
		if err != nil {
			s.f.cutMu.Unlock()
			s.err = err
			return
		}
		s.f.flushMu.Lock()
		s.f.cutMu.Unlock()
		defer s.f.flushMu.Unlock()
		s.err = s.f.commit(t, p)
	})
	return s.err
}

func (s *snapshot) Persist(sink raft.SnapshotSink) error {
	if err := s.write(); err != nil {
		sink.Cancel()
		return err
	}
	// After a bulk load (the log quiet again) the image holds its chunks
	// several times over: one sorted run makes this stream, and every
	// start after it, read each once. A snapshot in the middle of a load
	// leaves that to the one after it, which comes once the load ends.
	if s.f.quiet() {
		began := time.Now()
		if did, err := s.f.store.CompactShadowed(); err != nil {
			s.f.log.Warn("compacting the image", "err", err)
		} else if did {
			s.f.log.Info("compacted the image", "took", time.Since(began).Round(time.Millisecond))
		}
	}
	// The image now holds the snapshot's state durably: the snapshot
	// refers to it (snapshotStore) instead of copying it. Raft's index
	// for the snapshot is the state machine's applied one, so the image
	// is at it; should that ever not hold, no reference is stored.
	if is, ok := sink.(interface{ Index() uint64 }); ok {
		if at, err := s.f.store.Applied(); err != nil || at < is.Index() {
			sink.Cancel()
			return fmt.Errorf("snapshot at index %d, image at %d (%v): %w", is.Index(), at, err, errImageBehind)
		}
	}
	if _, err := sink.Write(reference(s.f.self)); err != nil {
		sink.Cancel()
		return err
	}
	if err := sink.Close(); err != nil {
		return err
	}
	// What it covers no longer counts.
	s.f.settle(s.logged, s.entries)
	// Once the log is quiet, a new flat copy of the large arrays lets the
	// next start read them at disk speed (persistence, base.go). Other
	// image writes wait for it: nothing may land between its copy of the
	// image and the entries that record it.
	if s.f.quiet() && s.f.store.Stale() {
		s.f.lockAll()
		began := time.Now()
		n, err := s.f.store.Rebase()
		s.f.unlockAll()
		if err != nil {
			s.f.log.Warn("writing the image's base", "err", err)
		} else {
			s.f.log.Info("wrote the image's base", "bytes", n, "took", time.Since(began).Round(time.Millisecond))
		}
	}
	return nil
}

// logTally is the log since the latest snapshot: the bytes (logged) and
// the number of the entries applied. Raft decodes every entry after the
// snapshot at start-up, so the node snapshots by bytes as well as by
// entries (Node.snapshotDue), and bounds by bytes what a snapshot leaves
// behind (Node.snapshot).
type logTally struct {
	logged, entries atomic.Uint64
}

// count adds one entry of n bytes.
func (t *logTally) count(n int) {
	t.logged.Add(uint64(n))
	t.entries.Add(1)
}

// reset empties the tally: a snapshot covers all of it.
func (t *logTally) reset() {
	t.logged.Store(0)
	t.entries.Store(0)
}

// settle takes off what a snapshot covered (the tally when it was cut),
// never below zero: a reset may have come between the cut and its end.
func (t *logTally) settle(logged, entries uint64) {
	uncount(&t.logged, logged)
	uncount(&t.entries, entries)
}

// uncount takes n off a count, never below zero.
func uncount(c *atomic.Uint64, n uint64) {
	for {
		cur := c.Load()
		if c.CompareAndSwap(cur, cur-min(cur, n)) {
			return
		}
	}
}

// avgEntry is the mean size of the entries counted, 0 with none.
func (t *logTally) avgEntry() uint64 {
	if e := t.entries.Load(); e > 0 {
		return t.logged.Load() / e
	}
	return 0
}

func (s *snapshot) Release() { s.write() }
