package scalable

import (
	"encoding/binary"
	"errors"
	"math"
	"runtime"
	"testing"
)

// bfHeader is the capture's valid one-link header (BF.RESERVE src 0.01 10,
// one item) with fields patched; see testdata/oracle/edge.jsonl.
func bfHeader(patch func(b []byte)) []byte {
	b := mustHex("01000000000000000100000005000000020000001000000000000000800000000000000001000000000000007b14ae47e17a743fe9862fb2350e2640080000000a0000000000000000")
	if patch != nil {
		patch(b)
	}
	return b
}

func putU64(off int, v uint64) func([]byte) {
	return func(b []byte) { binary.LittleEndian.PutUint64(b[off:], v) }
}

func both(fs ...func([]byte)) func([]byte) {
	return func(b []byte) {
		for _, f := range fs {
			f(b)
		}
	}
}

// A consistent claim of n bytes: l0.bytes = n, l0.bits = 8n.
func claim(n uint64) func([]byte) { return both(putU64(20, n), putU64(28, 8*n)) }

// TestChainHeaderOrder: every check RedisBloom makes comes before the cap,
// so a corrupt header is bad data however much it claims, and only a valid
// one is too large. What RedisBloom 8.8 takes (options 0, growth 0 or
// 2^32−1, entries 0, error NaN, claims up to 2^40 bytes) parses when the
// cap allows it.
func TestChainHeaderOrder(t *testing.T) {
	nan := math.Float64bits(math.NaN())
	cases := []struct {
		name string
		hdr  []byte
		max  uint64
		want error
	}{
		{"unchanged", bfHeader(nil), 1 << 20, nil},
		{"options=0", bfHeader(func(b []byte) { binary.LittleEndian.PutUint32(b[12:], 0) }), 1 << 20, nil},
		{"growth=0", bfHeader(func(b []byte) { binary.LittleEndian.PutUint32(b[16:], 0) }), 1 << 20, nil},
		{"growth=2^32-1", bfHeader(func(b []byte) { binary.LittleEndian.PutUint32(b[16:], math.MaxUint32) }), 1 << 20, nil},
		{"entries=0", bfHeader(putU64(64, 0)), 1 << 20, nil},
		{"error=NaN", bfHeader(putU64(44, nan)), 1 << 20, nil},
		{"bpe=0 hashes=0", bfHeader(both(putU64(52, 0), func(b []byte) { binary.LittleEndian.PutUint32(b[60:], 0) })), 1 << 20, nil},
		{"2^40 bytes, cap 1 MiB", bfHeader(claim(1 << 40)), 1 << 20, ErrTooLarge},
		{"2^40 bytes and options=2^16", bfHeader(both(claim(1<<40), func(b []byte) { binary.LittleEndian.PutUint32(b[12:], 1<<16) })), 1 << 20, ErrBadHeader},
		{"2^40 bytes and size=0", bfHeader(both(claim(1<<40), putU64(0, 0))), 1 << 20, ErrBadHeader},
		{"2^40 bytes and error=2", bfHeader(both(claim(1<<40), putU64(44, math.Float64bits(2)))), 1 << 20, ErrBadHeader},
		{"2^40 bytes and hashes=0", bfHeader(both(claim(1<<40), func(b []byte) { binary.LittleEndian.PutUint32(b[60:], 0) })), 1 << 20, ErrBadHeader},
		{"2^40 bytes, one byte short", bfHeader(claim(1 << 40))[:72], 1 << 20, ErrBadHeader},
		{"2^46 bytes", bfHeader(claim(1 << 46)), 1 << 40, ErrTooLarge},
		{"2^47 bytes: RedisBloom's calloc fails", bfHeader(claim(1 << 47)), 1 << 40, ErrBadHeader},
		{"2^61 bytes: bits wrap to 0", bfHeader(claim(1 << 61)), 1 << 40, ErrBadHeader},
		{"error=inf", bfHeader(putU64(44, math.Float64bits(math.Inf(1)))), 1 << 20, ErrBadHeader},
		{"bpe=NaN", bfHeader(putU64(52, nan)), 1 << 20, ErrBadHeader},
		{"n2=64", bfHeader(func(b []byte) { b[72] = 64 }), 1 << 20, ErrBadHeader},
	}
	for _, c := range cases {
		ch, err := ParseChainHeader(c.hdr, c.max)
		if !errors.Is(err, c.want) || (err == nil) != (c.want == nil) {
			t.Errorf("%s: err = %v, want %v", c.name, err, c.want)
			continue
		}
		if err == nil && ch.Bytes() != binary.LittleEndian.Uint64(c.hdr[20:]) {
			t.Errorf("%s: %d bytes", c.name, ch.Bytes())
		}
	}
}

