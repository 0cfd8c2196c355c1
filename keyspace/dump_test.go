package keyspace

import (
	"fmt"
	"math"
	"reflect"
	"runtime"
	"strconv"
	"testing"

	"github.com/bfserver/bfserver/command"
	"github.com/bfserver/bfserver/scalable"
	"github.com/bfserver/bfserver/sketch/window"
)

const capBytes = 1 << 26

func apply(t testing.TB, k *Keyspace, c *command.Cmd) Result {
	t.Helper()
	c.MaxBytes = capBytes
	r := k.Apply(c)
	if r.Err != nil {
		t.Fatalf("%v: %v", c.Op, r.Err)
	}
	return r
}

// TestDumpRestoreRoundTrip: every kind of value survives DUMP then RESTORE
// with an identical digest, growth and kick-outs included.
func TestDumpRestoreRoundTrip(t *testing.T) {
	k := New()
	var items [][]byte
	for i := 0; i < 3000; i++ {
		items = append(items, []byte("item:"+strconv.Itoa(i)))
	}
	apply(t, k, &command.Cmd{Op: command.BFAdd, Key: []byte("b"), Items: items, Multi: true, ErrorRate: 0.01, Capacity: 100, Expansion: 2})
	apply(t, k, &command.Cmd{Op: command.CFAdd, Key: []byte("c"), Items: items, Multi: true, Capacity: 256, BucketSize: 2, MaxIterations: 20, Expansion: 1, MaxExpansions: 32})
	apply(t, k, &command.Cmd{Op: command.Set, Key: []byte("s"), Data: []byte("value")})
	for _, key := range []string{"b", "c", "s"} {
		v := k.Lookup(0, []byte(key), 0)
		payload := EncodeDump(v)
		apply(t, k, &command.Cmd{Op: command.Restore, Key: []byte(key + "2"), Data: payload})
		if got, want := Digest(k.Lookup(0, []byte(key+"2"), 0)), Digest(v); got != want {
			t.Errorf("%s: restored digest %s, want %s", key, got, want)
		}
		// Any flipped byte is refused by the checksum, and changes nothing.
		bad := append([]byte(nil), payload...)
		bad[len(bad)/2] ^= 0x40
		if r := k.Apply(&command.Cmd{Op: command.Restore, Key: []byte(key + "3"), Data: bad, MaxBytes: capBytes}); r.Err != ErrBadPayload {
			t.Errorf("%s: corrupted payload gave %v", key, r.Err)
		}
		if k.Lookup(0, []byte(key+"3"), 0) != nil {
			t.Errorf("%s: corrupted RESTORE created a key", key)
		}
	}
	if r := k.Apply(&command.Cmd{Op: command.Restore, Key: []byte("b2"), Data: EncodeDump(k.Lookup(0, []byte("b"), 0))}); r.Err != ErrBusyKey {
		t.Errorf("RESTORE over an existing key: %v", r.Err)
	}
}

// FuzzDecodeDump: a RESTORE payload is refused or decoded within the cap,
// never a panic, into a filter that finds every add it acknowledges. The checksum is recomputed so the fuzzer reaches the body.
func FuzzDecodeDump(f *testing.F) {
	k := New()
	k.Apply(&command.Cmd{Op: command.BFAdd, Key: []byte("b"), Items: [][]byte{[]byte("x")}, ErrorRate: 0.01, Capacity: 10, Expansion: 2, MaxBytes: capBytes})
	k.Apply(&command.Cmd{Op: command.CFAdd, Key: []byte("c"), Items: [][]byte{[]byte("x")}, Capacity: 8, BucketSize: 2, MaxIterations: 20, Expansion: 1, MaxExpansions: 32, MaxBytes: capBytes})
	k.Apply(&command.Cmd{Op: command.TDCreate, Key: []byte("t"), Count: 5})
	k.Apply(&command.Cmd{Op: command.TDAdd, Key: []byte("t"), Data: command.Floats([]float64{1, 2, 3, 2, 7, 1}), MaxBytes: capBytes})
	k.Apply(&command.Cmd{Op: command.CMSInit, Key: []byte("m"), Capacity: 4, Count: 2, MaxBytes: capBytes})
	k.Apply(windowCmd(f, command.WReserve, "w", window.Count, 50, 0, 0.01))
	k.Apply(&command.Cmd{Op: command.WAdd, Key: []byte("w"), Items: [][]byte{[]byte("x")}, NoCreate: true})
	for _, key := range []string{"b", "c", "t", "m", "w"} {
		p := EncodeDump(k.Lookup(0, []byte(key), 0))
		f.Add(p[:len(p)-10])
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		p := sealForFuzz(body)
		v, err := decodeDump(p, 1<<20)
		if err != nil {
			return
		}
		if MemoryUsage(v) > 1<<21 {
			t.Fatalf("decoded %d bytes past the cap", MemoryUsage(v))
		}
		if v.Kind == KindTDigest {
			// Whatever it holds, a restored digest answers every query
			// through the log and again beside it.
			k := New()
			k.Put(0, "t", v)
			for _, c := range tdQueries("t") {
				k.Apply(c)
				k.Read(c)
			}
			k.Apply(&command.Cmd{Op: command.TDAdd, Key: []byte("t"), Data: command.Floats([]float64{1, -1}), MaxBytes: 1 << 20})
			if got, want := k.Bytes(), k.countBytes(); got != want {
				t.Fatalf("memory total %d, recount %d", got, want)
			}
		}
		// Whatever the restored fields, an add it acknowledges is found.
		var acked [][]byte
		for i := range 64 {
			it := []byte(fmt.Sprintf("item%d", i))
			switch v.Kind {
			case KindBloom:
				if _, err := v.Bloom().Add(it, 1<<20); err == nil {
					acked = append(acked, it)
				}
			case KindCuckoo:
				if v.Cuckoo().Insert(it, false, 1<<20) == scalable.Inserted {
					acked = append(acked, it)
				}
			case KindWindow:
				// Within the window: at most one window's worth of adds,
				// at the filter's own time (no clock moves).
				if in := v.Window().Info(math.MinInt64); uint64(i) < in.Capacity && in.Kind == window.Count {
					v.Window().f.Add(it, math.MinInt64)
					acked = append(acked, it)
				}
			}
		}
		for _, it := range acked {
			if (v.Kind == KindBloom && !v.Bloom().Test(it)) || (v.Kind == KindCuckoo && !v.Cuckoo().Exists(it)) ||
				(v.Kind == KindWindow && !v.Window().f.Exists(it, math.MinInt64)) {
				t.Fatalf("restored filter lost acknowledged add %q", it)
			}
		}
	})
}

