package persistence

import "github.com/bfserver/bfserver/internal/shrink"

// discard removes a file of the store's own (a table given up or
// ingested, a spill, an old base) on a goroutine of its own, gently
// (package shrink): a flush given up for a snapshot lets the snapshot go on, and
// with it every Apply, without waiting for its gigabyte to be freed.
// Close waits for the removals under way.
func (s *Store) discard(path string) {
	s.discards.Add(1)
	go func() {
		defer s.discards.Done()
		shrink.File(s.fs, path)
		s.fs.Remove(path)
	}()
}
