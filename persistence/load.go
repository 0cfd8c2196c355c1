package persistence

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"slices"
	"sync/atomic"

	"github.com/bfserver/bfserver/engine"
	"github.com/bfserver/bfserver/keyspace"
	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/objstorage/objstorageprovider"
	"github.com/cockroachdb/pebble/v2/sstable"
	"github.com/cockroachdb/pebble/v2/sstable/block"
)

// Loading the chunks.
//
// The chunks are nearly all of an image's bytes, and a load copies each
// into an array allocated for it moments before. On two cores the copy and
// the first touch of that fresh memory cost as much as the reads: a load is
// paced by the CPU, not the disk, so it spares the CPU what it can.
//
// When the tables holding chunks are one sorted run with nothing
// deleted, merged or shadowed (what a snapshot's compaction leaves, see
// CompactShadowed), each table is read on its own, front to back with the
// operating system's read-ahead, into a few reused buffers: no block
// cache, no allocation per block, no merge. Otherwise the chunks load
// through Pebble's iterators, in key ranges.
//
// Through Pebble, loadWorkers ranges load at once, so that the disk
// always has reads waiting, whatever the cores: from a cold page cache,
// 943 MiB loaded in 1.42 s with 2 ranges and 1.05 s with 8 on 2 cores.
// Table by table, each table reads ahead by itself, and tableWorkers
// suffice: with 8 the read-ahead queued before the Raft log's own reads
// (bbolt rebuilds its freelist alongside the load, one page at a time)
// and a start took 0.82-1.12 s, with 4 0.81-0.93 s (same image, 6 runs
// each, alternating).
const (
	loadWorkers  = 8
	tableWorkers = 4
)

// Chunk keys are in ["c", "d").
var chunksLo, chunksHi = []byte("c"), []byte("d")

// loadAllChunks loads every stored chunk into k, whose keys are loaded,
// but those of the arrays the base is loading (their chunk prefixes, with
// the part, sorted, in skip): with some, through Pebble's iterators, over
// the ranges between them.
func (s *Store) loadAllChunks(k *keyspace.Keyspace, skip [][]byte) error {
	if !s.throughPebble && len(skip) == 0 {
		if run := s.openChunkRun(); run != nil {
			return loadTables(k, run)
		}
	}
	skipped := make(map[string]bool, len(skip))
	for _, p := range skip {
		skipped[string(p)] = true
	}
	bounds := chunkRanges(k, loadWorkers, skipped)
	return parallel(len(bounds)-1, func(i int) error {
		for _, r := range outside(bounds[i], bounds[i+1], skip) {
			if err := s.loadChunks(k, r[0], r[1]); err != nil {
				return err
			}
		}
		return nil
	})
}

// outside returns the parts of [lo, hi) that hold no key starting with
// any of prefixes (sorted, none a prefix of another, as chunk prefixes
// are): a load iterates those instead of seeking past every array the
// base holds, which once cost a start right after a bulk load, its
// tables not yet compacted, 0.3 s.
func outside(lo, hi []byte, prefixes [][]byte) [][2][]byte {
	var r [][2][]byte
	for _, p := range prefixes {
		if bytes.Compare(p, hi) >= 0 {
			break
		}
		end := prefixEnd(p)
		if bytes.Compare(end, lo) <= 0 {
			continue
		}
		if bytes.Compare(lo, p) < 0 {
			r = append(r, [2][]byte{lo, p})
		}
		if lo = end; bytes.Compare(lo, hi) >= 0 {
			return r
		}
	}
	return append(r, [2][]byte{lo, hi})
}

// parallel runs fn(0) … fn(n-1) at once and returns the first error.
func parallel(n int, fn func(int) error) error {
	errs := make(chan error, n)
	for i := range n {
		go func() { errs <- fn(i) }()
	}
	var first error
	for range n {
		if err := <-errs; err != nil && first == nil {
			first = err
		}
	}
	return first
}

// loadChunk loads one stored chunk, its key and value as stored.
func loadChunk(k *keyspace.Keyspace, key, value []byte) error {
	if !keyed(key, 8) {
		return ErrCorrupt
	}
	n := int(binary.BigEndian.Uint32(key[2:]))
	c := keyspace.Chunk{
		Part:  binary.BigEndian.Uint32(key[6+n:]),
		Index: binary.BigEndian.Uint32(key[10+n:]),
		Data:  value,
	}
	if err := k.LoadChunk(key[1], string(key[6:6+n]), c); err != nil {
		return fmt.Errorf("%w: chunk of %q: %v", ErrCorrupt, key[6:6+n], err)
	}
	return nil
}

