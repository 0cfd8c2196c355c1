package rdb

import (
	"bytes"
	"testing"
)

// TestRedisStrings: strings are written as rdbSaveRawString writes them
// (testdata/oracle's CMS DUMP captures check the bytes against Redis);
// here, each decodes back to itself.
func TestRedisStrings(t *testing.T) {
	for _, s := range [][]byte{
		[]byte("0"), []byte("-1"), []byte("127"), []byte("128"), []byte("-32768"), []byte("2147483647"),
		[]byte("2147483648"), []byte("01"), []byte("+1"), []byte("1 "), {},
		bytes.Repeat([]byte{0}, 21), bytes.Repeat([]byte("ab"), 500), []byte("aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa1"),
	} {
		r := NewReader(AppendRawString(nil, s), 1<<20)
		if got := r.RawString(); r.Err() != nil || !bytes.Equal(got, s) || len(r.Rest()) != 0 {
			t.Errorf("%q: decoded %q (%v)", s, got, r.Err())
		}
	}
	if b := AppendRawString(nil, []byte("2147483647")); b[0] != 0xC2 {
		t.Errorf("a 32-bit number is not integer-encoded: % x", b)
	}
	if b := AppendRawString(nil, bytes.Repeat([]byte{0}, 100)); b[0] != 0xC3 {
		t.Errorf("100 zero bytes are not compressed: % x", b)
	}
}

func FuzzLZF(f *testing.F) {
	f.Add(bytes.Repeat([]byte("abc"), 40))
	f.Add([]byte("0123456789012345678901234567890123456789"))
	f.Fuzz(func(t *testing.T, s []byte) {
		c := lzfCompress(s, len(s)-4)
		if c == nil {
			return
		}
		if len(c) > len(s)-4 {
			t.Fatalf("compressed %d bytes into %d, over %d", len(s), len(c), len(s)-4)
		}
		d, ok := lzfDecompress(c, len(s))
		if !ok || !bytes.Equal(d, s) {
			t.Fatal("lzf does not round-trip")
		}
	})
}

func TestString2ll(t *testing.T) {
	for s, want := range map[string]bool{"0": true, "-0": false, "01": false, "9223372036854775807": true,
		"9223372036854775808": false, "-9223372036854775808": true, "-9223372036854775809": false,
		"18446744073709551616": false, "99999999999999999999": false, "": false, "-": false, "1a": false} {
		if _, ok := string2ll([]byte(s)); ok != want {
			t.Errorf("string2ll(%q) = %v", s, ok)
		}
	}
}
