package window

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"iter"
	"math/rand/v2"
	"runtime"
	"testing"
)

// sample is a time window with a few hundred inserts and some history.
func sample(t testing.TB) *Filter {
	f := mustNew(t, Options{ErrorRate: 0.01, Kind: Time, WindowMs: 10_000, Capacity: 500, Overflow: KeepRate, Now: 1_700_000_000_000})
	rng := rand.New(rand.NewPCG(9, 9))
	now := int64(1_700_000_000_000)
	for i := range 3000 {
		now += rng.Int64N(40)
		f.Add(key(1, uint64(i)), now)
	}
	return f
}

func TestMarshalRoundTrip(t *testing.T) {
	for _, f := range []*Filter{sample(t), mustNew(t, Options{ErrorRate: 0.1, Kind: Count, Count: 1})} {
		b := f.Marshal()
		g, err := Unmarshal(b, 0)
		if err != nil {
			t.Fatal(err)
		}
		if !Equal(f, g) || f.Digest() != g.Digest() || !bytes.Equal(g.Marshal(), b) {
			t.Fatal("round trip differs")
		}
		// they go on identically
		for i := range 500 {
			now := f.last + int64(i)
			if f.Add(key(2, uint64(i)), now) != g.Add(key(2, uint64(i)), now) {
				t.Fatal("Add answers differ")
			}
		}
		if f.Digest() != g.Digest() {
			t.Fatal("digests diverged")
		}
	}
}

func TestChunkedRoundTrip(t *testing.T) {
	f := sample(t)
	for _, size := range []int{1, 7, 4096, 1 << 30} {
		n := 0
		g, err := Load(func(yield func(int64, []byte) bool) {
			for c, d := range f.Chunks(size) {
				n++
				if !yield(c, d) {
					return
				}
			}
		}, 0)
		if err != nil {
			t.Fatalf("chunk %d: %v", size, err)
		}
		if !Equal(f, g) {
			t.Fatalf("chunk %d: loaded filter differs", size)
		}
		want := 1 + (int(f.dataBytes())+min(size, MaxChunk)-1)/min(size, MaxChunk)
		if n != want {
			t.Errorf("chunk %d: %d chunks, want %d", size, n, want)
		}
	}
	// out of range and malformed chunks are refused, state unchanged
	g, _ := LoadHeader(f.Header(), 0)
	before := g.Marshal()
	total := int64(f.dataBytes())
	for _, c := range []struct {
		next int64
		n    int
	}{{1, 4}, {0, 4}, {-5, 4}, {3, 4}, {total + 2, 4}, {total + 1 + 4, 0}, {1 << 62, 8}} {
		if err := g.LoadChunk(c.next, make([]byte, c.n)); !errors.Is(err, ErrCursor) {
			t.Errorf("LoadChunk(%d, %d bytes) = %v", c.next, c.n, err)
		}
	}
	if !bytes.Equal(before, g.Marshal()) {
		t.Fatal("refused chunks changed the filter")
	}
	if _, err := Load(func(yield func(int64, []byte) bool) { yield(5, []byte{1}) }, 0); !errors.Is(err, ErrCorrupt) {
		t.Errorf("headerless transfer: %v", err)
	}
	var empty iter.Seq2[int64, []byte] = func(func(int64, []byte) bool) {}
	if _, err := Load(empty, 0); !errors.Is(err, ErrCorrupt) {
		t.Errorf("empty transfer: %v", err)
	}
}

// reheader applies edit to a valid header and fixes its checksum, so the
// field checks (not the CRC) must refuse it.
func reheader(h []byte, edit func([]byte)) []byte {
	b := bytes.Clone(h)
	edit(b)
	binary.LittleEndian.PutUint32(b[108:], crc32.Checksum(b[:108], castagnoli))
	return b
}

