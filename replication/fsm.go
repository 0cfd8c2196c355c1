package replication

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sync"
	"sync/atomic"

	"github.com/bfserver/bfserver/command"
	"github.com/bfserver/bfserver/keyspace"
	"github.com/bfserver/bfserver/persistence"
	"github.com/hashicorp/raft"
)

// fsm is the replicated state machine: it decodes log entries and applies
// them to the keyspace, skipping those its stored image already covers.
//
// Locks: mu excludes Apply from taking changes for the image and from
// swapping in a restored keyspace; readers never take it. flushMu orders
// image writes, so an older batch can never land after a newer one.
type fsm struct {
	mu      sync.Mutex
	flushMu sync.Mutex
	ks      atomic.Pointer[keyspace.Keyspace]
	store   *persistence.Store
	// persisted is the index the stored image covered at load: entries at
	// or below it are already in the keyspace and must not apply twice
	// (CF.ADD and CF.DEL are not idempotent).
	persisted uint64
	applied   atomic.Uint64
	// changed is the index of the latest applied entry that may have
	// changed state; entries after it carried no command (lease renewals,
	// a new leader's first entry, membership), so a read needs nothing
	// past it. Stored before applied.
	changed atomic.Uint64
	members map[string]string // node id → RESP address; under mu
	dec     command.Decoder   // Apply's; its commands last until the next entry

	wmu      sync.Mutex
	advance  chan struct{}            // closed and replaced whenever applied moves
	syncLog  func() error             // forces the raft log to disk before an image write
	onConfig func(raft.Configuration) // told every committed membership
}

const membersKey = "members"

func newFSM(store *persistence.Store) (*fsm, error) {
	f := &fsm{store: store, advance: make(chan struct{}), members: map[string]string{}}
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
	ks.TrackChanges()
	f.mu.Lock()
	f.ks.Store(ks)
	f.persisted = applied
	f.members = members
	f.mu.Unlock()
	f.changed.Store(applied)
	f.setApplied(applied)
	return nil
}

func (f *fsm) setApplied(i uint64) {
	f.applied.Store(i)
	f.wmu.Lock()
	close(f.advance)
	f.advance = make(chan struct{})
	f.wmu.Unlock()
}

// advanceCh is closed when the applied index next moves.
func (f *fsm) advanceCh() <-chan struct{} {
	f.wmu.Lock()
	defer f.wmu.Unlock()
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
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

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
	if err != nil {
		// Applying anything else would let this node diverge from its peers.
		panic(fmt.Sprintf("replication: log entry %d does not decode: %v", l.Index, err))
	}
	out := make([]keyspace.Result, len(cmds))
	f.mu.Lock()
	ks := f.ks.Load()
	for i, c := range cmds {
		// A log entry holds hundreds of writes, mostly to a few big
		// filters: start loading the bits of a later one now.
		if j := i + keyspace.PrefetchAhead; j < len(cmds) {
			ks.Prefetch(cmds[j])
		}
		switch c.Op {
		case command.SetMember:
			f.members[string(c.Key)] = string(c.Data)
		case command.DelMember:
			delete(f.members, string(c.Key))
		default:
			out[i] = ks.Apply(c)
		}
	}
	f.mu.Unlock()
	if len(cmds) > 0 {
		f.changed.Store(l.Index)
	}
	f.setApplied(l.Index)
	return applyResult{results: out}
}

// StoreConfiguration implements raft.ConfigurationStore. Membership
// entries carry no data for the keyspace, but they take log indexes that a
// read may wait for, so applied must move past them too.
func (f *fsm) StoreConfiguration(index uint64, c raft.Configuration) {
	if f.onConfig != nil {
		f.onConfig(c)
	}
	if index > f.applied.Load() {
		f.setApplied(index)
	}
}

// flush writes every change since the last flush, and the index it reaches,
// to the image.
func (f *fsm) flush() error {
	f.flushMu.Lock()
	defer f.flushMu.Unlock()
	changes, members, idx := f.take()
	return f.writeImage(changes, members, idx)
}

// take collects the changes since the last take and the index they bring
// the image to. The caller holds flushMu and writes them next.
func (f *fsm) take() ([]keyspace.Change, []byte, uint64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	members, _ := json.Marshal(f.members)
	return f.ks.Load().TakeChanges(), members, f.applied.Load()
}

func (f *fsm) writeImage(changes []keyspace.Change, members []byte, idx uint64) error {
	if f.syncLog != nil {
		// The image must never be ahead of the log it was built from.
		if err := f.syncLog(); err != nil {
			return err
		}
	}
	return f.store.Write(changes, map[string][]byte{membersKey: members}, idx)
}

func (f *fsm) memberAddr(id string) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.members[id]
}

func (f *fsm) memberList() map[string]string {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make(map[string]string, len(f.members))
	for k, v := range f.members {
		out[k] = v
	}
	return out
}

// Snapshot implements raft.FSM. Raft calls it between Applies, so the
// changes it takes bring the image exactly to the applied index. Writing
// them, which for a large filter takes a few hundred milliseconds, is left
// to Persist on Raft's snapshot goroutine, so that Apply goes on
// meanwhile. flushMu stays held from here until that write, so that no
// later flush can land first.
func (f *fsm) Snapshot() (raft.FSMSnapshot, error) {
	f.flushMu.Lock()
	changes, members, idx := f.take()
	return &snapshot{f: f, changes: changes, members: members, idx: idx}, nil
}

// Restore implements raft.FSM: the stream replaces the image atomically and
// a fresh keyspace is loaded from it and swapped in.
func (f *fsm) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	f.flushMu.Lock()
	defer f.flushMu.Unlock()
	if err := f.store.ReadSnapshot(rc); err != nil {
		return err
	}
	return f.load()
}

type snapshot struct {
	f       *fsm
	changes []keyspace.Change
	members []byte
	idx     uint64

	once sync.Once
	err  error
	snap *persistence.Snapshot // the image frozen at idx
}

// write brings the image to the snapshot's index, freezes it and lets the
// next flush go. Persist calls it first; Release calls it too, so that the
// changes taken are written even if Raft never persists the snapshot.
func (s *snapshot) write() error {
	s.once.Do(func() {
		defer s.f.flushMu.Unlock()
		s.err = s.f.writeImage(s.changes, s.members, s.idx)
		s.changes = nil
		if s.err == nil {
			s.snap = s.f.store.NewSnapshot()
		}
	})
	return s.err
}

func (s *snapshot) Persist(sink raft.SnapshotSink) error {
	if err := s.write(); err != nil {
		sink.Cancel()
		return err
	}
	if err := s.snap.Stream(sink); err != nil {
		sink.Cancel()
		return err
	}
	return sink.Close()
}

func (s *snapshot) Release() {
	s.write()
	if s.snap != nil {
		s.snap.Close()
	}
}
