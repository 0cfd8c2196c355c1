// Package keyspace is the deterministic state machine: 16 databases of keys
// holding Bloom chains, Cuckoo filters or plain strings, with Redis's TYPE,
// DEL, RENAME and EXPIRE semantics.
//
// Flows: Apply executes a command from the log and returns a typed Result;
// Read answers read commands from current state; TakeChanges lists what
// changed for the durable image, LoadValue/LoadChunk rebuild from it;
// EncodeDump and RESTORE speak Redis's DUMP format.
//
// State and locks: a key lookup (Lookup) takes no lock: each database's
// key table (keytable.go) is read lock-free beside its one writer, and a
// value's expiry is read atomically. Table changes, and readers of many
// keys, take the database's RWMutex; filters protect their own contents.
// Apply must run on one goroutine at a time; Read may run beside it.
// The apply side keeps two one-entry memories that only it touches: the
// value it looked up last (forgotten on every change to a key table) and
// the key it last recorded as changed (forgotten when the record is
// taken). A log entry's hundreds of writes to one filter then hash its
// key once, not four or five times each. ApplyEntry may start one more
// goroutine for an entry of large BF.MADDs (pretest.go): it tests later
// commands' items against their chains' older links, which no add
// changes, while Apply adds the earlier ones; it reads as Lookup does and
// ends with the entry.
//
// Trade-offs: Apply is a pure function of the command sequence: time comes
// from the command (stamped by the receiving node), configuration and caps
// too, and nothing draws randomness (a key table's hash seed is random, as
// a Go map's is, and decides only where a key sits). SCAN's cursor is a
// position in sorted key order (simple, and stable across replicas)
// rather than Redis's hash cursor.
package keyspace
