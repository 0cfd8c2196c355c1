package wire

import (
	"bytes"
	"encoding/binary"
	"testing"
)

func TestRoundTrip(t *testing.T) {
	b := []byte{7}
	b = binary.AppendUvarint(b, 300)
	b = binary.AppendVarint(b, -5)
	b = binary.LittleEndian.AppendUint64(b, 1<<60)
	b = AppendBytes(b, []byte("key"))
	b = AppendList(b, [][]byte{[]byte("a"), nil})
	r := &Reader{B: b}
	if r.Byte() != 7 || r.Uvarint() != 300 || r.Varint() != -5 || r.U64() != 1<<60 || !bytes.Equal(r.Bytes(), []byte("key")) {
		t.Fatal("scalars or bytes did not round-trip")
	}
	if n := r.Count(); n != 2 || !bytes.Equal(r.Bytes(), []byte("a")) || r.Bytes() != nil {
		t.Fatal("list did not round-trip")
	}
	if r.Bad || len(r.B) != 0 {
		t.Fatalf("bad %v, %d bytes left", r.Bad, len(r.B))
	}
}

// TestShortInput: every read past the end marks the reader bad and yields
// a zero value; a count or length larger than what is left is refused.
func TestShortInput(t *testing.T) {
	for name, read := range map[string]func(*Reader) bool{
		"byte":    func(r *Reader) bool { return r.Byte() == 0 },
		"uvarint": func(r *Reader) bool { return r.Uvarint() == 0 },
		"varint":  func(r *Reader) bool { return r.Varint() == 0 },
		"u64":     func(r *Reader) bool { return r.U64() == 0 },
		"bytes":   func(r *Reader) bool { return r.Bytes() == nil },
		"count":   func(r *Reader) bool { return r.Count() == 0 },
	} {
		r := &Reader{}
		if !read(r) || !r.Bad {
			t.Errorf("%s on empty input: not refused", name)
		}
	}
	long := &Reader{B: binary.AppendUvarint(nil, 1000)}
	if long.Count() != 0 || !long.Bad {
		t.Error("a count beyond the input was accepted")
	}
	long = &Reader{B: append(binary.AppendUvarint(nil, 10), "short"...)}
	if long.Bytes() != nil || !long.Bad {
		t.Error("a length beyond the input was accepted")
	}
}
