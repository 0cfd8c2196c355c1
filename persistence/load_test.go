package persistence

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/bfserver/bfserver/command"
	"github.com/bfserver/bfserver/keyspace"
	"github.com/cockroachdb/pebble/v2/sstable"
)

// loadBoth loads the image table by table (when it is one sorted run) and
// through Pebble's iterators, checks both give the same keyspace, and
// returns it.
func loadBoth(t *testing.T, s *Store) *keyspace.Keyspace {
	t.Helper()
	direct, applied, err := s.Load()
	if err != nil {
		t.Fatal(err)
	}
	s.throughPebble = true
	generic, applied2, err := s.Load()
	s.throughPebble = false
	if err != nil {
		t.Fatal(err)
	}
	if applied != applied2 {
		t.Fatalf("applied %d table by table, %d through Pebble", applied, applied2)
	}
	sameDigests(t, digests(generic), digests(direct))
	return direct
}

// sortedRun reports whether the image's chunks are one sorted run a load
// reads table by table.
func sortedRun(s *Store) bool {
	run := s.openChunkRun()
	for _, r := range run {
		r.Close()
	}
	return run != nil
}

// chunkVersions counts the chunks in a sorted run's tables, and their
// records (versions).
func chunkVersions(t *testing.T, s *Store) (keys, records int) {
	t.Helper()
	seen := map[string]bool{}
	for _, r := range s.openChunkRun() {
		it, err := r.NewCompactionIter(sstable.IterTransforms{}, sstable.NoReadEnv, nil, sstable.TableBlobContext{})
		if err != nil {
			t.Fatal(err)
		}
		for kv := it.First(); kv != nil; kv = it.Next() {
			if kv.K.UserKey[0] == 'c' {
				records++
				seen[string(kv.K.UserKey)] = true
			}
		}
		it.Close()
		r.Close()
	}
	return len(seen), records
}

func bfAdd(k *keyspace.Keyspace, key, prefix string, n int) {
	k.Apply(&command.Cmd{Op: command.BFAdd, Key: []byte(key), Items: items(prefix, n), Multi: true, ErrorRate: 0.01, Capacity: 1000, Expansion: 2, MaxBytes: 1 << 30})
}

// TestLoadSortedRun: writes over the same chunks leave them in several
// levels, which load through Pebble; once compacted they are one sorted
// run, which loads table by table to the same keyspace, the live one,
// also when the compaction kept older versions of chunks for a snapshot
// open across it, when a key was replaced (its chunks range-deleted), and
// after a flush that changed no filter.
func TestLoadSortedRun(t *testing.T) {
	s := openMem(t)
	k := keyspace.New()
	k.TrackChanges()
	idx := uint64(0)
	// step writes the changes (and extra) and checks whether the image is
	// one sorted run, and that it loads back to k either way.
	step := func(extra map[string][]byte, run bool, what string) {
		t.Helper()
		idx++
		if err := write(s, k, extra, idx); err != nil {
			t.Fatal(err)
		}
		if sortedRun(s) != run {
			t.Fatalf("%s: one sorted run is %v, want %v", what, !run, run)
		}
		sameDigests(t, digests(k), digests(loadBoth(t, s)))
	}
	compact := func() {
		t.Helper()
		if err := s.db.Compact(context.Background(), []byte{0}, []byte{0xff}, false); err != nil {
			t.Fatal(err)
		}
		if !sortedRun(s) {
			t.Fatal("not one sorted run after a compaction")
		}
		sameDigests(t, digests(k), digests(loadBoth(t, s)))
	}
	bfAdd(k, "b", "a", 50000)
	k.Apply(&command.Cmd{Op: command.CFAdd, Key: []byte("c"), Items: items("x", 1000), Multi: true, Capacity: 64, BucketSize: 2, MaxIterations: 20, Expansion: 1, MaxExpansions: 64, MaxBytes: 1 << 30})
	step(nil, true, "the first write into an empty image")
	bfAdd(k, "b", "b", 20000)
	bfAdd(k, "d", "d", 100)
	step(nil, false, "a second write over the same chunks")

	snap := s.NewSnapshot() // keeps the chunks written so far through the compaction
	bfAdd(k, "b", "c", 20000)
	step(nil, false, "a third write")
	compact()
	if keys, records := chunkVersions(t, s); records <= keys {
		t.Fatalf("the compaction kept %d records of %d chunks: no older versions for the snapshot", records, keys)
	}
	snap.Close()

	// "d" replaced: its old chunks go by a range deletion.
	k.Apply(&command.Cmd{Op: command.Del, Keys: [][]byte{[]byte("d")}})
	k.Apply(&command.Cmd{Op: command.BFReserve, Key: []byte("d"), ErrorRate: 0.001, Capacity: 5000, Expansion: 1, MaxBytes: 1 << 30})
	bfAdd(k, "d", "e", 10)
	step(nil, false, "a replaced key")
	compact()

	// A flush that changed no filter spans the chunks' range (the applied
	// index to the replicated metadata) without holding any.
	step(map[string][]byte{"members": []byte("{}")}, true, "a flush without chunks")
	bfAdd(k, "b", "f", 10)
	step(nil, false, "a flush with chunks over the run")
}

