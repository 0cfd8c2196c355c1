package keyspace

import (
	"testing"

	"github.com/bfserver/bfserver/engine"
)

// loadImage installs v at key in k as a start would from an image holding
// it whole: its metadata, then every chunk of its arrays (as a full
// write stores them).
func loadImage(t testing.TB, k *Keyspace, key string, v *Value) {
	t.Helper()
	if err := k.LoadValue(0, key, encodeMeta(v), capBytes); err != nil {
		t.Fatal(err)
	}
	eachPart(v, func(part uint32, size uint64, _ *engine.Dirty, read func([]byte, uint64)) {
		for off := uint64(0); off < size; off += engine.ChunkSize {
			buf := make([]byte, min(engine.ChunkSize, size-off))
			read(buf, off)
			if err := k.LoadChunk(0, key, Chunk{Part: part, Index: uint32(off / engine.ChunkSize), Data: buf}); err != nil {
				t.Fatal(err)
			}
		}
	})
	k.ForgetChanges()
}
