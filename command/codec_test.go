package command

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"reflect"
	"runtime"
	"testing"
)

var sample = []*Cmd{
	{Op: BFAdd, DB: 3, Now: 1234, Key: []byte("k"), Items: [][]byte{[]byte("a"), {}}, Multi: true, ErrorRate: 0.01, Capacity: 100, Expansion: 2, MaxBytes: 1 << 20},
	{Op: BFAdd, DB: 3, Now: 1234, Key: []byte("k"), Items: [][]byte{[]byte("b")}, ErrorRate: 0.01, Capacity: 100, Expansion: 2, MaxBytes: 1 << 20},
	{Op: BFAdd, DB: 3, Now: 1234, Key: []byte("k"), Items: [][]byte{[]byte("b")}, ErrorRate: 0.01, Capacity: 100, Expansion: 2, MaxBytes: 1 << 20},
	{Op: CFAdd, Key: []byte("c"), Items: [][]byte{[]byte("x")}, NX: true, BucketSize: 4, MaxIterations: 20, MaxExpansions: 32},
	{Op: Rename, Key: []byte("a"), Dst: []byte("b"), NX: true},
	{Op: Expire, Key: []byte("e"), Iter: -5, Field: CondGT},
	{Op: Del, Keys: [][]byte{[]byte("a"), []byte("b")}},
	{Op: Set, Key: []byte("s"), Data: []byte("value"), Count: 7},
}

func TestCodecRoundTrip(t *testing.T) {
	out, err := DecodeBatch(EncodeBatch(sample))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(sample, out) {
		t.Fatalf("round trip:\n%+v\n%+v", sample, out)
	}
}

// randomCmd draws every field from a few values, so that neighbours often
// share some and differ in others.
func randomCmd(r *rand.Rand) *Cmd {
	pick := func(vs ...[]byte) []byte { return vs[r.IntN(len(vs))] }
	list := func() [][]byte {
		if r.IntN(3) == 0 {
			return nil
		}
		l := make([][]byte, 1+r.IntN(3))
		for i := range l {
			l[i] = pick([]byte{}, []byte("a"), []byte("item"))
		}
		return l
	}
	return &Cmd{
		Op: Op(1 + r.IntN(20)), DB: uint8(r.IntN(2)), Now: int64(r.IntN(3)) * 1_700_000_000_000,
		Key: pick(nil, []byte("k"), []byte("key")), Dst: pick(nil, []byte("d")),
		Keys: list(), Items: list(), Data: pick(nil, []byte("data")),
		Iter: int64(r.IntN(3)) - 1, Count: int64(r.IntN(2)),
		Multi: r.IntN(2) == 0, NX: r.IntN(2) == 0, NoCreate: r.IntN(2) == 0, NonScaling: r.IntN(2) == 0, Flag: r.IntN(2) == 0,
		ErrorRate: []float64{0, 0.01, 0.5}[r.IntN(3)], Capacity: uint64(r.IntN(2)) * 100,
		Expansion: uint32(r.IntN(2)) * 2, BucketSize: uint16(r.IntN(2)) * 4, MaxIterations: uint16(r.IntN(2)) * 20,
		MaxExpansions: uint32(r.IntN(2)) * 32, MaxBytes: uint64(r.IntN(2)) << 29, Field: uint8(r.IntN(3)),
	}
}

// TestCodecRandomRoundTrip: seeded batches of commands that share and
// differ in every field decode to what was encoded (empty and absent
// byte strings both decode as absent, as they always have).
func TestCodecRandomRoundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	for n := 0; n < 500; n++ {
		in := make([]*Cmd, 1+r.IntN(20))
		for i := range in {
			in[i] = randomCmd(r)
		}
		out, err := DecodeBatch(EncodeBatch(in))
		if err != nil {
			t.Fatal(err)
		}
		if len(out) != len(in) {
			t.Fatalf("%d commands decoded, %d encoded", len(out), len(in))
		}
		for i := range in {
			if !bytes.Equal(encodeV1([]*Cmd{in[i]}), encodeV1([]*Cmd{out[i]})) {
				t.Fatalf("batch %d command %d:\n%+v\n%+v", n, i, in[i], out[i])
			}
		}
	}
}

