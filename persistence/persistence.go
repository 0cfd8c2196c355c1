// Package persistence keeps the durable image of the keyspace in Pebble:
// each key's metadata, the changed chunks of its arrays, a little replicated
// metadata, and the log index that image covers. It stores and streams
// bytes; what they mean is keyspace's business.
//
// Key layout:
//
//	"a"                                   applied index (8 bytes LE)
//	"c" db len(key)u32 key part u32 idx u32   one chunk of a key's arrays
//	"k" db key                            metadata of a key
//	"w" name                              the keyspace's own records (WATCH versions)
//	"x" name                              replicated metadata (members)
//	"b", "d", "e"                         the base (base.go): a flat copy of the large arrays
//
// Writes: every change to the image (a flush, a Raft snapshot's, an
// installed snapshot) is one sstable, written in key order straight from
// the live filters and ingested into Pebble: atomic (all of it or none),
// durable when Ingest returns, and bounded in memory (a block at a time),
// whatever the size of the filters. Pebble's WAL is off: the Raft log is
// already the write-ahead log, and the image only ever moves by whole
// ingested tables, so nothing written through the WAL would add anything.
//
// Faults: a write that fails leaves the image as it was; the caller keeps
// what it took and writes it again (replication: the keyspace's Cut). A
// write is refused before it starts when the filesystem lacks its size
// plus a reserve: Pebble treats a failed MANIFEST write as fatal, so the
// reserve keeps a full disk from ever reaching it. Anything Pebble still
// finds fatal reaches Options.OnFatal, and the store stops taking writes.
package persistence

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"log/slog"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/bfserver/bfserver/engine"
	"github.com/bfserver/bfserver/internal/shrink"
	"github.com/bfserver/bfserver/keyspace"
	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/objstorage/objstorageprovider"
	"github.com/cockroachdb/pebble/v2/sstable"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// Errors.
var (
	// ErrCorrupt: a stored record or a snapshot stream does not decode.
	ErrCorrupt = errors.New("persistence: corrupt image")
	// ErrChecksum: a snapshot stream decoded but its checksum does not
	// match its bytes: it was damaged after its writer summed them (in
	// transit, or on a disk on the way). Nothing was installed. It is
	// also ErrCorrupt (errors.Is).
	ErrChecksum error = checksumError{}
	// ErrNoSpace: the filesystem lacks room for the write and its
	// reserve. It is syscall.ENOSPC (errors.Is), as a full disk's is.
	ErrNoSpace error = noSpace{}
	// ErrStopped: Pebble met a fatal error; the store takes no more writes.
	ErrStopped = errors.New("persistence: the image store stopped after a fatal error")
	// ErrInUse: another process holds the image directory's lock (a
	// second bfserver started on the same data directory).
	ErrInUse = errors.New("persistence: the image directory is in use by another process")
)

type noSpace struct{}

type checksumError struct{}

func (checksumError) Error() string        { return "persistence: snapshot checksum mismatch" }
func (checksumError) Is(target error) bool { return target == ErrCorrupt }

func (noSpace) Error() string        { return "no space left on device" }
func (noSpace) Is(target error) bool { return target == syscall.ENOSPC }

// Options configure a Store.
type Options struct {
	// Dir is where Pebble keeps its files. Required.
	Dir string
	// FS is the filesystem. Default: the operating system's (vfs.Default).
	// Tests inject failing ones (vfs/errorfs).
	FS vfs.FS
	// Logger receives Pebble's messages. Default: discarded.
	Logger *slog.Logger
	// InMemory keeps everything in memory (tests and fuzzing); it sets FS
	// to a fresh in-memory one. Default false.
	InMemory bool
	// MaxValueBytes refuses to load a filter larger than this, so a damaged
	// or hostile image cannot allocate without bound. Default 4 GiB.
	MaxValueBytes uint64
	// Reserve is the free space a write must leave on the filesystem, for
	// Pebble's own MANIFEST and compactions. Default 64 MiB.
	Reserve uint64
	// NoBase keeps no base (base.go), and removes one: loads read every
	// chunk through Pebble, and no disk holds a second copy. Default false.
	NoBase bool
	// MaxOpenFiles bounds the descriptors Pebble keeps open (its
	// MaxOpenFiles: tables in its file cache, at least 64 of them, plus
	// about 10 of its own), so that the process can budget its descriptor
	// limit. Default Pebble's, 1000.
	MaxOpenFiles int
	// OnFatal is told of an error Pebble cannot go on after (a failed
	// MANIFEST write). The store then refuses writes; the node should stop.
	// Default: logged only.
	OnFatal func(error)
}

