package replication

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/bfserver/bfserver/internal/atomicfile"
	"github.com/bfserver/bfserver/internal/shrink"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	wal "github.com/hashicorp/raft-wal"
	walfs "github.com/hashicorp/raft-wal/fs"
	"github.com/hashicorp/raft-wal/metadb"
	"github.com/hashicorp/raft-wal/segment"
	"github.com/hashicorp/raft-wal/types"
)

// The raft-wal log store (Options.LogStore "wal"), in DataDir/wal: 64 MiB
// segment files that each batch of entries is appended to with one fsync,
// and raft-wal's meta store (wal-meta.db, bbolt) for the segment list and
// Raft's stable values (term, vote), written only at a rotation, a
// truncation or a vote, and always synced.
//
// Around raft-wal, walStore adds what this server needs of a log:
//   - --fsync everysec and no: raft-wal syncs every append. Its files go
//     through walFS, whose Sync only marks a file dirty unless every
//     append must be synced; Sync (once a second for everysec, and before
//     the image moves) syncs the dirty ones, and so does every commit of
//     the segment list, so the list never names a segment whose data
//     could be lost while it survives.
//   - Large entries: raft-wal reads no frame over 64 MiB back (it takes
//     the length for damage), and keeps its largest batch's buffer for as
//     long as the segment lives. An entry whose data exceeds asideBytes
//     is written to a file of its own under wal/aside (synced and renamed
//     into place before the entry is appended) and the log holds a stub
//     naming its length and CRC-32C; appends are cut into batches of at
//     most asideBytes of data.
//   - Segments raft-wal deletes (a truncation after a snapshot) go to
//     wal/trash and are removed there a step at a time (package shrink),
//     on a goroutine of their own: raft-wal deletes them while it holds
//     its write lock, so every append waited for the unlink of 64 MiB
//     files and, behind it, every fsync for ext4 to free their blocks.
//     Open empties the trash a crash left.
//   - A lock (wal/LOCK): raft-wal's meta store waits forever for another
//     process's lock; this one waits lockWait, as raft.db's does.
//   - A damaged entry that does not decode: raft-wal's decoder can panic
//     on one; GetLog returns an error instead (logcheck.go halts there).
//   - Entries truncated from the head of the tail segment: raft-wal still
//     reads them back; GetLog does not.
//   - The tail's recovery: raft-wal drops a final batch that fails its
//     checksum, and everything after a frame header it cannot read, as a
//     torn write. checkWALTail (waltail.go) refuses such a tail instead:
//     a batch that was synced was acknowledged. And a tail sealed by its
//     last append whose rotation a crash kept out of the segment list
//     would refuse every later append; checkWALTail completes it.
type walStore struct {
	*wal.WAL
	dir   string
	fs    *walFS
	meta  *walMeta
	lock  io.Closer
	aside string
	log   *slog.Logger

	closeOnce sync.Once
	closeErr  error
}

// asideBytes: entries with more data are stored aside (above), and no
// append carries more data than this, bar one entry. 2 MiB keeps a bulk
// load's 1 MiB LOADCHUNK pieces in the log.
const asideBytes = 2 << 20

// lockWait is how long a start waits for another process to release the
// data directory's log.
const lockWait = 5 * time.Second

// Stubs: Extensions asideMagic, data length (8 bytes LE), CRC-32C of the
// data (4 bytes LE), then the entry's own Extensions.
var asideMagic = []byte{entryMagic, 0xa5}

const stubLen = 2 + 8 + 4

