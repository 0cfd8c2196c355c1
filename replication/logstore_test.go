package replication

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/bfserver/bfserver/command"
	"github.com/bfserver/bfserver/internal/shrink"
	"github.com/hashicorp/raft"
	wal "github.com/hashicorp/raft-wal"
	"github.com/hashicorp/raft-wal/metadb"
	"github.com/hashicorp/raft-wal/types"
)

// openLogForTest opens the log store a data directory holds, as it is.
func openLogForTest(t testing.TB, dir string) logStore {
	t.Helper()
	kind := LogStoreBolt
	if exists(logStorePath(dir, LogStoreWAL)) {
		kind = LogStoreWAL
	}
	s, err := openStoreAt(logStorePath(dir, kind), kind, true, slog.Default())
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// testEntries are entries first.. with checksums, data of the sizes given
// (one of them over asideBytes, for raft-wal).
func testEntries(first uint64, sizes ...int) []*raft.Log {
	var out []*raft.Log
	for i, n := range sizes {
		data := bytes.Repeat([]byte{byte('a' + i%26)}, n)
		copy(data, fmt.Sprintf("entry-%d-", first+uint64(i)))
		l := &raft.Log{Index: first + uint64(i), Term: 3, Type: raft.LogCommand, Data: data, AppendedAt: time.Unix(1700000000, 0).UTC()}
		stamp(l)
		out = append(out, l)
	}
	return out
}

// sameLog fails unless s holds exactly want, checksums intact.
func sameLog(t *testing.T, s logStore, want []*raft.Log) {
	t.Helper()
	first, _ := s.FirstIndex()
	last, _ := s.LastIndex()
	if first != want[0].Index || last != want[len(want)-1].Index {
		t.Fatalf("the log holds %d to %d, not %d to %d", first, last, want[0].Index, want[len(want)-1].Index)
	}
	for _, w := range want {
		var got raft.Log
		if err := s.GetLog(w.Index, &got); err != nil {
			t.Fatalf("entry %d: %v", w.Index, err)
		}
		if err := checkEntry(&got); err != nil || got.Term != w.Term || !bytes.Equal(got.Data, w.Data) || !bytes.Equal(got.Extensions, w.Extensions) {
			t.Fatalf("entry %d read back as term %d, %d bytes, %v", w.Index, got.Term, len(got.Data), err)
		}
	}
}

func setStable(t *testing.T, s logStore) {
	t.Helper()
	if err := s.SetUint64([]byte("CurrentTerm"), 7); err != nil {
		t.Fatal(err)
	}
	if err := s.Set([]byte("LastVoteCand"), []byte("node-b")); err != nil {
		t.Fatal(err)
	}
}

func checkStable(t *testing.T, s logStore) {
	t.Helper()
	term, err := s.GetUint64([]byte("CurrentTerm"))
	cand, err2 := s.Get([]byte("LastVoteCand"))
	if err != nil || err2 != nil || term != 7 || string(cand) != "node-b" {
		t.Fatalf("stable values: term %d %v, vote %q %v", term, err, cand, err2)
	}
}

// TestLogStores: each store keeps entries exactly (data, checksums, an
// entry larger than raft-wal reads back in its log), its stable values
// across a reopen, and drops what DeleteRange asks; raft-wal's entries
// stored aside go with them.
func TestLogStores(t *testing.T) {
	for _, kind := range []string{LogStoreWAL, LogStoreBolt} {
		t.Run(kind, func(t *testing.T) {
			dir := t.TempDir()
			s, err := openLogStore(dir, kind, true, slog.Default())
			if err != nil {
				t.Fatal(err)
			}
			big := 70 << 20 // over raft-wal's 64 MiB frame limit; bbolt is slow to write it
			if kind == LogStoreBolt {
				big = 3 << 20
			}
			ents := testEntries(5, 100, 3<<20, 1<<20, big, 10, 10)
			if err := s.StoreLogs(ents); err != nil {
				t.Fatal(err)
			}
			setStable(t, s)
			sameLog(t, s, ents)
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			s = openLogForTest(t, dir)
			defer s.Close()
			sameLog(t, s, ents)
			checkStable(t, s)
			if err := s.DeleteRange(5, 6); err != nil {
				t.Fatal(err)
			}
			if err := s.DeleteRange(9, 10); err != nil {
				t.Fatal(err)
			}
			sameLog(t, s, ents[2:4])
			var l raft.Log
			if err := s.GetLog(5, &l); err != raft.ErrLogNotFound {
				t.Fatalf("an entry DeleteRange removed reads back: %v", err)
			}
			if kind == LogStoreWAL {
				// Only entry 8 (70 MiB) is still aside.
				files, _ := os.ReadDir(filepath.Join(dir, "wal", "aside"))
				if len(files) != 1 || files[0].Name() != asideName(8) {
					t.Fatalf("aside after DeleteRange: %v", files)
				}
			}
		})
	}
}

// TestWALAsideDamage: data stored aside that no longer matches its stub
// is an error on reading, not another entry.
func TestWALAsideDamage(t *testing.T) {
	dir := t.TempDir()
	s, err := openWAL(filepath.Join(dir, "wal"), true, slog.Default())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.StoreLogs(testEntries(1, 10, 3<<20)); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "wal", "aside", asideName(2))
	b, _ := os.ReadFile(path)
	b[1000] ^= 1
	os.WriteFile(path, b, 0o644)
	var l raft.Log
	if err := s.GetLog(2, &l); err == nil || !strings.Contains(err.Error(), "do not match") {
		t.Fatalf("damaged aside data: %v", err)
	}
	os.Remove(path)
	if err := s.GetLog(2, &l); err == nil {
		t.Fatal("missing aside data read")
	}
}

