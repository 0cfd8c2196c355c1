package replication

import (
	"io"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/cockroachdb/pebble/v2/vfs"
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

// Create starts a snapshot whose stream is written back as it goes
// (pacedSink).
func (s *snapshotStore) Create(version raft.SnapshotVersion, index, term uint64, configuration raft.Configuration,
	configurationIndex uint64, trans raft.Transport) (raft.SnapshotSink, error) {
	sink, err := s.FileSnapshotStore.Create(version, index, term, configuration, configurationIndex, trans)
	if err != nil {
		return nil, err
	}
	// Where raft.FileSnapshotStore writes the stream until Close (its
	// tmpSuffix and stateFilePath). Not there: the stream goes unpaced.
	f, err := vfs.Default.Open(filepath.Join(s.dir, sink.ID()+".tmp", "state.bin"))
	if err != nil {
		return sink, nil
	}
	return &pacedSink{SnapshotSink: sink, f: f}, nil
}

// pacedSink asks the kernel to write a snapshot's stream back every
// snapshotBytesPerSync bytes, waiting for the piece before (as Pebble
// does for its tables, and Redis for its RDB files with
// rdb-save-incremental-fsync): Raft's sink syncs only at Close, and a
// gigabyte left dirty until then would hold the Raft log's next sync, and
// every durable write with it, behind the whole of it. f is the same file
// opened for this alone.
type pacedSink struct {
	raft.SnapshotSink
	f               vfs.File
	written, synced int64
}

const snapshotBytesPerSync = 1 << 20

func (p *pacedSink) Write(b []byte) (int, error) {
	n, err := p.SnapshotSink.Write(b)
	p.written += int64(n)
	// The last MiB stays out of it: the sink's buffer may hold its end.
	if to := p.written - 1<<20; to-p.synced >= snapshotBytesPerSync {
		to -= to % 4096
		if _, serr := p.f.SyncTo(to); serr == nil {
			p.synced = to
		}
	}
	return n, err
}

func (p *pacedSink) Close() error {
	defer p.f.Close()
	return p.SnapshotSink.Close()
}

func (p *pacedSink) Cancel() error {
	defer p.f.Close()
	return p.SnapshotSink.Cancel()
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
