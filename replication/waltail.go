package replication

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	wal "github.com/hashicorp/raft-wal"
	"github.com/hashicorp/raft-wal/metadb"
	"github.com/hashicorp/raft-wal/segment"
	"github.com/hashicorp/raft-wal/types"
)

// raft-wal's segment format (its README): a 32-byte file header (the
// entries' first index at bytes 8-15), then 8-byte-aligned frames, each
// an 8-byte header (type; three reserved bytes; the payload's length,
// or for a commit frame the CRC-32C of every byte since the previous
// commit frame, the file header included for the first) and its payload
// padded to 8 bytes. Each append writes its entries' frames and one
// commit frame, then syncs.
const (
	walFileHeader  = 32
	walFrameHeader = 8
	walEntry       = 1
	walIndex       = 2
	walCommit      = 3
)

// checkWALTail reads the tail segment (the last one raft-wal's segment
// list names, before raft-wal opens it) as raft-wal's recovery does, and
// refuses the two things that recovery drops without a word, taking them
// for a write torn by a crash:
//   - a final batch whose commit frame is there but whose bytes fail its
//     checksum: raft-wal goes back to the batch before;
//   - a frame header it cannot read, or data after a stretch of zeros:
//     raft-wal stops reading there, and loses every batch after it.
//
// A batch that reached its commit frame was synced, and with --fsync
// always acknowledged: losing it would lose acknowledged writes (one
// torn by a power cut while it was being synced was not acknowledged,
// and is refused all the same: the error says how to let it go). What
// is accepted after the last intact commit is zeros, and the frames of
// one append a crash cut short before its commit frame (never
// acknowledged); those are zeroed, so that no later, shorter batch
// leaves an older one's frames behind it for the next recovery to read
// (and raft-wal does not take an index frame among them for a seal).
//
// A tail whose last intact batch sealed it (its index frame) while the
// list still calls it open, a crash having come between that append and
// the rotation's commit, would refuse every append after it in raft-wal
// (ErrSealed, at every start): the rotation is completed here instead.
//
// With syncs deferred (sync false: --fsync everysec or no), a power cut
// may leave any unsynced batch damaged, and those batches may be lost by
// the policy's own terms: the damaged tail is then zeroed, with a
// warning, where --fsync always refuses to start (every batch there was
// synced before it was acknowledged, so damage is not a cut write).
func checkWALTail(dir string, sync bool, logger *slog.Logger) error {
	if !exists(filepath.Join(dir, metadb.FileName)) {
		return nil // a new log
	}
	var meta metadb.BoltMetaDB
	st, err := meta.Load(dir)
	if err != nil {
		return fmt.Errorf("raft log %s: %w", dir, err)
	}
	defer meta.Close()
	if err := indexSealed(dir, &st, &meta); err != nil {
		return err
	}
	if len(st.Segments) == 0 || !st.Segments[len(st.Segments)-1].SealTime.IsZero() {
		return nil // raft-wal makes a new tail
	}
	info := st.Segments[len(st.Segments)-1]
	path := filepath.Join(dir, segment.FileName(info))
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if errors.Is(err, os.ErrNotExist) {
		return nil // created before its first append: raft-wal makes it again
	}
	if err != nil {
		return err
	}
	defer f.Close()
	t, err := scanTail(f)
	if err != nil {
		return fmt.Errorf("raft log segment %s: %w", path, err)
	}
	if t.problem != "" {
		if sync {
			return damagedTail(t, path)
		}
		logger.Warn("raft log: a damaged tail, unsynced under the fsync policy, is dropped",
			"segment", filepath.Base(path), "problem", t.problem, "at", t.at, "first_entry_lost", t.first)
		return zeroFrom(f, t.end)
	}
	if t.dirtyTo > t.end {
		// An append cut short, never acknowledged: zero it. Unless it
		// holds a commit frame that matches the bytes before it: then
		// the walk jumped over it (a frame's length damaged), and it
		// ends a batch that was synced.
		b := make([]byte, t.dirtyTo-t.end)
		if _, err := f.ReadAt(b, t.end); err != nil && !errors.Is(err, io.EOF) {
			return err
		}
		if p := intactCommit(b); p >= 0 && sync {
			t.problem, t.at = "a frame whose length does not read", t.end+int64(p)
			return damagedTail(t, path)
		}
		zeros := make([]byte, min(t.dirtyTo-t.end, 1<<20))
		for at := t.end; at < t.dirtyTo; at += int64(len(zeros)) {
			n := min(int64(len(zeros)), t.dirtyTo-at)
			if _, err := f.WriteAt(zeros[:n], at); err != nil {
				return err
			}
		}
		if err := f.Sync(); err != nil {
			return err
		}
	}
	if t.sealed == 0 || t.first == t.base {
		return nil
	}
	// Seal it in the list, and name the next segment, as raft-wal's
	// rotation does (the file is created when raft-wal opens).
	now := time.Now()
	info.SealTime, info.MaxIndex, info.IndexStart = now, t.first-1, uint64(t.sealed)
	next := types.SegmentInfo{ID: st.NextSegmentID, BaseIndex: t.first, MinIndex: t.first,
		SizeLimit: uint32(wal.DefaultSegmentSize), Codec: info.Codec, CreateTime: now}
	st.Segments[len(st.Segments)-1] = info
	st.Segments = append(st.Segments, next)
	st.NextSegmentID++
	return meta.CommitState(st)
}

