package replication

import (
	"io"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"sync"

	"github.com/bfserver/bfserver/internal/shrink"
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
//
// It reaps old snapshots itself (reap), gently, after each new one is in
// place: Raft's store removes them inside the sink's Close with one
// RemoveAll, and unlinking a gigabyte's stream at once held the Raft
// log's syncs (package shrink).
type snapshotStore struct {
	*raft.FileSnapshotStore
	dir string // the store's own directory, which holds one per snapshot

	mu      sync.Mutex
	open    map[string]int // snapshots being read, by id: not shrunk
	reaping sync.WaitGroup
}

// keepSnapshots is how many snapshots the store keeps: the newest, and one
// to fall back on should it not open.
const keepSnapshots = 2

// newSnapshotStore opens the store in base, keeping the newest two.
func newSnapshotStore(base string, hl hclog.Logger) (*snapshotStore, error) {
	// Raft's store never reaps (its retain is past any count kept); it
	// lists every snapshot, newest first, which reap then trims.
	fs, err := raft.NewFileSnapshotStoreWithLogger(base, math.MaxInt32, hl)
	if err != nil {
		return nil, err
	}
	// Where raft.FileSnapshotStore keeps them (its snapPath).
	s := &snapshotStore{FileSnapshotStore: fs, dir: filepath.Join(base, "snapshots"), open: map[string]int{}}
	s.reap()
	return s, nil
}

// reap removes the snapshots past the newest keepSnapshots, on a goroutine
// of its own: each stream shrinks a step at a time first, unless it is
// being read.
func (s *snapshotStore) reap() {
	metas, err := s.FileSnapshotStore.List()
	if err != nil || len(metas) <= keepSnapshots {
		return
	}
	s.reaping.Add(1)
	go func() {
		defer s.reaping.Done()
		for _, m := range metas[keepSnapshots:] {
			dir := filepath.Join(s.dir, m.ID)
			s.mu.Lock()
			reading := s.open[m.ID] > 0
			s.mu.Unlock()
			if !reading {
				shrink.File(vfs.Default, filepath.Join(dir, "state.bin"))
			}
			os.RemoveAll(dir)
		}
	}()
}

// wait waits for the reaping under way.
func (s *snapshotStore) wait() { s.reaping.Wait() }

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
	p := &pacedSink{SnapshotSink: sink, store: s, path: filepath.Join(s.dir, sink.ID()+".tmp", "state.bin")}
	if p.f, err = vfs.Default.Open(p.path); err != nil {
		p.f = nil
	}
	return p, nil
}

// pacedSink asks the kernel to write a snapshot's stream back every
// snapshotBytesPerSync bytes, waiting for the piece before (as Pebble
// does for its tables, and Redis for its RDB files with
// rdb-save-incremental-fsync): Raft's sink syncs only at Close, and a
// gigabyte left dirty until then would hold the Raft log's next sync, and
// every durable write with it, behind the whole of it. f is the same file
// opened for this alone (nil where it could not be). Once the snapshot is
// in place it reaps the old ones (snapshotStore.reap).
type pacedSink struct {
	raft.SnapshotSink
	f               vfs.File
	store           *snapshotStore
	path            string // the stream's file until Close
	written, synced int64
}

const snapshotBytesPerSync = 1 << 20

func (p *pacedSink) closeFile() {
	if p.f != nil {
		p.f.Close()
	}
}

func (p *pacedSink) Write(b []byte) (int, error) {
	n, err := p.SnapshotSink.Write(b)
	p.written += int64(n)
	// The last MiB stays out of it: the sink's buffer may hold its end.
	if to := p.written - 1<<20; p.f != nil && to-p.synced >= snapshotBytesPerSync {
		to -= to % 4096
		if _, serr := p.f.SyncTo(to); serr == nil {
			p.synced = to
		}
	}
	return n, err
}

func (p *pacedSink) Close() error {
	p.closeFile()
	err := p.SnapshotSink.Close()
	if err == nil {
		p.store.reap()
	}
	return err
}

// Cancel removes what was written, shrinking it first (a stream given up
// may be most of a gigabyte).
func (p *pacedSink) Cancel() error {
	p.closeFile()
	shrink.File(vfs.Default, p.path)
	return p.SnapshotSink.Cancel()
}

// Open opens a stored snapshot.
func (s *snapshotStore) Open(id string) (*raft.SnapshotMeta, io.ReadCloser, error) {
	meta, rc, err := s.FileSnapshotStore.Open(id)
	if err != nil {
		return nil, nil, err
	}
	s.mu.Lock()
	s.open[id]++
	s.mu.Unlock()
	return meta, &storedSnapshot{ReadCloser: rc, id: id, dir: filepath.Join(s.dir, id), store: s}, nil
}

// storedSnapshot is one opened snapshot's stream.
type storedSnapshot struct {
	io.ReadCloser
	id, dir string
	log     *slog.Logger // set by discard: remove the snapshot at Close
	store   *snapshotStore
}

// discard marks the snapshot for removal when it is closed.
func (s *storedSnapshot) discard(log *slog.Logger) { s.log = log }

func (s *storedSnapshot) Close() error {
	err := s.ReadCloser.Close()
	s.store.mu.Lock()
	if s.store.open[s.id]--; s.store.open[s.id] <= 0 {
		delete(s.store.open, s.id)
	}
	s.store.mu.Unlock()
	if s.log != nil {
		if rerr := os.RemoveAll(s.dir); rerr != nil {
			s.log.Error("removing a damaged snapshot", "id", s.id, "err", rerr)
		} else {
			s.log.Warn("removed a damaged snapshot", "id", s.id)
		}
	}
	return err
}