func openWAL(dir string, sync bool, logger *slog.Logger) (*walStore, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	lock, err := lockDir(filepath.Join(dir, "LOCK"))
	if err != nil {
		return nil, err
	}
	s := &walStore{dir: dir, lock: lock, aside: filepath.Join(dir, "aside"), log: logger,
		fs: &walFS{FS: walfs.New(), sync: sync, dirty: map[*walFile]struct{}{}, trash: filepath.Join(dir, "trash")}}
	s.meta = &walMeta{fs: s.fs}
	fail := func(err error) (*walStore, error) {
		if s.WAL != nil {
			s.WAL.Close()
		}
		s.meta.Close()
		s.fs.removing.Wait()
		lock.Close()
		return nil, err
	}
	if err := os.MkdirAll(s.aside, 0o755); err != nil {
		return fail(err)
	}
	if err := s.fs.emptyTrash(); err != nil {
		return fail(err)
	}
	if err := syncDir(dir); err != nil {
		return fail(err)
	}
	// Before raft-wal reads the tail: what it would drop, or take for
	// sealed for good.
	if err := checkWALTail(dir, sync, logger); err != nil {
		return fail(err)
	}
	hl := hclog.New(&hclog.LoggerOptions{Name: "wal", Level: hclog.Warn, Output: slogWriter{logger}})
	s.WAL, err = wal.Open(dir, wal.WithLogger(hl), wal.WithMetaStore(s.meta),
		wal.WithSegmentFiler(segment.NewFiler(dir, s.fs)))
	if err != nil {
		return fail(fmt.Errorf("raft log %s: %w", dir, err))
	}
	if err := s.tidyAside(); err != nil {
		return fail(err)
	}
	return s, nil
}

// lockDir takes the lock file at path, waiting up to lockWait for another
// process to let it go.
func lockDir(path string) (io.Closer, error) {
	deadline := time.Now().Add(lockWait)
	for {
		l, err := vfs.Default.Lock(path)
		if err == nil {
			return l, nil
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("raft log: %w (is another bfserver running on this data directory?)", err)
		}
		time.Sleep(50 * time.Millisecond) // polling: a lock offers nothing to wait on
	}
}

// syncDir fsyncs a directory, so that the entries made in it last.
func syncDir(dir string) error {
	f, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = f.Sync()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

func (s *walStore) StoreLog(l *raft.Log) error { return s.StoreLogs([]*raft.Log{l}) }

// StoreLogs stores large entries' data aside, then appends in batches of
// at most asideBytes of data.
func (s *walStore) StoreLogs(logs []*raft.Log) error {
	var aside []*raft.Log
	for i, l := range logs {
		if len(l.Data) <= asideBytes {
			continue
		}
		if aside == nil { // the caller's slice stays as it was
			aside = make([]*raft.Log, len(logs))
			copy(aside, logs)
			logs = aside
		}
		stub, err := s.putAside(l)
		if err != nil {
			return err
		}
		logs[i] = stub
	}
	// All or nothing, as raft-boltdb's one transaction: a piece that
	// fails after others were stored takes them back out, or Raft's next
	// append (at the index it believes next) would be refused for good.
	var stored []*raft.Log
	for len(logs) > 0 {
		n, bytes := 1, len(logs[0].Data)
		for n < len(logs) && bytes+len(logs[n].Data) <= asideBytes {
			bytes += len(logs[n].Data)
			n++
		}
		if err := s.WAL.StoreLogs(logs[:n]); err != nil {
			if len(stored) > 0 {
				if derr := s.WAL.DeleteRange(stored[0].Index, stored[len(stored)-1].Index); derr != nil {
					return fmt.Errorf("%w (and the entries %d to %d stored before it could not be taken back: %v)",
						err, stored[0].Index, stored[len(stored)-1].Index, derr)
				}
			}
			return err
		}
		stored = append(stored, logs[:n]...)
		logs = logs[n:]
	}
	return nil
}

func asideName(index uint64) string { return fmt.Sprintf("%020d.entry", index) }

// putAside writes l's data to its own file, synced and renamed into
// place, and returns the stub the log holds instead.
func (s *walStore) putAside(l *raft.Log) (*raft.Log, error) {
	err := atomicfile.Write(filepath.Join(s.aside, asideName(l.Index)), 0o644, func(w io.Writer) error {
		_, err := w.Write(l.Data)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("raft log entry %d: %w", l.Index, err)
	}
	x := append([]byte{}, asideMagic...)
	x = binary.LittleEndian.AppendUint64(x, uint64(len(l.Data)))
	x = binary.LittleEndian.AppendUint32(x, crc32.Checksum(l.Data, crcTable))
	stub := *l
	stub.Data, stub.Extensions = nil, append(x, l.Extensions...)
	return &stub, nil
}

// GetLog reads an entry, and its data from aside when stored there. An
// entry that raft-wal's decoder panics on is an error, as one that does
// not decode.
func (s *walStore) GetLog(index uint64, l *raft.Log) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("raft log entry %d does not decode: %v", index, r)
		}
	}()
	// raft-wal answers for entries a head truncation removed from the
	// tail segment (its writer keeps the segment's first index as it
	// was): they are gone, and Raft must send a snapshot instead.
	if first, err := s.FirstIndex(); err != nil {
		return err
	} else if index < first {
		return raft.ErrLogNotFound
	}
	if err := s.WAL.GetLog(index, l); err != nil {
		return err // raft.ErrLogNotFound for one it does not hold
	}
	x := l.Extensions
	if len(x) < stubLen || x[0] != asideMagic[0] || x[1] != asideMagic[1] {
		return nil
	}
	size, sum := binary.LittleEndian.Uint64(x[2:]), binary.LittleEndian.Uint32(x[10:])
	data, err := os.ReadFile(filepath.Join(s.aside, asideName(index)))
	if err != nil {
		return fmt.Errorf("raft log entry %d, stored aside: %w", index, err)
	}
	if uint64(len(data)) != size || crc32.Checksum(data, crcTable) != sum {
		return fmt.Errorf("raft log entry %d, stored aside: %d bytes that do not match its checksum", index, len(data))
	}
	l.Data = data
	if len(x) == stubLen {
		l.Extensions = nil
	} else {
		l.Extensions = x[stubLen:]
	}
	return nil
}