// indexSealed gives every segment the list calls sealed but that has no
// index (IndexStart 0) one: raft-wal v0.4.0 seals the tail it truncates
// (a follower dropping entries a new leader did not keep) without
// writing its index, and reads nothing of it after a restart ("sealed
// segment has no index block"; raft-wal's issue #31, fixed after
// v0.4.0). The index goes after the file's end, synced, and then into
// the list; a crash in between leaves it to be written again.
func indexSealed(dir string, st *types.PersistentState, meta types.MetaStore) error {
	changed := false
	for i, info := range st.Segments {
		if info.SealTime.IsZero() || info.IndexStart != 0 || info.MaxIndex < info.BaseIndex {
			continue
		}
		path := filepath.Join(dir, segment.FileName(info))
		at, err := writeIndex(path, int(info.MaxIndex-info.BaseIndex+1))
		if err != nil {
			return fmt.Errorf("raft log segment %s, sealed without an index: %w", path, err)
		}
		st.Segments[i].IndexStart = uint64(at)
		changed = true
	}
	if !changed {
		return nil
	}
	return meta.CommitState(*st)
}

// writeIndex appends to a segment an index frame of its first n entries'
// frame offsets, synced, and returns where the offsets start.
func writeIndex(path string, n int) (int64, error) {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	var hdr [walFileHeader]byte
	r := bufio.NewReaderSize(f, 1<<20)
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return 0, err
	}
	index := make([]byte, walFrameHeader, walFrameHeader+4*n+4)
	off := int64(walFileHeader)
	var fh [walFrameHeader]byte
	for len(index) < walFrameHeader+4*n {
		if _, err := io.ReadFull(r, fh[:]); err != nil {
			return 0, fmt.Errorf("%d of its %d entries found: %w", (len(index)-walFrameHeader)/4, n, err)
		}
		typ, size := fh[0], int64(binary.LittleEndian.Uint32(fh[4:]))
		switch typ {
		case walEntry:
			index = binary.LittleEndian.AppendUint32(index, uint32(off))
		case walIndex:
		case walCommit:
			size = 0
		default:
			return 0, fmt.Errorf("%d of its %d entries found: a frame header that does not read at byte %d", (len(index)-walFrameHeader)/4, n, off)
		}
		size += int64(padding(int(size)))
		if _, err := r.Discard(int(size)); err != nil {
			return 0, err
		}
		off += walFrameHeader + size
	}
	index[0] = walIndex
	binary.LittleEndian.PutUint32(index[4:], uint32(4*n))
	index = append(index, make([]byte, padding(4*n))...)
	end, err := f.Seek(0, io.SeekEnd)
	if err != nil {
		return 0, err
	}
	end += int64(padding(int(end % walFrameHeader)))
	if _, err := f.WriteAt(index, end); err != nil {
		return 0, err
	}
	return end + walFrameHeader, f.Sync()
}

// tailScan is what scanTail found in a tail segment.
type tailScan struct {
	base    uint64 // the segment's first index
	end     int64  // where raft-wal's recovery resumes appending
	dirtyTo int64  // the end of the last non-zero byte after end
	// first is the index after the last entry raft-wal keeps; problem,
	// when set, is what it would drop (the entries from first on), at
	// the offset of the trouble.
	problem string
	first   uint64
	at      int64
	// sealed is where the index array of the last batch raft-wal keeps
	// starts, when that batch sealed the segment; 0 otherwise.
	sealed int64
}

// scanTail walks a segment's frames, streaming it once.
func scanTail(f io.Reader) (*tailScan, error) {
	r := bufio.NewReaderSize(f, 1<<20)
	var hdr [walFileHeader]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return &tailScan{end: walFileHeader}, nil // nothing was ever committed
		}
		return nil, err
	}
	t := &tailScan{base: binary.LittleEndian.Uint64(hdr[8:16])}
	crc := crc32.Update(0, crcTable, hdr[:])
	off := int64(walFileHeader)
	entries := uint64(0)
	// The last commit frame and the one before: where each ends, how many
	// entries precede it, and whether the bytes since the one before
	// match its checksum.
	type commit struct {
		end     int64
		entries uint64
		intact  bool
		sealed  int64 // the batch's index array, if it has one
	}
	sealed := int64(0) // an index frame since the last commit
	var last, prev *commit
	scratch := make([]byte, 64<<10)
	eof := false
	var fh [walFrameHeader]byte