// Store is the Pebble-backed image.
type Store struct {
	db      *pebble.DB
	opts    Options
	fs      vfs.FS
	tmp     string // where tables are built before they are ingested
	seq     atomic.Uint64
	stopped atomic.Pointer[error]
	// writeMu serialises image writes: a table is ingested whole before the
	// next is built.
	writeMu sync.Mutex
	// discards are the files being removed beside the writes (discard).
	discards sync.WaitGroup
	// Counters of the tables this store ingested, for Stats.
	tables, valueBytes, tableBytes atomic.Uint64
	// throughPebble: load every chunk through Pebble's iterators, never
	// table by table (tests compare the two); noBase: Options.NoBase (tests
	// also set it around one load, to compare it with the base's).
	throughPebble, noBase bool
	// The base (base.go): its generation (the newest file name used, set
	// at Open and by Rebase, which its caller serialises), the bytes it
	// holds, the chunk bytes written since it was (Stale), and what loads
	// read from it.
	baseGen                                   uint64
	baseBytes, baseWritten, stale, baseLoaded atomic.Uint64
}

// Stats are the image's write counters and memory, for INFO: what a flush
// costs the disk, per byte of filter it carries.
type Stats struct {
	// Tables is how many tables were ingested (flushes, snapshot installs
	// and restores); ValueBytes the filter chunks and records they carried;
	// TableBytes their files' bytes.
	Tables, ValueBytes, TableBytes uint64
	// CompactedBytes is what Pebble wrote rewriting tables in compactions.
	CompactedBytes uint64
	// DiskBytes is the image's live tables.
	DiskBytes uint64
	// MemoryBytes is what Pebble holds in memory: block cache and memtables.
	MemoryBytes uint64
	// BaseBytes is what the base holds (base.go); BaseWritten what rebases
	// wrote since Open; BaseLoaded what loads read from it.
	BaseBytes, BaseWritten, BaseLoaded uint64
}

// Stats reports the image's counters since Open.
func (s *Store) Stats() Stats {
	m := s.db.Metrics()
	t := m.Total()
	return Stats{
		Tables: s.tables.Load(), ValueBytes: s.valueBytes.Load(), TableBytes: s.tableBytes.Load(),
		CompactedBytes: t.TableBytesCompacted, DiskBytes: uint64(t.TablesSize),
		MemoryBytes: uint64(m.BlockCache.Size) + m.MemTable.Size,
		BaseBytes:   s.baseBytes.Load(), BaseWritten: s.baseWritten.Load(), BaseLoaded: s.baseLoaded.Load(),
	}
}

var appliedKey = []byte("a")

// Open opens or creates the image in opts.Dir.
func Open(opts Options) (*Store, error) {
	if opts.Dir == "" {
		return nil, errors.New("persistence: no directory")
	}
	if opts.MaxValueBytes == 0 {
		opts.MaxValueBytes = 4 << 30
	}
	if opts.Reserve == 0 {
		opts.Reserve = 64 << 20
	}
	fs := opts.FS
	if opts.InMemory {
		fs = vfs.NewMem()
	} else if fs == nil {
		fs = vfs.Default
	}
	s := &Store{opts: opts, fs: fs, tmp: fs.PathJoin(opts.Dir, "ingest"), noBase: opts.NoBase}
	po := &pebble.Options{FS: shrink.FS{FS: fs}, DisableWAL: true, Logger: pebbleLogger{s}, MaxOpenFiles: opts.MaxOpenFiles}
	// A damaged block fails the read that met it, with Pebble's error (a
	// load then fails, the node does not start); by default Pebble would
	// also call Fatalf, which parks the reader forever.
	po.EventListener = &pebble.EventListener{DataCorruption: func(info pebble.DataCorruptionInfo) {
		pebbleLogger{s}.Errorf("%s", info)
	}}
	for i := range po.Levels {
		po.Levels[i].Compression = func() *sstable.CompressionProfile { return sstable.NoCompression }
		po.Levels[i].BlockSize = 64 << 10
	}
	// Nothing goes through the memtable; keep it small. The block cache
	// serves only loads, snapshots and compactions, which read each block
	// once: a small one costs a node little.
	po.MemTableSize = 1 << 20
	cache := pebble.NewCache(2 << 20)
	defer cache.Unref()
	po.Cache = cache
	db, err := pebble.Open(opts.Dir, po)
	if errors.Is(err, syscall.EWOULDBLOCK) { // the LOCK file's flock
		return nil, fmt.Errorf("%w: %s (%v)", ErrInUse, opts.Dir, err)
	}
	if err != nil {
		return nil, err
	}
	s.db = db
	// Tables a crash left half built.
	if err := fs.RemoveAll(s.tmp); err != nil {
		db.Close()
		return nil, err
	}
	if err := fs.MkdirAll(s.tmp, 0o755); err != nil {
		db.Close()
		return nil, err
	}
	if err := s.openBase(); err != nil {
		db.Close()
		return nil, err
	}
	return s, nil
}

