package persistence

import (
	"fmt"
	"strconv"
	"testing"

	"github.com/bfserver/bfserver/command"
	"github.com/bfserver/bfserver/keyspace"
)

func openMem(t testing.TB) *Store {
	s, err := Open(Options{Dir: "/db", InMemory: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// write brings the image to the keyspace's changes at index idx.
func write(s *Store, k *keyspace.Keyspace, extra map[string][]byte, idx uint64) error {
	cut := k.Cut()
	t, err := s.WriteCut(cut, idx, extra)
	if err != nil {
		cut.Restore()
		return err
	}
	if err := t.Commit(); err != nil {
		cut.Restore()
		return err
	}
	return nil
}

func items(prefix string, n int) [][]byte {
	out := make([][]byte, n)
	for i := range out {
		out[i] = []byte(prefix + strconv.Itoa(i))
	}
	return out
}

// digests maps every key to its state digest; a window's adds its
// BFX.WINFO (its fills are counted, not in the digest).
func digests(k *keyspace.Keyspace) map[string]string {
	out := map[string]string{}
	for db := uint8(0); db < keyspace.NumDBs; db++ {
		k.Range(db, func(key string, v *keyspace.Value) bool {
			d := keyspace.Digest(v)
			if v.Kind == keyspace.KindWindow {
				r := k.Read(&command.Cmd{Op: command.WInfo, DB: db, Key: []byte(key)})
				d += fmt.Sprintf(" %q", r.List())
			}
			out[strconv.Itoa(int(db))+"/"+key] = d
			return true
		})
	}
	return out
}

func sameDigests(t *testing.T, a, b map[string]string) {
	t.Helper()
	if len(a) != len(b) {
		t.Fatalf("%d keys vs %d", len(a), len(b))
	}
	for k, v := range a {
		if b[k] != v {
			t.Fatalf("key %s differs", k)
		}
	}
}

// TestIncrementalImage: flushing changes after every step and loading gives
// back exactly the live keyspace, through growth, deletes, compaction that
// drops sub-filters, renames, expiry and flushes.
func TestIncrementalImage(t *testing.T) {
	s := openMem(t)
	k := keyspace.New()
	k.TrackChanges()
	idx := uint64(0)
	step := func(c *command.Cmd) {
		idx++
		c.MaxBytes = 1 << 30
		k.Apply(c)
		if err := write(s, k, nil, idx); err != nil {
			t.Fatal(err)
		}
		loaded, applied, err := s.Load()
		if err != nil {
			t.Fatal(err)
		}
		if applied != idx {
			t.Fatalf("applied %d, want %d", applied, idx)
		}
		sameDigests(t, digests(k), digests(loaded))
	}
	bf := func(key string, it [][]byte) *command.Cmd {
		return &command.Cmd{Op: command.BFAdd, Key: []byte(key), Items: it, Multi: true, ErrorRate: 0.01, Capacity: 1000, Expansion: 2}
	}
	cf := func(key string, it [][]byte) *command.Cmd {
		return &command.Cmd{Op: command.CFAdd, Key: []byte(key), Items: it, Multi: true, Capacity: 64, BucketSize: 2, MaxIterations: 20, Expansion: 1, MaxExpansions: 64}
	}
	step(bf("b", items("a", 500)))
	step(bf("b", items("b", 200000))) // several links, many chunks
	step(bf("b", items("c", 10)))     // a few dirty chunks only
	step(cf("c", items("x", 1000)))
	for i := 0; i < 900; i += 100 {
		step(&command.Cmd{Op: command.CFDel, Key: []byte("c"), Items: [][]byte{[]byte("x" + strconv.Itoa(i))}})
	}
	step(&command.Cmd{Op: command.CFCompact, Key: []byte("c")})
	step(&command.Cmd{Op: command.Set, DB: 3, Key: []byte("s"), Data: []byte("v")})
	step(&command.Cmd{Op: command.Rename, Key: []byte("b"), Dst: []byte("b2")})
	step(&command.Cmd{Op: command.Expire, Key: []byte("b2"), Iter: 1 << 50})
	step(&command.Cmd{Op: command.BFReserve, Key: []byte("b"), ErrorRate: 0.001, Capacity: 100, Expansion: 1})
	step(&command.Cmd{Op: command.Del, Keys: [][]byte{[]byte("c")}})
	step(cf("c", items("y", 10)))
	step(&command.Cmd{Op: command.FlushDB, DB: 3})
	// A window: created, a few adds (some chunks), many (shifts, every
	// chunk), renamed, replaced.
	step(windowReserve("w", 300_000))
	for _, n := range []int{10, 300_000, 1000} {
		c := &command.Cmd{Op: command.WAdd, Key: []byte("w"), Items: items("w"+strconv.Itoa(n), n), Multi: true, NoCreate: true}
		step(c)
	}
	step(&command.Cmd{Op: command.Rename, Key: []byte("w"), Dst: []byte("w2")})
	step(windowReserve("w", 100))
}

// TestImageAcrossPages: cuts of more keys than a page of the walk's lists
// (keyspace's pages of 4,096), over three databases and several key
// lengths, then with every third key deleted: the image loads back as
// the live keyspace each time (marks, deletions and metadata in their
// orders across the pages' boundaries).
func TestImageAcrossPages(t *testing.T) {
	s := openMem(t)
	k := keyspace.New()
	k.TrackChanges()
	const n = 2*4096 + 7
	key := func(i int) []byte { return []byte("t:" + strconv.Itoa(i*7919%100000)) }
	for i := range n {
		k.Apply(&command.Cmd{Op: command.Set, DB: uint8(i % 3), Key: key(i), Data: []byte(strconv.Itoa(i)), MaxBytes: 1 << 30})
	}
	if err := write(s, k, nil, 1); err != nil {
		t.Fatal(err)
	}
	loadChecked(t, s, k)
	for i := 0; i < n; i += 3 {
		k.Apply(&command.Cmd{Op: command.Del, DB: uint8(i % 3), Keys: [][]byte{key(i)}})
	}
	if err := write(s, k, nil, 2); err != nil {
		t.Fatal(err)
	}
	loadChecked(t, s, k)
}