// TestWALFsyncPolicy: without a sync per append, raft-wal's appends leave
// their segment dirty until Sync, and a commit of the segment list (a
// truncation here) syncs them first; with one, nothing is ever left.
func TestWALFsyncPolicy(t *testing.T) {
	for _, sync := range []bool{false, true} {
		s, err := openWAL(filepath.Join(t.TempDir(), "wal"), sync, slog.Default())
		if err != nil {
			t.Fatal(err)
		}
		dirty := func() int {
			s.fs.mu.Lock()
			defer s.fs.mu.Unlock()
			return len(s.fs.dirty)
		}
		if err := s.StoreLogs(testEntries(1, 10, 10, 10)); err != nil {
			t.Fatal(err)
		}
		if got, want := dirty(), map[bool]int{false: 1, true: 0}[sync]; got != want {
			t.Fatalf("sync %v: %d dirty segments after an append", sync, got)
		}
		if err := s.DeleteRange(3, 3); err != nil {
			t.Fatal(err)
		}
		if dirty() != 0 {
			t.Fatalf("sync %v: a segment left dirty by a commit of the segment list", sync)
		}
		if err := s.StoreLogs(testEntries(3, 10)); err != nil {
			t.Fatal(err)
		}
		if err := s.Sync(); err != nil || dirty() != 0 {
			t.Fatalf("sync %v: Sync: %v, %d dirty", sync, err, dirty())
		}
		s.Close()
	}
}

// TestMoveLog: a data directory holding one kind of log opens as the
// other with every entry (checksums, an entry stored aside, an older
// bolt log's gap) and the stable values, the old store gone; and back.
func TestMoveLog(t *testing.T) {
	dir := t.TempDir()
	s, err := openLogStore(dir, LogStoreBolt, true, slog.Default())
	if err != nil {
		t.Fatal(err)
	}
	// A follower that installed a snapshot at 20 kept 3..4 and goes on
	// at 21.
	if err := s.StoreLogs(testEntries(3, 10, 10)); err != nil {
		t.Fatal(err)
	}
	ents := testEntries(21, 10, 5<<20, 10, 200)
	if err := s.StoreLogs(ents); err != nil {
		t.Fatal(err)
	}
	setStable(t, s)
	s.Close()
	s, err = openLogStore(dir, LogStoreWAL, true, slog.Default())
	if err != nil {
		t.Fatal(err)
	}
	sameLog(t, s, ents)
	checkStable(t, s)
	more := testEntries(25, 30)
	if err := s.StoreLogs(more); err != nil {
		t.Fatal(err)
	}
	s.Close()
	if exists(filepath.Join(dir, "raft.db")) || exists(filepath.Join(dir, "wal.new")) || exists(filepath.Join(dir, "raft.db.old")) {
		t.Fatal("the move left files behind")
	}
	s, err = openLogStore(dir, LogStoreBolt, true, slog.Default())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	sameLog(t, s, append(ents, more...))
	checkStable(t, s)
	if exists(filepath.Join(dir, "wal")) {
		t.Fatal("the move back left wal behind")
	}
}

