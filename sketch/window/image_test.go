package window

import (
	"bytes"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/bfserver/bfserver/engine"
)

// checkCounts fails unless every slice's count of set bits is its
// recount.
func checkCounts(t *testing.T, f *Filter) {
	t.Helper()
	want := slices.Clone(f.ones)
	f.Recount()
	if !slices.Equal(want, f.ones) {
		t.Fatalf("slice counts %v, recounted %v", want, f.ones)
	}
}

// TestDirtyMarksEveryChange: the image writes only the chunks a filter
// marked, so every chunk whose bytes changed since the record was last
// taken must be marked, through adds, shifts by count and by time, an
// idle gap that clears everything and LOADCHUNK; and the slices' counts
// (Info's fills) always equal a recount.
func TestDirtyMarksEveryChange(t *testing.T) {
	for _, o := range []Options{
		{ErrorRate: 0.01, Kind: Count, Count: 200_000},
		{ErrorRate: 0.001, Kind: Time, WindowMs: 60_000, Capacity: 100_000, Now: 1_000_000},
	} {
		f := mustNew(t, o)
		if f.Size() <= 4*engine.ChunkSize {
			t.Fatalf("%d bytes: want a filter of several chunks", f.Size())
		}
		rng := rand.New(rand.NewPCG(7, uint64(o.Kind)))
		now, id := o.Now, uint64(0)
		prev := make([]byte, f.Size())
		for round := range 40 {
			f.ReadBytes(prev, 0)
			f.dirty.Swap()
			switch {
			case round == 20: // idle past the forgetting margin (time), or a chunk loaded
				if o.Kind == Time {
					now += 10 * o.WindowMs
				} else {
					data := make([]byte, 3*engine.ChunkSize/2)
					for i := range data {
						data[i] = byte(rng.Uint32())
					}
					off := uint64(engine.ChunkSize + 100)
					if err := f.LoadChunk(int64(1+off+uint64(len(data))), data); err != nil {
						t.Fatal(err)
					}
				}
			default:
				for range rng.IntN(3000) + 1 {
					f.Add(key(1, id), now)
					id++
					now += rng.Int64N(2)
				}
			}
			set := f.dirty.Swap()
			cur := make([]byte, f.Size())
			f.ReadBytes(cur, 0)
			for c := uint64(0); c*engine.ChunkSize < f.Size(); c++ {
				lo, hi := c*engine.ChunkSize, min((c+1)*engine.ChunkSize, f.Size())
				marked := c>>6 < uint64(len(set)) && set[c>>6]&(1<<(c&63)) != 0
				if !bytes.Equal(prev[lo:hi], cur[lo:hi]) && !marked {
					t.Fatalf("%v round %d: chunk %d changed but not marked", o.Kind, round, c)
				}
			}
			checkCounts(t, f)
		}
		g, err := Unmarshal(f.Marshal(), 0)
		if err != nil || !slices.Equal(g.ones, f.ones) {
			t.Fatalf("counts after a round trip: %v", err)
		}
	}
}

// TestLoadBytes: an image loaded chunk by chunk (in any order) and then
// recounted, or read straight into LoadTarget, is the filter it was
// written from; a chunk out of range is refused.
func TestLoadBytes(t *testing.T) {
	f := mustNew(t, Options{ErrorRate: 0.01, Kind: Count, Count: 100_000})
	for i := range 250_000 {
		f.Add(key(1, uint64(i)), 0)
	}
	img := make([]byte, f.Size())
	f.ReadBytes(img, 0)
	g, err := LoadHeader(f.Header(), 0)
	if err != nil {
		t.Fatal(err)
	}
	n := (f.Size() + engine.ChunkSize - 1) / engine.ChunkSize
	for _, c := range rand.New(rand.NewPCG(8, 8)).Perm(int(n)) {
		lo := uint64(c) * engine.ChunkSize
		if err := g.LoadBytes(img[lo:min(lo+engine.ChunkSize, f.Size())], lo); err != nil {
			t.Fatal(err)
		}
	}
	g.Recount()
	if !Equal(f, g) || !slices.Equal(f.ones, g.ones) {
		t.Fatal("loaded chunk by chunk: not the filter written")
	}
	if err := g.LoadBytes(make([]byte, 8), f.Size()-4); err == nil {
		t.Fatal("a chunk past the end was taken")
	}
	if dst := g.LoadTarget(); littleEndian && !bytes.Equal(dst, img) {
		t.Fatal("LoadTarget is not the image's layout")
	}
}
