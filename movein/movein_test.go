package movein

import (
	"bytes"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/bfserver/bfserver/command"
	"github.com/bfserver/bfserver/scalable"
)

// An emptied Cuckoo filter (grown, then every item deleted, which compacts
// it) has no dump; the header rebuilt from its CF.INFO must be the one it
// would dump.
func TestEmptyCuckooHeader(t *testing.T) {
	cf, err := scalable.NewCuckoo(scalable.CuckooParams{Capacity: 64, BucketSize: 2, MaxIterations: 20, Expansion: 1}, math.MaxUint64)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 300 {
		cf.Insert(fmt.Appendf(nil, "e%d", i), false, math.MaxUint64)
	}
	for i := range 300 {
		if !cf.Delete(fmt.Appendf(nil, "e%d", i)) {
			t.Fatalf("delete e%d", i)
		}
	}
	ci := cf.Info()
	if ci.NumItems != 0 || ci.NumDeletes == 0 {
		t.Fatalf("want an emptied filter: %+v", ci)
	}
	// CF.INFO's fields, as parseInfo reads them.
	in := info{{name: "Size", value: int64(ci.Size)}, {name: "Number of buckets", value: int64(ci.NumBuckets)},
		{name: "Number of filters", value: int64(ci.NumFilters)}, {name: "Number of items inserted", value: int64(ci.NumItems)},
		{name: "Number of items deleted", value: int64(ci.NumDeletes)}, {name: "Bucket size", value: int64(ci.BucketSize)},
		{name: "Expansion rate", value: int64(ci.Expansion)}, {name: "Max iterations", value: int64(ci.MaxIterations)}}
	if got, want := emptyCuckooHeader(in), cf.Header(); !bytes.Equal(got, want) {
		t.Fatalf("rebuilt header %x, dump header %x", got, want)
	}
}

func TestParseInfo(t *testing.T) {
	in, err := parseInfo([]any{"Capacity", int64(100), "Expansion rate", nil})
	if err != nil {
		t.Fatal(err)
	}
	if in.String() != "Capacity=100 Expansion rate=nil" || in.get("Capacity") != 100 {
		t.Fatalf("%s", in)
	}
	if _, err := parseInfo([]any{"Capacity"}); err == nil {
		t.Fatal("an odd reply was accepted")
	}
}

func TestShowKey(t *testing.T) {
	for k, want := range map[string]string{"plain:key": "plain:key", "a b": `"a b"`, "": `""`, "x\x00": `"x\x00"`, "é": "é"} {
		if got := showKey(k); got != want {
			t.Errorf("showKey(%q) = %s, want %s", k, got, want)
		}
	}
}

func TestLoadFlagsValidate(t *testing.T) {
	ok := loadOptions{to: "redis://x", key: "k", errorRate: 0.01, capacity: 10, batch: 1, pipeline: 1, conns: 1, method: "build"}
	cases := []struct {
		edit func(*loadOptions)
		want string
	}{
		{func(o *loadOptions) {}, ""},
		{func(o *loadOptions) { o.capacity = 0 }, "--capacity"},
		{func(o *loadOptions) { o.errorRate = 1 }, "--error-rate must be"},
		{func(o *loadOptions) { o.cuckoo = true }, "--error-rate applies to Bloom"},
		{func(o *loadOptions) { o.cuckoo, o.errorRate, o.bucketSize = true, 0, 4 }, ""},
		{func(o *loadOptions) { o.bucketSize = 4 }, "Cuckoo filters only"},
		{func(o *loadOptions) { o.nonScaling, o.expansionPresent = true, true }, "exclude each other"},
		{func(o *loadOptions) { o.postgres = "postgres://" }, "go together"},
		{func(o *loadOptions) { o.postgres, o.query, o.file = "postgres://", "select 1", "f" }, "--file and --postgres"},
		{func(o *loadOptions) { o.method = "fast" }, "--method"},
	}
	for i, c := range cases {
		o := ok
		c.edit(&o)
		got := o.validate(0)
		if (c.want == "") != (got == "") || !strings.Contains(got, c.want) {
			t.Errorf("case %d: %q, want %q", i, got, c.want)
		}
	}
}

// TestInPieces: a chunk sent in pieces covers its bytes once, in order,
// each piece at the iterator a LOADCHUNK of it alone takes; a header or
// a small chunk goes whole.
func TestInPieces(t *testing.T) {
	data := make([]byte, 2*command.MaxPiece+5)
	for i := range data {
		data[i] = byte(i * 7)
	}
	const iter = 1000 + 2*command.MaxPiece + 5 + 1 // a chunk at offset 1000
	var got []byte
	err := inPieces(iter, data, false, func(it int64, d []byte) error {
		if len(d) > command.MaxPiece {
			t.Fatalf("a piece of %d bytes", len(d))
		}
		if off := it - int64(len(d)) - 1; off != 1000+int64(len(got)) {
			t.Fatalf("piece at offset %d, want %d", off, 1000+len(got))
		}
		got = append(got, d...)
		return nil
	})
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("pieces carried %d bytes (%v)", len(got), err)
	}
	calls := 0
	inPieces(iter, data, true, func(it int64, d []byte) error {
		calls++
		if it != iter || len(d) != len(data) {
			t.Fatal("a header was split")
		}
		return nil
	})
	if calls != 1 {
		t.Fatalf("%d calls for a header", calls)
	}
}