// TestMoveLogCrash: a start after a move that crashed finds the log where
// it is: an unfinished copy (".new") is made again, a finished one whose
// source was not yet removed is taken and the source removed, whichever
// kind is asked for next; a half-removed source (".old") is removed.
func TestMoveLogCrash(t *testing.T) {
	ents := testEntries(1, 10, 20, 30)
	bolt := func(t *testing.T) string {
		dir := t.TempDir()
		s, err := openLogStore(dir, LogStoreBolt, true, slog.Default())
		if err != nil {
			t.Fatal(err)
		}
		s.StoreLogs(ents)
		setStable(t, s)
		s.Close()
		return dir
	}
	reopen := func(t *testing.T, dir, kind string) {
		t.Helper()
		s, err := openLogStore(dir, kind, true, slog.Default())
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		sameLog(t, s, ents)
		checkStable(t, s)
		for _, p := range []string{"raft.db.new", "wal.new", "raft.db.old", "wal.old", logStorePath("", otherLogStore(kind))} {
			if exists(filepath.Join(dir, p)) {
				t.Fatalf("%s left in the data directory", p)
			}
		}
	}
	t.Run("unfinished copy", func(t *testing.T) {
		dir := bolt(t)
		os.MkdirAll(filepath.Join(dir, "wal.new"), 0o755)
		os.WriteFile(filepath.Join(dir, "wal.new", "00000000000000000001-0000000000000000.wal"), []byte("junk"), 0o644)
		reopen(t, dir, LogStoreWAL)
	})
	for _, kind := range []string{LogStoreWAL, LogStoreBolt} {
		t.Run("finished copy, then "+kind, func(t *testing.T) {
			dir := bolt(t)
			// The copy, renamed into place, and the source still there.
			src, _ := openStoreAt(filepath.Join(dir, "raft.db"), LogStoreBolt, true, slog.Default())
			dst, _ := openStoreAt(filepath.Join(dir, "wal"), LogStoreWAL, true, slog.Default())
			if _, _, _, err := copyLog(src, dst); err != nil {
				t.Fatal(err)
			}
			src.Close()
			dst.Close()
			os.MkdirAll(filepath.Join(dir, "raft.db.old"), 0o755)
			reopen(t, dir, kind)
		})
	}
}

// tailFile is the tail segment of a wal directory, read whole.
func tailFile(t *testing.T, dir string) (string, []byte) {
	t.Helper()
	segs, err := walSegments(dir)
	if err != nil || len(segs) == 0 {
		t.Fatal(segs, err)
	}
	path := filepath.Join(dir, segs[len(segs)-1])
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return path, b
}

// frameBefore is the offset of the last frame header of type typ before
// the first copy of marker in a segment (the last commit frame, when
// marker is not there): the 8-byte boundaries before an entry's
// encoding (index, term, type, lengths: a few bytes).
func frameBefore(b []byte, marker string, typ byte) int {
	i := bytes.Index(b, []byte(marker)) - walFrameHeader
	if i < 0 {
		i = bytes.LastIndexFunc(b, func(r rune) bool { return r != 0 })
	}
	h := i &^ (walFrameHeader - 1)
	for b[h] != typ {
		h -= walFrameHeader
	}
	return h
}

