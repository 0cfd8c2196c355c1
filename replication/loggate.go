package replication

import (
	"errors"
	"sync"

	"github.com/hashicorp/raft"
)

// loggedStore wraps the Raft log store so that the group commit can see
// when a write to the log is under way. Raft's leader loop writes the log
// synchronously, and an entry queued while it writes waits for that write
// and then races, at random, against processing the commit it just made:
// holding the next entry open until the write ends lets the commit go
// first, and the entry carries everything that arrived meanwhile.
//
// It also reports every write's outcome to the node's disk health.
type loggedStore struct {
	raft.LogStore
	disk   *diskHealth
	stages *stageTimes

	mu      sync.Mutex
	writing int
	idle    chan struct{} // closed when no write is under way
}

var closedCh = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

func newLoggedStore(s raft.LogStore, disk *diskHealth, stages *stageTimes) *loggedStore {
	return &loggedStore{LogStore: s, disk: disk, stages: stages, idle: closedCh}
}

// IsMonotonic passes on the store's: Raft empties a monotonic log after
// installing a snapshot, where it keeps a gap in another (raft-wal
// refuses one).
func (s *loggedStore) IsMonotonic() bool { return isMonotonic(s.LogStore) }

// isMonotonic reports whether a log store takes only consecutive entries
// (raft.MonotonicLogStore).
func isMonotonic(s raft.LogStore) bool {
	m, ok := s.(raft.MonotonicLogStore)
	return ok && m.IsMonotonic()
}

func (s *loggedStore) StoreLog(l *raft.Log) error {
	return s.StoreLogs([]*raft.Log{l})
}

func (s *loggedStore) StoreLogs(l []*raft.Log) error {
	s.begin()
	defer s.end()
	began := stageNow()
	err := s.LogStore.StoreLogs(l)
	if err == nil && len(l) > 0 && s.stages != nil {
		s.stages.storing(l[0].Index, l[len(l)-1].Index, began, stageNow())
	}
	if !isDamaged(err) { // an entry damaged on its way is the sender's, not this disk's
		s.disk.report(faultLog, err)
	}
	return err
}

// isDamaged reports whether err is a damagedError. Its own function: the
// target errors.As is given escapes, and each log write paid for it.
func isDamaged(err error) bool {
	if err == nil {
		return false
	}
	var damaged *damagedError
	return errors.As(err, &damaged)
}

func (s *loggedStore) begin() {
	s.mu.Lock()
	if s.writing == 0 {
		s.idle = make(chan struct{})
	}
	s.writing++
	s.mu.Unlock()
}

func (s *loggedStore) end() {
	s.mu.Lock()
	s.writing--
	if s.writing == 0 {
		close(s.idle)
	}
	s.mu.Unlock()
}

// idleCh is closed once no write to the log is under way (at once, if none
// is).
func (s *loggedStore) idleCh() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.idle
}
