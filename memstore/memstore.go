// Package memstore is an in-memory, non-replicated resp.Backend: writes are
// applied under one lock in arrival order. Unit tests use it, and it is the
// reference the replicated store must behave like.
package memstore

import (
	"context"
	"sync"

	"github.com/bfserver/bfserver/command"
	"github.com/bfserver/bfserver/keyspace"
)

// Store applies commands directly to a keyspace.
type Store struct {
	mu sync.Mutex
	ks *keyspace.Keyspace
}

// New returns an empty store.
func New() *Store { return &Store{ks: keyspace.New()} }

// Write applies cmds in order as one unit.
func (s *Store) Write(_ context.Context, cmds []*command.Cmd) ([]keyspace.Result, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]keyspace.Result, len(cmds))
	for i := 0; i < len(cmds); i++ {
		out[i] = s.ks.Apply(cmds[i])
		// A transaction whose WATCHed keys moved is left out.
		i += min(keyspace.Skip(cmds[i], &out[i]), len(cmds)-1-i)
	}
	return out, nil
}

// Barrier is immediate: there is no log to wait for.
func (s *Store) Barrier(context.Context, bool) error { return nil }

// State is the keyspace.
func (s *Store) State() *keyspace.Keyspace { return s.ks }