// TestWALTail: what raft-wal's recovery would drop without a word is
// refused, naming the first entry lost and the way out (a batch that
// fails its checksum, a frame header that does not read, data after
// zeros), and what a crash leaves of an append that never reached its
// commit frame is taken, and zeroed.
func TestWALTail(t *testing.T) {
	write := func(t *testing.T) (string, []*raft.Log) {
		dir := filepath.Join(t.TempDir(), "wal")
		s, err := openWAL(dir, true, slog.Default())
		if err != nil {
			t.Fatal(err)
		}
		var all []*raft.Log
		for i := uint64(1); i <= 7; i += 2 { // four appends of two entries
			e := testEntries(i, 300, 300)
			if err := s.StoreLogs(e); err != nil {
				t.Fatal(err)
			}
			all = append(all, e...)
		}
		s.Close()
		return dir, all
	}
	refused := func(t *testing.T, dir string, first uint64) {
		t.Helper()
		s, err := openWAL(dir, true, slog.Default())
		if err == nil {
			s.Close()
			t.Fatal("a tail raft-wal would cut opened")
		}
		if !strings.Contains(err.Error(), fmt.Sprintf("raft log entry %d is damaged", first)) ||
			!strings.Contains(err.Error(), "writing zeros from byte") {
			t.Fatalf("refused with: %v", err)
		}
	}
	t.Run("last batch damaged", func(t *testing.T) {
		dir, _ := write(t)
		path, b := tailFile(t, dir)
		i := bytes.LastIndex(b, []byte("entry-8-"))
		b[i+100] ^= 1
		os.WriteFile(path, b, 0o644)
		refused(t, dir, 7)
	})
	t.Run("frame header damaged", func(t *testing.T) {
		dir, _ := write(t)
		path, b := tailFile(t, dir)
		b[frameBefore(b, "entry-3-", walEntry)] = 9
		os.WriteFile(path, b, 0o644)
		refused(t, dir, 3)
	})
	t.Run("frame length damaged", func(t *testing.T) {
		// Entry 5's length a MiB longer: the walk jumps past the rest
		// into zeros, as if entries 5 to 8 were an append cut short.
		dir, _ := write(t)
		path, b := tailFile(t, dir)
		b[frameBefore(b, "entry-5-", walEntry)+6] ^= 0x10
		os.WriteFile(path, b, 0o644)
		refused(t, dir, 5)
	})
	t.Run("data after zeros", func(t *testing.T) {
		dir, _ := write(t)
		path, b := tailFile(t, dir)
		b[len(b)-100] = 1
		os.WriteFile(path, b, 0o644)
		refused(t, dir, 9)
	})
	t.Run("last batch damaged, syncs deferred", func(t *testing.T) {
		// --fsync everysec or no: a power cut may damage any unsynced
		// batch, which the policy lets go; the tail is zeroed from the
		// damage and the log opens with the entries before it.
		dir, all := write(t)
		path, b := tailFile(t, dir)
		i := bytes.LastIndex(b, []byte("entry-8-"))
		b[i+100] ^= 1
		os.WriteFile(path, b, 0o644)
		s, err := openWAL(dir, false, slog.Default())
		if err != nil {
			t.Fatal(err)
		}
		sameLog(t, s, all[:6])
		appendsGoOn(t, s, dir, all[:6], testEntries(7, 50))
	})
	t.Run("append cut short", func(t *testing.T) {
		dir, all := write(t)
		path, b := tailFile(t, dir)
		// The second append's frames, copied after the last commit with
		// no commit frame of their own.
		from := frameBefore(b, "entry-3-", walEntry)
		to := frameBefore(b, "entry-5-", walCommit)
		end := frameBefore(b, "entry-9-", walCommit) + walFrameHeader // no entry 9: the last commit
		n := copy(b[end:], b[from:to])
		os.WriteFile(path, b, 0o644)
		s, err := openWAL(dir, true, slog.Default())
		if err != nil {
			t.Fatal(err)
		}
		sameLog(t, s, all)
		_, after := tailFile(t, dir)
		if !bytes.Equal(after[end:end+n], make([]byte, n)) {
			t.Fatal("the unacknowledged frames were not zeroed")
		}
		appendsGoOn(t, s, dir, all, testEntries(9, 50))
	})
}

// TestWALDamagedEntry: any byte of an entry's frame damaged (in a batch
// raft-wal does not check on opening) reads back as an error or as an
// entry that fails its checksum, never as another intact entry, and
// never panics.
func TestWALDamagedEntry(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "wal")
	s, err := openWAL(dir, true, slog.Default())
	if err != nil {
		t.Fatal(err)
	}
	if err := s.StoreLogs(testEntries(1, 40)); err != nil {
		t.Fatal(err)
	}
	if err := s.StoreLogs(testEntries(2, 40)); err != nil {
		t.Fatal(err)
	}
	s.Close()
	path, b := tailFile(t, dir)
	start := walFileHeader + walFrameHeader // entry 1's encoding
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for i := start; i < start+60; i++ {
		for _, v := range []byte{b[i] ^ 1, 0xff} {
			f.WriteAt([]byte{v}, int64(i))
			s, err := openWAL(dir, true, slog.Default())
			f.WriteAt(b[i:i+1], int64(i))
			if err != nil {
				continue // refused at the start: as good
			}
			var l raft.Log
			err = s.GetLog(1, &l)
			if err == nil {
				err = checkEntry(&l)
			}
			s.Close()
			if err == nil && !(l.Index == 1 && bytes.Equal(l.Data, testEntries(1, 40)[0].Data)) {
				t.Fatalf("byte %d set to %#x: entry 1 read back intact as %+v", i, v, l)
			}
		}
	}
}