func TestResultsRoundTrip(t *testing.T) {
	in := []Result{
		{},
		{Err: ErrWrongType},
		{Ints: []int64{1, 0, -1}, More: &More{Tail: ErrNonScalingFull}},
		{Int: -7, More: &More{Bytes: []byte{}}, Null: false},
		{Null: true},
		{More: &More{List: [][]byte{[]byte("a"), {}}}},
		{More: &More{BF: &BFInfo{Capacity: 100, Size: 240, Filters: 1, Items: 3, Expansion: 2, NonScaling: true}}},
	}
	k := New()
	k.Apply(&command.Cmd{Op: command.CFAdd, Key: []byte("c"), Items: [][]byte{[]byte("x")}, Capacity: 8, BucketSize: 2, MaxIterations: 20, Expansion: 1, MaxExpansions: 32, MaxBytes: capBytes})
	in = append(in, k.Read(&command.Cmd{Op: command.CFInfo, Key: []byte("c")}))
	out, err := DecodeResults(EncodeResults(in))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(in, out) {
		t.Fatalf("round trip:\n%+v\n%+v", in, out)
	}
	// A write's results (an integer, an error) decode into the one slice
	// they fill, with no More each.
	plain := EncodeResults(make([]Result, 100))
	if n := testing.AllocsPerRun(10, func() { DecodeResults(plain) }); n != 1 {
		t.Fatalf("decoding 100 integer results: %v allocations, want 1", n)
	}
}

func FuzzDecodeResults(f *testing.F) {
	f.Add(EncodeResults([]Result{{Ints: []int64{1}}, {Err: ErrNotFound}}))
	f.Fuzz(func(t *testing.T, b []byte) {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		DecodeResults(b)
		runtime.ReadMemStats(&after)
		// A Result (under 200 bytes) for every 7 bytes, an integer for
		// every byte, or a list element's header for every byte, at worst.
		if got, most := after.TotalAlloc-before.TotalAlloc, 32*uint64(len(b))+1<<20; got > most {
			t.Fatalf("decoding %d bytes of results allocated %d, over %d", len(b), got, most)
		}
		if rs, err := DecodeResults(b); err == nil {
			if _, err := DecodeResults(EncodeResults(rs)); err != nil {
				t.Fatal(err)
			}
		}
	})
}

// TestBytesStaysExact: the running memory total equals a full recount
// after every kind of command.
func TestBytesStaysExact(t *testing.T) {
	k := New()
	items := func(p string, n int) (out [][]byte) {
		for i := 0; i < n; i++ {
			out = append(out, []byte(p+strconv.Itoa(i)))
		}
		return
	}
	steps := []*command.Cmd{
		{Op: command.BFAdd, Key: []byte("b"), Items: items("x", 2000), Multi: true, ErrorRate: 0.01, Capacity: 100, Expansion: 2},
		{Op: command.CFAdd, Key: []byte("c"), Items: items("y", 3000), Multi: true, Capacity: 64, BucketSize: 2, MaxIterations: 20, Expansion: 1, MaxExpansions: 64},
		{Op: command.CFDel, Key: []byte("c"), Items: items("y", 1)},
		{Op: command.CFCompact, Key: []byte("c")},
		{Op: command.Set, Key: []byte("s"), Data: []byte("value")},
		{Op: command.Rename, Key: []byte("b"), Dst: []byte("s")},
		{Op: command.BFReserve, Key: []byte("b"), ErrorRate: 0.001, Capacity: 1000, Expansion: 2},
		{Op: command.Del, Keys: [][]byte{[]byte("c"), []byte("missing")}},
		{Op: command.BFAdd, Key: []byte(""), Items: items("e", 10), Multi: true, ErrorRate: 0.01, Capacity: 100, Expansion: 2},
		{Op: command.Copy, Key: []byte("s"), Dst: []byte("")},
		{Op: command.Set, Key: []byte("t"), Data: []byte("v")},
		{Op: command.Copy, Key: []byte("t"), Dst: []byte("")},
		{Op: command.Del, Keys: [][]byte{[]byte(""), []byte("t"), []byte("")}},
		{Op: command.Expire, Key: []byte("b"), Iter: 1, Now: 2},
		{Op: command.FlushDB, DB: 1},
		{Op: command.BFAdd, DB: 1, Key: []byte("b1"), Items: items("z", 10), Multi: true, ErrorRate: 0.01, Capacity: 100, Expansion: 2},
		{Op: command.FlushAll},
	}
	for i, c := range steps {
		c.MaxBytes = capBytes
		k.Apply(c)
		if got, want := k.Bytes(), k.countBytes(); got != want {
			t.Fatalf("step %d (%v): total %d, recount %d", i, c.Op, got, want)
		}
	}
}
