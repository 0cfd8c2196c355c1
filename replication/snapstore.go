package replication

import (
	"io"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
)

// snapshotStore is Raft's file snapshot store whose snapshots, once
// opened, know their own directory. A stored snapshot whose stream
// Restore refuses as damaged (a follower stores what the leader sent
// before it installs it) is removed when it is closed: otherwise a restart
// would take its index as applied and try to install it again, and this
// node, leading, could send it on.
type snapshotStore struct {
	*raft.FileSnapshotStore
	dir string // the store's own directory, which holds one per snapshot
}

// newSnapshotStore opens the store in base, keeping the newest two.
func newSnapshotStore(base string, hl hclog.Logger) (*snapshotStore, error) {
	fs, err := raft.NewFileSnapshotStoreWithLogger(base, 2, hl)
	if err != nil {
		return nil, err
	}
	// Where raft.FileSnapshotStore keeps them (its snapPath).
	return &snapshotStore{FileSnapshotStore: fs, dir: filepath.Join(base, "snapshots")}, nil
}

// Open opens a stored snapshot.
func (s *snapshotStore) Open(id string) (*raft.SnapshotMeta, io.ReadCloser, error) {
	meta, rc, err := s.FileSnapshotStore.Open(id)
	if err != nil {
		return nil, nil, err
	}
	return meta, &storedSnapshot{ReadCloser: rc, id: id, dir: filepath.Join(s.dir, id)}, nil
}

// storedSnapshot is one opened snapshot's stream.
type storedSnapshot struct {
	io.ReadCloser
	id, dir string
	log     *slog.Logger // set by discard: remove the snapshot at Close
}

// discard marks the snapshot for removal when it is closed.
func (s *storedSnapshot) discard(log *slog.Logger) { s.log = log }

func (s *storedSnapshot) Close() error {
	err := s.ReadCloser.Close()
	if s.log != nil {
		if rerr := os.RemoveAll(s.dir); rerr != nil {
			s.log.Error("removing a damaged snapshot", "id", s.id, "err", rerr)
		} else {
			s.log.Warn("removed a damaged snapshot", "id", s.id)
		}
	}
	return err
}
