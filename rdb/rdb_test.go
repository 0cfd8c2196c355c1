package rdb

import (
	"bytes"
	"testing"
)

func TestCRC64CheckValue(t *testing.T) {
	if got := CRC64(0, []byte("123456789")); got != 0xe9c6d914c4b8d9ca {
		t.Fatalf("crc64 = %#x", got)
	}
}

func TestModuleID(t *testing.T) {
	if got := ModuleID("MBbloom--", 4); got != 0x3016e5a289bef804 {
		t.Fatalf("MBbloom-- id = %#x", got)
	}
}

func TestFieldsRoundTrip(t *testing.T) {
	b := AppendUInt(nil, 5)
	b = AppendUInt(b, 1<<40)
	b = AppendDouble(b, 0.125)
	b = AppendString(b, bytes.Repeat([]byte("ab"), 100))
	r := NewReader(b, 1<<20)
	if r.UInt() != 5 || r.UInt() != 1<<40 || r.Double() != 0.125 || !bytes.Equal(r.String(), bytes.Repeat([]byte("ab"), 100)) || r.Err() != nil {
		t.Fatal("round trip failed")
	}
	p := Seal([]byte{TypeModule2})
	if body, err := Open(p); err != nil || !bytes.Equal(body, []byte{TypeModule2}) {
		t.Fatalf("Open(Seal) = %x, %v", body, err)
	}
	p[0] ^= 1
	if _, err := Open(p); err != ErrChecksum {
		t.Fatalf("corrupt payload: %v", err)
	}
}

// FuzzReader: arbitrary bytes never panic or decode past the string cap.
func FuzzReader(f *testing.F) {
	f.Add(AppendString(AppendUInt(nil, 7), []byte("hello")))
	f.Add([]byte{5, 0xc3, 0x05, 0x0a, 0x01, 'a', 'b', 0xe0, 0x00, 0x01})
	f.Fuzz(func(t *testing.T, b []byte) {
		r := NewReader(b, 1<<16)
		for i := 0; i < 8 && r.Err() == nil; i++ {
			if s := r.String(); len(s) > 1<<16 {
				t.Fatalf("string of %d bytes", len(s))
			}
		}
	})
}
