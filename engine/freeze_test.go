package engine

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// memSpill is a spill in memory; fail makes its writes fail.
type memSpill struct {
	mu   sync.Mutex
	b    []byte
	fail bool
}

func (m *memSpill) WriteAt(p []byte, off int64) (int, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.fail {
		return 0, errors.New("disk full")
	}
	if need := int(off) + len(p); need > len(m.b) {
		m.b = append(m.b, make([]byte, need-len(m.b))...)
	}
	return copy(m.b[off:], p), nil
}

func (m *memSpill) ReadAt(p []byte, off int64) (int, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return copy(p, m.b[off:]), nil
}

// frozenArray is an array of chunks chunks, chunk c filled with byte c,
// held whole by a Freeze of a one-chunk budget with spill sp (none when
// nil, limited to limit bytes).
func frozenArray(chunks int, sp Spill, limit int64) (arr []byte, d *Dirty, f *Freeze, h *Hold) {
	arr = make([]byte, chunks*ChunkSize)
	for c := range chunks {
		for i := range ChunkSize {
			arr[c*ChunkSize+i] = byte(c)
		}
	}
	dd := NewDirty(uint64(len(arr)))
	d = &dd
	f = NewFreeze(ChunkSize)
	if sp != nil {
		f.SetSpill(sp, limit)
	}
	read := func(dst []byte, off uint64) { copy(dst, arr[off:]) }
	f.Lock()
	h = f.Hold(d, uint64(len(arr)), read, true, nil)
	f.Unlock()
	return arr, d, f, h
}

// overwrite is the writer: it changes every chunk, the last first (the
// image write reads the first first), marking each before it changes it.
func overwrite(arr []byte, d *Dirty, chunks int) {
	for c := chunks - 1; c >= 0; c-- {
		d.MarkRange(uint64(c)*ChunkSize, ChunkSize)
		for i := range ChunkSize {
			arr[c*ChunkSize+i] = 0xee
		}
	}
}

