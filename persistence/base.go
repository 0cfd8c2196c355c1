package persistence

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/bfserver/bfserver/engine"
	"github.com/bfserver/bfserver/keyspace"
	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// The base: a flat copy of the large arrays, for starting at disk speed.
//
// A start reads the whole image, and through Pebble every byte lands
// first in the page cache, then, copied, in the filter's fresh array:
// twice the fresh memory, which on this project's virtual machines is
// what a start waits on (the host backs new pages lazily). The base is
// one file holding each array of 1 MiB or more as its bytes, 4 KiB
// aligned, so that a start reads it with O_DIRECT straight into the
// arrays: no page cache, no copy. On 943 MiB of filters a start took
// 0.67-1.03 s this way against 0.91-2.52 s through Pebble, the raw read
// of the image 0.83-1.43 s (a prototype, 9 rounds in turn).
//
// The base is a cache of the image, never its only copy: Pebble keeps
// every chunk, a snapshot streams from Pebble alone, and an older build
// ignores the base's keys and loads as before. So every doubt about the
// base (a missing or short file, a checksum that does not match, an array
// of another size) loads that array from Pebble instead, and costs only
// time. It is written from the image as it stands (a Pebble snapshot, the
// other image writes held off by the caller) when a quiet snapshot finds
// enough changed since the last one (Stale), and costs the disk the large
// arrays' bytes once more.
//
// Which arrays it may be trusted for: each flush marks every key it
// writes that holds an array of baseMinArray or more ("d" key, the
// applied index it brings the image to), and a base entry ("b" key)
// records the applied index of the image it copies. An entry whose key
// was marked at a later index is stale, and the array loads from Pebble;
// an entry never loads into a shorter array, so a key holding only small
// ones needs no mark. A rebase writes new entries and drops every mark.
//
// A build from before the base writes the image without marks. So every
// flush (and a rebase) also records the index it brings the image to as
// "e", beside "a": when the two differ, a build that does not mark wrote
// the image last, and no entry is trusted.
//
// Keys:
//
//	"b" db len(key)u32 key part u32   an array's place in the base file
//	"d" db len(key)u32 key            the index of the last flush that wrote the key
//	"e"                               the index of the last flush that marked
//
// Files: base/<gen>.arrays in the image directory, the newest the one
// the entries name; any other is removed at Open and after a rebase.

const (
	// baseMinArray: smaller arrays stay in Pebble only (a 4 KiB-aligned
	// copy of many small ones would cost more disk than it saves time).
	baseMinArray = 1 << 20
	// basePiece is one read of the base, and baseWorkers read at once:
	// with 8 of 2 MiB in flight 943 MiB started in 0.68-0.91 s, with 4 of
	// 1 MiB in 0.74-2.05 s (4 starts each, in turn).
	basePiece = 2 << 20
	// baseAlign is where each array starts in the file: O_DIRECT's unit.
	baseAlign   = 4096
	baseWorkers = 8
)

var (
	markedKey      = []byte("e")
	baseLo, baseHi = []byte("b"), []byte("c")
	markLo, markHi = []byte("d"), []byte("e")
	castagnoli     = crc32.MakeTable(crc32.Castagnoli)
	zeroChunkCRC   = crc32.Checksum(make([]byte, engine.ChunkSize), castagnoli)
)

// baseEntry is one array's place in the base.
type baseEntry struct {
	gen    uint64   // the file
	index  uint64   // the applied index of the image it copies
	off    uint64   // where its bytes start in the file (baseAlign-aligned)
	length uint64   // its bytes in the file; the rest of the array is zero
	crcs   []uint32 // crc32c (Castagnoli) of each chunk of those bytes
}

func (e *baseEntry) encode() []byte {
	b := make([]byte, 0, 32+4*len(e.crcs))
	for _, v := range []uint64{e.gen, e.index, e.off, e.length} {
		b = binary.LittleEndian.AppendUint64(b, v)
	}
	for _, c := range e.crcs {
		b = binary.LittleEndian.AppendUint32(b, c)
	}
	return b
}

