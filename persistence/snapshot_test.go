package persistence

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"math/rand/v2"
	"runtime"
	"testing"

	"github.com/bfserver/bfserver/command"
	"github.com/bfserver/bfserver/keyspace"
)

// snapSource is a store holding a Bloom filter, a Cuckoo filter, a string
// and replicated metadata at index 7, with its keyspace and its stream.
func snapSource(t testing.TB) (*keyspace.Keyspace, []byte) {
	src := openMem(t)
	k := keyspace.New()
	k.TrackChanges()
	k.Apply(&command.Cmd{Op: command.BFAdd, Key: []byte("b"), Items: items("i", 50), Multi: true, ErrorRate: 0.01, Capacity: 100, Expansion: 2, MaxBytes: 1 << 30})
	k.Apply(&command.Cmd{Op: command.CFAdd, Key: []byte("c"), Items: items("x", 20), Multi: true, Capacity: 64, BucketSize: 2, MaxIterations: 20, Expansion: 1, MaxExpansions: 64, MaxBytes: 1 << 30})
	k.Apply(&command.Cmd{Op: command.Set, DB: 2, Key: []byte("s"), Data: []byte("v")})
	if err := write(src, k, map[string][]byte{"members": []byte("m")}, 7); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := src.WriteSnapshot(&buf); err != nil {
		t.Fatal(err)
	}
	return k, buf.Bytes()
}

// snapTarget is a store holding other state, at index 3.
func snapTarget(t testing.TB) (*Store, map[string]string) {
	dst := openMem(t)
	other := keyspace.New()
	other.TrackChanges()
	other.Apply(&command.Cmd{Op: command.Set, Key: []byte("old"), Data: []byte("x")})
	if err := write(dst, other, map[string][]byte{"members": []byte("old")}, 3); err != nil {
		t.Fatal(err)
	}
	return dst, digests(other)
}

// unchanged fails unless dst still holds exactly what snapTarget gave it.
func unchanged(t *testing.T, dst *Store, want map[string]string, what string) {
	t.Helper()
	k, applied, err := dst.Load()
	if err != nil || applied != 3 {
		t.Fatalf("%s: the image changed: applied %d, %v", what, applied, err)
	}
	sameDigests(t, want, digests(k))
	if m, _ := dst.Extra("members"); string(m) != "old" {
		t.Fatalf("%s: members changed to %q", what, m)
	}
}

// installs fails unless stream installs into dst exactly what snapSource
// gave k.
func installs(t *testing.T, dst *Store, k *keyspace.Keyspace, stream []byte) {
	t.Helper()
	if err := dst.ReadSnapshot(bytes.NewReader(stream)); err != nil {
		t.Fatal(err)
	}
	loaded, applied, err := dst.Load()
	if err != nil || applied != 7 {
		t.Fatalf("applied %d, %v", applied, err)
	}
	sameDigests(t, digests(k), digests(loaded))
	if m, _ := dst.Extra("members"); string(m) != "m" {
		t.Fatalf("members = %q", m)
	}
}

// TestSnapshotChecksum: a stream ends with the CRC-32C of every byte
// before it; a stream with any one byte changed, or cut anywhere, is
// refused and the image stays as it was; the intact stream installs
// exactly the source's state.
func TestSnapshotChecksum(t *testing.T) {
	k, stream := snapSource(t)
	if string(stream[:len(snapMagic)]) != snapMagic {
		t.Fatalf("the stream starts %q", stream[:len(snapMagic)])
	}
	body := stream[:len(stream)-4]
	if got, want := binary.BigEndian.Uint32(stream[len(body):]), crc32.Checksum(body, castagnoli); got != want {
		t.Fatalf("trailer %08x, the stream sums to %08x", got, want)
	}
	dst, before := snapTarget(t)
	r := rand.New(rand.NewPCG(1, 2))
	damaged := bytes.Clone(stream)
	var checksums int
	for i := range damaged {
		mask := byte(1 + r.IntN(255))
		damaged[i] ^= mask
		err := dst.ReadSnapshot(bytes.NewReader(damaged))
		damaged[i] ^= mask
		if err == nil {
			t.Fatalf("a stream with byte %d of %d changed (^%02x) was installed", i, len(stream), mask)
		}
		if !errors.Is(err, ErrCorrupt) {
			t.Fatalf("byte %d changed: %v is not ErrCorrupt", i, err)
		}
		if errors.Is(err, ErrChecksum) {
			checksums++
		}
		if applied, err := dst.Applied(); err != nil || applied != 3 {
			t.Fatalf("byte %d changed: applied is now %d (%v)", i, applied, err)
		}
	}
	unchanged(t, dst, before, "after every damaged stream")
	// Most changes land in chunk data, which only the checksum can tell.
	if checksums < len(stream)/2 {
		t.Fatalf("only %d of %d damaged streams were refused by their checksum", checksums, len(stream))
	}
	for n := range len(stream) {
		if err := dst.ReadSnapshot(bytes.NewReader(stream[:n])); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("the stream cut to %d of %d bytes: %v", n, len(stream), err)
		}
	}
	if err := dst.ReadSnapshot(bytes.NewReader(append(bytes.Clone(stream), 0))); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("a byte after the trailer: %v", err)
	}
	unchanged(t, dst, before, "after every truncated stream")

	installs(t, dst, k, stream)
}

