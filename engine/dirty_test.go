package engine

import (
	"bytes"
	"slices"
	"testing"
)

// chunksOf lists the chunks a record names.
func chunksOf(set []uint64) []uint64 {
	var out []uint64
	EachChunk(set, func(c uint64) error { out = append(out, c); return nil })
	return out
}

// TestDirtyGrow: a record grown past 64 chunks (a t-digest's nodes) keeps
// the chunks it had and records those past the old end; grown while a
// Freeze holds the array, a held chunk the writer then changes is copied
// first, and the hold reads the array as it was.
func TestDirtyGrow(t *testing.T) {
	var d Dirty
	d.Mark(3 * ChunkSize)
	d.Mark(63 * ChunkSize)
	d.Grow(10 * ChunkSize) // still one word
	d.Grow(100 * ChunkSize)
	d.Mark(90 * ChunkSize)
	d.Grow(200 * ChunkSize)
	d.Mark(150 * ChunkSize)
	if got := chunksOf(d.Swap()); !slices.Equal(got, []uint64{3, 63, 90, 150}) {
		t.Fatalf("grown record names chunks %v", got)
	}
	if got := chunksOf(d.Swap()); len(got) != 0 {
		t.Fatalf("after a swap the record names %v", got)
	}

	// Held, then grown: the writer's change to a held chunk is copied.
	arr := make([]byte, 3*ChunkSize)
	for i := range arr {
		arr[i] = byte(i / ChunkSize)
	}
	var h Dirty
	read := func(dst []byte, off uint64) { copy(dst, arr[off:]) }
	f := NewFreeze(1 << 20)
	f.Lock()
	hold := f.Hold(&h, uint64(len(arr)), read, true, nil)
	f.Unlock()
	h.Grow(100 * ChunkSize)
	h.Mark(1 * ChunkSize)
	arr[ChunkSize] = 0xff
	h.Mark(80 * ChunkSize)
	var got [][]byte
	if err := hold.Read(make([]byte, ChunkSize), func(c uint64, data []byte) error {
		got = append(got, bytes.Clone(data))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 || got[1][0] != 1 || f.Copies != 1 {
		t.Fatalf("the hold read %d chunks (chunk 1 starting %d), %d copied", len(got), got[1][0], f.Copies)
	}
	f.End()
	if c := chunksOf(h.Swap()); !slices.Equal(c, []uint64{1, 80}) {
		t.Fatalf("the held, grown record names %v", c)
	}
}