// decodeBaseEntry decodes an entry, or fails on anything an encode would
// not have written.
func decodeBaseEntry(v []byte, maxLength uint64) (baseEntry, error) {
	if len(v) < 32 || (len(v)-32)%4 != 0 {
		return baseEntry{}, ErrCorrupt
	}
	e := baseEntry{
		gen: binary.LittleEndian.Uint64(v), index: binary.LittleEndian.Uint64(v[8:]),
		off: binary.LittleEndian.Uint64(v[16:]), length: binary.LittleEndian.Uint64(v[24:]),
	}
	n := (len(v) - 32) / 4
	if e.length < baseMinArray || e.length > maxLength || e.off%baseAlign != 0 || e.off > 1<<62 ||
		uint64(n) != (e.length+engine.ChunkSize-1)/engine.ChunkSize {
		return baseEntry{}, ErrCorrupt
	}
	e.crcs = make([]uint32, n)
	for i := range e.crcs {
		e.crcs[i] = binary.LittleEndian.Uint32(v[32+4*i:])
	}
	return e, nil
}

// markKey is the key a flush marks: "d" and the chunk prefix's rest.
func markKey(db uint8, key string) []byte { return appendMarkKey(nil, db, key) }

func appendMarkKey(b []byte, db uint8, key string) []byte {
	n := len(b)
	b = appendChunkPrefix(b, db, key)
	b[n] = 'd'
	return b
}

func (s *Store) baseDir() string { return s.fs.PathJoin(s.opts.Dir, "base") }

func baseName(gen uint64) string { return fmt.Sprintf("%016x.arrays", gen) }

func (s *Store) basePath(gen uint64) string { return s.fs.PathJoin(s.baseDir(), baseName(gen)) }

// openBase finds the base the entries name, removes every other file in
// the base directory (a rebase a crash cut short, or one replaced), and
// sets the next generation and what counts as stale. Called by Open.
func (s *Store) openBase() error {
	if err := s.fs.MkdirAll(s.baseDir(), 0o755); err != nil {
		return err
	}
	if s.noBase {
		s.removeBases(0)
		return nil
	}
	var live uint64
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: baseLo, UpperBound: baseHi})
	if err != nil {
		return err
	}
	var held uint64
	for valid := it.First(); valid; valid = it.Next() {
		if e, err := decodeBaseEntry(it.Value(), s.opts.MaxValueBytes); err == nil {
			live = e.gen
			held += e.length
		}
	}
	s.baseBytes.Store(held)
	if err := it.Close(); err != nil {
		return err
	}
	names, err := s.fs.List(s.baseDir())
	if err != nil {
		return err
	}
	found := false
	for _, name := range names {
		if gen, err := strconv.ParseUint(strings.TrimSuffix(name, ".arrays"), 16, 64); err == nil {
			s.baseGen = max(s.baseGen, gen) // never reused, even a stray's
		}
		if live != 0 && name == baseName(live) {
			found = true
			continue
		}
		if err := s.fs.Remove(s.fs.PathJoin(s.baseDir(), name)); err != nil {
			return err
		}
	}
	if live == 0 {
		s.staleAll()
	} else if !found {
		s.stale.Store(1 << 62) // the entries' file is gone: a new one at the next quiet snapshot
	}
	return nil
}

// staleAll counts every chunk as changed since the base, when there is
// none: the first quiet snapshot writes one if the image holds large
// arrays (what the chunks cost the disk tells).
func (s *Store) staleAll() {
	n, _ := s.db.EstimateDiskUsage(chunksLo, chunksHi)
	s.stale.Store(n)
}

// isBaseKey reports whether an image key is the base's ("b", "d", "e"),
// which snapshot streams neither carry nor keep: a receiver has no base
// file.
func isBaseKey(k []byte) bool { return len(k) > 0 && (k[0] == 'b' || k[0] == 'd' || k[0] == 'e') }

// Stale reports whether enough of the image changed since the base was
// written for a new one to pay: 64 MiB of chunks, and a quarter of the
// base.
func (s *Store) Stale() bool {
	return !s.noBase && s.stale.Load() >= max(64<<20, s.baseBytes.Load()/4)
}

