package persistence

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/bfserver/bfserver/command"
	"github.com/bfserver/bfserver/keyspace"
	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// largeKeyspace holds arrays the base takes (large Blooms in db 0 and 5,
// a Cuckoo filter) and a scaled chain in db 3 and small filters it leaves
// to Pebble.
func largeKeyspace() *keyspace.Keyspace {
	k := keyspace.New()
	k.TrackChanges()
	largeArrays(k, 2_000_000, 300000, 4<<20)
	k.Apply(&command.Cmd{Op: command.BFReserve, DB: 5, Key: []byte("keep"), ErrorRate: 0.001, Capacity: 1_000_000, Expansion: 2, MaxBytes: 1 << 30})
	k.Apply(&command.Cmd{Op: command.BFAdd, DB: 5, Key: []byte("keep"), Items: items("k", 1000), Multi: true, ErrorRate: 0.01, Capacity: 1000, Expansion: 2, MaxBytes: 1 << 30})
	for _, key := range []string{"small1", "small2"} {
		bfAdd(k, key, "x", 100)
	}
	k.Apply(windowReserve("win", 1_000_000)) // 2.4 MB: the base takes it
	wAdd(k, "win", "w", 300_000)
	return k
}

// loadChecked loads s three ways (from the base where it may be trusted,
// and without it table by table and through Pebble), checks each gives
// the live keyspace's digests, and returns the bytes the first read from
// the base.
func loadChecked(t *testing.T, s *Store, live *keyspace.Keyspace) uint64 {
	t.Helper()
	before := s.baseLoaded.Load()
	k, _, err := s.Load()
	if err != nil {
		t.Fatal(err)
	}
	sameDigests(t, digests(live), digests(k))
	fromBase := s.baseLoaded.Load() - before
	s.noBase = true
	sameDigests(t, digests(live), digests(loadBoth(t, s)))
	s.noBase = false
	return fromBase
}

// baseFiles lists the base directory.
func baseFiles(t *testing.T, s *Store) []string {
	t.Helper()
	s.discards.Wait() // an old base goes on a goroutine of its own
	names, err := s.fs.List(s.baseDir())
	if err != nil {
		t.Fatal(err)
	}
	return names
}

