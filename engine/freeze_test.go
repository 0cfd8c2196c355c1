package engine

import (
	"bytes"
	"errors"
	"sync"
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
		d.Mark(uint64(c) * ChunkSize)
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