// Rebase writes a new base from the image as it is now and returns its
// bytes. The caller keeps every other write of the image out until it
// returns (replication: flushMu), so that no mark lands between the copy
// and the entries that supersede it. A failure leaves the old base and
// its entries as they were.
func (s *Store) Rebase() (uint64, error) {
	snap := s.db.NewSnapshot()
	defer snap.Close()
	applied, _, err := getIndex(snap, appliedKey)
	if err != nil {
		return 0, err
	}
	need, _ := s.db.EstimateDiskUsage(chunksLo, chunksHi)
	if err := s.checkSpace(need); err != nil {
		return 0, err
	}
	gen := s.baseGen + 1
	path := s.basePath(gen)
	entries, end, err := s.writeBase(snap, path, baseEntry{gen: gen, index: applied})
	if err == nil {
		err = s.commitBase(snap, entries, applied)
	}
	if err != nil {
		s.discard(path)
		return 0, err
	}
	s.baseGen = gen
	var held uint64
	for i := range entries {
		held += entries[i].length
	}
	s.baseBytes.Store(held)
	s.baseWritten.Add(end)
	s.stale.Store(0)
	s.removeBases(gen)
	return held, nil
}

// keyedEntry is a base entry and its key.
type keyedEntry struct {
	key []byte
	baseEntry
}

// writeBase copies the snapshot's arrays of baseMinArray or more into a
// new, synced file at path, each entry stamped like proto, and returns
// the entries in key order and the file's bytes.
func (s *Store) writeBase(snap *pebble.Snapshot, path string, proto baseEntry) ([]keyedEntry, uint64, error) {
	f, err := s.fs.Create(path, vfs.WriteCategoryUnspecified)
	if err != nil {
		return nil, 0, err
	}
	var entries []keyedEntry
	var end uint64 // the file's bytes so far
	// The array being copied: its chunk prefix (with part), the chunks
	// held until it reaches baseMinArray, and its entry once it has.
	var (
		prefix []byte
		held   []keyspace.Chunk
		cur    *keyedEntry
		last   int64 = -1
	)
	write := func(idx uint32, v []byte) error {
		for i := last + 1; i < int64(idx); i++ {
			cur.crcs = append(cur.crcs, zeroChunkCRC) // never written: a hole
		}
		if _, err := f.WriteAt(v, int64(cur.off)+int64(idx)*engine.ChunkSize); err != nil {
			return err
		}
		cur.crcs = append(cur.crcs, crc32.Checksum(v, castagnoli))
		cur.length = uint64(idx)*engine.ChunkSize + uint64(len(v))
		last = int64(idx)
		return nil
	}
	finish := func() {
		if cur != nil {
			entries = append(entries, *cur)
			end = (cur.off + cur.length + baseAlign - 1) &^ (baseAlign - 1)
		}
		held, cur, last = held[:0], nil, -1
	}
	add := func(key, v []byte) error {
		if !keyed(key, 8) || len(v) > engine.ChunkSize {
			return ErrCorrupt
		}
		idx := binary.BigEndian.Uint32(key[len(key)-4:])
		if !bytes.Equal(key[:len(key)-4], prefix) {
			finish()
			prefix = append(prefix[:0], key[:len(key)-4]...)
		}
		if cur != nil {
			return write(idx, v)
		}
		held = append(held, keyspace.Chunk{Index: idx, Data: slices.Clone(v)})
		if uint64(idx)*engine.ChunkSize+uint64(len(v)) < baseMinArray {
			return nil
		}
		e := keyedEntry{key: slices.Clone(prefix), baseEntry: proto}
		e.key[0], e.off = 'b', end
		cur = &e
		for _, c := range held {
			if err := write(c.Index, c.Data); err != nil {
				return err
			}
		}
		held = held[:0]
		return nil
	}
	it, err := snap.NewIter(&pebble.IterOptions{LowerBound: chunksLo, UpperBound: chunksHi})
	if err == nil {
		for it.First(); it.Valid() && err == nil; it.Next() {
			err = add(it.Key(), it.Value())
		}
		finish()
		if cerr := it.Close(); err == nil {
			err = cerr
		}
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		var d vfs.File
		if d, err = s.fs.OpenDir(s.baseDir()); err == nil {
			err = d.Sync()
			d.Close()
		}
	}
	return entries, end, err
}