// Close closes Pebble. After a fatal error it only reports it: Pebble's
// Close would wait forever for the goroutine Fatalf parked, and the
// process that holds the store is about to end.
func (s *Store) Close() error {
	s.discards.Wait()
	if err := s.stopped.Load(); err != nil {
		return *err
	}
	return s.db.Close()
}

func metaKey(db uint8, key string) []byte { return appendMetaKey(nil, db, key) }

func chunkPrefix(db uint8, key string) []byte { return appendChunkPrefix(nil, db, key) }

func chunkKey(db uint8, key string, c keyspace.Chunk) []byte { return appendChunkKey(nil, db, key, c) }

// The append forms let a table's writer build every key in one buffer
// (the table copies each key it is given): a flush of a million keys
// otherwise allocated three keys apiece, garbage the collector then
// chased beside Apply.

func appendMetaKey(b []byte, db uint8, key string) []byte {
	return append(append(b, 'k', db), key...)
}

func appendChunkPrefix(b []byte, db uint8, key string) []byte {
	b = append(b, 'c', db)
	b = binary.BigEndian.AppendUint32(b, uint32(len(key)))
	return append(b, key...)
}

func appendChunkKey(b []byte, db uint8, key string, c keyspace.Chunk) []byte {
	b = appendChunkPrefix(b, db, key)
	b = binary.BigEndian.AppendUint32(b, c.Part)
	return binary.BigEndian.AppendUint32(b, c.Index)
}

// prefixEnd is the first key after every key starting with p.
func prefixEnd(p []byte) []byte {
	end := append([]byte(nil), p...)
	for i := len(end) - 1; i >= 0; i-- {
		if end[i] < 0xff {
			end[i]++
			return end[:i+1]
		}
	}
	return nil
}

// ---- writing ----

// Table is one change of the image being built: records are added in key
// order, and Commit makes all of them durable and visible at once.
type Table struct {
	s    *Store
	path string
	w    *sstable.Writer
	err  error
	// file is the table's file under the writer, given up by Abort.
	file *abandonFile
	// written counts bytes added, for the free-space checks of long tables;
	// values the values' bytes, for Stats; chunks the chunks' bytes, for
	// Stale.
	written, checked, values, chunks uint64
}

// checkSpace refuses a write of need bytes that would leave less than the
// reserve free.
func (s *Store) checkSpace(need uint64) error {
	if err := s.stopped.Load(); err != nil {
		return *err
	}
	free, err := s.fs.GetDiskUsage(s.opts.Dir)
	if err != nil {
		return nil // not every filesystem tells (in-memory ones)
	}
	if free.AvailBytes < need+s.opts.Reserve {
		return fmt.Errorf("%w: the image needs %d bytes and a reserve of %d, %d are free", ErrNoSpace, need, s.opts.Reserve, free.AvailBytes)
	}
	return nil
}

// newTable starts a table of about size bytes, after checking the
// filesystem has room for it. It holds writeMu until Commit or Abort.
func (s *Store) newTable(size uint64) (*Table, error) {
	s.writeMu.Lock()
	if err := s.checkSpace(size); err != nil {
		s.writeMu.Unlock()
		return nil, err
	}
	path := s.fs.PathJoin(s.tmp, strconv.FormatUint(s.seq.Add(1), 10)+".sst")
	f, err := s.fs.Create(path, vfs.WriteCategoryUnspecified)
	if err != nil {
		s.writeMu.Unlock()
		return nil, err
	}
	wo := sstable.WriterOptions{
		TableFormat: s.db.FormatMajorVersion().MaxTableFormat(), Compression: sstable.NoCompression,
		BlockSize: 64 << 10, DisableValueBlocks: true,
	}
	// Written back as it goes (sync_file_range every MiB, waiting for the
	// MiB before), as Pebble writes its own tables: a gigabyte left dirty
	// until the table's sync would hold the Raft log's next sync, and every
	// durable write with it, behind the whole of it.
	af := &abandonFile{File: f}
	f = vfs.NewSyncingFile(af, vfs.SyncingFileOptions{BytesPerSync: tableBytesPerSync})
	return &Table{s: s, path: path, w: sstable.NewWriter(objstorageprovider.NewFileWritable(f), wo), file: af, checked: size}, nil
}

