package persistence

import "github.com/bfserver/bfserver/internal/shrink"

// discard removes a file of the store's own (a table given up or
// ingested, an old base) on a goroutine of its own, gently (package
// shrink): a flush given up for a snapshot lets the snapshot go on, and
// with it every Apply, without waiting for its gigabyte to be freed.
// Close waits for the removals under way.
func (s *Store) discard(path string) { s.remove(path, true) }

// discardDirty removes a file whose pages may not have reached the disk
// (a spill: written, never synced) on a goroutine of its own, at once:
// shrinking it would sync what is left of it at every step, writing the
// dirty pages that removing it drops unwritten (a gigabyte's spill held
// the Raft log's syncs for over a second).
func (s *Store) discardDirty(path string) { s.remove(path, false) }

func (s *Store) remove(path string, gently bool) {
	s.discards.Add(1)
	go func() {
		defer s.discards.Done()
		if gently {
			shrink.File(s.fs, path)
		}
		s.fs.Remove(path)
	}()
}