// TestHugeClaimAllocatesNothing: a header claiming a TiB, refused by the
// cap, costs no memory (and one claiming 2^47 is refused as bad data).
func TestHugeClaimAllocatesNothing(t *testing.T) {
	for _, n := range []uint64{1 << 40, 1 << 47} {
		hdr := bfHeader(claim(n))
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		_, err := ParseChainHeader(hdr, 1<<30)
		runtime.ReadMemStats(&after)
		if err == nil {
			t.Fatalf("a %d-byte claim was taken under a 1 GiB cap", n)
		}
		if d := after.TotalAlloc - before.TotalAlloc; d > 1<<16 {
			t.Fatalf("refusing a %d-byte claim allocated %d bytes", n, d)
		}
	}
}

// TestGrowthPastUnallocatable: a full link whose successor RedisBloom
// cannot calloc (the capture: 2^50 entries, the next link 3.2 PB) answers
// ErrGrow, "problem inserting into filter", under any cap; one whose
// successor is merely over the cap (2^40 entries, 3.4 TB, which RedisBloom
// allocates) answers ErrTooLarge. Neither allocates.
func TestGrowthPastUnallocatable(t *testing.T) {
	for _, c := range []struct {
		entries uint64
		want    error
	}{{1 << 50, ErrGrow}, {1 << 40, ErrTooLarge}, {1 << 62, ErrGrow}} {
		hdr := bfHeader(both(putU64(0, c.entries), putU64(36, c.entries), putU64(64, c.entries)))
		ch, err := ParseChainHeader(hdr, 1<<20)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := ch.Add([]byte("probe"), 1<<40); err != c.want {
			t.Errorf("full link of %d: Add err = %v, want %v", c.entries, err, c.want)
		}
		if len(ch.Links()) != 1 {
			t.Errorf("full link of %d: grew to %d links", c.entries, len(ch.Links()))
		}
	}
}

// TestNaNErrorLink: a link whose error is NaN answers like any other and
// cannot grow; BF.DEBUG prints its ratio as glibc does.
func TestNaNErrorLink(t *testing.T) {
	for _, c := range []struct {
		bits  uint64
		ratio string
	}{{0x7ff8000000000000, "nan"}, {0xfff8000000000000, "-nan"}} {
		ch, err := ParseChainHeader(bfHeader(both(putU64(44, c.bits), putU64(64, 2))), 1<<20)
		if err != nil {
			t.Fatal(err)
		}
		if added, err := ch.Add([]byte("a"), 1<<20); !added || err != nil {
			t.Fatalf("first add: %v %v", added, err)
		}
		if _, err := ch.Add([]byte("b"), 1<<20); err != ErrGrow {
			t.Fatalf("add to the full NaN link: %v, want ErrGrow", err)
		}
		if got := ch.Debug()[1]; got != "bytes:16 bits:128 hashes:8 hashwidth:64 capacity:2 size:2 ratio:"+c.ratio {
			t.Fatalf("DEBUG %q", got)
		}
		if h := ch.Header(); binary.LittleEndian.Uint64(h[44:]) != c.bits {
			t.Fatalf("the NaN's bits changed: %x", h[44:52])
		}
	}
	if FormatG(math.Inf(1)) != "inf" || FormatG(0.005) != "0.005" || FormatG(6.25e-05) != "6.25e-05" {
		t.Fatal("FormatG")
	}
}

func cfHeader(items, nb, dels, nf uint64, bs, mi, exp uint16) []byte {
	b := make([]byte, CuckooHeaderSize)
	binary.LittleEndian.PutUint64(b[0:], items)
	binary.LittleEndian.PutUint64(b[8:], nb)
	binary.LittleEndian.PutUint64(b[16:], dels)
	binary.LittleEndian.PutUint64(b[24:], nf)
	binary.LittleEndian.PutUint16(b[32:], bs)
	binary.LittleEndian.PutUint16(b[34:], mi)
	binary.LittleEndian.PutUint16(b[36:], exp)
	return b
}