// abandonFile is a table's file that Abort can give up: from then on its
// writes and syncs fail at once, so that closing the writer (which would
// finish the table: its last block, its index, a sync) returns without
// touching the disk. A flush given up for a snapshot is aborted while the
// snapshot, and every Apply behind it on Raft's FSM goroutine, waits.
type abandonFile struct {
	vfs.File
	off atomic.Bool
}

var errAbandoned = errors.New("persistence: table given up")

func (f *abandonFile) Write(b []byte) (int, error) {
	if f.off.Load() {
		return 0, errAbandoned
	}
	return f.File.Write(b)
}

func (f *abandonFile) Sync() error {
	if f.off.Load() {
		return errAbandoned
	}
	return f.File.Sync()
}

func (f *abandonFile) SyncData() error {
	if f.off.Load() {
		return errAbandoned
	}
	return f.File.SyncData()
}

func (f *abandonFile) SyncTo(length int64) (bool, error) {
	if f.off.Load() {
		return false, errAbandoned
	}
	return f.File.SyncTo(length)
}

// tableBytesPerSync is how often a table being written asks the kernel to
// write back what it holds (newTable).
const tableBytesPerSync = 1 << 20

func (t *Table) set(k, v []byte) {
	if t.err == nil {
		t.err = t.w.Set(k, v)
		t.written += uint64(len(k) + len(v))
		t.values += uint64(len(v))
	}
	// A table whose size was not known up front (an installed snapshot)
	// checks the filesystem as it grows.
	if t.err == nil && t.written > t.checked+64<<20 {
		t.checked = t.written
		t.err = t.s.checkSpace(64 << 20)
	}
}

// Commit finishes the table, syncs it and ingests it.
func (t *Table) Commit() error {
	defer t.s.writeMu.Unlock()
	defer t.s.discard(t.path)
	if t.err != nil {
		t.w.Close()
		return t.err
	}
	if err := t.w.Close(); err != nil {
		return err
	}
	if err := t.s.stopped.Load(); err != nil {
		return *err
	}
	var size uint64
	if fi, err := t.s.fs.Stat(t.path); err == nil {
		size = uint64(fi.Size())
	}
	if err := t.s.db.Ingest(context.Background(), []string{t.path}); err != nil {
		return err
	}
	t.s.tables.Add(1)
	t.s.valueBytes.Add(t.values)
	t.s.stale.Add(t.chunks)
	t.s.tableBytes.Add(size)
	return nil
}

// Abort drops the table.
func (t *Table) Abort() {
	defer t.s.writeMu.Unlock()
	t.file.off.Store(true)
	t.w.Close()
	t.s.discard(t.path)
}