// TestDecoderReuse: one Decoder, fed entries of both versions and of
// sizes that outgrow and undershoot its kept memory, with corrupt entries
// between them, decodes each as DecodeBatch does.
func TestDecoderReuse(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 10))
	var d Decoder
	for n := 0; n < 300; n++ {
		in := make([]*Cmd, 1+r.IntN([]int{3, 40, 2500}[r.IntN(3)]))
		for i := range in {
			in[i] = randomCmd(r)
		}
		enc := EncodeBatch(in)
		if r.IntN(4) == 0 {
			enc = encodeV1(in)
		}
		if r.IntN(10) == 0 {
			if _, err := d.Decode(enc[:len(enc)-1]); err == nil {
				t.Fatalf("entry %d: a truncated entry decoded", n)
			}
		}
		want, err := DecodeBatch(enc)
		if err != nil {
			t.Fatal(err)
		}
		got, err := d.Decode(enc)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(EncodeBatch(got), EncodeBatch(want)) || !bytes.Equal(encodeV1(got), encodeV1(want)) {
			t.Fatalf("entry %d (%d commands): the decoder's commands differ from DecodeBatch's", n, len(in))
		}
	}
}

// TestEncoderMatchesEncodeBatch: entries built one after another with one
// Encoder, as the group commit does, are the bytes a fresh encoding of the
// same commands gives: nothing of an entry leaks into the next.
func TestEncoderMatchesEncodeBatch(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	var e Encoder
	for n := 0; n < 200; n++ {
		in := make([]*Cmd, r.IntN(50))
		for i := range in {
			in[i] = randomCmd(r)
			e.Add(in[i])
		}
		if e.Len() != len(in) {
			t.Fatalf("Len %d after %d commands", e.Len(), len(in))
		}
		if got, want := e.Entry(), EncodeBatch(in); !bytes.Equal(got, want) {
			t.Fatalf("entry %d: the encoder wrote %x, EncodeBatch %x", n, got, want)
		}
	}
}

// TestVersion2IsSmaller: a batch of BF.ADDs to one filter, the log's
// common case, takes well under half the bytes it took in version 1.
func TestVersion2IsSmaller(t *testing.T) {
	var cmds []*Cmd
	for i := 0; i < 500; i++ {
		cmds = append(cmds, &Cmd{Op: BFAdd, Now: 1_764_000_000_000, Key: []byte("users:emails"),
			Items: [][]byte{fmt.Appendf(nil, "user%d@example.com", i)}, ErrorRate: 0.01, Capacity: 100, Expansion: 2, MaxBytes: 512 << 20})
	}
	v1, v2 := len(encodeV1(cmds)), len(EncodeBatch(cmds))
	t.Logf("500 BF.ADDs: version 1 %d bytes, version 2 %d bytes", v1, v2)
	if v2*2 > v1 {
		t.Fatalf("version 2 takes %d bytes against version 1's %d", v2, v1)
	}
}

// TestDecodeVersion1: entries written before version 2 still decode, from
// bytes kept as they were written.
func TestDecodeVersion1(t *testing.T) {
	out, err := DecodeBatch(encodeV1(sample))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(sample, out) {
		t.Fatalf("version 1:\n%+v\n%+v", sample, out)
	}
	// BF.ADD k a, as version 1 wrote it.
	old := []byte{1, 1, 2, 0, 0, 1, 'k', 0, 0, 1, 1, 'a', 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}
	cmds, err := DecodeBatch(old)
	if err != nil || len(cmds) != 1 || cmds[0].Op != BFAdd || string(cmds[0].Key) != "k" || string(cmds[0].Items[0]) != "a" {
		t.Fatalf("version 1 entry: %+v, %v", cmds, err)
	}
}

// encodeV1 is version 1's encoder, kept to prove its entries still decode.
func encodeV1(cmds []*Cmd) []byte {
	b := []byte{version1}
	b = binary.AppendUvarint(b, uint64(len(cmds)))
	for _, c := range cmds {
		b = appendFields(append(b, byte(c.Op)), c, fAll)
	}
	return b
}

