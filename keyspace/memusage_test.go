package keyspace

import "testing"

// TestJemallocSizeClasses: jemalloc 5.3 with an 8-byte quantum, as Redis
// builds it: multiples of 8 to 64, then four classes per doubling, pages
// and huge sizes alike.
func TestJemallocSizeClasses(t *testing.T) {
	classes := []uint64{8, 16, 24, 32, 40, 48, 56, 64, 80, 96, 112, 128, 160, 192, 224, 256, 320, 384, 448, 512,
		640, 768, 896, 1024, 1280}
	n := uint64(1)
	for _, c := range classes {
		for ; n <= c; n++ {
			if got := jemallocSize(n); got != c {
				t.Fatalf("jemallocSize(%d) = %d, want %d", n, got, c)
			}
		}
	}
	for _, c := range [][2]uint64{{14336, 14336}, {14337, 16384}, {65537, 81920}, {200006, 229376}, {1 << 30, 1 << 30}, {1<<30 + 1, 1<<30 + 1<<28}} {
		if got := jemallocSize(c[0]); got != c[1] {
			t.Errorf("jemallocSize(%d) = %d, want %d", c[0], got, c[1])
		}
	}
}

// TestKeyMemoryUsage: a filter's Size plus the key's sds (header 1 byte to
// 31 bytes of key, 3 to 252, 5 to 65530, 9 beyond) in its size class plus
// the 24-byte dict entry; the captured offsets of memkeys.jsonl.
func TestKeyMemoryUsage(t *testing.T) {
	want := map[int]uint64{1: 32, 6: 32, 7: 40, 30: 56, 31: 64, 32: 64, 252: 280, 253: 344, 14330: 14360, 65530: 65560, 65531: 81944}
	v := StringValue("v")
	for n, w := range want {
		key := make([]byte, n)
		if got := KeyMemoryUsage(key, v) - stringValueUsage(v.Str()); got != w {
			t.Errorf("key of %d bytes: %d over the value, want %d", n, got, w)
		}
	}
	for s, w := range map[string]uint64{"v": 24, "12": 16, "-0": 24, "+1": 24, "01": 24, "9223372036854775808": 40} {
		if got := stringValueUsage(s); got != w {
			t.Errorf("string %q: %d, want %d", s, got, w)
		}
	}
}