// WriteCut starts a table that brings the image to the cut and the index
// applied, with the replicated metadata extra (both as they were at the
// cut), reading the cut's chunks as they were at the cut (keyspace.Cut:
// Apply goes on meanwhile, and copies what it changes first). Then the
// caller Commits (or Aborts) the table. The table's size is not known
// until the cut is walked: it checks the filesystem as it grows.
func (s *Store) WriteCut(cut *keyspace.Cut, applied uint64, extra map[string][]byte) (*Table, error) {
	t, err := s.newTable(0)
	if err != nil {
		cut.Walk(func(*keyspace.CutKey) error { return err }) // ends the cut
		return nil, err
	}
	var idx [8]byte
	binary.LittleEndian.PutUint64(idx[:], applied)
	t.set(appliedKey, idx[:])
	// Chunks ("c"), in chunk-key order (Walk's): database, key length, key.
	buf := make([]byte, engine.ChunkSize)
	var kb []byte // each point key, built in place (the table copies it)
	if err := cut.Walk(func(ck *keyspace.CutKey) error {
		if ck.Full && !ck.Fresh {
			p := chunkPrefix(ck.DB, ck.Key)
			if t.err == nil {
				t.err = t.w.DeleteRange(p, prefixEnd(p))
			}
		}
		if err := ck.Chunks(buf, func(c keyspace.Chunk) error {
			kb = appendChunkKey(kb[:0], ck.DB, ck.Key, c)
			t.set(kb, c.Data)
			t.chunks += uint64(len(c.Data))
			return t.err
		}); err != nil && t.err == nil {
			t.err = err
		}
		return t.err
	}); err != nil && t.err == nil {
		t.err = err
	}
	keys := &cut.Keys
	// Marks ("d"), in the same order: the base's copy of these keys is
	// stale from this index on (base.go). Only a key with an array the
	// base could hold needs one: an entry is at least baseMinArray long,
	// and a load never reads one into a shorter array, so a key that now
	// holds only small ones (auto-created filters, most keys) or none
	// costs a flush no mark. A key gone loses its mark, so that marks
	// never outnumber the keys; one that grows large again is marked then.
	// A snapshot may give the cut up after its walk too (Cut.Abort): the
	// loops below look every abortEvery keys, so that a cut of a million
	// keys keeps no snapshot (and no Apply behind it) waiting on them.
	const abortEvery = 4096
	aborted := func(i int) bool {
		if i%abortEvery == 0 && t.err == nil && cut.Aborted() {
			t.err = keyspace.ErrCutAborted
		}
		return t.err != nil
	}
	for i := range keys.Len() {
		if aborted(i) {
			break
		}
		w := keys.At(i)
		kb = appendMarkKey(kb[:0], w.DB, w.Key)
		mk := kb
		switch {
		case w.Largest() >= baseMinArray:
			t.set(mk, idx[:])
		case w.Gone() && t.err == nil:
			t.err = t.w.Delete(mk)
		}
	}
	t.set(markedKey, idx[:])
	// Metadata ("k"), in key order.
	n := 0
	inKeyOrder(keys, func(ck *keyspace.Walked) bool {
		if aborted(n) {
			return false
		}
		n++
		kb = appendMetaKey(kb[:0], ck.DB, ck.Key)
		if ck.Meta() != nil {
			t.set(kb, ck.Meta())
		} else if t.err == nil {
			t.err = t.w.Delete(kb)
		}
		return true
	})
	// The keyspace's own records ("w"), in name order.
	recs := cut.Records
	slices.SortFunc(recs, func(a, b keyspace.Record) int { return compareStrings(a.Name, b.Name) })
	for _, r := range recs {
		t.set(append([]byte{'w'}, r.Name...), r.Data)
	}
	t.setExtra(extra)
	// What the table added since its last check (set checks every 64
	// MiB): a cut's size is known only now. On a disk this counts bytes
	// already written again, at most 64 MiB more than needed.
	if t.err == nil && t.written > t.checked {
		t.err = s.checkSpace(t.written - t.checked)
	}
	if t.err != nil {
		err := t.err
		t.Abort()
		return nil, err
	}
	return t, nil
}

// Spill is a cut's scratch file for the chunks Apply copies past the
// cut's budget (keyspace.Cut.SetSpill), in the table directory, which Open
// empties: a crash leaves nothing behind for long. Its methods do nothing
// on a nil Spill.
type Spill struct {
	s     *Store
	path  string
	f     vfs.File
	limit int64
}

// NewSpill creates a spill allowed half of the free space beyond the
// reserve (the table takes as much again); nil when there is no room or
// it cannot be created: Apply then waits on the budget instead. The
// caller attaches it to a cut as soon as the cut is taken, and closes it
// once the cut's walk has returned.
func (s *Store) NewSpill() *Spill {
	free, err := s.fs.GetDiskUsage(s.opts.Dir)
	limit := int64(1) << 40
	if err == nil {
		if free.AvailBytes <= s.opts.Reserve {
			return nil
		}
		limit = int64((free.AvailBytes - s.opts.Reserve) / 2)
	}
	path := s.fs.PathJoin(s.tmp, "spill-"+strconv.FormatUint(s.seq.Add(1), 10))
	f, err := s.fs.OpenReadWrite(path, vfs.WriteCategoryUnspecified)
	if err != nil {
		return nil
	}
	return &Spill{s: s, path: path, f: f, limit: limit}
}

// Attach makes sp the cut's spill.
func (sp *Spill) Attach(cut *keyspace.Cut) {
	if sp != nil {
		cut.SetSpill(sp.f, sp.limit)
	}
}

// Close removes the spill.
func (sp *Spill) Close() {
	if sp != nil {
		sp.f.Close()
		sp.s.discardDirty(sp.path)
	}
}

// CompactShadowed rewrites the image as one sorted run in the bottom level
// when the tables above it hold more than a quarter of its bytes, and
// reports whether it did. A bulk load flushes the same chunks again and
// again faster than Pebble compacts them, leaving each in several levels:
// every later load, and every snapshot, reads all of them (a 943 MiB image
// was seen at 3.3 GB). It refuses with less free space than the image and
// the reserve; it can run alongside writes and open snapshots.
func (s *Store) CompactShadowed() (bool, error) {
	levels := s.db.Metrics().Levels
	var upper, total int64
	for i, l := range levels {
		total += l.TablesSize
		if i < len(levels)-1 {
			upper += l.TablesSize
		}
	}
	if upper*4 <= total {
		return false, nil
	}
	if err := s.checkSpace(uint64(total)); err != nil {
		return false, err
	}
	return true, s.db.Compact(context.Background(), []byte{0}, []byte{0xff}, true)
}

