// Package replication runs the Raft node: hashicorp/raft with a
// raft-boltdb/v2 log, the state machine over keyspace and persistence,
// group commit, forwarding of writes from followers, linearizable read
// barriers and membership. A single node is a one-voter cluster: the same
// code path from one node to many.
//
// Flows: Write → batcher (proposals that arrive while the log is being
// written share the next entry) → raft.Apply → fsm.Apply on every node
// → reply after the local apply; a follower forwards its batch to the
// leader's RESP address and waits until it applied the returned index.
// Barrier → on a leader holding a lease (or the only voter), its read
// index at once; otherwise one read-index round shared by concurrent reads
// (leader: VerifyLeader, and a lease renewal through an empty entry;
// follower: asks the leader) → wait for the local applied index. The read
// index is the commit index, narrowed to the latest entry that carried a
// command.
//
// State and locks: fsm.mu excludes Apply from image flushes and snapshot
// installs; fsm.flushMu orders image writes; readers never lock.
//
// Trade-offs: leases save a heartbeat round per read batch on the leader and
// trust the nodes' clocks to run at the same rate (Options.NoReadLease turns
// them off). The image is flushed every FlushInterval (30 s by default) and
// before snapshots, so restart replays at most that much log; snapshots
// copy the whole image (simple and atomic, costly for very large data sets).
package replication