// commitBase makes entries the base's, in one table: it sets them, deletes
// the snapshot's other entries and every mark, and records applied as
// the marked index. By point deletions: a range deletion would span the
// chunks' keys, and the chunks would no longer load table by table.
func (s *Store) commitBase(snap *pebble.Snapshot, entries []keyedEntry, applied uint64) error {
	var old, marks [][]byte
	for _, r := range []struct {
		lo, hi []byte
		into   *[][]byte
	}{{baseLo, baseHi, &old}, {markLo, markHi, &marks}} {
		it, err := snap.NewIter(&pebble.IterOptions{LowerBound: r.lo, UpperBound: r.hi})
		if err != nil {
			return err
		}
		for it.First(); it.Valid(); it.Next() {
			*r.into = append(*r.into, slices.Clone(it.Key()))
		}
		if err := it.Close(); err != nil {
			return err
		}
	}
	t, err := s.newTable(uint64(len(entries)+len(old)+len(marks)) * 64)
	if err != nil {
		return err
	}
	del := func(k []byte) {
		if t.err == nil {
			t.err = t.w.Delete(k)
		}
	}
	i := 0
	for _, k := range old {
		for ; i < len(entries) && bytes.Compare(entries[i].key, k) < 0; i++ {
			t.set(entries[i].key, entries[i].encode())
		}
		if i < len(entries) && bytes.Equal(entries[i].key, k) {
			continue // replaced by the set below
		}
		del(k)
	}
	for ; i < len(entries); i++ {
		t.set(entries[i].key, entries[i].encode())
	}
	for _, k := range marks {
		del(k)
	}
	var idx [8]byte
	binary.LittleEndian.PutUint64(idx[:], applied)
	t.set(markedKey, idx[:])
	return t.Commit()
}

// removeBases removes every base file but keep's (0: all of them).
func (s *Store) removeBases(keep uint64) {
	names, _ := s.fs.List(s.baseDir())
	for _, name := range names {
		if keep == 0 || name != baseName(keep) {
			s.discard(s.fs.PathJoin(s.baseDir(), name))
		}
	}
}

// basedArray is an array to read from the base.
type basedArray struct {
	prefix string // its chunk key prefix, with the part
	dst    []byte
	e      baseEntry
	failed atomic.Bool
}

// baseLoad is the base's part of a load, under way: startBase starts it,
// wait ends it. Its reads fill only its arrays, so the chunks of every
// other array load from Pebble meanwhile.
type baseLoad struct {
	s      *Store
	arrays []*basedArray
	files  []io.Closer
	wg     sync.WaitGroup
}