// TestNodeMovesItsLog: a node whose data directory a build before
// raft-wal wrote (raft.db), stopped as kill -9 stops it, starts on
// raft-wal with every acknowledged write, takes new ones, and goes back
// to bolt the same way; INFO writestages counted the writes.
func TestNodeMovesItsLog(t *testing.T) {
	dir := t.TempDir()
	opts := Options{RaftAddr: freeAddr(t), RESPAddr: "127.0.0.1:1", DataDir: dir, FlushInterval: time.Hour, LogStore: LogStoreBolt}
	var acked []string
	write := func(n *Node, ctx context.Context, k int) {
		t.Helper()
		for i := range k {
			item := fmt.Sprintf("item-%d-%d", len(acked), i)
			if _, err := n.Write(ctx, []*command.Cmd{{Op: command.BFAdd, Key: []byte("f"), Items: [][]byte{[]byte(item)},
				ErrorRate: 0.01, Capacity: 1000, Expansion: 2, MaxBytes: 1 << 20}}); err != nil {
				t.Fatal(err)
			}
			acked = append(acked, item)
		}
	}
	check := func(n *Node) {
		t.Helper()
		for _, item := range acked {
			if r := n.State().Read(&command.Cmd{Op: command.BFExists, Key: []byte("f"), Items: [][]byte{[]byte(item)}}); r.Err != nil || r.Ints[0] != 1 {
				t.Fatalf("%s missing after the move: %+v", item, r)
			}
		}
	}
	for _, kind := range []string{LogStoreBolt, LogStoreWAL, LogStoreBolt} {
		opts.LogStore = kind
		n, ctx := openLeader(t, opts)
		if _, err := n.Barrier(ctx, false); err != nil {
			t.Fatal(err)
		}
		check(n)
		n.ResetWriteStages()
		write(n, ctx, 20)
		stages := map[string]string{}
		for _, f := range n.WriteStages() {
			stages[f[0]] = f[1]
		}
		if stages["raft_log_store"] != kind || !strings.HasPrefix(stages["stage_total"], "count=20,") || !strings.HasPrefix(stages["stage_store"], "count=") {
			t.Fatalf("INFO writestages: %v", stages)
		}
		crash(n)
	}
}

// FuzzScanTail: any bytes as a tail segment are read without a panic,
// and what is accepted ends within them.
func FuzzScanTail(f *testing.F) {
	dir := filepath.Join(f.TempDir(), "wal")
	s, err := openWAL(dir, true, slog.Default())
	if err != nil {
		f.Fatal(err)
	}
	s.StoreLogs(testEntries(1, 30, 200))
	s.StoreLogs(testEntries(3, 10))
	s.Close()
	segs, _ := walSegments(dir)
	b, _ := os.ReadFile(filepath.Join(dir, segs[0]))
	f.Add(b[:1024])
	f.Add(b[:100])
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		ts, err := scanTail(bytes.NewReader(b))
		if err != nil {
			t.Fatal(err)
		}
		if ts.problem == "" && len(b) >= walFileHeader && (ts.end > int64(len(b)) || ts.dirtyTo < ts.end) {
			t.Fatalf("accepted up to %d, dirty to %d, of %d bytes", ts.end, ts.dirtyTo, len(b))
		}
		intactCommit(b)
	})
}

// failingMeta is raft-wal's meta store, refusing commits once fail is
// set: a crash between a segment's sealing append and the commit of the
// rotation, as the files show it.
type failingMeta struct {
	metadb.BoltMetaDB
	fail bool
}

func (m *failingMeta) CommitState(st types.PersistentState) error {
	if m.fail {
		return errors.New("refused")
	}
	return m.BoltMetaDB.CommitState(st)
}

