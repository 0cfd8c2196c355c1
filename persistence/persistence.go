// Package persistence keeps the durable image of the keyspace in Pebble:
// each key's metadata, the changed chunks of its arrays, a little replicated
// metadata, and the log index that image covers, all written in one atomic
// batch. It stores and streams bytes; what they mean is keyspace's business.
//
// Key layout:
//
//	"a"                                   applied index (8 bytes LE)
//	"k" db key                            metadata of a key
//	"c" db len(key)u32 key part u32 idx u32   one chunk of a key's arrays
//	"x" name                              replicated metadata (members)
package persistence

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"

	"github.com/bfserver/bfserver/keyspace"
	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// Errors.
var (
	// ErrCorrupt: a stored record or a snapshot stream does not decode.
	ErrCorrupt = errors.New("persistence: corrupt image")
)

// Options configure a Store.
type Options struct {
	// Dir is where Pebble keeps its files. Required.
	Dir string
	// Logger receives Pebble's messages. Default: discarded.
	Logger *slog.Logger
	// InMemory keeps everything in memory (tests and fuzzing). Default false.
	InMemory bool
	// MaxValueBytes refuses to load a filter larger than this, so a damaged
	// or hostile image cannot allocate without bound. Default 4 GiB.
	MaxValueBytes uint64
}

// Store is the Pebble-backed image.
type Store struct {
	db       *pebble.DB
	maxValue uint64
}

var appliedKey = []byte("a")

// Open opens or creates the image in opts.Dir.
func Open(opts Options) (*Store, error) {
	if opts.Dir == "" {
		return nil, errors.New("persistence: no directory")
	}
	po := &pebble.Options{Logger: quietLogger{opts.Logger}}
	if opts.InMemory {
		po.FS = vfs.NewMem()
	}
	db, err := pebble.Open(opts.Dir, po)
	if err != nil {
		return nil, err
	}
	if opts.MaxValueBytes == 0 {
		opts.MaxValueBytes = 4 << 30
	}
	return &Store{db: db, maxValue: opts.MaxValueBytes}, nil
}

// Close closes Pebble.
func (s *Store) Close() error { return s.db.Close() }

func metaKey(db uint8, key string) []byte {
	return append([]byte{'k', db}, key...)
}

func chunkPrefix(db uint8, key string) []byte {
	b := []byte{'c', db}
	b = binary.BigEndian.AppendUint32(b, uint32(len(key)))
	return append(b, key...)
}

