package replication

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/bfserver/bfserver/command"
	"github.com/bfserver/bfserver/internal/atomicfile"
	"github.com/bfserver/bfserver/internal/wire"
	"github.com/hashicorp/raft"
)

// Join implements resp.Cluster: add a voter (on the leader; a follower
// asks the leader over the peer protocol), then record its RESP address
// through the log.
func (n *Node) Join(ctx context.Context, id, raftAddr, respAddr string) error {
	if !n.IsLeader() {
		_, addr := n.leaderRaft()
		if addr == "" {
			return command.ErrNoLeader
		}
		b := wire.AppendBytes(nil, []byte(id))
		b = wire.AppendBytes(b, []byte(raftAddr))
		b = wire.AppendBytes(b, []byte(respAddr))
		_, err := n.peers.call(ctx, addr, reqJoin, b)
		return peerCallErr(err)
	}
	if err := n.probe(ctx, raftAddr); err != nil {
		return err
	}
	if err := n.raft.AddVoter(raft.ServerID(id), raft.ServerAddress(raftAddr), 0, 10*time.Second).Error(); err != nil {
		return &RemoteError{Msg: err.Error()}
	}
	_, _, err := n.propose(ctx, []*command.Cmd{{Op: command.SetMember, Key: []byte(id), Data: []byte(respAddr)}})
	return err
}

// Remove implements resp.Cluster.
func (n *Node) Remove(ctx context.Context, id string) error {
	if !n.IsLeader() {
		_, addr := n.leaderRaft()
		if addr == "" {
			return command.ErrNoLeader
		}
		_, err := n.peers.call(ctx, addr, reqRemove, wire.AppendBytes(nil, []byte(id)))
		return peerCallErr(err)
	}
	if err := n.raft.RemoveServer(raft.ServerID(id), 0, 10*time.Second).Error(); err != nil {
		return &RemoteError{Msg: err.Error()}
	}
	_, _, err := n.propose(ctx, []*command.Cmd{{Op: command.DelMember, Key: []byte(id)}})
	return err
}

// probe checks, before a node becomes a voter, that the leader reaches its
// Raft port and that the two authenticate each other: a voter that cannot
// take part (another secret, a certificate the cluster refuses, a port
// nobody reaches) would count toward every quorum, and a rogue node must
// not receive the snapshot.
func (n *Node) probe(ctx context.Context, raftAddr string) error {
	if n.opts.ownSecret {
		return &RemoteError{Msg: "this node has no cluster secret (cluster-secret) or cluster TLS (tls-cluster): give every node the same one to form a cluster"}
	}
	pctx, cancel := context.WithTimeout(ctx, dialTimeout)
	defer cancel()
	c, err := n.peers.dial(pctx, raftAddr, muxPeer)
	if err != nil {
		return &RemoteError{Msg: fmt.Sprintf("the joining node's Raft port %s did not authenticate with this cluster (%v): every node needs the same cluster secret or a certificate the cluster accepts", raftAddr, err)}
	}
	c.Close()
	return nil
}

// peerCallErr: a request that never reached the leader found none.
func peerCallErr(err error) error {
	if err == errDial {
		return command.ErrNoLeader
	}
	return err
}

// Members implements resp.Cluster: id, Raft address, RESP address.
func (n *Node) Members() ([][3]string, error) {
	f := n.raft.GetConfiguration()
	if err := f.Error(); err != nil {
		return nil, err
	}
	addrs := n.fsm.memberList()
	var out [][3]string
	for _, s := range f.Configuration().Servers {
		out = append(out, [3]string{string(s.ID), string(s.Address), addrs[string(s.ID)]})
	}
	sort.Slice(out, func(i, j int) bool { return out[i][0] < out[j][0] })
	return out, nil
}

// Snapshot implements resp.Cluster (SAVE, BGSAVE): a Raft snapshot of this
// node, its image written and frozen, so that the log before it can be
// truncated. A node with nothing new since its last snapshot has one
// already.
func (n *Node) Snapshot(ctx context.Context) error {
	if err := n.HaltErr(); err != nil {
		return err
	}
	if !n.snapping.CompareAndSwap(false, true) {
		return errSnapshotRunning
	}
	defer n.snapping.Store(false)
	done := make(chan error, 1)
	go func() { done <- n.snapshot().Error() }()
	select {
	case err := <-done:
		if err != nil && !errors.Is(err, raft.ErrNothingNewToSnapshot) {
			return err
		}
	case <-ctx.Done():
		return ctx.Err()
	}
	n.lastSave.Store(time.Now().Unix())
	return nil
}