func compareStrings(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// ---- reading ----

// Applied is the log index the stored image covers (0 if none).
func (s *Store) Applied() (uint64, error) {
	v, _, err := getIndex(s.db, appliedKey)
	return v, err
}

// getIndex reads a log index stored at key (8 bytes, little-endian): the
// applied index and the base's marks. Absent, it is 0 and not found.
func getIndex(r pebble.Reader, key []byte) (v uint64, found bool, err error) {
	b, closer, err := r.Get(key)
	if errors.Is(err, pebble.ErrNotFound) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, err
	}
	defer closer.Close()
	if len(b) != 8 {
		return 0, true, ErrCorrupt
	}
	return binary.LittleEndian.Uint64(b), true, nil
}

// Extra returns a replicated metadata value, or nil.
func (s *Store) Extra(name string) ([]byte, error) {
	v, closer, err := s.db.Get(append([]byte{'x'}, name...))
	if errors.Is(err, pebble.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer closer.Close()
	return append([]byte(nil), v...), nil
}

// Load builds a fresh keyspace from the stored image.
func (s *Store) Load() (*keyspace.Keyspace, uint64, error) {
	k := keyspace.New()
	applied, err := s.Applied()
	if err != nil {
		return nil, 0, err
	}
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: []byte("k"), UpperBound: []byte("l")})
	if err != nil {
		return nil, 0, err
	}
	for it.First(); it.Valid(); it.Next() {
		key := it.Key()
		if len(key) < 2 {
			it.Close()
			return nil, 0, ErrCorrupt
		}
		if err := k.LoadValue(key[1], string(key[2:]), it.Value(), s.opts.MaxValueBytes); err != nil {
			it.Close()
			return nil, 0, fmt.Errorf("%w: key %q: %v", ErrCorrupt, key[2:], err)
		}
	}
	if err := it.Close(); err != nil {
		return nil, 0, err
	}
	if it, err = s.db.NewIter(&pebble.IterOptions{LowerBound: []byte("w"), UpperBound: []byte("x")}); err != nil {
		return nil, 0, err
	}
	for it.First(); it.Valid(); it.Next() {
		r := keyspace.Record{Name: string(it.Key()[1:]), Data: it.Value()}
		if err := k.LoadRecord(r); err != nil {
			it.Close()
			return nil, 0, fmt.Errorf("%w: record %q: %v", ErrCorrupt, r.Name, err)
		}
	}
	if err := it.Close(); err != nil {
		return nil, 0, err
	}
	var base *baseLoad
	if !s.noBase {
		if base, err = s.startBase(k, applied); err != nil {
			return nil, 0, err
		}
	}
	err = s.loadAllChunks(k, base.prefixes())
	failed := base.wait() // its reads write into k: wait for them whatever err is
	if err != nil {
		return nil, 0, err
	}
	for _, p := range failed {
		if err := s.loadChunks(k, p, prefixEnd(p)); err != nil {
			return nil, 0, err
		}
	}
	k.ForgetChanges()
	return k, applied, nil
}

// ---- snapshots ----

// Snapshot format (docs/STORAGE.md, Snapshot streams): a magic that names
// the version, then records (uvarint key length, key, uvarint value
// length, value) in key order, then a zero-length key. Version 2 follows
// that with a trailer, the CRC-32C (Castagnoli, big-endian) of every byte
// before it, magic included, and then the stream ends. Raft's own CRC
// covers what a receiver wrote to its disk, not what the sender read: the
// trailer is computed by the writer as it streams and checked by the
// reader before the image changes, so a stream damaged anywhere between
// them is refused whole. Version 1 (no trailer) is still read: snapshots
// and backups that older versions wrote.
const (
	snapMagic   = "bfsnap2\n"
	snapMagicV1 = "bfsnap1\n"
)

// maxRecord bounds one record read from a stream: a key of 512 MiB plus
// headroom, or a string value of the same size.
const maxRecord = 1 << 30

// snapStep is how much of a record ReadSnapshot reads before it grows its
// buffer for more.
const snapStep = 1 << 20

// Snapshot is a frozen point-in-time view of the image.
type Snapshot struct{ snap *pebble.Snapshot }

// NewSnapshot freezes the image as it is now; later writes do not show.
func (s *Store) NewSnapshot() *Snapshot { return &Snapshot{snap: s.db.NewSnapshot()} }

// Close releases the view.
func (s *Snapshot) Close() error { return s.snap.Close() }