func TestDecoderRefuses(t *testing.T) {
	f := sample(t)
	h := f.Header()
	le := binary.LittleEndian
	edits := map[string]func([]byte){
		"magic":         func(b []byte) { b[0] = 'X' },
		"version":       func(b []byte) { b[4] = 2 },
		"kind":          func(b []byte) { b[5] = 3 },
		"overflow":      func(b []byte) { b[6] = 2 },
		"reserved":      func(b []byte) { b[7] = 1 },
		"reserved2":     func(b []byte) { b[104] = 1 },
		"k=0":           func(b []byte) { le.PutUint16(b[8:], 0) },
		"k big":         func(b []byte) { le.PutUint16(b[8:], MaxK+1) },
		"l big":         func(b []byte) { le.PutUint16(b[10:], MaxL+1) },
		"head":          func(b []byte) { le.PutUint32(b[12:], 1<<20) },
		"words=0":       func(b []byte) { le.PutUint64(b[16:], 0) },
		"error rate":    func(b []byte) { le.PutUint64(b[24:], 0x7ff8000000000001) },
		"window short":  func(b []byte) { le.PutUint64(b[32:], 1<<60) },
		"capacity":      func(b []byte) { le.PutUint64(b[40:], 0) },
		"g=0":           func(b []byte) { le.PutUint64(b[48:], 0) },
		"d=0":           func(b []byte) { le.PutUint64(b[56:], 0) },
		"d negative":    func(b []byte) { le.PutUint64(b[56:], 1<<63) },
		"in generation": func(b []byte) { le.PutUint64(b[72:], 1<<40) },
		"data size":     func(b []byte) { le.PutUint64(b[96:], 8) },
		"count+d":       func(b []byte) { b[5], b[6] = byte(Count), 0 },
	}
	for name, edit := range edits {
		if _, err := LoadHeader(reheader(h, edit), 0); !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrTooLarge) {
			t.Errorf("%s: %v", name, err)
		}
	}
	if _, err := LoadHeader(h[:50], 0); !errors.Is(err, ErrCorrupt) {
		t.Errorf("short header: %v", err)
	}
	// a huge but consistent shape is refused by the cap before allocating
	huge := reheader(h, func(b []byte) {
		le.PutUint64(b[16:], 1<<40)
		le.PutUint64(b[96:], uint64(f.shape.Slices())<<43)
	})
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	for range 10 {
		if _, err := LoadHeader(huge, 1<<20); !errors.Is(err, ErrTooLarge) {
			t.Fatalf("huge: %v", err)
		}
	}
	runtime.ReadMemStats(&m1)
	if d := m1.TotalAlloc - m0.TotalAlloc; d > 64<<10 {
		t.Errorf("refusing a huge header 10 times allocated %d bytes", d)
	}
	// every single flipped bit of a whole dump is caught
	b := f.Marshal()
	for i := 0; i < len(b); i += 1 + len(b)/500 {
		c := bytes.Clone(b)
		c[i] ^= 0x10
		if _, err := Unmarshal(c, 0); err == nil {
			t.Fatalf("flip at byte %d accepted", i)
		}
	}
	for _, n := range []int{0, 10, HeaderSize, len(b) - 1} {
		if _, err := Unmarshal(b[:n], 0); err == nil {
			t.Fatalf("truncation to %d accepted", n)
		}
	}
}

// TestReplicasAgree: two filters given the same operations (times that
// jump, stall and step back included) have equal digests at every step;
// one different insert makes them differ.
func TestReplicasAgree(t *testing.T) {
	o := Options{ErrorRate: 0.001, Kind: Time, WindowMs: 5000, Capacity: 300, Now: 1000}
	a, b := mustNew(t, o), mustNew(t, o)
	rng := rand.New(rand.NewPCG(10, 10))
	now := int64(1000)
	for i := range 2000 {
		now += rng.Int64N(200) - 20
		it := key(1, rng.Uint64N(500))
		if a.Add(it, now) != b.Add(it, now) {
			t.Fatal("answers differ")
		}
		if i%100 == 0 && a.Digest() != b.Digest() {
			t.Fatalf("digests differ at %d", i)
		}
	}
	b.Add([]byte("extra"), now)
	if a.Digest() == b.Digest() || Equal(a, b) {
		t.Fatal("different filters compare equal")
	}
}