// FuzzDecodeBatch: a log entry is rejected or decodes to commands that
// encode back to an entry decoding the same way; it never panics.
func FuzzDecodeBatch(f *testing.F) {
	f.Add(EncodeBatch([]*Cmd{{Op: BFAdd, Key: []byte("k"), Items: [][]byte{[]byte("a")}}}))
	f.Add(EncodeBatch(sample))
	f.Add(encodeV1(sample))
	f.Add([]byte{1, 255, 255, 255, 255, 15})
	f.Add([]byte{2, 3, 2, 0, 2, 0, 2, 0})
	f.Add([]byte{})
	var d Decoder
	f.Fuzz(func(t *testing.T, b []byte) {
		if got, most := allocated(func() { DecodeBatch(b) }), decodeBudget(len(b)); got > most {
			t.Fatalf("decoding %d bytes allocated %d, over its budget of %d", len(b), got, most)
		}
		cmds, err := DecodeBatch(b)
		reused, rerr := d.Decode(b)
		if (err == nil) != (rerr == nil) {
			t.Fatalf("DecodeBatch: %v, a reused Decoder: %v", err, rerr)
		}
		if err != nil {
			return
		}
		if !bytes.Equal(encodeV1(reused), encodeV1(cmds)) {
			t.Fatal("a reused Decoder decoded otherwise")
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
	if n := len(encodeV1([]*Cmd{{}})) - 2; n != minCmdBytesV1 {
		t.Fatalf("an empty command encodes to %d bytes in version 1, minCmdBytesV1 is %d", n, minCmdBytesV1)
	}
	if n := len(appendCmd(nil, &Cmd{}, &Cmd{})); n != minCmdBytesV2 {
		t.Fatalf("an unchanged command encodes to %d bytes in version 2, minCmdBytesV2 is %d", n, minCmdBytesV2)
	}
}

// TestEncoderSizeAfterLargeEntry: one large entry does not make every
// later small entry allocate its size.
func TestEncoderSizeAfterLargeEntry(t *testing.T) {
	var e Encoder
	e.Add(&Cmd{Op: BFLoadChunk, Key: []byte("k"), Iter: 1, Data: make([]byte, 200<<10)})
	e.Entry()
	for i := 0; i < 3; i++ {
		e.Add(&Cmd{Op: BFAdd, Key: []byte("k"), Items: [][]byte{[]byte("x")}})
		if b := e.Entry(); cap(b) > 4<<10 {
			t.Fatalf("entry %d after a 200 KiB one: len %d, cap %d", i, len(b), cap(b))
		}
	}
}

// decodeBudget is the most an entry of n bytes may cost to decode: a
// command (208 bytes and its pointer) for every two bytes at worst, or a
// list element's header (24 bytes) for every byte, plus a little.
func decodeBudget(n int) uint64 { return 128*uint64(n) + 1<<20 }

// allocated is the bytes fn allocates.
func allocated(fn func()) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	fn()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// TestDecodeBoundedByBytes: an entry claiming far more list elements than
// it holds, or more than a command may have, is refused having allocated
// about its own size, not its claims (a 64 MiB peer frame whose lists each
// claimed an element per byte allocated 1.5 GiB before the list decoded).
func TestDecodeBoundedByBytes(t *testing.T) {
	entry := func(claim uint64, elements []byte) []byte {
		b := []byte{version2, 1, byte(BFAdd)}
		b = binary.AppendUvarint(b, fKey|fItems)
		b = append(b, 1, 'k')
		b = binary.AppendUvarint(b, claim)
		return append(b, elements...)
	}
	// The first element claims more bytes than there are.
	lying := append(binary.AppendUvarint(nil, 16<<20), make([]byte, 8<<20)...)
	for name, b := range map[string][]byte{
		"more elements than a command may have":   entry(MaxItems+1, make([]byte, MaxItems+1)),
		"an element per byte, none of them whole": entry(4<<20, lying),
	} {
		var err error
		got := allocated(func() { _, err = DecodeBatch(b) })
		if err == nil {
			t.Fatalf("%s: decoded", name)
		}
		if most := uint64(1 << 20); got > most {
			t.Fatalf("%s: refusing it allocated %d bytes, over %d", name, got, most)
		}
	}
}