// TestBase: a start reads the large arrays from the base, and every
// change since (a filter written, replaced, deleted), every damage to the
// base (a flipped byte, a missing file) loads from Pebble instead, to the
// same state; a snapshot carries no base; a new base replaces the old.
// On a real directory (O_DIRECT where it allows) and an in-memory one.
func TestBase(t *testing.T) {
	for _, real := range []bool{true, false} {
		t.Run(map[bool]string{true: "disk", false: "memory"}[real], func(t *testing.T) {
			var s *Store
			if real {
				dir := t.TempDir()
				var err error
				if s, err = Open(Options{Dir: dir}); err != nil {
					t.Fatal(err)
				}
				defer func() { s.Close() }()
			} else {
				s = openMem(t)
			}
			k := largeKeyspace()
			var large uint64
			k.EachArray(func(_ uint8, _ string, _ uint32, size uint64) {
				if size >= baseMinArray {
					large += size
				}
			})
			if err := write(s, k, nil, 1); err != nil {
				t.Fatal(err)
			}
			if s.stale.Load() < large/2 {
				t.Fatalf("no base yet, and %d bytes count as stale of %d", s.stale.Load(), large)
			}
			if n := loadChecked(t, s, k); n != 0 {
				t.Fatalf("%d bytes loaded from a base not yet written", n)
			}
			n, err := s.Rebase()
			if err != nil {
				t.Fatal(err)
			}
			if n == 0 || n > large || s.stale.Load() != 0 {
				t.Fatalf("a base of %d bytes for %d bytes of large arrays (%d stale)", n, large, s.stale.Load())
			}
			if got := loadChecked(t, s, k); got != n {
				t.Fatalf("loaded %d bytes from a base of %d", got, n)
			}

			// Changed since: "big" and the window "win" written, "cf"
			// replaced by a smaller one, "scaled" deleted: each loads from
			// Pebble, "keep" from the base.
			bfAdd(k, "big", "more", 1000)
			wAdd(k, "win", "more", 1000)
			k.Apply(&command.Cmd{Op: command.Del, Keys: [][]byte{[]byte("cf")}})
			k.Apply(&command.Cmd{Op: command.CFReserve, Key: []byte("cf"), Capacity: 1 << 20, BucketSize: 4, MaxIterations: 20, Expansion: 1, MaxBytes: 1 << 30})
			k.Apply(&command.Cmd{Op: command.CFAdd, Key: []byte("cf"), Items: items("d", 100), Multi: true, Capacity: 1 << 20, BucketSize: 4, MaxIterations: 20, Expansion: 1, MaxExpansions: 64, MaxBytes: 1 << 30})
			if err := write(s, k, nil, 2); err != nil {
				t.Fatal(err)
			}
			got := loadChecked(t, s, k)
			if got == 0 || got >= n {
				t.Fatalf("after changes to two of its filters %d bytes loaded from a base of %d", got, n)
			}
			k.Apply(&command.Cmd{Op: command.Del, DB: 3, Keys: [][]byte{[]byte("scaled")}})
			if err := write(s, k, nil, 3); err != nil {
				t.Fatal(err)
			}
			if again := loadChecked(t, s, k); again != got {
				t.Fatalf("%d bytes loaded from the base after a delete, %d before", again, got)
			}

			// "keep" replaced by a small filter costs no mark (no entry fits
			// a small array), and grown back to its old size it is marked:
			// neither loads the base's old copy.
			for i, capacity := range []uint64{1000, 1_000_000} {
				k.Apply(&command.Cmd{Op: command.Del, DB: 5, Keys: [][]byte{[]byte("keep")}})
				k.Apply(&command.Cmd{Op: command.BFReserve, DB: 5, Key: []byte("keep"), ErrorRate: 0.001, Capacity: capacity, Expansion: 2, MaxBytes: 1 << 30})
				k.Apply(&command.Cmd{Op: command.BFAdd, DB: 5, Key: []byte("keep"), Items: items("r", 100), Multi: true, ErrorRate: 0.01, Capacity: 1000, Expansion: 2, MaxBytes: 1 << 30})
				if err := write(s, k, nil, uint64(4+i)); err != nil {
					t.Fatal(err)
				}
				if _, marked, err := getIndex(s.db, markKey(5, "keep")); err != nil || marked != (i == 1) {
					t.Fatalf("\"keep\" of capacity %d: marked %v (%v)", capacity, marked, err)
				}
				if got := loadChecked(t, s, k); got != 0 {
					t.Fatalf("\"keep\" of capacity %d replaced: %d bytes loaded from the base", capacity, got)
				}
			}

			// A new base, then damage to it.
			k.Apply(&command.Cmd{Op: command.BFReserve, DB: 3, Key: []byte("scaled"), ErrorRate: 0.001, Capacity: 1_000_000, Expansion: 2, MaxBytes: 1 << 30})
			bfAdd(k, "scaled", "t", 100)
			if err := write(s, k, nil, 6); err != nil {
				t.Fatal(err)
			}
			first := baseFiles(t, s)
			if n, err = s.Rebase(); err != nil {
				t.Fatal(err)
			}
			if files := baseFiles(t, s); len(files) != 1 || len(first) != 1 || files[0] == first[0] {
				t.Fatalf("base files %v after a rebase over %v", files, first)
			}
			if got := loadChecked(t, s, k); got != n {
				t.Fatalf("loaded %d bytes from a base of %d", got, n)
			}
			path := s.fs.PathJoin(s.baseDir(), baseFiles(t, s)[0])
			f, err := s.fs.OpenReadWrite(path, vfs.WriteCategoryUnspecified)
			if err != nil {
				t.Fatal(err)
			}
			b := make([]byte, 1)
			f.ReadAt(b, 4096*3+7) // within the first array
			b[0] ^= 0x10
			f.WriteAt(b, 4096*3+7)
			f.Close()
			if got := loadChecked(t, s, k); got == 0 || got >= n {
				t.Fatalf("with one array damaged %d bytes loaded from a base of %d", got, n)
			}
			if err := s.fs.Remove(path); err != nil {
				t.Fatal(err)
			}
			if got := loadChecked(t, s, k); got != 0 {
				t.Fatalf("%d bytes loaded from a removed base", got)
			}
			if n, err = s.Rebase(); err != nil {
				t.Fatal(err)
			}

			// A snapshot streams the image without the base's keys, and
			// installing one drops the base.
			var buf bytes.Buffer
			if err := s.WriteSnapshot(&buf); err != nil {
				t.Fatal(err)
			}
			dst := openMem(t)
			if err := dst.ReadSnapshot(bytes.NewReader(buf.Bytes())); err != nil {
				t.Fatal(err)
			}
			for _, st := range []*Store{dst, s} {
				if st == s {
					if err := s.ReadSnapshot(bytes.NewReader(buf.Bytes())); err != nil {
						t.Fatal(err)
					}
				}
				it, err := st.db.NewIter(&pebble.IterOptions{LowerBound: baseLo, UpperBound: []byte("f")})
				if err != nil {
					t.Fatal(err)
				}
				for it.First(); it.Valid(); it.Next() {
					if it.Key()[0] != 'c' {
						t.Fatalf("after a snapshot install a base key %q", it.Key())
					}
				}
				it.Close()
				if files := baseFiles(t, st); len(files) != 0 || st.stale.Load() == 0 {
					t.Fatalf("after a snapshot install base files %v, %d bytes stale", files, st.stale.Load())
				}
				if got := loadChecked(t, st, k); got != 0 {
					t.Fatalf("%d bytes from a base after a snapshot install", got)
				}
			}
			if !real {
				// A build that keeps no base wrote the image last: its flush
				// moved the applied index ("a") and not the marked one ("e").
				if _, err := s.Rebase(); err != nil {
					t.Fatal(err)
				}
				if got := loadChecked(t, s, k); got == 0 {
					t.Fatal("nothing loaded from a fresh base")
				}
				tb, err := s.newTable(0)
				if err != nil {
					t.Fatal(err)
				}
				tb.set(appliedKey, []byte{9, 0, 0, 0, 0, 0, 0, 0})
				if err := tb.Commit(); err != nil {
					t.Fatal(err)
				}
				if got := loadChecked(t, s, k); got != 0 {
					t.Fatalf("%d bytes loaded from the base after a flush that did not mark", got)
				}
				return
			}
			// Reopened: the entries' file stays, any other goes.
			if _, err := s.Rebase(); err != nil {
				t.Fatal(err)
			}
			live := baseFiles(t, s)
			s.Close()
			for _, stray := range []string{"00000000000000ff.arrays", "0000000000000001.arrays.tmp"} {
				if err := os.WriteFile(filepath.Join(s.opts.Dir, "base", stray), []byte("x"), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			if s, err = Open(Options{Dir: s.opts.Dir}); err != nil {
				t.Fatal(err)
			}
			if files := baseFiles(t, s); len(files) != 1 || files[0] != live[0] {
				t.Fatalf("reopened: base files %v, want %v", files, live)
			}
			if got := loadChecked(t, s, k); got == 0 {
				t.Fatal("nothing loaded from the base after reopening")
			}
			if _, err := s.Rebase(); err != nil {
				t.Fatal(err)
			}
			if files := baseFiles(t, s); len(files) != 1 || files[0] == live[0] || files[0] <= "00000000000000ff.arrays" {
				t.Fatalf("a rebase after a stray generation wrote %v", files)
			}
			// Without a base (--image-base false): the file goes, the load is
			// Pebble's, and no snapshot writes one.
			s.Close()
			if s, err = Open(Options{Dir: s.opts.Dir, NoBase: true}); err != nil {
				t.Fatal(err)
			}
			if files := baseFiles(t, s); len(files) != 0 || s.Stale() {
				t.Fatalf("with NoBase: base files %v, stale %v", files, s.Stale())
			}
			if got := loadChecked(t, s, k); got != 0 {
				t.Fatalf("with NoBase %d bytes loaded from a base", got)
			}
			// Its entries stay, their file gone: with a base again, the next
			// quiet snapshot writes one.
			s.Close()
			if s, err = Open(Options{Dir: s.opts.Dir}); err != nil {
				t.Fatal(err)
			}
			if !s.Stale() {
				t.Fatal("the base's file is gone, and no new one is due")
			}
			if got := loadChecked(t, s, k); got != 0 {
				t.Fatalf("%d bytes loaded from a base whose file is gone", got)
			}
		})
	}
}

// FuzzBaseEntry: any value either fails to decode or decodes to an entry
// that encodes back to it, and never allocates past its own size.
func FuzzBaseEntry(f *testing.F) {
	f.Add((&baseEntry{gen: 1, index: 7, off: 8192, length: 100, crcs: []uint32{5}}).encode()) // too short for the base
	f.Add((&baseEntry{gen: 2, index: 9, off: 0, length: 1 << 20, crcs: make([]uint32, 16)}).encode())
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, v []byte) {
		e, err := decodeBaseEntry(v, 1<<30)
		if err != nil {
			return
		}
		if !bytes.Equal(e.encode(), v) {
			t.Fatalf("%x decodes to %+v, which encodes to %x", v, e, e.encode())
		}
	})
}
