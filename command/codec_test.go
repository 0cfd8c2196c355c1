package command

import (
	"bytes"
	"reflect"
	"testing"
)

func TestCodecRoundTrip(t *testing.T) {
	in := []*Cmd{
		{Op: BFAdd, DB: 3, Now: 1234, Key: []byte("k"), Items: [][]byte{[]byte("a"), {}}, Multi: true, ErrorRate: 0.01, Capacity: 100, Expansion: 2, MaxBytes: 1 << 20},
		{Op: CFAdd, Key: []byte("c"), Items: [][]byte{[]byte("x")}, NX: true, BucketSize: 4, MaxIterations: 20, MaxExpansions: 32},
		{Op: Rename, Key: []byte("a"), Dst: []byte("b"), NX: true},
		{Op: Expire, Key: []byte("e"), Iter: -5, Field: CondGT},
	}
	out, err := DecodeBatch(EncodeBatch(in))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(in, out) {
		t.Fatalf("round trip:\n%+v\n%+v", in, out)
	}
}

// FuzzDecodeBatch: a log entry is rejected or decodes to commands that
// encode back to an entry decoding the same way; it never panics.
func FuzzDecodeBatch(f *testing.F) {
	f.Add(EncodeBatch([]*Cmd{{Op: BFAdd, Key: []byte("k"), Items: [][]byte{[]byte("a")}}}))
	f.Add([]byte{1, 255, 255, 255, 255, 15})
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		cmds, err := DecodeBatch(b)
		if err != nil {
			return
		}
		// Compare encodings, not structs: a NaN error rate is not equal to
		// itself.
		enc := EncodeBatch(cmds)
		again, err := DecodeBatch(enc)
		if err != nil || !bytes.Equal(EncodeBatch(again), enc) {
			t.Fatalf("re-encode: %v", err)
		}
	})
}

func TestMinCmdBytes(t *testing.T) {
	if n := len(appendCmd(nil, &Cmd{})); n != minCmdBytes {
		t.Fatalf("an empty command encodes to %d bytes, minCmdBytes is %d", n, minCmdBytes)
	}
}
