package replication

import (
	"bytes"
	"fmt"
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
//
// A snapshot this node takes is a reference to its image rather than a
// copy of it (reference: refMagic and the node's id): the image already holds the snapshot's
// state durably when Raft asks (fsm's Persist writes it first), and
// copying it cost a core-second and S bytes of disk writes per snapshot
// of 1M small filters (250 MB), beside the writes it held up, and 2 × S
// of disk for the two kept. Open streams such a snapshot from a frozen
// view of the live image (image), which may be past the snapshot's index:
// the node that installs it skips the log entries its image covers, as
// at every start. A snapshot received from a leader is its stream, kept
// whole until it is installed.
type snapshotStore struct {
	*raft.FileSnapshotStore
	dir   string // the store's own directory, which holds one per snapshot
	self  string // this node's id, which its references name
	image func() imageView

	mu      sync.Mutex
	open    map[string]int // snapshots being read, by id: not shrunk
	reaping sync.WaitGroup
}

// imageView is a frozen view of the node's image (persistence.Snapshot),
// which a reference snapshot is streamed from.
type imageView interface {
	Applied() (uint64, error)
	Stream(w io.Writer) error
	Close() error
}

// refMagic begins a reference snapshot, followed by the id of the node
// whose image it refers to (reference). It has the length of
// persistence's stream headers (bfsnap2\n), and no stream of an image
// begins with it.
const refMagic = "bfsnapR\n"

// reference is the whole of a snapshot node self takes. A reference
// naming another node (one that a node gone back to an earlier build,
// which reads no references, sent as its stream) is opened as a stream,
// which Restore refuses as damaged and removes.
func reference(self string) []byte { return append([]byte(refMagic), self...) }

// keepSnapshots is how many snapshots the store keeps: the newest, and one
// to fall back on should it not open.
const keepSnapshots = 2

// newSnapshotStore opens the store in base, keeping the newest two; image
// freezes the image of node self, for the snapshots that refer to it.
func newSnapshotStore(base, self string, image func() imageView, hl hclog.Logger) (*snapshotStore, error) {
	// Raft's store never reaps (its retain is past any count kept); it
	// lists every snapshot, newest first, which reap then trims.
	fs, err := raft.NewFileSnapshotStoreWithLogger(base, math.MaxInt32, hl)
	if err != nil {
		return nil, err
	}
	// Where raft.FileSnapshotStore keeps them (its snapPath).
	s := &snapshotStore{FileSnapshotStore: fs, dir: filepath.Join(base, "snapshots"), self: self, image: image, open: map[string]int{}}
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
	p := &pacedSink{SnapshotSink: sink, store: s, index: index, path: filepath.Join(s.dir, sink.ID()+".tmp", "state.bin")}
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
	index           uint64 // the snapshot's, for a Persist that refers to the image
	path            string // the stream's file until Close
	written, synced int64
}

const snapshotBytesPerSync = 1 << 20

// Index is the snapshot's log index.
func (p *pacedSink) Index() uint64 { return p.index }

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

// Open opens a stored snapshot: a stream received whole, or one that
// refers to the image, streamed from it (openRef).
func (s *snapshotStore) Open(id string) (*raft.SnapshotMeta, io.ReadCloser, error) {
	meta, rc, err := s.FileSnapshotStore.Open(id)
	if err != nil {
		return nil, nil, err
	}
	// This node's reference, and one byte more to see that nothing follows.
	ref := reference(s.self)
	head := make([]byte, len(ref)+1)
	n, err := io.ReadFull(rc, head)
	if err == io.ErrUnexpectedEOF && string(head[:n]) == string(ref) {
		rc.Close()
		return s.openRef(meta)
	}
	// A stream: what was read of it goes first.
	rc = struct {
		io.Reader
		io.Closer
	}{io.MultiReader(bytes.NewReader(head[:n]), rc), rc}
	s.mu.Lock()
	s.open[id]++
	s.mu.Unlock()
	return meta, &storedSnapshot{ReadCloser: rc, id: id, dir: filepath.Join(s.dir, id), store: s}, nil
}

// openRef streams a snapshot that refers to the image from a frozen view
// of it, refused if the view is behind the snapshot. Raft sends a
// snapshot's size before its bytes, so the view is streamed once to count
// them (the stream of a frozen view is the same each time): a
// core-second for 250 MB, paid only when a follower needs the snapshot.
func (s *snapshotStore) openRef(meta *raft.SnapshotMeta) (*raft.SnapshotMeta, io.ReadCloser, error) {
	if s.image == nil {
		return nil, nil, fmt.Errorf("snapshot %s: %w", meta.ID, errImageBehind)
	}
	view := s.image()
	at, err := view.Applied()
	if err == nil && at < meta.Index {
		err = fmt.Errorf("snapshot %s at index %d, image at %d: %w", meta.ID, meta.Index, at, errImageBehind)
	}
	var size countWriter
	if err == nil {
		err = view.Stream(&size)
	}
	if err != nil {
		view.Close()
		return nil, nil, err
	}
	m := *meta
	m.Size = int64(size)
	pr, pw := io.Pipe()
	r := &refStream{PipeReader: pr, view: view, done: make(chan struct{})}
	go func() {
		defer close(r.done)
		pw.CloseWithError(view.Stream(pw))
	}()
	return &m, r, nil
}

// countWriter counts what is written to it.
type countWriter int64

func (c *countWriter) Write(p []byte) (int, error) {
	*c += countWriter(len(p))
	return len(p), nil
}

// refStream is a reference snapshot's stream, written into the pipe by a
// goroutine of its own from view. Close stops it and lets the view go.
type refStream struct {
	*io.PipeReader
	view imageView
	done chan struct{}
}

func (r *refStream) Close() error {
	r.PipeReader.CloseWithError(errClosed)
	<-r.done
	return r.view.Close()
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
