package keyspace

import (
	"math/rand/v2"
	"testing"

	"github.com/bfserver/bfserver/command"
)

// TestLoadPieces: a large LOADCHUNK written as its pieces (command.Pieces),
// one Apply each, leaves the filter exactly as the chunk in one Apply does;
// and a chunk that LOADCHUNK refuses has its first piece refused with the
// same error, changing nothing, though that piece alone would fit.
func TestLoadPieces(t *testing.T) {
	reserve := map[string]*command.Cmd{
		"bloom":  {Op: command.BFReserve, ErrorRate: 0.01, Capacity: 3_000_000, Expansion: 2, NonScaling: true},
		"cuckoo": {Op: command.CFReserve, Capacity: 3_000_000, BucketSize: 2, MaxIterations: 20, Expansion: 1},
	}
	load := map[string]command.Op{"bloom": command.BFLoadChunk, "cuckoo": command.CFLoadChunk}
	for kind, rc := range reserve {
		t.Run(kind, func(t *testing.T) {
			fresh := func() *Keyspace {
				k := New()
				c := *rc
				c.Key = []byte("f")
				apply(t, k, &c)
				return k
			}
			whole, split := fresh(), fresh()
			size := int64(firstSubBytes(t, whole))
			n := int64(2*command.MaxPiece + 12345)
			if size < n+command.MaxPiece {
				t.Fatalf("filter of %d bytes is too small for the test", size)
			}
			data := make([]byte, n)
			for i := range data {
				data[i] = byte(rand.Uint32())
			}
			// The chunk at offset 100: both kinds' chunks start at
			// iterator − length − 1.
			c := &command.Cmd{Op: load[kind], Key: []byte("f"), Iter: 100 + n + 1, Data: data}
			apply(t, whole, c)
			pieces := command.Pieces(c)
			if len(pieces) != 3 {
				t.Fatalf("%d pieces, want 3", len(pieces))
			}
			var total int64
			for i := range pieces {
				p := &pieces[i]
				if len(p.Data) > command.MaxPiece {
					t.Fatalf("piece %d: %d bytes", i, len(p.Data))
				}
				if err := command.Validate(p); err != nil {
					t.Fatalf("piece %d: %v", i, err)
				}
				total += int64(len(p.Data))
				apply(t, split, p)
			}
			if total != n {
				t.Fatalf("pieces carry %d bytes, want %d", total, n)
			}
			got, want := Digest(split.Lookup(0, []byte("f"), 0)), Digest(whole.Lookup(0, []byte("f"), 0))
			if got != want {
				t.Fatalf("pieces left digest %s, the whole chunk %s", got, want)
			}

			// A chunk running past the end of its sub-filter.
			k := fresh()
			before := Digest(k.Lookup(0, []byte("f"), 0))
			over := &command.Cmd{Op: load[kind], Key: []byte("f"), Data: make([]byte, n)}
			over.Iter = int64(firstSubBytes(t, k)) - n + command.MaxPiece + n + 1
			over.MaxBytes = capBytes
			wantErr := k.Apply(over).Err
			if wantErr == nil {
				t.Fatal("a chunk past its sub-filter's end was accepted")
			}
			ps := command.Pieces(over)
			if len(ps) == 0 {
				t.Fatal("no pieces")
			}
			ps[0].MaxBytes = capBytes
			if r := k.Apply(&ps[0]); r.Err != wantErr {
				t.Fatalf("first piece: %v, the whole chunk: %v", r.Err, wantErr)
			}
			if Digest(k.Lookup(0, []byte("f"), 0)) != before {
				t.Fatal("a refused piece changed the filter")
			}
		})
	}
}

// firstSubBytes is the size of the key f's first link or sub-filter.
func firstSubBytes(t *testing.T, k *Keyspace) uint64 {
	t.Helper()
	v := k.Lookup(0, []byte("f"), 0)
	if v.Bloom() != nil {
		return v.Bloom().Links()[0].BloomParams.Bytes
	}
	return uint64(len(v.Cuckoo().Tables()[0].Data))
}
