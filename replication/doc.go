// Package replication runs the Raft node: hashicorp/raft with a
// raft-boltdb/v2 log, the state machine over keyspace and persistence,
// group commit, forwarding of writes from followers, linearizable read
// barriers and membership. A single node is a one-voter cluster: the same
// code path from one node to many. A lone voter stands for election as it
// starts (campaign: Raft's TimeoutNow, sent to itself) rather than after
// the heartbeat timeout, and serves reads before its election
// (fsm.replayTail).
//
// Flows: Write → batcher (proposals that arrive while the log is being
// written share the next entry, encoded as each joins) → raft.Apply → fsm.Apply on every node
// → reply after the local apply; a follower forwards its batch to the
// leader's RESP address and waits until it applied the returned index.
// While followers hold read leases, the leader's reply also waits until
// it has told each of them the entry is committed (readlease.go). A
// forwarded write nudges the batcher to append the next entry, so the
// forwarding follower learns of its commit at once.
// Barrier → on a leader holding a lease (or the only voter), its read
// index at once; on a follower holding a lease, the index it was granted
// at; otherwise one read-index round shared by concurrent reads (leader:
// VerifyLeader, and a lease renewal through an empty entry; follower: asks
// the leader) → wait for the local applied index. The read index is the
// commit index, narrowed to the latest entry that carried a command.
// leaseLoop, on followers reading linearizably: asks for a lease and
// renews it; a read under it waits for the latest index the leader told.
//
// State and locks: fsm.mu excludes Apply from taking a cut of the image
// (O(1); the cut is written beside Apply, keyspace.Cut) and from snapshot
// installs; fsm.cutMu and fsm.flushMu order image writes; readers never
// lock; the
// leader's lease holders sit behind holders.mu, taken by a write only
// while a follower holds a lease, and per message to a holder.
//
// Trade-offs: leases save a heartbeat round per read batch on the leader,
// and a request to the leader per read batch on a follower, and trust the
// nodes' clocks to run at the same rate (Options.NoReadLease turns them
// off). Follower leases make each write wait for a round trip to the
// followers that hold them (Options.NoFollowerLease turns those off).
// The image is flushed every FlushInterval (30 s by default) and before
// snapshots, so restart replays at most that much log. A snapshot is
// that write and a reference to the image, which is streamed from a
// frozen view of it only when a follower needs it (snapstore.go). A
// snapshot's image write runs in Persist, not in the state machine's
// call, so Apply goes on meanwhile; cutMu and then flushMu, held from the
// call to that write, keep later flushes behind it, and a flush still
// walking its cut when Raft asks for a snapshot is given up for the
// snapshot's. A snapshot stream ends with a checksum of its writer's
// (persistence); Restore refuses one that fails it before anything is
// swapped in, does not count it as a disk fault, and removes the stored
// copy (snapstore.go), so Raft tells the leader, which sends it again.
// The state machine prefetches the filter bits of the commands a few
// places ahead of the one it applies (keyspace.Prefetch).
package replication