// readAll reads the hold and checks every chunk is as it was when the
// hold was taken.
func readAll(t *testing.T, h *Hold, chunks int) {
	t.Helper()
	seen := 0
	buf := make([]byte, ChunkSize)
	if err := h.Read(buf, func(c uint64, data []byte) error {
		if !bytes.Equal(data, bytes.Repeat([]byte{byte(c)}, ChunkSize)) {
			t.Errorf("chunk %d is not as it was when held", c)
		}
		seen++
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if seen != chunks {
		t.Fatalf("read %d chunks, want %d", seen, chunks)
	}
}

// TestFreezeSpill: a writer over the budget puts its chunks in the spill
// and goes on, without waiting for the image write to read anything; the
// write then reads every chunk as it was, spilled ones included.
func TestFreezeSpill(t *testing.T) {
	const chunks = 40
	sp := &memSpill{}
	arr, d, f, h := frozenArray(chunks, sp, 1<<30)
	done := make(chan struct{})
	go func() {
		overwrite(arr, d, chunks)
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("the writer waited for the image write")
	}
	if f.Waits != 0 || f.Copies != 1 || f.Spills != chunks-1 {
		t.Fatalf("waits %d, copies %d, spills %d: want 0, 1 (the budget) and %d", f.Waits, f.Copies, f.Spills, chunks-1)
	}
	if len(sp.b) != (chunks-1)*ChunkSize {
		t.Fatalf("the spill holds %d bytes, want %d", len(sp.b), (chunks-1)*ChunkSize)
	}
	readAll(t, h, chunks)
	f.End()
	// After the hold, the writer changes the array freely.
	d.Mark(0)
}

// TestFreezeSpillFallsBack: with a spill that fails, or is full, a writer
// over the budget waits for the image write as it would without one, and
// the write still reads every chunk as it was.
func TestFreezeSpillFallsBack(t *testing.T) {
	for _, tc := range []struct {
		name       string
		sp         *memSpill
		limit      int64
		wantSpills uint64
	}{
		{"none", nil, 0, 0},
		{"failing", &memSpill{fail: true}, 1 << 30, 0},
		{"full", &memSpill{}, 3 * ChunkSize, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const chunks = 12
			var sp Spill
			if tc.sp != nil {
				sp = tc.sp
			}
			arr, d, f, h := frozenArray(chunks, sp, tc.limit)
			done := make(chan struct{})
			go func() {
				overwrite(arr, d, chunks)
				close(done)
			}()
			// The writer must wait: it cannot finish before the read.
			waiting := func() bool {
				f.Lock()
				defer f.Unlock()
				return f.waiting > 0
			}
			for deadline := time.Now().Add(30 * time.Second); !waiting(); {
				select {
				case <-done:
					t.Fatal("the writer went past the budget without a spill")
				default:
				}
				if time.Now().After(deadline) {
					t.Fatal("the writer never waited")
				}
				time.Sleep(time.Millisecond)
			}
			readAll(t, h, chunks)
			<-done
			f.Lock()
			spills, waits := f.Spills, f.Waits
			f.Unlock()
			if spills != tc.wantSpills || waits == 0 {
				t.Fatalf("spills %d (want %d), waits %d (want some)", spills, tc.wantSpills, waits)
			}
			f.End()
		})
	}
}

// TestFreezeLines: a writer that changes a few bytes of a held chunk
// copies only the lines holding them, and the image write still reads
// every chunk as it was: lines copied, ranges across chunks, a chunk
// spilled after some of its lines were copied, and the last chunk shorter
// than the others.
func TestFreezeLines(t *testing.T) {
	const size = 6*ChunkSize + 1000 // a short last chunk, not a whole line at its end
	arr := make([]byte, size)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range arr {
		arr[i] = byte(rng.Uint32())
	}
	want := bytes.Clone(arr)
	dd := NewDirty(size)
	d := &dd
	// The budget holds a handful of chunks' lines, not all of them.
	f := NewFreeze(2 * ChunkSize)
	sp := &memSpill{}
	f.SetSpill(sp, 1<<30)
	read := func(dst []byte, off uint64) { copy(dst, arr[off:]) }
	f.Lock()
	h := f.Hold(d, size, read, true, nil)
	f.Unlock()
	// A byte here and there: one line each.
	touched := map[uint64]bool{}
	set := func(off uint64) {
		d.Mark(off)
		arr[off] = ^arr[off]
		touched[off/LineSize] = true
	}
	for range 200 {
		set(rng.Uint64N(size))
	}
	set(size - 1) // the last line, short
	if f.Spills != 0 || f.Lines != uint64(len(touched)) {
		t.Fatalf("lines %d, spills %d: want %d and none", f.Lines, f.Spills, len(touched))
	}
	if f.Peak > 64<<10 {
		t.Fatalf("%d bytes of copies for %d lines", f.Peak, len(touched))
	}
	// A range across chunks 1 and 2, then whole chunks past the budget:
	// some go to the spill, with the lines they had.
	d.MarkRange(2*ChunkSize-100, 300)
	for i := 2*ChunkSize - 100; i < 2*ChunkSize+200; i++ {
		arr[i] ^= 0x5a
	}
	for c := uint64(0); c < 5; c++ {
		d.MarkRange(c*ChunkSize, ChunkSize)
		for i := c * ChunkSize; i < (c+1)*ChunkSize; i++ {
			arr[i] = 0xee
		}
	}
	if f.Spills == 0 || f.Waits != 0 {
		t.Fatalf("spills %d, waits %d: want some spills and no wait", f.Spills, f.Waits)
	}
	seen := 0
	if err := h.Read(make([]byte, ChunkSize), func(c uint64, data []byte) error {
		if !bytes.Equal(data, want[c*ChunkSize:min(size, (c+1)*ChunkSize)]) {
			t.Errorf("chunk %d is not as it was when held", c)
		}
		seen++
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if seen != 7 {
		t.Fatalf("read %d chunks, want 7", seen)
	}
	f.Lock()
	copied := f.copied
	f.Unlock()
	if copied != 0 {
		t.Fatalf("%d bytes of copies left after the read", copied)
	}
	f.End()
}

// TestFreezeLinesBeside: a writer changing bytes all over the array while
// the image write reads it, and the write reads the array as held; no
// read of the array (a copy's, or the write's) ever takes in a line the
// writer changed since the hold, which the writer may be changing as it
// is read. (The writer's stores are plain, as a cuckoo table's are.)
func TestFreezeLinesBeside(t *testing.T) {
	const size = 64 * ChunkSize
	words := make([]uint64, size/8)
	rng := rand.New(rand.NewPCG(3, 4))
	for i := range words {
		words[i] = rng.Uint64()
	}
	want := make([]byte, size)
	for i, w := range words {
		binary.LittleEndian.PutUint64(want[8*i:], w)
	}
	// changed marks a line once Mark has returned for it, before its
	// first change: a read may never see it again.
	changed := make([]atomic.Bool, size/LineSize)
	var bad atomic.Int64
	dd := NewDirty(size)
	d := &dd
	f := NewFreeze(4 * ChunkSize)
	f.SetSpill(&memSpill{}, 1<<30)
	read := func(dst []byte, off uint64) {
		for l := off / LineSize; l*LineSize < off+uint64(len(dst)); l++ {
			if changed[l].Load() {
				bad.Add(1)
				return
			}
		}
		for i := range dst {
			p := off + uint64(i)
			dst[i] = byte(words[p/8] >> (8 * (p % 8)))
		}
	}
	f.Lock()
	h := f.Hold(d, size, read, true, nil)
	f.Unlock()
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		r := rand.New(rand.NewPCG(5, 6))
		for {
			select {
			case <-stop:
				return
			default:
			}
			x := r.Uint64N(size * 8)
			d.Mark(x / 8)
			changed[x/8/LineSize].Store(true)
			words[x/64] ^= 1 << (x % 64)
		}
	}()
	// Let the writer copy lines of chunks the write has not reached.
	for lines := uint64(0); lines < 2000; {
		f.Lock()
		lines = f.Lines
		f.Unlock()
		runtime.Gosched()
	}
	err := h.Read(make([]byte, ChunkSize), func(c uint64, data []byte) error {
		if !bytes.Equal(data, want[c*ChunkSize:(c+1)*ChunkSize]) {
			t.Errorf("chunk %d is not as it was when held", c)
		}
		return nil
	})
	close(stop)
	<-done
	if err != nil {
		t.Fatal(err)
	}
	if n := bad.Load(); n > 0 {
		t.Fatalf("%d reads took in a line the writer had changed", n)
	}
	f.End()
}

// failAfter is a spill whose writes fail after the first n.
type failAfter struct {
	memSpill
	n int
}

func (s *failAfter) WriteAt(p []byte, off int64) (int, error) {
	if s.n--; s.n < 0 {
		return 0, errors.New("disk full")
	}
	return s.memSpill.WriteAt(p, off)
}

// TestFreezeLinesRandom: random arrays (a short last chunk, one grown past
// the held size), marks of bytes and of ranges (across chunks, empty),
// budgets of up to three chunks, and spills that work, fail at once or
// later, or fill: the write reads every chunk as held, no read takes in a
// line the writer changed or a byte past the held size, the copies cost
// what the budget counts at every chunk read, nothing is left counted at
// the end, and the copies never exceed the budget.
func TestFreezeLinesRandom(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	for round := range 120 {
		size := uint64(1+rng.IntN(5))*ChunkSize - uint64(rng.IntN(3))*uint64(1+rng.IntN(ChunkSize/2))
		grownTo := size + uint64(rng.IntN(2))*uint64(rng.IntN(2*ChunkSize)) // the writer may grow the array (a t-digest)
		arr := make([]byte, grownTo)
		for i := range arr {
			arr[i] = byte(rng.Uint32())
		}
		want := bytes.Clone(arr[:size])
		changed := make([]atomic.Bool, (grownTo+LineSize-1)/LineSize)
		var bad atomic.Int64
		read := func(dst []byte, off uint64) {
			if off+uint64(len(dst)) > size {
				panic(fmt.Sprintf("read of [%d, %d) past the held %d bytes", off, off+uint64(len(dst)), size))
			}
			for l := off / LineSize; l*LineSize < off+uint64(len(dst)); l++ {
				if changed[l].Load() {
					bad.Add(1)
				}
			}
			copy(dst, arr[off:])
		}
		dd := NewDirty(size)
		d := &dd
		budget := uint64(rng.IntN(4)) * ChunkSize
		f := NewFreeze(budget)
		var sp Spill
		switch rng.IntN(4) {
		case 1:
			sp = &memSpill{}
			f.SetSpill(sp, 1<<30)
		case 2:
			sp = &failAfter{n: rng.IntN(3)}
			f.SetSpill(sp, 1<<30)
		case 3:
			sp = &memSpill{}
			f.SetSpill(sp, int64(rng.IntN(3))*ChunkSize)
		}
		f.Lock()
		h := f.Hold(d, size, read, true, nil)
		f.Unlock()
		ops := make([][2]uint64, 300)
		for i := range ops {
			var off uint64
			switch rng.IntN(4) {
			case 0, 1:
				off = rng.Uint64N(grownTo)
			case 2: // about a chunk's edge
				off = min(grownTo-1, (rng.Uint64N(grownTo/ChunkSize+1)*ChunkSize+rng.Uint64N(256))-min(128, grownTo))
			case 3: // about the held size's end
				off = min(grownTo-1, size-1-rng.Uint64N(min(128, size))+rng.Uint64N(64))
			}
			n := uint64(1)
			if rng.IntN(4) == 0 {
				n = rng.Uint64N(min(3*ChunkSize, grownTo-off) + 1) // may be 0
			}
			ops[i] = [2]uint64{off, n}
		}
		done := make(chan struct{})
		var half atomic.Bool
		go func() {
			defer close(done)
			if grownTo > size {
				d.Grow(grownTo)
			}
			for i, op := range ops {
				half.Store(i >= len(ops)/2)
				off, n := op[0], op[1]
				if n == 1 {
					d.Mark(off)
				} else {
					d.MarkRange(off, n)
				}
				for l := off / LineSize; n > 0 && l*LineSize < off+n; l++ {
					changed[l].Store(true)
				}
				for i := off; i < off+n; i++ {
					arr[i] ^= 0xa5
				}
			}
		}()
		// The write starts once the writer is half way, or waiting for it.
		for !half.Load() {
			f.Lock()
			waiting := f.waiting > 0
			f.Unlock()
			if waiting {
				break
			}
			runtime.Gosched()
		}
		seen := 0
		err := h.Read(make([]byte, ChunkSize), func(c uint64, data []byte) error {
			if !bytes.Equal(data, want[c*ChunkSize:min(size, (c+1)*ChunkSize)]) {
				t.Errorf("round %d: chunk %d is not as it was when held", round, c)
			}
			f.Lock()
			var cost uint64
			for c, l := range h.copies {
				if l != nil {
					cost += l.cost()
					if !h.isPending(uint64(c)) {
						t.Errorf("round %d: chunk %d keeps copies after it was read or spilled", round, c)
					}
				}
			}
			if cost != f.copied {
				t.Errorf("round %d: copies cost %d bytes, the budget counts %d", round, cost, f.copied)
			}
			f.Unlock()
			seen++
			return nil
		})
		<-done
		if err != nil {
			t.Fatal(err)
		}
		if want := int((size + ChunkSize - 1) / ChunkSize); seen != want {
			t.Fatalf("round %d: read %d chunks, want %d", round, seen, want)
		}
		if n := bad.Load(); n > 0 {
			t.Fatalf("round %d: %d reads took in a line the writer had changed", round, n)
		}
		f.Lock()
		if f.copied != 0 || f.Peak > max(budget, MinBudget) {
			t.Errorf("round %d: %d bytes counted after the read, peak %d over a budget of %d", round, f.copied, f.Peak, max(budget, MinBudget))
		}
		f.Unlock()
		f.End()
	}
}