// keyed reports whether key is laid out as a chunk key is up to its key:
// a letter, the db, the key's length and the key, then tail bytes (8 for
// a chunk's part and index, 4 for a base entry's part).
func keyed(key []byte, tail int) bool {
	return len(key) >= 6 && uint64(len(key)) == 6+uint64(binary.BigEndian.Uint32(key[2:]))+uint64(tail)
}

// ---- through Pebble's iterators ----

// chunkRanges splits the chunk keys into about n ranges of equal bytes,
// by the arrays the loaded metadata describes but those in skip (by chunk
// prefix, with the part): n+1 bounds, the first "c" and the last "d".
func chunkRanges(k *keyspace.Keyspace, n int, skip map[string]bool) [][]byte {
	type array struct {
		db   uint8
		key  string
		part uint32
		size uint64
	}
	var arrays []array
	var total uint64
	k.EachArray(func(db uint8, key string, part uint32, size uint64) {
		if len(skip) > 0 {
			p := chunkKey(db, key, keyspace.Chunk{Part: part})
			if skip[string(p[:len(p)-4])] {
				return
			}
		}
		arrays = append(arrays, array{db, key, part, size})
		total += size
	})
	slices.SortFunc(arrays, func(a, b array) int {
		return bytes.Compare(chunkKey(a.db, a.key, keyspace.Chunk{Part: a.part}), chunkKey(b.db, b.key, keyspace.Chunk{Part: b.part}))
	})
	bounds := [][]byte{chunksLo}
	n = max(1, min(n, 8))
	step := total/uint64(n) + 1
	var done uint64
	next := step
	for _, a := range arrays {
		for done+a.size >= next && len(bounds) < n {
			chunk := uint32((next - done) / engine.ChunkSize)
			bounds = append(bounds, chunkKey(a.db, a.key, keyspace.Chunk{Part: a.part, Index: chunk}))
			next += step
		}
		done += a.size
	}
	return append(bounds, chunksHi)
}

// loadChunks loads the stored chunks with keys in [lo, hi).
func (s *Store) loadChunks(k *keyspace.Keyspace, lo, hi []byte) error {
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: hi})
	if err != nil {
		return err
	}
	defer it.Close()
	for it.First(); it.Valid(); it.Next() {
		if err := loadChunk(k, it.Key(), it.Value()); err != nil {
			return err
		}
	}
	return it.Error()
}

// ---- table by table ----

// openChunkRun opens the tables that hold chunks if they are one sorted
// run that needs no merge: the tables of the deepest level that has any
// in the chunks' range, no two overlapping, and by their properties
// nothing in them merged, range-keyed or kept in a blob file, and nothing
// deleted (no point or range deletion) unless all of a table's records
// share one sequence number; every table above them must hold no chunk
// and no range deletion (a flush that changed no filter still spans the
// chunks' range, from the applied index to the replicated metadata). Then
// the newest version of each chunk in its table is the image's. It
// returns nil otherwise, or if a table cannot be opened (a compaction may
// have just removed it): the caller loads through Pebble instead.
func (s *Store) openChunkRun() []runTable {
	levels, err := s.db.SSTables(pebble.WithProperties())
	if err != nil {
		return nil
	}
	spans := func(t pebble.SSTableInfo) bool {
		return bytes.Compare(t.Largest.UserKey, chunksLo) >= 0 && bytes.Compare(t.Smallest.UserKey, chunksHi) < 0
	}
	runLevel := -1
	for level, tables := range levels {
		if slices.ContainsFunc(tables, spans) {
			runLevel = level
		}
	}
	if runLevel < 0 {
		return nil // no chunks at all: nothing to gain
	}
	var run []pebble.SSTableInfo
	for level, tables := range levels {
		for _, t := range tables {
			if !spans(t) {
				continue
			}
			p := t.Properties
			if t.Virtual || t.BackingType != pebble.BackingTypeLocal || p == nil || p.NumMergeOperands != 0 ||
				p.NumRangeKeySets != 0 || p.NumRangeKeyUnsets != 0 || p.NumRangeKeyDels != 0 || p.NumValuesInBlobFiles != 0 {
				return nil
			}
			if level != runLevel {
				if p.NumRangeDeletions != 0 || !s.chunkFree(t.BackingSSTNum.String()+".sst") {
					return nil // chunks in two levels
				}
				continue
			}
			// A deletion deletes only what is older than itself: none of a
			// table whose records share one sequence number (an ingested
			// flush, whose range deletions drop older tables' chunks).
			if (p.NumDeletions != 0 || p.NumSizedDeletions != 0 || p.NumRangeDeletions != 0) && t.SmallestSeqNum != t.LargestSeqNum {
				return nil
			}
			run = append(run, t)
		}
	}
	// Level 0's tables may overlap; the others' never do.
	slices.SortFunc(run, func(a, b pebble.SSTableInfo) int { return bytes.Compare(a.Smallest.UserKey, b.Smallest.UserKey) })
	for i := 1; i < len(run); i++ {
		if bytes.Compare(run[i-1].Largest.UserKey, run[i].Smallest.UserKey) >= 0 {
			return nil
		}
	}
	tables := make([]runTable, 0, len(run))
	for _, t := range run {
		name := t.BackingSSTNum.String() + ".sst"
		r, err := s.openTable(name)
		if err != nil {
			for _, t := range tables {
				t.Close()
			}
			return nil
		}
		tables = append(tables, runTable{r, name})
	}
	return tables
}