// DeleteRange removes the entries and then the data stored aside for
// them (a crash between the two leaves files tidyAside removes).
func (s *walStore) DeleteRange(min, max uint64) error {
	if err := s.WAL.DeleteRange(min, max); err != nil {
		return err
	}
	s.removeAside(func(i uint64) bool { return i >= min && i <= max }, false)
	return nil
}

// tidyAside removes what a crash left aside: files of entries the log
// no longer holds, and unfinished ones.
func (s *walStore) tidyAside() error {
	first, err := s.FirstIndex()
	if err != nil {
		return err
	}
	last, err := s.LastIndex()
	if err != nil {
		return err
	}
	s.removeAside(func(i uint64) bool { return last == 0 || i < first || i > last }, true)
	return nil
}

// removeAside removes the files stored aside whose index drop says, and
// with unfinished every other file there (at open: a StoreLogs may be
// writing one otherwise, Raft compacting its log meanwhile).
func (s *walStore) removeAside(drop func(uint64) bool, unfinished bool) {
	ents, err := os.ReadDir(s.aside)
	if err != nil {
		return
	}
	removed := false
	for _, e := range ents {
		name := e.Name()
		i, err := strconv.ParseUint(strings.TrimSuffix(name, ".entry"), 10, 64)
		if err != nil && unfinished || err == nil && strings.HasSuffix(name, ".entry") && drop(i) {
			if err := os.Remove(filepath.Join(s.aside, name)); err != nil {
				s.log.Warn("raft log: removing an entry stored aside", "file", name, "err", err)
			}
			removed = true
		}
	}
	if removed {
		syncDir(s.aside)
	}
}

// Sync makes every append durable: with every append synced, there is
// nothing to do.
func (s *walStore) Sync() error { return s.fs.syncAll() }

// Close syncs what the policy left unsynced, closes raft-wal and its meta
// store (raft-wal's Close leaves that open) and lets the lock go.
// Once: a second Close returns the first's result.
func (s *walStore) Close() error {
	s.closeOnce.Do(func() {
		err := s.fs.syncAll()
		if cerr := s.WAL.Close(); err == nil {
			err = cerr
		}
		if cerr := s.meta.Close(); err == nil {
			err = cerr
		}
		s.fs.removing.Wait()
		s.lock.Close()
		s.closeErr = err
	})
	return s.closeErr
}

// walFS is raft-wal's file system with each file's Sync deferred to
// syncAll unless every append must be synced, and segments deleted
// through the trash.
type walFS struct {
	*walfs.FS
	sync bool

	mu    sync.Mutex
	dirty map[*walFile]struct{}

	trash    string         // where deleted segments are removed
	removing sync.WaitGroup // the removals under way
	one      sync.Mutex     // one removal at a time: their steps would overlap
}

