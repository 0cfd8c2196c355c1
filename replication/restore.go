package replication

import (
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/bfserver/bfserver/persistence"
	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
)

// RestoreBackup makes dataDir the data directory of a new node holding
// what a backup (BFBACKUP's file) holds: the image, with the node as the
// only member, and a Raft snapshot of it at the backup's index in a
// cluster of that one voter. A node started on it with the same id and
// addresses leads that cluster and carries on from the backup's index; a
// node that joins it installs the snapshot, since the log holds nothing
// before it. The backup's own cluster and members are not carried over.
// The log it writes is raft-wal's; a node started with another log store
// moves it into that one.
func RestoreBackup(dataDir, nodeID, raftAddr, respAddr string, backup io.Reader) error {
	for _, p := range []string{"raft.db", "wal", "snapshots"} {
		if _, err := os.Stat(filepath.Join(dataDir, p)); err == nil {
			return fmt.Errorf("%s already holds a node (%s): restore into an empty directory", dataDir, p)
		}
	}
	if nodeID == "" {
		nodeID = raftAddr
	}
	store, err := persistence.Open(persistence.Options{Dir: filepath.Join(dataDir, "image")})
	if err != nil {
		return err
	}
	defer store.Close()
	members, _ := json.Marshal(map[string]string{nodeID: respAddr})
	voters, _ := json.Marshal([]string{nodeID})
	if err := store.RestoreBackup(backup, map[string][]byte{membersKey: members, votersKey: voters}); err != nil {
		return err
	}
	index, err := store.Applied()
	if err != nil {
		return err
	}
	index = max(index, 1)
	// Raft starts from a snapshot of exactly this image, in term 1.
	logs, err := openLogStore(dataDir, LogStoreWAL, true, slog.Default())
	if err != nil {
		return err
	}
	defer logs.Close()
	if err := logs.SetUint64([]byte("CurrentTerm"), 1); err != nil {
		return err
	}
	snaps, err := raft.NewFileSnapshotStoreWithLogger(filepath.Join(dataDir, "snapshots"), 2, hclog.NewNullLogger())
	if err != nil {
		return err
	}
	_, trans := raft.NewInmemTransport(raft.ServerAddress(raftAddr))
	conf := raft.Configuration{Servers: []raft.Server{{ID: raft.ServerID(nodeID), Address: raft.ServerAddress(raftAddr)}}}
	sink, err := snaps.Create(raft.SnapshotVersionMax, index, 1, conf, index, trans)
	if err != nil {
		return err
	}
	if err := store.WriteSnapshot(sink); err != nil {
		sink.Cancel()
		return err
	}
	if err := sink.Close(); err != nil {
		return err
	}
	return recordNodeID(dataDir, nodeID) // the id the snapshot's configuration names
}
