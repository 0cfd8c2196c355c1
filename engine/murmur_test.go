package engine

import "testing"

// Vectors from golden/vectors.txt, captured from a live RedisBloom.
func TestMurmurVectors(t *testing.T) {
	cases := []struct {
		in   string
		seed uint64
		want uint64
	}{
		{"", 0xc6a4a7935bd1e995, 0x1ab11ea5a7b2c56e},
		{"", 0, 0},
		{"foo", 0xc6a4a7935bd1e995, 0x822b4f99b121f10d},
		{"foo", 0, 0xcdde38358fd25b01},
		{"hello world", 0xc6a4a7935bd1e995, 0xbae8fb35317acde1},
		{"hello world", 0, 0xd3ba2368a832afce},
		{"0123456789abcdef!", 0xc6a4a7935bd1e995, 0xdd3c8c269b953c1b},
		{"0123456789abcdef!", 0, 0x7866985da0fe6924},
	}
	for _, c := range cases {
		if got := MurmurHash64A([]byte(c.in), c.seed); got != c.want {
			t.Errorf("MurmurHash64A(%q, %#x) = %#x, want %#x", c.in, c.seed, got, c.want)
		}
	}
}

func TestBloomPositions(t *testing.T) {
	h := BloomHash64([]byte("foo"))
	if h.A != 0x822b4f99b121f10d || h.B != 0x9d63d52a557f61c2 {
		t.Fatalf("hash of foo = %#x %#x", h.A, h.B)
	}
	p, ok := SizeBloom(10, 0.005)
	if !ok || p.Bits != 128 || p.Hashes != 8 || p.Bytes != 16 {
		t.Fatalf("SizeBloom(10, 0.005) = %+v", p)
	}
	b := NewBloom(p)
	if !b.Add(h) || b.Add(h) || !b.Test(h) {
		t.Fatal("add/test of foo")
	}
	want := []uint64{13, 79, 17, 83, 21, 87, 25, 91}
	buf := make([]byte, 16)
	b.ReadBytes(buf, 0)
	for _, x := range want {
		if buf[x>>3]&(1<<(x&7)) == 0 {
			t.Errorf("bit %d not set", x)
		}
	}
}

func TestCuckooLookup(t *testing.T) {
	l := NewLookup(CuckooHash([]byte("foo")))
	if l.FP != 217 || l.H1%4 != 1 || l.H2%4 != 0 {
		t.Fatalf("foo: %+v", l)
	}
	l = NewLookup(CuckooHash([]byte("bar")))
	if l.FP != 20 || l.H1%4 != 2 || l.H2%4 != 2 {
		t.Fatalf("bar: %+v", l)
	}
}

// TestRemMatchesDivision checks the division-free remainder against %, on
// moduli of every size and dividends at the edges.
func TestRemMatchesDivision(t *testing.T) {
	mods := []uint64{1, 2, 3, 7, 64, 1152, 1 << 20, 1<<32 - 1, 1 << 32, 1<<32 + 1, 12345678901, 1 << 62, 1<<63 + 12345, 1<<64 - 1}
	xs := []uint64{0, 1, 2, 1<<63 - 1, 1 << 63, 1<<64 - 2, 1<<64 - 1, 0x822b4f99b121f10d, 0x9d63d52a557f61c2}
	for i := uint64(0); i < 2000; i++ {
		xs = append(xs, MurmurHash64A([]byte{byte(i), byte(i >> 8)}, i))
	}
	for _, m := range mods {
		b := NewBloom(BloomParams{Bits: m, Bytes: 8})
		b.w = nil
		// Where an estimate one short shows: at and just below the
		// largest multiples of m.
		edges := xs
		for k := (1<<64 - 1) / m; k > 0 && k > (1<<64-1)/m-8; k-- {
			edges = append(edges, k*m, k*m-1, k*m+m-1)
		}
		for _, x := range edges {
			if got, want := b.rem(x), x%m; got != want {
				t.Fatalf("%d mod %d = %d, want %d", x, m, got, want)
			}
		}
	}
}