// LastSnapshot implements resp.Cluster (LASTSAVE): when this node's latest
// snapshot completed, or when it started.
func (n *Node) LastSnapshot() time.Time { return time.Unix(n.lastSave.Load(), 0) }

// Backup implements resp.Cluster (BFBACKUP): a consistent copy of this
// node's state, written to path inside Options.BackupDir (backupName;
// package atomicfile: a path never holds half a backup). bfserver restore turns it
// into the data directory of a new node. It returns the log index the copy
// is at.
func (n *Node) Backup(ctx context.Context, path string) (uint64, error) {
	if err := n.HaltErr(); err != nil {
		return 0, err
	}
	name, err := n.backupName(path)
	if err != nil {
		return 0, err
	}
	root, err := os.OpenRoot(n.opts.BackupDir)
	if err != nil {
		return 0, fmt.Errorf("%w: %v", ErrBackupPath, err)
	}
	defer root.Close()
	var idx uint64
	err = atomicfile.WriteIn(root, name, 0o600, func(w io.Writer) (err error) {
		idx, err = n.fsm.backup(w)
		return err
	})
	if err != nil {
		return 0, err
	}
	return idx, nil
}

// Reload implements resp.Cluster (DEBUG RELOAD): the image is written and
// the keyspace loaded back from it, as a restart would.
func (n *Node) Reload(ctx context.Context) error { return n.fsm.reload() }

// ChangesSinceSnapshot is INFO persistence's rdb_changes_since_last_save:
// the log entries this node applied after its latest snapshot.
func (n *Node) ChangesSinceSnapshot() uint64 {
	snap, _ := strconv.ParseUint(n.raft.Stats()["last_snapshot_index"], 10, 64)
	return n.fsm.applied.Load() - min(snap, n.fsm.applied.Load())
}

// ReplicationInfo implements resp.Cluster: INFO replication in Redis's
// words, so that Redis tools understand it (role:master on the leader,
// role:slave with the leader's RESP address on a follower, the followers
// as slaveN lines), then Raft's own state in fields of its own.
func (n *Node) ReplicationInfo() [][2]string {
	state := n.raft.State()
	raftRole := strings.ToLower(state.String())
	leaderID, _ := n.leaderRaft()
	leaderAddr := ""
	if leaderID != "" {
		leaderAddr = n.fsm.memberAddr(leaderID)
	}
	commit := n.raft.CommitIndex()
	applied := n.fsm.applied.Load()
	members, _ := n.Members()
	var info [][2]string
	add := func(k, v string) { info = append(info, [2]string{k, v}) }
	if state == raft.Leader {
		add("role", "master")
		var slaves [][3]string
		for _, m := range members {
			if m[0] != n.opts.NodeID {
				slaves = append(slaves, m)
			}
		}
		add("connected_slaves", strconv.Itoa(len(slaves)))
		for i, m := range slaves {
			host, port, _ := net.SplitHostPort(m[2])
			add("slave"+strconv.Itoa(i), "ip="+host+",port="+port+",state=online,offset="+strconv.FormatUint(commit, 10)+",lag=0")
		}
	} else {
		add("role", "slave")
		host, port, _ := net.SplitHostPort(leaderAddr)
		link := "up"
		if leaderAddr == "" {
			link = "down"
		}
		add("master_host", host)
		add("master_port", port)
		add("master_link_status", link)
		add("master_last_io_seconds_ago", "0")
		add("master_sync_in_progress", "0")
		add("slave_read_repl_offset", strconv.FormatUint(applied, 10))
		add("slave_repl_offset", strconv.FormatUint(applied, 10))
		add("slave_priority", "100")
		add("slave_read_only", "0")
		add("replica_announced", "1")
		add("connected_slaves", "0")
	}
	id := sha1.Sum([]byte(n.opts.NodeID + "/" + n.raft.Stats()["term"]))
	add("master_failover_state", "no-failover")
	add("master_replid", hex.EncodeToString(id[:]))
	add("master_replid2", "0000000000000000000000000000000000000000")
	add("master_repl_offset", strconv.FormatUint(commit, 10))
	add("second_repl_offset", "-1")
	add("repl_backlog_active", "0")
	add("repl_backlog_size", "0")
	add("repl_backlog_first_byte_offset", "0")
	add("repl_backlog_histlen", "0")
	// Raft's own state.
	stats := n.raft.Stats()
	add("raft_role", raftRole)
	add("raft_node_id", n.opts.NodeID)
	add("raft_leader_id", leaderID)
	add("raft_leader_addr", leaderAddr)
	add("raft_term", stats["term"])
	add("commit_index", strconv.FormatUint(commit, 10))
	add("applied_index", strconv.FormatUint(applied, 10))
	add("last_log_index", strconv.FormatUint(n.raft.LastIndex(), 10))
	add("fsync", n.opts.Fsync)
	add("read_lease", strconv.FormatBool(!n.opts.NoReadLease))
	add("leader_rounds", strconv.FormatUint(n.rounds.Load(), 10))
	add("lease_renewals", strconv.FormatUint(n.renewals.Load(), 10))
	add("follower_read_lease", strconv.FormatBool(n.followerLeases()))
	add("follower_lease", strconv.FormatBool(n.holdsLease()))
	add("follower_lease_requests", strconv.FormatUint(n.leaseAsks.Load(), 10))
	add("read_index_requests", strconv.FormatUint(n.readRPCs.Load(), 10))
	add("lease_holders", strconv.Itoa(n.holders.count()))
	ready, why := n.Ready()
	add("raft_ready", strconv.FormatBool(ready))
	if !ready {
		add("raft_not_ready_reason", why)
	}
	var parts []string
	for _, m := range members {
		parts = append(parts, m[0]+"@"+m[2]+"/"+m[1])
	}
	add("raft_members", strings.Join(parts, ","))
	add("raft_num_members", strconv.Itoa(len(members)))
	return info
}