// Applied is the log index the frozen image covers (0 if none).
func (s *Snapshot) Applied() (uint64, error) {
	v, _, err := getIndex(s.snap, appliedKey)
	return v, err
}

// WriteSnapshot streams a point-in-time copy of the whole image.
func (s *Store) WriteSnapshot(w io.Writer) error {
	snap := s.NewSnapshot()
	defer snap.Close()
	return snap.Stream(w)
}

// crcWriter sums what passes through it on its way to a buffered writer,
// and keeps the first error.
type crcWriter struct {
	w   *bufio.Writer
	crc uint32
	err error
}

func (c *crcWriter) Write(p []byte) {
	c.crc = crc32.Update(c.crc, castagnoli, p)
	if _, err := c.w.Write(p); err != nil && c.err == nil {
		c.err = err
	}
}

// streamYield is how many bytes of values Stream writes between its
// yields to other goroutines: a few hundred microseconds' work.
const streamYield = 1 << 20

// Stream writes the frozen image, in the current version.
func (s *Snapshot) Stream(w io.Writer) error {
	it, err := s.snap.NewIter(nil)
	if err != nil {
		return err
	}
	defer it.Close()
	cw := &crcWriter{w: bufio.NewWriterSize(w, 1<<20)}
	cw.Write([]byte(snapMagic))
	var hdr [binary.MaxVarintLen64]byte
	var since int
	for it.First(); it.Valid(); it.Next() {
		if isBaseKey(it.Key()) {
			continue
		}
		// The stream never blocks while the sink's buffer has room, so it
		// kept its P for the runtime's whole time slice (10 ms) each time:
		// with the other P busy too (the collector's worker), the event
		// loops, Raft and the state machine, made runnable meanwhile, and
		// the writes they carry, waited behind it.
		if since += len(it.Value()); since >= streamYield {
			since = 0
			// A reader gone (a follower's connection, a stream closed
			// early) ends the walk, not the end of the image.
			if cw.err != nil {
				return cw.err
			}
			runtime.Gosched()
		}
		for _, part := range [][]byte{it.Key(), it.Value()} {
			n := binary.PutUvarint(hdr[:], uint64(len(part)))
			cw.Write(hdr[:n])
			cw.Write(part)
		}
	}
	if err := it.Error(); err != nil {
		return err
	}
	cw.Write([]byte{0})
	cw.w.Write(binary.BigEndian.AppendUint32(nil, cw.crc))
	return cw.w.Flush()
}

// crcReader sums the bytes read through it (not what its buffer holds
// ahead of them).
type crcReader struct {
	r   *bufio.Reader
	crc uint32
}

func (c *crcReader) ReadByte() (byte, error) {
	b, err := c.r.ReadByte()
	if err == nil {
		c.crc = crc32.Update(c.crc, castagnoli, []byte{b})
	}
	return b, err
}

func (c *crcReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.crc = crc32.Update(c.crc, castagnoli, p[:n])
	return n, err
}

