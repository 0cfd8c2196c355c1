// Package server serves Redis clients: connections (event loops, or a
// goroutine each), per-connection state (protocol, database, auth, name,
// MULTI), the command table, the handlers and their replies, and the
// operators' commands (CLIENT, INFO, CONFIG, SLOWLOG, LATENCY, MONITOR).
// It knows nothing of Raft or storage: it talks to a Backend (and, for a
// replicated one, a Cluster) that it declares. The wire protocol is
// package resp's, the commands' metadata cmdinfo's, ACL rules acl's.
//
// Flows: a connection's input is read when it is ready (evloop.go), every
// complete command parsed with lengths checked before use, and the
// commands run in order: writes are parsed into commands with every
// default resolved and batched until a read or the end of the input, then
// sent to the backend as one Write; reads wait for one read barrier per
// batch of input, then read the keyspace directly. Replies go out in one
// write per batch. On an event loop, a batch runs on the loop until a
// command that could wait; the rest of it runs on a goroutine. A write
// that ends its batch, while the backend writes alone (WritesLocally), is
// instead left for the loop's turn to end: the loop sends that turn's
// writes as one Write and answers them itself (turnEnd).
//
// State and locks: a session belongs to whoever serves it (its loop, or
// the goroutine it is parked with or has), and publishes what other
// connections may read of it (CLIENT LIST, KILL) in atomics after each
// command; the server's client table, the CONFIG SET settings, the ACL
// LOG, the slow log, the latency monitor and the MONITOR set have their
// own mutexes. ACL users come from the backend's replicated user table
// (UserTable), parsed once per table version into an immutable set behind
// an atomic pointer; a session compares the version before each command.
// Every command is accounted once its reply is rendered (admin.go), which
// is where INFO's counters, the slow log, the latency monitor and MONITOR
// see it. A batch's commands point into the session's query buffer and
// arenas, which are reused only once the backend answered the batch for
// certain: after an error (an unknown outcome above all) the log may
// still encode them, so the session moves to fresh memory instead.
//
// Trade-offs: the reader is ours, not redcon's (whose reader panics or
// spins on hostile lengths); errors are written verbatim because
// RedisBloom's have no ERR prefix.
package server
