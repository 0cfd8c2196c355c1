package keyspace

import (
	"testing"
	"unsafe"

	"github.com/bfserver/bfserver/command"
)

// TestWatchImageRecords: the version state travels in a Cut (the header
// and the changed pages of missing keys' stamps), loads back the same, is
// carried again by the next cut when a write fails (Restore), and a
// damaged record is refused.
func TestWatchImageRecords(t *testing.T) {
	k := New()
	k.TrackChanges()
	if c := k.Cut(); len(c.Records) != 0 {
		t.Fatalf("records before tracking began: %v", c.Records)
	}
	k.Apply(&command.Cmd{Op: command.Watch})
	k.Apply(&command.Cmd{Op: command.Set, Key: []byte("s"), Data: []byte("v")})
	k.Apply(&command.Cmd{Op: command.Del, Keys: [][]byte{[]byte("s")}})
	k.Apply(&command.Cmd{Op: command.CFDel, Key: []byte("m"), Items: [][]byte{[]byte("x")}})
	c := k.Cut()
	if len(c.Records) != 3 { // the header and the pages of s and m
		t.Fatalf("%d records, want 3: %v", len(c.Records), c.Records)
	}
	c.Restore()
	again := k.Cut()
	if len(again.Records) != len(c.Records) {
		t.Fatalf("after Restore the next cut carries %d records, want %d", len(again.Records), len(c.Records))
	}
	l := New()
	for _, r := range again.Records {
		if err := l.LoadRecord(r); err != nil {
			t.Fatal(err)
		}
	}
	for _, key := range []string{"s", "m", "never"} {
		want, _ := k.Version(0, []byte(key), 0)
		if got, _ := l.Version(0, []byte(key), 0); got != want {
			t.Errorf("%s: loaded version %d, want %d", key, got, want)
		}
	}
	if !l.Versioned() || l.watch.clock != k.watch.clock {
		t.Fatalf("loaded tracking %v clock %d, want on and %d", l.Versioned(), l.watch.clock, k.watch.clock)
	}
	for _, bad := range []Record{{"h", []byte{9}}, {"p0", make([]byte, 8)}, {"q", nil}, {"p\x7f", make([]byte, 8*pageSlots)}} {
		if err := l.LoadRecord(bad); err != ErrCorruptImage {
			t.Errorf("record %q: %v, want ErrCorruptImage", bad.Name, err)
		}
	}
}

// TestWatchMeta: a key's version is in its metadata once it has one, and
// a key without one keeps the old metadata format.
func TestWatchMeta(t *testing.T) {
	v := StringValue("v")
	v.ExpireAt = 5
	if m := encodeMeta(v); m[0] != metaVersion {
		t.Fatalf("unversioned key written as metadata version %d", m[0])
	}
	v.setStamp(42)
	m := appendMeta(nil, v, v.stamp())
	k := New()
	if err := k.LoadValue(0, "s", m, 1<<20); err != nil {
		t.Fatal(err)
	}
	got := k.Lookup(0, []byte("s"), 0)
	if got.stamp() != 42 || got.Str() != "v" || got.ExpireAt != 5 {
		t.Fatalf("loaded %+v", got)
	}
	if err := k.LoadValue(0, "t", m[:12], 1<<20); err != ErrCorruptImage {
		t.Fatalf("truncated versioned metadata: %v", err)
	}
}

// TestWatchValueSize: the version takes no byte per key: it lives in what
// was Kind's padding, and a Value stays in Go's 24-byte size class (one
// per small filter, docs/STORAGE.md).
func TestWatchValueSize(t *testing.T) {
	if n := unsafe.Sizeof(Value{}); n > 24 {
		t.Fatalf("a Value is %d bytes, over the 24-byte size class", n)
	}
}