// chunkFree reports whether a table holds no chunk (false if it cannot
// tell).
func (s *Store) chunkFree(name string) bool {
	r, err := s.openTable(name)
	if err != nil {
		return false
	}
	defer r.Close()
	it, err := r.NewPointIter(context.Background(), sstable.IterOptions{Lower: chunksLo, Upper: chunksHi, FilterBlockSizeLimit: sstable.NeverUseFilterBlock})
	if err != nil {
		return false
	}
	free := it.First() == nil
	return it.Close() == nil && free
}

// runTable is an open table of a sorted run, and its file's name.
type runTable struct {
	*sstable.Reader
	name string
}

// readahead reads a table front to back with the operating system's
// read-ahead (fadvise sequential), as Pebble's compactions do.
var readahead = objstorageprovider.NewReadaheadConfig()

func (s *Store) openTable(name string) (*sstable.Reader, error) {
	path := s.fs.PathJoin(s.opts.Dir, name)
	f, err := s.fs.Open(path)
	if err != nil {
		return nil, err
	}
	readable, err := objstorageprovider.NewFileReadable(f, s.fs, readahead, path)
	if err != nil {
		f.Close()
		return nil, err
	}
	r, err := sstable.NewReader(context.Background(), readable, sstable.ReaderOptions{})
	if err != nil {
		readable.Close()
		return nil, err
	}
	return r, nil
}

// loadTables loads the chunks of a sorted run's tables (openChunkRun),
// tableWorkers tables at a time, in key order, and closes them.
func loadTables(k *keyspace.Keyspace, tables []runTable) error {
	var next atomic.Int64
	var failed atomic.Bool
	err := parallel(min(tableWorkers, len(tables)), func(int) error {
		var pool block.BufferPool
		pool.Init(4)
		defer pool.Release()
		for !failed.Load() {
			i := int(next.Add(1) - 1)
			if i >= len(tables) {
				return nil
			}
			if err := loadTable(k, tables[i].Reader, &pool); err != nil {
				failed.Store(true)
				return fmt.Errorf("table %s: %w", tables[i].name, err)
			}
		}
		return nil
	})
	for _, t := range tables {
		if cerr := t.Close(); err == nil {
			err = cerr
		}
	}
	return err
}

// loadTable loads the chunks in one table of a sorted run: of each key,
// the newest version (the first in the table; older ones are kept only
// for snapshots that were open when it was written).
func loadTable(k *keyspace.Keyspace, r *sstable.Reader, pool *block.BufferPool) error {
	it, err := r.NewCompactionIter(sstable.IterTransforms{}, sstable.ReadEnv{Block: block.ReadEnv{BufferPool: pool}}, nil, sstable.TableBlobContext{})
	if err != nil {
		return err
	}
	var prev []byte
	for kv := it.First(); kv != nil; kv = it.Next() {
		key := kv.K.UserKey
		if bytes.Compare(key, chunksLo) < 0 || bytes.Compare(key, chunksHi) >= 0 {
			continue
		}
		if prev != nil && bytes.Equal(key, prev) {
			continue
		}
		prev = append(prev[:0], key...)
		if kind := kv.K.Kind(); kind != pebble.InternalKeyKindSet && kind != pebble.InternalKeyKindSetWithDelete || !kv.V.IsInPlaceValue() {
			it.Close()
			return fmt.Errorf("%w: chunk %q: a %v record where a value was expected", ErrCorrupt, key, kind)
		}
		if err := loadChunk(k, key, kv.V.InPlaceValue()); err != nil {
			it.Close()
			return err
		}
	}
	return it.Close()
}