func chunkKey(db uint8, key string, c keyspace.Chunk) []byte {
	b := chunkPrefix(db, key)
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

// Write stores changes, extra metadata and the applied index they reach in
// one synced batch.
func (s *Store) Write(changes []keyspace.Change, extra map[string][]byte, applied uint64) error {
	b := s.db.NewBatch()
	defer b.Close()
	for _, ch := range changes {
		if ch.Full || ch.Meta == nil {
			p := chunkPrefix(ch.DB, ch.Key)
			if err := b.DeleteRange(p, prefixEnd(p), nil); err != nil {
				return err
			}
		}
		if ch.Meta == nil {
			if err := b.Delete(metaKey(ch.DB, ch.Key), nil); err != nil {
				return err
			}
			continue
		}
		if err := b.Set(metaKey(ch.DB, ch.Key), ch.Meta, nil); err != nil {
			return err
		}
		for _, c := range ch.Chunks {
			if err := b.Set(chunkKey(ch.DB, ch.Key, c), c.Data, nil); err != nil {
				return err
			}
		}
	}
	for name, v := range extra {
		if err := b.Set(append([]byte{'x'}, name...), v, nil); err != nil {
			return err
		}
	}
	var idx [8]byte
	binary.LittleEndian.PutUint64(idx[:], applied)
	if err := b.Set(appliedKey, idx[:], nil); err != nil {
		return err
	}
	return b.Commit(pebble.Sync)
}

// Applied is the log index the stored image covers (0 if none).
func (s *Store) Applied() (uint64, error) {
	v, closer, err := s.db.Get(appliedKey)
	if errors.Is(err, pebble.ErrNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	defer closer.Close()
	if len(v) != 8 {
		return 0, ErrCorrupt
	}
	return binary.LittleEndian.Uint64(v), nil
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
		if err := k.LoadValue(key[1], string(key[2:]), it.Value(), s.maxValue); err != nil {
			it.Close()
			return nil, 0, fmt.Errorf("%w: key %q: %v", ErrCorrupt, key[2:], err)
		}
	}
	if err := it.Close(); err != nil {
		return nil, 0, err
	}
	it, err = s.db.NewIter(&pebble.IterOptions{LowerBound: []byte("c"), UpperBound: []byte("d")})
	if err != nil {
		return nil, 0, err
	}
	defer it.Close()
	for it.First(); it.Valid(); it.Next() {
		key := it.Key()
		if len(key) < 6 {
			return nil, 0, ErrCorrupt
		}
		n := int(binary.BigEndian.Uint32(key[2:]))
		if len(key) != 6+n+8 {
			return nil, 0, ErrCorrupt
		}
		c := keyspace.Chunk{
			Part:  binary.BigEndian.Uint32(key[6+n:]),
			Index: binary.BigEndian.Uint32(key[10+n:]),
			Data:  it.Value(),
		}
		if err := k.LoadChunk(key[1], string(key[6:6+n]), c); err != nil {
			return nil, 0, fmt.Errorf("%w: chunk of %q: %v", ErrCorrupt, key[6:6+n], err)
		}
	}
	k.ForgetChanges()
	return k, applied, nil
}

// Snapshot format: magic, then records (uvarint key length, key, uvarint
// value length, value), then a zero-length key.
const snapMagic = "bfsnap1\n"

// maxRecord bounds one record read from a stream: a key of 512 MiB plus
// headroom, or a string value of the same size.
const maxRecord = 1 << 30

// Snapshot is a frozen point-in-time view of the image.
type Snapshot struct{ snap *pebble.Snapshot }

// NewSnapshot freezes the image as it is now; later writes do not show.
func (s *Store) NewSnapshot() *Snapshot { return &Snapshot{snap: s.db.NewSnapshot()} }

// Close releases the view.
func (s *Snapshot) Close() error { return s.snap.Close() }

// WriteSnapshot streams a point-in-time copy of the whole image.
func (s *Store) WriteSnapshot(w io.Writer) error {
	snap := s.NewSnapshot()
	defer snap.Close()
	return snap.Stream(w)
}

// Stream writes the frozen image.
func (s *Snapshot) Stream(w io.Writer) error {
	it, err := s.snap.NewIter(nil)
	if err != nil {
		return err
	}
	defer it.Close()
	bw := bufio.NewWriterSize(w, 1<<20)
	bw.WriteString(snapMagic)
	var hdr [binary.MaxVarintLen64]byte
	for it.First(); it.Valid(); it.Next() {
		for _, part := range [][]byte{it.Key(), it.Value()} {
			n := binary.PutUvarint(hdr[:], uint64(len(part)))
			bw.Write(hdr[:n])
			bw.Write(part)
		}
	}
	bw.WriteByte(0)
	return bw.Flush()
}

// ReadSnapshot replaces the whole image with a stream from WriteSnapshot,
// atomically: on any error the old image is untouched.
func (s *Store) ReadSnapshot(r io.Reader) error {
	br := bufio.NewReaderSize(r, 1<<20)
	magic := make([]byte, len(snapMagic))
	if _, err := io.ReadFull(br, magic); err != nil || string(magic) != snapMagic {
		return ErrCorrupt
	}
	b := s.db.NewBatch()
	defer b.Close()
	if err := b.DeleteRange([]byte{0}, []byte{0xff}, nil); err != nil {
		return err
	}
	read := func() ([]byte, error) {
		n, err := binary.ReadUvarint(br)
		if err != nil || n > maxRecord {
			return nil, ErrCorrupt
		}
		buf := make([]byte, n)
		if _, err := io.ReadFull(br, buf); err != nil {
			return nil, ErrCorrupt
		}
		return buf, nil
	}
	for {
		k, err := read()
		if err != nil {
			return err
		}
		if len(k) == 0 {
			break
		}
		v, err := read()
		if err != nil {
			return err
		}
		if err := b.Set(k, v, nil); err != nil {
			return err
		}
	}
	return b.Commit(pebble.Sync)
}

// quietLogger sends Pebble's messages to slog at debug level.
type quietLogger struct{ l *slog.Logger }

func (q quietLogger) Infof(format string, args ...any) {
	if q.l != nil {
		q.l.Debug(fmt.Sprintf(format, args...))
	}
}

func (q quietLogger) Errorf(format string, args ...any) {
	if q.l != nil {
		q.l.Error(fmt.Sprintf(format, args...))
	}
}

func (q quietLogger) Fatalf(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	if q.l != nil {
		q.l.Error(msg)
	}
	panic(msg)
}