// TestSnapshotVersion1: a stream of version 1 (no trailer: what earlier
// versions wrote to snapshots and backups) still installs; a version 2
// stream whose header was changed to version 1's is refused, since its
// trailer then follows the end.
func TestSnapshotVersion1(t *testing.T) {
	k, stream := snapSource(t)
	v1 := append([]byte(snapMagicV1), stream[len(snapMagic):len(stream)-4]...)
	dst, before := snapTarget(t)
	relabelled := append([]byte(snapMagicV1), stream[len(snapMagic):]...)
	if err := dst.ReadSnapshot(bytes.NewReader(relabelled)); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("version 2 relabelled as 1: %v", err)
	}
	unchanged(t, dst, before, "version 2 relabelled")
	installs(t, dst, k, v1)
}

// TestSnapshotHostileLength: a record that claims a gigabyte and carries
// a few bytes is refused after allocating about what arrived, not what it
// claimed.
func TestSnapshotHostileLength(t *testing.T) {
	dst, before := snapTarget(t)
	stream := []byte(snapMagic)
	stream = binary.AppendUvarint(stream, 1)
	stream = append(stream, 'k')
	stream = binary.AppendUvarint(stream, maxRecord)
	stream = append(stream, make([]byte, 3<<20)...)
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	err := dst.ReadSnapshot(bytes.NewReader(stream))
	runtime.ReadMemStats(&m1)
	if !errors.Is(err, ErrCorrupt) {
		t.Fatalf("a record cut short: %v", err)
	}
	if got := m1.TotalAlloc - m0.TotalAlloc; got > 64<<20 {
		t.Fatalf("refusing a record of %d bytes that carried 3 MiB allocated %d bytes", maxRecord, got)
	}
	unchanged(t, dst, before, "a record cut short")
}

// FuzzReadSnapshot: a hostile stream is refused or installs records; it
// never panics, allocates within a bound of what it carries, and loading
// what it installed never panics either. A version 2 stream installs only
// when its trailer is its checksum; each input is also tried with its
// trailer made right, so the fuzzer reaches past the checksum.
func FuzzReadSnapshot(f *testing.F) {
	_, stream := snapSource(f)
	f.Add(stream)
	f.Add(append([]byte(snapMagicV1), stream[len(snapMagic):len(stream)-4]...))
	f.Add([]byte(snapMagicV1 + "\x01a\x08\x00\x00\x00\x00\x00\x00\x00\x00\x00"))
	f.Add([]byte(snapMagic + "\x01a\x08\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00"))
	f.Fuzz(func(t *testing.T, data []byte) {
		try := func(data []byte) {
			s, err := Open(Options{Dir: "/db", InMemory: true, MaxValueBytes: 1 << 20})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			var m0, m1 runtime.MemStats
			runtime.ReadMemStats(&m0)
			err = s.ReadSnapshot(bytes.NewReader(data))
			runtime.ReadMemStats(&m1)
			if got := m1.TotalAlloc - m0.TotalAlloc; got > 32<<20+4*uint64(len(data)) {
				t.Fatalf("a stream of %d bytes allocated %d", len(data), got)
			}
			if err != nil {
				return
			}
			if bytes.HasPrefix(data, []byte(snapMagic)) {
				n := len(data) - 4
				if n < len(snapMagic) || binary.BigEndian.Uint32(data[n:]) != crc32.Checksum(data[:n], castagnoli) {
					t.Fatal("a version 2 stream installed without its checksum")
				}
			}
			s.Load()
		}
		try(data)
		if bytes.HasPrefix(data, []byte(snapMagic)) && len(data) >= len(snapMagic)+4 {
			n := len(data) - 4
			try(binary.BigEndian.AppendUint32(bytes.Clone(data[:n]), crc32.Checksum(data[:n], castagnoli)))
		}
	})
}

// failAfter takes n bytes, then fails every write.
type failAfter struct{ n, took int }

var errGone = errors.New("reader gone")

func (f *failAfter) Write(p []byte) (int, error) {
	if f.took+len(p) > f.n {
		return 0, errGone
	}
	f.took += len(p)
	return len(p), nil
}

// TestSnapshotStreamWriterGone: a stream whose reader is gone (a
// follower's connection, a reference stream closed early) ends with the
// writer's error (Stream checks it every MiB of values, so as not to walk
// the rest of the image first); a view's applied index is the image's.
func TestSnapshotStreamWriterGone(t *testing.T) {
	src := openMem(t)
	k := keyspace.New()
	k.TrackChanges()
	// A filter of about 12 MiB of bits: 12 MiB of values or so in chunks.
	k.Apply(&command.Cmd{Op: command.BFAdd, Key: []byte("big"), Items: items("i", 10), Multi: true, ErrorRate: 0.0001, Capacity: 5_000_000, Expansion: 2, MaxBytes: 1 << 30})
	if err := write(src, k, nil, 9); err != nil {
		t.Fatal(err)
	}
	snap := src.NewSnapshot()
	defer snap.Close()
	if at, err := snap.Applied(); err != nil || at != 9 {
		t.Fatalf("the view's applied index: %d, %v", at, err)
	}
	var all countingWriter
	if err := snap.Stream(&all); err != nil {
		t.Fatal(err)
	}
	if all < 4<<20 {
		t.Fatalf("the image streams %d bytes, want a test image of several MiB", all)
	}
	w := &failAfter{n: 1 << 20}
	if err := snap.Stream(w); !errors.Is(err, errGone) {
		t.Fatalf("a stream into a failing writer: %v, want its error", err)
	}
}

type countingWriter int

func (c *countingWriter) Write(p []byte) (int, error) {
	*c += countingWriter(len(p))
	return len(p), nil
}