// TestCompactShadowed: chunks written over and over sit in several
// levels; CompactShadowed rewrites them into the bottom one, once.
func TestCompactShadowed(t *testing.T) {
	s := openMem(t)
	k := keyspace.New()
	k.TrackChanges()
	for i := 0; i < 4; i++ {
		bfAdd(k, "b", string(rune('a'+i)), 100000) // every chunk dirty
		if err := write(s, k, nil, uint64(i+1)); err != nil {
			t.Fatal(err)
		}
	}
	levels := s.db.Metrics().Levels
	before := s.db.Metrics().Total().TablesSize
	if levels[len(levels)-1].TablesSize*4 >= before*3 {
		t.Fatalf("the writes left %d of %d bytes in the bottom level: nothing shadowed", levels[len(levels)-1].TablesSize, before)
	}
	did, err := s.CompactShadowed()
	if err != nil || !did {
		t.Fatalf("compacted %v, %v", did, err)
	}
	m := s.db.Metrics()
	live := int64(k.Lookup(0, []byte("b"), 0).Bloom().Bytes())
	if bottom := m.Levels[len(m.Levels)-1].TablesSize; bottom != m.Total().TablesSize || bottom > live+live/8 {
		t.Fatalf("after compacting: %d bytes at the bottom of %d (%d before) for a %d-byte filter", bottom, m.Total().TablesSize, before, live)
	}
	if did, err := s.CompactShadowed(); did || err != nil {
		t.Fatalf("compacted a compacted image: %v, %v", did, err)
	}
	if !sortedRun(s) {
		t.Fatal("not one sorted run after CompactShadowed")
	}
	sameDigests(t, digests(k), digests(loadBoth(t, s)))
}