// ReadSnapshot replaces the whole image with a stream from WriteSnapshot,
// atomically: on any error the old image is untouched. The new image is
// built aside (a table not yet ingested) and goes in only once the whole
// stream decoded, its checksum matched and it ended there; a mismatch is
// ErrChecksum. It holds one record in memory at a time.
func (s *Store) ReadSnapshot(r io.Reader) error {
	cr := &crcReader{r: bufio.NewReaderSize(r, 1<<20)}
	magic := make([]byte, len(snapMagic))
	if _, err := io.ReadFull(cr, magic); err != nil {
		return fmt.Errorf("%w: the snapshot stream ends before its header", ErrCorrupt)
	}
	v1 := string(magic) == snapMagicV1
	if !v1 && string(magic) != snapMagic {
		return fmt.Errorf("%w: the stream is not a snapshot of a version this build reads (header %q)", ErrCorrupt, magic)
	}
	t, err := s.newTable(0)
	if err != nil {
		return err
	}
	// One table deletes the old image and holds the new one: its range
	// deletion covers only what was there before it.
	if err := t.w.DeleteRange([]byte{0}, []byte{0xff}); err != nil {
		t.Abort()
		return err
	}
	var key, val []byte
	var records uint64
	read := func(buf []byte) ([]byte, error) {
		n, err := binary.ReadUvarint(cr)
		if err != nil || n > maxRecord {
			return nil, fmt.Errorf("%w: record %d of the snapshot stream: bad length", ErrCorrupt, records)
		}
		// The buffer grows with the bytes that arrive, a step at a
		// time: a length the stream does not carry costs no more than
		// the bytes it did.
		buf = buf[:0]
		for uint64(len(buf)) < n {
			step := min(n-uint64(len(buf)), snapStep)
			buf = slices.Grow(buf, int(step))
			if _, err := io.ReadFull(cr, buf[len(buf):len(buf)+int(step)]); err != nil {
				return nil, fmt.Errorf("%w: record %d of the snapshot stream: cut short", ErrCorrupt, records)
			}
			buf = buf[:len(buf)+int(step)]
		}
		return buf, nil
	}
	var prev []byte
	for ; ; records++ {
		if key, err = read(key); err != nil {
			t.Abort()
			return err
		}
		if len(key) == 0 {
			break
		}
		if val, err = read(val); err != nil {
			t.Abort()
			return err
		}
		if key[0] == 0 || key[0] == 0xff || (prev != nil && string(key) <= string(prev)) {
			t.Abort()
			return fmt.Errorf("%w: record %d of the snapshot stream: key out of order", ErrCorrupt, records)
		}
		prev = append(prev[:0], key...)
		if isBaseKey(key) {
			continue // never sent: a stream that holds some (damaged, or foreign) cannot bring their file
		}
		t.set(key, val)
		if t.err != nil {
			err := t.err
			t.Abort()
			return err
		}
	}
	if !v1 {
		sum := cr.crc
		var trailer [4]byte
		if _, err := io.ReadFull(cr.r, trailer[:]); err != nil {
			t.Abort()
			return fmt.Errorf("%w: the snapshot stream ends before its checksum", ErrCorrupt)
		}
		if got := binary.BigEndian.Uint32(trailer[:]); got != sum {
			t.Abort()
			return fmt.Errorf("%w: the stream sums to %08x, its trailer says %08x", ErrChecksum, sum, got)
		}
	}
	// Nothing follows: a stream with more (a version 2 stream whose
	// header was damaged into version 1's) is not the one written.
	if _, err := cr.r.ReadByte(); err != io.EOF {
		t.Abort()
		return fmt.Errorf("%w: bytes after the end of the snapshot stream", ErrCorrupt)
	}
	if err := t.Commit(); err != nil {
		return err
	}
	// The range deletion took the base's entries: its file goes, and the
	// next quiet snapshot writes a new one.
	s.removeBases(0)
	s.baseBytes.Store(0)
	s.staleAll()
	return nil
}

// RestoreBackup fills an empty image from a backup (a snapshot stream, as
// BFBACKUP writes it), with its replicated metadata replaced by extra: a
// node restored from it belongs to a new cluster, not the backup's.
func (s *Store) RestoreBackup(r io.Reader, extra map[string][]byte) error {
	it, err := s.db.NewIter(nil)
	if err != nil {
		return err
	}
	empty := !it.First()
	it.Close()
	if !empty {
		return errors.New("persistence: the image is not empty")
	}
	if err := s.ReadSnapshot(r); err != nil {
		return err
	}
	t, err := s.newTable(0)
	if err != nil {
		return err
	}
	if t.err == nil {
		t.err = t.w.DeleteRange([]byte{'x'}, []byte{'y'})
	}
	t.setExtra(extra)
	return t.Commit()
}

// setExtra writes the replicated metadata ("x" keys), in name order.
func (t *Table) setExtra(extra map[string][]byte) {
	names := make([]string, 0, len(extra))
	for name := range extra {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		t.set(append([]byte{'x'}, name...), extra[name])
	}
}

// pebbleLogger sends Pebble's messages to slog (debug and error levels),
// and its fatal errors to Options.OnFatal.
type pebbleLogger struct{ s *Store }

func (l pebbleLogger) Infof(format string, args ...any) {
	if l.s.opts.Logger != nil {
		l.s.opts.Logger.Debug(fmt.Sprintf(format, args...), "component", "pebble")
	}
}

func (l pebbleLogger) Errorf(format string, args ...any) {
	if l.s.opts.Logger != nil {
		l.s.opts.Logger.Error(fmt.Sprintf(format, args...), "component", "pebble")
	}
}

// Fatalf must not return: Pebble's state is past repair when it calls it.
// The goroutine that met the error parks (holding whatever Pebble holds,
// so nothing else writes), the store refuses writes, and OnFatal tells the
// node, which stops. The image on disk is what the last ingest left: the
// Raft log holds everything after it.
func (l pebbleLogger) Fatalf(format string, args ...any) {
	err := fmt.Errorf("%w: pebble: %s", ErrStopped, fmt.Sprintf(format, args...))
	l.Errorf("%v", err)
	l.s.stopped.Store(&err)
	if l.s.opts.OnFatal != nil {
		go l.s.opts.OnFatal(err)
	}
	select {}
}
