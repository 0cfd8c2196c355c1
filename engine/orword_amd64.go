//go:build !race

package engine

// orWord sets mask's bits in *w for the array's one writer (Bloom.Add).
//
// Why not atomic.OrUint64: on amd64 that is a LOCK OR, which waits for
// every store before it to drain and keeps the loads after it from
// starting early; in a bulk load (BenchmarkBulkLoad, a million items into
// a 14-link chain) it was a third of the adds' time. A plain OR of an
// aligned word is one store, which a reader's atomic load sees whole,
// old or new (amd64 neither tears it nor lets a store pass an earlier
// load or store, which is all the Freeze's copy-on-write and the readers
// rely on); the lock guards only against a second writer, and there is
// none. Race-detector builds, and other architectures, whose stores may be
// reordered, keep the atomic (orword_other.go).
func orWord(w *uint64, mask uint64) { *w |= mask }