// TestLoadDamagedTable: a flipped byte in a table's chunks fails the load
// with an error, table by table and through Pebble alike, never a panic
// or a filter loaded with it.
func TestLoadDamagedTable(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	k := keyspace.New()
	k.TrackChanges()
	bfAdd(k, "b", "a", 200000)
	if err := write(s, k, nil, 1); err != nil {
		t.Fatal(err)
	}
	if !sortedRun(s) {
		t.Fatal("not one sorted run")
	}
	s.Close()
	tables, _ := filepath.Glob(filepath.Join(dir, "*.sst"))
	slices.SortFunc(tables, func(a, b string) int { return int(fileSize(t, b) - fileSize(t, a)) })
	f, err := os.OpenFile(tables[0], os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	var b [1]byte
	off := fileSize(t, tables[0]) / 3 // among the data blocks
	f.ReadAt(b[:], off)
	b[0] ^= 0x40
	f.WriteAt(b[:], off)
	f.Close()

	for _, through := range []bool{false, true} {
		s, err := Open(Options{Dir: dir})
		if err != nil {
			t.Fatal(err)
		}
		s.throughPebble = through
		_, _, err = s.Load()
		s.Close()
		if err == nil || !strings.Contains(err.Error(), "checksum") && !errors.Is(err, ErrCorrupt) {
			t.Fatalf("through Pebble %v: loading a damaged table: %v", through, err)
		}
		t.Logf("through Pebble %v: %v", through, err)
	}
}

func fileSize(t *testing.T, path string) int64 {
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}

// largeArrays adds to k a Bloom filter "big" of bigCapacity at 0.1%, a
// chain "scaled" in db 3 grown by scaledItems, and a Cuckoo filter "cf"
// of cfCapacity, each with items.
func largeArrays(k *keyspace.Keyspace, bigCapacity uint64, scaledItems int, cfCapacity uint64) {
	k.Apply(&command.Cmd{Op: command.BFReserve, Key: []byte("big"), ErrorRate: 0.001, Capacity: bigCapacity, Expansion: 2, MaxBytes: 1 << 30})
	k.Apply(&command.Cmd{Op: command.BFAdd, Key: []byte("big"), Items: items("i", 20000), Multi: true, ErrorRate: 0.01, Capacity: 1000, Expansion: 2, MaxBytes: 1 << 30})
	k.Apply(&command.Cmd{Op: command.BFReserve, DB: 3, Key: []byte("scaled"), ErrorRate: 0.01, Capacity: 100, Expansion: 4, MaxBytes: 1 << 30})
	k.Apply(&command.Cmd{Op: command.BFAdd, DB: 3, Key: []byte("scaled"), Items: items("s", scaledItems), Multi: true, ErrorRate: 0.01, Capacity: 1000, Expansion: 2, MaxBytes: 1 << 30})
	k.Apply(&command.Cmd{Op: command.CFReserve, Key: []byte("cf"), Capacity: cfCapacity, BucketSize: 2, MaxIterations: 20, Expansion: 1, MaxBytes: 1 << 30})
	k.Apply(&command.Cmd{Op: command.CFAdd, Key: []byte("cf"), Items: items("c", 5000), Multi: true, Capacity: cfCapacity, BucketSize: 2, MaxIterations: 20, Expansion: 1, MaxExpansions: 64, MaxBytes: 1 << 30})
}

// TestLoadLargeArrays: arrays of several MiB (many chunks each) load back
// to the live keyspace both ways, in two dbs, a scaled Bloom chain's
// links and a Cuckoo filter's tables alike.
func TestLoadLargeArrays(t *testing.T) {
	s := openMem(t)
	k := keyspace.New()
	k.TrackChanges()
	largeArrays(k, 4_000_000, 600000, 8<<20)
	var large int
	k.EachArray(func(_ uint8, _ string, _ uint32, size uint64) {
		if size >= 4<<20 {
			large++
		}
	})
	if large < 3 {
		t.Fatalf("%d arrays of 4 MiB or more, want 3", large)
	}
	if err := write(s, k, nil, 1); err != nil {
		t.Fatal(err)
	}
	if err := s.db.Compact(context.Background(), []byte{0}, []byte{0xff}, false); err != nil {
		t.Fatal(err)
	}
	if !sortedRun(s) {
		t.Fatal("not one sorted run after a compaction")
	}
	sameDigests(t, digests(k), digests(loadBoth(t, s)))
}

// TestOutside: the ranges a load iterates beside the base's arrays hold
// every key that starts with none of them, and no key that does, from
// any bounds (a bound may fall inside an array's chunks, or past them).
func TestOutside(t *testing.T) {
	var prefixes [][]byte
	for _, key := range []string{"a", "b", "bb", "f0", "f1", "z"} {
		for _, part := range []uint32{0, 1, 255, 256} {
			p := chunkKey(0, key, keyspace.Chunk{Part: part})
			prefixes = append(prefixes, p[:len(p)-4])
		}
	}
	slices.SortFunc(prefixes, bytes.Compare)
	keys := [][]byte{chunksLo, chunksHi}
	for _, key := range []string{"", "a", "b", "ba", "bb", "bbb", "f", "f0", "f1", "f2", "y", "z", "zz"} {
		for _, part := range []uint32{0, 1, 2, 255, 256, 0xffffffff} {
			for _, index := range []uint32{0, 1, 0xff, 0xffffffff} {
				keys = append(keys, chunkKey(0, key, keyspace.Chunk{Part: part, Index: index}))
			}
		}
	}
	skipped := func(k []byte) bool {
		return slices.ContainsFunc(prefixes, func(p []byte) bool { return bytes.HasPrefix(k, p) })
	}
	for i, lo := range keys {
		for j := i; j < len(keys); j += 5 {
			hi := keys[j]
			ranges := outside(lo, hi, prefixes)
			for _, k := range keys {
				in := 0
				for _, r := range ranges {
					if bytes.Compare(r[0], k) <= 0 && bytes.Compare(k, r[1]) < 0 {
						in++
					}
				}
				want := 0
				if bytes.Compare(lo, k) <= 0 && bytes.Compare(k, hi) < 0 && !skipped(k) {
					want = 1
				}
				if in != want {
					t.Fatalf("outside(%q, %q): key %q in %d ranges, want %d (ranges %q)", lo, hi, k, in, want, ranges)
				}
			}
		}
	}
}
