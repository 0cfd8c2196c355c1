// Package memstore is an in-memory, non-replicated server.Backend: writes are
// applied under one lock in arrival order. Unit tests use it, and it is the
// reference the replicated store must behave like.
package memstore

import (
	"context"
	"sync"
	"time"

	"github.com/bfserver/bfserver/command"
	"github.com/bfserver/bfserver/keyspace"
)

// Store applies commands directly to a keyspace, and ACL commands to its
// user table.
type Store struct {
	mu    sync.Mutex
	ks    *keyspace.Keyspace
	users command.UserTable
}

// New returns an empty store.
func New() *Store {
	s := &Store{ks: keyspace.New()}
	s.users.Set(command.Users{})
	return s
}

// Write applies cmds in order as one unit.
func (s *Store) Write(_ context.Context, cmds []*command.Cmd) ([]keyspace.Result, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]keyspace.Result, len(cmds))
	if next := s.ks.ApplyEntry(cmds, out, s.users.Users, nil); next != nil {
		s.users.Set(next)
	}
	return out, nil
}

// Barrier is immediate: there is no log to wait for.
func (s *Store) Barrier(context.Context, bool) (time.Time, error) { return time.Time{}, nil }

// ReadNow: a read never waits here.
func (s *Store) ReadNow() (time.Time, bool) { return time.Time{}, true }

// WritesImmediately: Write applies at once, under one lock, so a server
// runs writes on its event loops too.
func (s *Store) WritesImmediately() bool { return true }

// State is the keyspace.
func (s *Store) State() *keyspace.Keyspace { return s.ks }

// Users returns the ACL user table (not to be modified), its version and a
// channel closed when it next changes.
func (s *Store) Users() (uint64, map[string][]string, <-chan struct{}) { return s.users.Load() }

// UsersVersion is the user table's version.
func (s *Store) UsersVersion() uint64 { return s.users.Version() }