// Delete moves a segment raft-wal is done with into the trash (a rename:
// no block is freed under raft-wal's write lock) and removes it from
// there on a goroutine of its own. As raft-wal's own Delete, it syncs the
// directory: the segment stays gone. One a crash brings back would be
// deleted again (raft-wal deletes at open the segments its meta store
// does not list).
func (v *walFS) Delete(dir, name string) error {
	to := filepath.Join(v.trash, name)
	if err := os.Rename(filepath.Join(dir, name), to); err != nil {
		return err
	}
	if err := syncDir(dir); err != nil {
		return err
	}
	v.removeLater(to)
	return nil
}

// removeLater removes path, a step at a time, on a goroutine of its own.
func (v *walFS) removeLater(path string) {
	v.removing.Add(1)
	go func() {
		defer v.removing.Done()
		v.one.Lock()
		defer v.one.Unlock()
		shrink.File(vfs.Default, path)
		os.Remove(path)
	}()
}

// emptyTrash creates the trash, or removes (later) what a crash left in
// it.
func (v *walFS) emptyTrash() error {
	if err := os.MkdirAll(v.trash, 0o755); err != nil {
		return err
	}
	ents, err := os.ReadDir(v.trash)
	if err != nil {
		return err
	}
	for _, e := range ents {
		v.removeLater(filepath.Join(v.trash, e.Name()))
	}
	return nil
}

func (v *walFS) Create(dir, name string, size uint64) (types.WritableFile, error) {
	f, err := v.FS.Create(dir, name, size)
	if err != nil {
		return nil, err
	}
	return &walFile{WritableFile: f, fs: v}, nil
}

func (v *walFS) OpenWriter(dir, name string) (types.WritableFile, error) {
	f, err := v.FS.OpenWriter(dir, name)
	if err != nil {
		return nil, err
	}
	return &walFile{WritableFile: f, fs: v}, nil
}

// syncAll syncs every file written since its last sync. Appends go on
// meanwhile (one that writes a file again marks it dirty again); a file
// closed meanwhile was a segment a truncation deleted.
func (v *walFS) syncAll() error {
	v.mu.Lock()
	files := make([]*walFile, 0, len(v.dirty))
	for f := range v.dirty {
		files = append(files, f)
		delete(v.dirty, f)
	}
	v.mu.Unlock()
	for i, f := range files {
		if err := f.WritableFile.Sync(); err != nil && !errors.Is(err, os.ErrClosed) {
			v.mu.Lock()
			for _, g := range files[i:] {
				v.dirty[g] = struct{}{}
			}
			v.mu.Unlock()
			return err
		}
	}
	return nil
}

// walFile is a segment file open for writing.
type walFile struct {
	types.WritableFile
	fs *walFS
}

func (f *walFile) Sync() error {
	if f.fs.sync {
		return f.WritableFile.Sync()
	}
	f.fs.mu.Lock()
	f.fs.dirty[f] = struct{}{}
	f.fs.mu.Unlock()
	return nil
}

// Close forgets the file: raft-wal closes a segment once it is deleted,
// or at Close, after walStore synced everything.
func (f *walFile) Close() error {
	f.fs.mu.Lock()
	delete(f.fs.dirty, f)
	f.fs.mu.Unlock()
	return f.WritableFile.Close()
}

// walMeta is raft-wal's meta store, syncing the segments before each
// commit of their list (see walStore).
type walMeta struct {
	metadb.BoltMetaDB
	fs *walFS
}

func (m *walMeta) CommitState(st types.PersistentState) error {
	if err := m.fs.syncAll(); err != nil {
		return err
	}
	return m.BoltMetaDB.CommitState(st)
}

// walSegments lists dir's segment files in the order of their first
// index (the names sort so).
func walSegments(dir string) ([]string, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range ents {
		if !e.IsDir() && strings.HasSuffix(e.Name(), ".wal") {
			out = append(out, e.Name())
		}
	}
	sort.Strings(out)
	return out, nil
}