// TestWALSealedTail: a segment sealed by its last append (the index frame
// written and synced) whose rotation never reached the segment list
// (a crash in between) opens: raft-wal alone would refuse every append
// after it (ErrSealed), for good. Every entry is there, and appends go on.
func TestWALSealedTail(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "wal")
	os.MkdirAll(dir, 0o755)
	meta := &failingMeta{}
	w, err := wal.Open(dir, wal.WithSegmentSize(8192), wal.WithMetaStore(meta))
	if err != nil {
		t.Fatal(err)
	}
	meta.fail = true
	var all []*raft.Log
	for i := uint64(1); i <= 40; i++ {
		e := testEntries(i, 500)
		if err := w.StoreLogs(e); err != nil {
			break // sealed: the rotation failed
		}
		all = append(all, e...)
	}
	w.Close()
	meta.BoltMetaDB.Close()
	if len(all) == 40 {
		t.Fatal("the segment never sealed")
	}
	s, err := openWAL(dir, true, slog.Default())
	if err != nil {
		t.Fatal(err)
	}
	sameLog(t, s, all)
	appendsGoOn(t, s, dir, all, testEntries(uint64(len(all))+1, 100, 100))
}

// appendsGoOn appends more to s, which holds all, closes it, and checks
// that the store opened again holds both.
func appendsGoOn(t *testing.T, s *walStore, dir string, all, more []*raft.Log) {
	t.Helper()
	if err := s.StoreLogs(more); err != nil {
		t.Fatalf("an append after: %v", err)
	}
	s.Close()
	s, err := openWAL(dir, true, slog.Default())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	sameLog(t, s, append(all, more...))
}

// TestWALTailTruncated: entries before a truncation of the log's suffix
// (a follower dropping entries a new leader did not keep) read back after
// a restart. raft-wal v0.4.0 records the segment it truncates as sealed
// with no index (its issue #31), and read none of it after a restart.
func TestWALTailTruncated(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "wal")
	s, err := openWAL(dir, true, slog.Default())
	if err != nil {
		t.Fatal(err)
	}
	all := testEntries(1, 100, 200, 300, 400, 500, 600)
	if err := s.StoreLogs(all); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteRange(5, 6); err != nil {
		t.Fatal(err)
	}
	all = all[:4]
	for round := range 2 {
		more := testEntries(uint64(len(all))+1, 70, 80)
		for _, l := range more {
			l.Term = 4 + uint64(round)
			stamp(l)
		}
		appendsGoOn(t, s, dir, all, more)
		all = append(all, more...)
		if s, err = openWAL(dir, true, slog.Default()); err != nil {
			t.Fatal(err)
		}
		// Truncate again, across the segment the last one sealed.
		if err := s.DeleteRange(uint64(len(all)), uint64(len(all))); err != nil {
			t.Fatal(err)
		}
		all = all[:len(all)-1]
	}
	s.Close()
	s, err = openWAL(dir, true, slog.Default())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	sameLog(t, s, all)
}

// TestWALTrash: a segment raft-wal deletes (the head truncated past it)
// leaves the log's directory at once and is removed through the trash,
// which is empty once the store is closed; a file a crash left in the
// trash (one large enough to be shrunk first) is removed after the next
// open.
func TestWALTrash(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "wal")
	s, err := openWAL(dir, true, slog.Default())
	if err != nil {
		t.Fatal(err)
	}
	// Past one 64 MiB segment: 40 appends of two 1 MiB entries.
	data := make([]byte, 1<<20)
	idx := uint64(1)
	for range 40 {
		if err := s.StoreLogs([]*raft.Log{{Index: idx, Term: 1, Data: data}, {Index: idx + 1, Term: 1, Data: data}}); err != nil {
			t.Fatal(err)
		}
		idx += 2
	}
	segs, err := walSegments(dir)
	if err != nil || len(segs) < 2 {
		t.Fatalf("segments %v (%v): want at least two", segs, err)
	}
	if err := s.DeleteRange(1, idx-2); err != nil {
		t.Fatal(err)
	}
	left, _ := walSegments(dir)
	if slices.Contains(left, segs[0]) {
		t.Fatalf("segment %s still in the log's directory after the truncation", segs[0])
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if ents, _ := os.ReadDir(filepath.Join(dir, "trash")); len(ents) != 0 {
		t.Fatalf("%d files left in the trash after Close", len(ents))
	}

	crash := filepath.Join(dir, "trash", "00000000000000000001-0000000000000009.wal")
	if err := os.WriteFile(crash, make([]byte, shrink.Min+shrink.Step/2), 0o644); err != nil {
		t.Fatal(err)
	}
	s, err = openWAL(dir, true, slog.Default())
	if err != nil {
		t.Fatal(err)
	}
	if last, _ := s.LastIndex(); last != idx-1 {
		t.Fatalf("last index %d after reopening, want %d", last, idx-1)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(crash); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the file a crash left in the trash is still there (%v)", err)
	}
}