walk:
	for {
		if _, err := io.ReadFull(r, fh[:]); err != nil {
			if !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) {
				return nil, err
			}
			eof = true
			break
		}
		typ, n := fh[0], int64(binary.LittleEndian.Uint32(fh[4:]))
		switch {
		case fh == [walFrameHeader]byte{}:
			break walk // zeros: the end of what was written
		case typ == walCommit:
			prev, last = last, &commit{end: off + walFrameHeader, entries: entries, intact: uint32(n) == crc, sealed: sealed}
			crc, sealed = 0, 0
			off += walFrameHeader
			continue
		case typ == walEntry && n <= asideBytes+stubLen+64, typ == walIndex && n <= maxIndexFrame:
			// An entry's frame holds at most asideBytes of data and its
			// encoding (walStore); an index frame four bytes per entry.
		default:
			t.problem, t.at = "a frame header that does not read", off
			break walk
		}
		crc = crc32.Update(crc, crcTable, fh[:])
		if typ == walEntry {
			entries++
		} else {
			sealed = off + walFrameHeader
		}
		off += walFrameHeader
		for n += int64(padding(int(n))); n > 0; {
			k, err := io.ReadFull(r, scratch[:min(n, int64(len(scratch)))])
			crc = crc32.Update(crc, crcTable, scratch[:k])
			off += int64(k)
			n -= int64(k)
			if err != nil {
				eof = true // a frame an append cut short
				break walk
			}
		}
	}
	// Where raft-wal resumes: after the last commit (before the whole
	// segment when there is none); a final commit followed by nothing is
	// checked, and one that fails sends it back to the commit before.
	t.end = walFileHeader
	acked := uint64(0) // entries up to the last commit raft-wal keeps
	if last != nil && (last.entries < entries || last.intact) {
		t.end, acked, t.sealed = last.end, last.entries, last.sealed
	} else if last != nil {
		if prev != nil {
			t.end, acked, t.sealed = prev.end, prev.entries, prev.sealed
		}
		if t.problem == "" {
			t.problem, t.at = "a batch whose bytes do not match its checksum", last.end-walFrameHeader
		}
	}
	t.first = t.base + acked
	if t.problem != "" {
		return t, nil
	}
	// The frames of an append cut short, then only zeros.
	t.dirtyTo = max(off, t.end)
	if eof {
		return t, nil
	}
	off += walFrameHeader // the zero header
	zeros := make([]byte, len(scratch))
	for {
		k, err := r.Read(scratch)
		if !bytes.Equal(scratch[:k], zeros[:k]) {
			i := bytes.IndexFunc(scratch[:k], func(r rune) bool { return r != 0 })
			t.problem, t.at = "data after a stretch of zeros", off+int64(max(i, 0))
			return t, nil
		}
		off += int64(k)
		if err == io.EOF {
			return t, nil
		}
		if err != nil {
			return nil, err
		}
	}
}

// maxIndexFrame bounds a sealed segment's index frame: four bytes for
// each entry a 64 MiB segment can hold (at least eight bytes each).
const maxIndexFrame = 4 * (64 << 20) / 8

// intactCommit is the offset of the first 8-byte-aligned commit frame in
// b whose checksum matches the bytes before it, since b's start or since
// the commit frame before, or -1.
func intactCommit(b []byte) int {
	all, since := uint32(0), uint32(0)
	for p := 0; p+walFrameHeader <= len(b); p += walFrameHeader {
		h := b[p : p+walFrameHeader]
		if h[0] == walCommit && h[1]|h[2]|h[3] == 0 {
			if sum := binary.LittleEndian.Uint32(h[4:]); sum == all || sum == since {
				return p
			}
			since = 0
		} else {
			since = crc32.Update(since, crcTable, h)
		}
		all = crc32.Update(all, crcTable, h)
	}
	return -1
}

// padding is how many zero bytes follow a payload of n bytes.
func padding(n int) int { return (walFrameHeader - n%walFrameHeader) % walFrameHeader }

// damagedTail is the error a start stops with at a tail it refuses.
// zeroFrom writes zeros from at to the file's end, synced.
func zeroFrom(f *os.File, at int64) error {
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	zeros := make([]byte, 1<<20)
	for ; at < fi.Size(); at += int64(len(zeros)) {
		n := min(int64(len(zeros)), fi.Size()-at)
		if _, err := f.WriteAt(zeros[:n], at); err != nil {
			return err
		}
	}
	return f.Sync()
}

func damagedTail(t *tailScan, path string) error {
	cause := fmt.Errorf("%w: the raft log segment %s holds %s at byte %d, and the entries from there on would be lost on reading it",
		errDamaged, filepath.Base(path), t.problem, t.at)
	return fmt.Errorf("%w. If this machine lost power while that batch was being written (it was then never acknowledged), "+
		"writing zeros from byte %d to the end of that file lets the node start without it", damagedLog(t.first, cause), t.at)
}
