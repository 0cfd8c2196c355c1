// Package resp serves the Redis protocol: bounded RESP2/RESP3 framing,
// per-connection state (protocol, database, auth, name, MULTI), the command
// table and reply rendering. It knows nothing of Raft or storage: it talks
// to a Backend (and, for a replicated one, a Cluster) that it declares.
//
// Flows: a connection goroutine reads what is available, parses every
// complete command with lengths checked before use, and runs them in order:
// writes are parsed into commands with every default resolved and batched
// until a read or the end of the input, then sent to the backend as one
// Write; reads wait for one read barrier per batch of input, then read the
// keyspace directly. Replies go out in one write per batch.
//
// State and locks: a session belongs to its goroutine, and publishes what
// other connections may read of it (CLIENT LIST, KILL) in atomics after
// each command; the server's client table, the CONFIG SET settings, the
// ACL LOG, the slow log, the latency monitor and the MONITOR set have their
// own mutexes. ACL users come from the backend's replicated user table
// (UserTable), parsed once per table version into an immutable set behind
// an atomic pointer; a session compares the version before each command.
// Every command is accounted once its reply is rendered (admin.go), which
// is where INFO's counters, the slow log, the latency monitor and MONITOR
// see it. A batch's
// commands point into the session's query buffer and arenas, which are
// reused only once the backend answered the batch for certain: after an
// error (an unknown outcome above all) the log may still encode them, so
// the session moves to fresh memory instead.
//
// Trade-offs: the reader is ours, not redcon's (whose reader panics or spins
// on hostile lengths); errors are written verbatim because RedisBloom's have
// no ERR prefix.
package server