// TestCuckooHeaderBytes: the capture's CF header cases, judged without
// allocating; a valid header over the cap is ErrTooLarge.
func TestCuckooHeaderBytes(t *testing.T) {
	cases := []struct {
		name string
		hdr  []byte
		want uint64
		err  error
	}{
		{"one bucket", cfHeader(1, 1, 0, 1, 2, 20, 1), 2, nil},
		{"numFilters 2^64-1 is 65535", cfHeader(1, 4, 0, math.MaxUint64, 2, 20, 1), 65535 * 8, nil},
		{"numFilters 65537 is 1", cfHeader(1, 4, 0, 65537, 2, 20, 1), 8, nil},
		{"numFilters 65536 is 0", cfHeader(1, 4, 0, 65536, 2, 20, 1), 0, ErrBadHeader},
		{"2^40 buckets x 3", cfHeader(1, 1<<40, 0, 3, 2, 20, 1), 6 << 40, nil},
		{"expansion 3, two sub-filters", cfHeader(1, 4, 0, 2, 2, 20, 3), 8 + 24, nil},
		{"expansion 32769", cfHeader(1, 4, 0, 1, 2, 20, 32769), 0, ErrBadHeader},
		{"expansion 0, two sub-filters", cfHeader(1, 4, 0, 2, 2, 20, 0), 0, ErrBadHeader},
		{"3 buckets", cfHeader(1, 3, 0, 1, 2, 20, 1), 0, ErrBadHeader},
		{"2^55 buckets: RedisBloom's calloc fails", cfHeader(1, 1<<55, 0, 1, 2, 20, 1), 0, ErrBadHeader},
		{"2^56 buckets", cfHeader(1, 1<<56, 0, 1, 2, 20, 1), 0, ErrBadHeader},
		{"40 sub-filters doubling", cfHeader(1, 4, 0, 40, 2, 20, 2), 8 * (1<<40 - 1), nil},
		{"one byte short", cfHeader(1, 4, 0, 1, 2, 20, 1)[:37], 0, ErrBadHeader},
	}
	for _, c := range cases {
		got, err := CuckooHeaderBytes(c.hdr)
		if err != c.err || got != c.want {
			t.Errorf("%s: %d, %v; want %d, %v", c.name, got, err, c.want, c.err)
		}
		if c.err == nil && c.want > 1<<20 {
			if _, err := ParseCuckooHeader(c.hdr, 1<<20); err != ErrTooLarge {
				t.Errorf("%s: parse under a 1 MiB cap: %v", c.name, err)
			}
		}
	}
}

// TestOneBucketCuckoo: a header patched to one bucket loads; with
// expansion 1 every insert finds room by adding one-bucket sub-filters,
// and CF.COUNT counts the one bucket twice (both candidates are it).
func TestOneBucketCuckoo(t *testing.T) {
	cf, err := ParseCuckooHeader(cfHeader(1, 1, 0, 1, 2, 20, 1), 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	if cf.LoadChunk(3, []byte{0, 0}) != nil || cf.LoadChunk(5, []byte{0, 0, 0, 0}) == nil {
		t.Fatal("a chunk of one bucket loads and one of two does not")
	}
	for _, it := range []string{"a", "b", "c", "d", "e", "a", "f", "g", "h"} {
		if r := cf.Insert([]byte(it), false, 1<<20); r != Inserted {
			t.Fatalf("insert %s: %v", it, r)
		}
	}
	if cf.Count([]byte("a")) != 4 || cf.Info().NumFilters < 2 {
		t.Fatalf("count a = %d with %d sub-filters", cf.Count([]byte("a")), cf.Info().NumFilters)
	}
	full, err := ParseCuckooHeader(cfHeader(1, 1, 0, 1, 4, 20, 0), 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	for i, it := range []string{"a", "b", "c", "d"} {
		if r := full.Insert([]byte(it), false, 1<<20); r != Inserted {
			t.Fatalf("insert %d: %v", i, r)
		}
	}
	if r := full.Insert([]byte("e"), false, 1<<20); r != NoSpace {
		t.Fatalf("fifth insert into one bucket of four, expansion 0: %v", r)
	}
}
