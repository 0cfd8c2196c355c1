// Package release is the stores of a structure's one writer that readers
// load, without a lock, with sync/atomic loads: a filter's bits
// (engine.Bloom) and the key table's slots (keyspace).
//
// Why not sync/atomic's stores: on amd64 they are locked instructions
// (XCHG, LOCK OR), which wait for every store before them to drain and
// keep the loads after them from starting. With one writer the lock buys
// nothing: an aligned 8-byte MOV is seen whole by a reader's load, old or
// new, and amd64 keeps stores in order with each other and with the loads
// before them (TSO), so a reader that sees a store sees every store made
// before it, which is what publishing a slot (its fields, then its
// control word) needs. The Go compiler does not reorder stores with each
// other or with atomic operations. Measured: a LOCK OR was a third of a
// bulk load's adds, and the key table's three atomic stores a slot about
// a tenth of creating a million small filters (docs/BENCHMARKS.md).
//
// What the callers owe: one writer at a time, ordered with the next by a
// lock or a channel. A second concurrent writer would lose updates, and
// the race detector could not tell: race builds take the atomics
// (release_other.go), as do other architectures, whose stores may be
// reordered.
package release