// startBase starts reading into k, whose keys are loaded, every array the
// base holds and may be trusted for. It returns nil when there is none.
func (s *Store) startBase(k *keyspace.Keyspace, applied uint64) (*baseLoad, error) {
	marked, found, err := getIndex(s.db, markedKey)
	if err != nil && !errors.Is(err, ErrCorrupt) {
		return nil, err
	}
	if !found {
		return nil, nil // never written by a build that marks
	}
	if err != nil || marked != applied {
		s.warn("the image was written last by a build that keeps no base: loading it from Pebble")
		s.stale.Store(1 << 62) // the next quiet snapshot writes a new one
		return nil, nil
	}
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: baseLo, UpperBound: baseHi})
	if err != nil {
		return nil, err
	}
	var arrays []*basedArray
	var gen uint64
	for it.First(); it.Valid(); it.Next() {
		key := it.Key()
		e, err := decodeBaseEntry(it.Value(), s.opts.MaxValueBytes)
		if err != nil || !keyed(key, 4) || gen != 0 && e.gen != gen {
			s.warn("a base entry does not decode: loading the image from Pebble", "key", fmt.Sprintf("%q", key))
			arrays = nil
			break
		}
		gen = e.gen
		n := int(binary.BigEndian.Uint32(key[2:]))
		m, found, err := getIndex(s.db, markKey(key[1], string(key[6:6+n])))
		if err != nil && !errors.Is(err, ErrCorrupt) {
			it.Close()
			return nil, err
		}
		if found && (err != nil || m > e.index) {
			continue // written since the base (or a mark that does not decode)
		}
		dst := k.LoadTarget(key[1], string(key[6:6+n]), binary.BigEndian.Uint32(key[6+n:]))
		if uint64(len(dst)) < e.length {
			continue // another array now (or none)
		}
		prefix := slices.Clone(key)
		prefix[0] = 'c'
		arrays = append(arrays, &basedArray{prefix: string(prefix), dst: dst, e: e})
	}
	if err := it.Close(); err != nil {
		return nil, err
	}
	if len(arrays) == 0 {
		return nil, nil
	}
	path := s.basePath(gen)
	f, err := s.fs.Open(path)
	if err != nil {
		s.warn("the base cannot be opened: loading the image from Pebble", "err", err)
		return nil, nil
	}
	b := &baseLoad{s: s, arrays: arrays, files: []io.Closer{f}}
	var direct *os.File
	if s.fs == vfs.Default {
		if direct = openDirect(path); direct != nil {
			b.files = append(b.files, direct)
		}
	}
	type piece struct {
		a   *basedArray
		off uint64 // within the array
	}
	pieces := make(chan piece, 64)
	for range baseWorkers {
		b.wg.Go(func() {
			for p := range pieces {
				if p.a.failed.Load() {
					continue
				}
				n := min(basePiece, p.a.e.length-p.off)
				dst := p.a.dst[p.off : p.off+n]
				if err := readPiece(direct, f, dst, int64(p.a.e.off+p.off)); err != nil {
					p.a.failed.Store(true)
					s.warn("reading the base: loading an array from Pebble", "err", err)
					continue
				}
				for c := uint64(0); c < n; c += engine.ChunkSize {
					chunk := dst[c:min(c+engine.ChunkSize, n)]
					if crc32.Checksum(chunk, castagnoli) != p.a.e.crcs[(p.off+c)/engine.ChunkSize] {
						p.a.failed.Store(true)
						s.warn("a base checksum does not match: loading an array from Pebble", "array", fmt.Sprintf("%q", p.a.prefix))
						break
					}
				}
			}
		})
	}
	b.wg.Go(func() {
		defer close(pieces)
		for _, a := range arrays {
			for off := uint64(0); off < a.e.length; off += basePiece {
				pieces <- piece{a, off}
			}
		}
	})
	return b, nil
}

// prefixes returns the chunk prefixes (with the part) of the arrays b
// reads, sorted: the chunks' load leaves them to it. Nil-safe.
func (b *baseLoad) prefixes() [][]byte {
	if b == nil {
		return nil
	}
	p := make([][]byte, len(b.arrays))
	for i, a := range b.arrays {
		p[i] = []byte(a.prefix)
	}
	return p // the entries' order, the chunk keys'
}

// wait waits for b's reads and returns the chunk prefixes of the arrays
// it could not read or check, zeroed again, to load from Pebble instead.
// Nil-safe.
func (b *baseLoad) wait() [][]byte {
	if b == nil {
		return nil
	}
	b.wg.Wait()
	for _, f := range b.files {
		f.Close()
	}
	var failed [][]byte
	for _, a := range b.arrays {
		if a.failed.Load() {
			clear(a.dst[:a.e.length])
			failed = append(failed, []byte(a.prefix))
			continue
		}
		b.s.baseLoaded.Add(a.e.length)
	}
	return failed
}

// readPiece reads len(dst) bytes at off: its whole 4 KiB blocks with
// O_DIRECT straight into dst when dst is aligned and direct is open, the
// rest (and everything otherwise) through f.
func readPiece(direct *os.File, f vfs.File, dst []byte, off int64) error {
	done := 0
	if direct != nil && uintptr(unsafe.Pointer(unsafe.SliceData(dst)))%baseAlign == 0 && off%baseAlign == 0 {
		for whole := len(dst) &^ (baseAlign - 1); done < whole; {
			n, err := preadDirect(direct, dst[done:whole], off+int64(done))
			if err != nil || n <= 0 || n%baseAlign != 0 {
				break // the rest through f, which reports what it meets
			}
			done += n
		}
	}
	if done < len(dst) {
		if _, err := f.ReadAt(dst[done:], off+int64(done)); err != nil {
			return err
		}
	}
	return nil
}

// warn logs a problem the store works around.
func (s *Store) warn(msg string, args ...any) {
	if s.opts.Logger != nil {
		s.opts.Logger.Warn(msg, append(args, "component", "image")...)
	}
}