// MemoryInfo is this node's part of INFO memory's breakdown: what the
// image holds in memory (Pebble's block cache and memtables) and what the
// log does (entries proposed here and not yet applied; Raft reads the
// rest of its log from the log store's file).
func (n *Node) MemoryInfo() (image, log uint64) {
	return n.store.Stats().MemoryBytes, uint64(n.inflight.held())
}

// ImageInfo is INFO persistence's account of the image's writes since the
// node started: tables ingested, the filter bytes they carried, the bytes
// written for them (their files and Pebble's compactions), the ratio
// of the two, the image's write amplification, the snapshots installed
// and refused as damaged, and what the latest flush's copy-on-write cost
// (chunks Apply copied, the most bytes held in copies at once; and how
// often, since start, Apply waited on the copies' budget).
func (n *Node) ImageInfo() [][2]string {
	st := n.store.Stats()
	amp := "0.00"
	if st.ValueBytes > 0 {
		amp = strconv.FormatFloat(float64(st.TableBytes+st.CompactedBytes)/float64(st.ValueBytes), 'f', 2, 64)
	}
	u := func(v uint64) string { return strconv.FormatUint(v, 10) }
	return [][2]string{
		{"image_tables_ingested", u(st.Tables)},
		{"image_value_bytes", u(st.ValueBytes)},
		{"image_table_bytes_written", u(st.TableBytes)},
		{"image_compaction_bytes_written", u(st.CompactedBytes)},
		{"image_write_amplification", amp},
		{"image_disk_bytes", u(st.DiskBytes)},
		{"image_base_bytes", u(st.BaseBytes)},
		{"image_base_bytes_written", u(st.BaseWritten)},
		{"image_base_loaded_bytes", u(st.BaseLoaded)},
		{"image_snapshots_installed", u(n.fsm.installed.Load())},
		{"image_snapshots_refused", u(n.fsm.refused.Load())},
		{"image_cut_copied_chunks", u(n.fsm.cutCopies.Load())},
		{"image_cut_copied_lines", u(n.fsm.cutLines.Load())},
		{"image_cut_copied_peak_bytes", u(n.fsm.cutPeak.Load())},
		{"image_cut_budget_waits", u(n.fsm.cutWaits.Load())},
		{"image_cut_spilled_chunks", u(n.fsm.cutSpills.Load())},
	}
}
