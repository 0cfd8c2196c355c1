package engine

import (
	"io"
	"runtime"
	"sync"
	"sync/atomic"
	"unsafe"
)

// A Freeze is one image write's hold on the chunks it still has to read:
// the write reads them while the writer goes on, and the writer, before it
// changes a held chunk, copies the lines of it that it changes (LineSize
// bytes each) for the write (copy-on-write). The write thus reads every
// chunk as it was when the hold was taken: the lines copied from their
// copies, the others from the array, which the writer has not changed.
//
// Lines, not chunks, because an add to a large filter sets bits in about
// seven chunks: copying whole chunks cost 448 KiB an add until the write
// reached them, and put nearly the whole array in the spill each flush
// (a 1 GiB filter at 20,000 adds a second); seven lines are 448 bytes.
//
// Copies are budgeted: a writer that would take the copies past the
// budget puts the whole chunk (as held) in the Freeze's spill instead (a
// scratch file the image write owns, SetSpill), one write of a chunk, and
// the image write reads it back from there. Memory for copies is
// therefore at most the budget (to within the allocator's rounding of the
// lines' bookkeeping), whatever the filters' size, and a writer
// never waits for the image write to reach a chunk. Only without a spill
// (or once writing to it failed, or it is full) does a writer over budget
// wait until the write has read (and let go of) enough copies, or the
// chunk itself.
//
// Locks: mu guards every Hold of the Freeze and the copies. The writer's
// check of an array it does not hold (Dirty.x nil) costs nothing more than
// before, and of a chunk the write has read, an atomic load
// (Hold.isPending).
type Freeze struct {
	mu      sync.Mutex
	cond    sync.Cond
	done    atomic.Bool
	held    map[*Dirty]*Hold
	budget  uint64
	copied  uint64 // bytes of copies not yet read
	waiting int    // writers waiting on the budget
	// spill takes the copies past the budget, at spillOff, up to
	// spillLimit bytes; spillBuf is the chunk on its way there.
	spill       Spill
	spillOff    int64
	spillLimit  int64
	spillBuf    []byte
	spillFailed bool
	// Counters for the owner's statistics: chunks with lines copied, lines
	// copied, bytes at most held in copies at once, how often a writer
	// waited on the budget, and the chunks put in the spill.
	Copies, Lines, Peak, Waits, Spills uint64
}

// Spill is where a Freeze puts copies past its budget: a scratch file
// the image write creates and removes. Each chunk is written once, at an
// offset never reused, and read back once.
type Spill interface {
	io.ReaderAt
	io.WriterAt
}

// SetSpill gives the Freeze a spill of at most limit bytes for the
// copies past its budget. Its owner closes it once End has returned.
func (f *Freeze) SetSpill(s Spill, limit int64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.spill, f.spillLimit = s, limit
}

// NewFreeze starts a Freeze whose copies may hold up to budget bytes (at
// least MinBudget).
func NewFreeze(budget uint64) *Freeze {
	f := &Freeze{held: map[*Dirty]*Hold{}, budget: max(budget, MinBudget)}
	f.cond.L = &f.mu
	return f
}

// Lock and Unlock take the Freeze's lock, so that its owner can decide
// who takes a hold on a value (the writer or the image write) under it.
func (f *Freeze) Lock()   { f.mu.Lock() }
func (f *Freeze) Unlock() { f.mu.Unlock() }

// Hold is a Freeze's hold on one array: the chunks still to be read and
// the copies the writer made of some of them.
type Hold struct {
	f       *Freeze
	d       *Dirty
	size    uint64
	read    func(dst []byte, off uint64)
	pending []uint64         // chunks not yet read nor spilled
	all     []uint64         // the chunks the hold was taken on
	copies  []*lines         // by chunk: a pending chunk's lines copied, if any
	spilled map[uint64]int64 // chunk -> its offset in the spill
	// inline holds the array's chunks, copied when the hold was taken, at
	// their offsets (only the held ones filled): the caller's buffer, not
	// the budget's.
	inline []byte
	// Bits is the change record the hold took from the array (Swap): a
	// write that fails merges it back (Dirty.Merge).
	Bits []uint64
	// word and pend are Bits and pending for an array of up to 64 chunks
	// (nearly every one): a hold in place (HoldIn) then allocates nothing.
	word, pend [1]uint64
}

// Hold takes d's change record and holds the chunks an image of the array
// needs: every chunk when full, the recorded ones otherwise. The caller
// holds f's lock and knows the writer is not changing the array (it is
// the writer, or the writer must take f's lock before it changes it).
// With inline (size bytes, the caller's, reused once the hold ends), the
// chunks are copied into it at once and the array is not held: for an
// image write about to read them. It costs no allocation per chunk, which
// matters for a cut of a million small filters (the garbage collector's
// work, not the copies, was most of such a flush's CPU).
func (f *Freeze) Hold(d *Dirty, size uint64, read func(dst []byte, off uint64), full bool, inline []byte) *Hold {
	h := &Hold{}
	f.HoldIn(h, d, size, read, full, inline)
	return h
}

// HoldIn is Hold into h, which the caller provides (a hold with inline,
// of an array of up to 64 chunks, then allocates nothing: a cut of a
// million small filters takes a million of them). h must be unused, or
// with inline released: a hold without inline is the array's writer's to
// look at (Hold.before) until the Freeze ends.
func (f *Freeze) HoldIn(h *Hold, d *Dirty, size uint64, read func(dst []byte, off uint64), full bool, inline []byte) {
	*h = Hold{f: f, d: d, size: size, read: read}
	if d.x == nil || d.x.bits == nil {
		h.word[0], d.word = d.word, 0 // Swap, into the hold
		h.Bits = h.word[:]
	} else {
		h.Bits = d.Swap()
	}
	chunks := (size + ChunkSize - 1) / ChunkSize
	words := (chunks + 63) / 64
	h.pending = h.pend[:0]
	if words > 1 {
		h.pending = make([]uint64, 0, words)
	}
	if full {
		h.pending = h.pending[:words]
		clear(h.pending)
		for c := uint64(0); c < chunks; c++ {
			h.pending[c>>6] |= 1 << (c & 63)
		}
	} else {
		// Only chunks inside the array (a record never names others; it
		// costs nothing to be sure).
		h.pending = append(h.pending, h.Bits[:min(uint64(len(h.Bits)), words)]...)
		if r := chunks & 63; r != 0 && uint64(len(h.pending)) == words {
			h.pending[words-1] &= 1<<r - 1
		}
	}
	if inline != nil {
		h.inline = inline[:size]
		EachChunk(h.pending, func(c uint64) error {
			read(h.inline[c*ChunkSize:c*ChunkSize+h.chunkLen(c)], c*ChunkSize)
			return nil
		})
		h.all = h.pending // nothing is pending any more: Read reads inline
		h.pending = nil
		return
	}
	h.all = append([]uint64(nil), h.pending...)
	f.held[d] = h
	if d.x == nil {
		d.x = &dirtyExt{hold: h}
	} else {
		d.x.hold = h
	}
}

func (h *Hold) chunkLen(c uint64) uint64 { return min(ChunkSize, h.size-c*ChunkSize) }

// isPending reports whether chunk c is still to be read (or spilled).
// The writer asks without f.mu first: a chunk's bit is only ever cleared
// (atomically, under f.mu), and the slice itself never changes once the
// hold is taken, so a clear bit is final.
func (h *Hold) isPending(c uint64) bool {
	return c>>6 < uint64(len(h.pending)) && atomic.LoadUint64(&h.pending[c>>6])&(1<<(c&63)) != 0
}

// done clears chunk c's pending bit; f.mu is held.
func (h *Hold) done(c uint64) { atomic.AndUint64(&h.pending[c>>6], ^(1 << (c & 63))) }

// LineSize is the grain of a Freeze's copies, a cache line: a writer that
// marks byte off (Dirty.Mark) changes nothing outside the LineSize-aligned
// line holding it.
const LineSize = 64

const linesPerChunk = ChunkSize / LineSize

// lines are the lines of one held chunk the writer copied before changing
// them, in the order copied: line at[i] is data[i*LineSize:][:LineSize].
type lines struct {
	copied [linesPerChunk / 64]uint64
	at     []uint16
	data   []byte
}

func (l *lines) has(i uint64) bool { return l.copied[i>>6]&(1<<(i&63)) != 0 }

// cost is the memory l takes, which the budget counts.
func (l *lines) cost() uint64 {
	return linesSize + uint64(cap(l.data)) + 2*uint64(cap(l.at))
}

const linesSize = uint64(unsafe.Sizeof(lines{}))

// MinBudget is the least a Freeze's copies may hold (NewFreeze): one
// chunk copied whole, and what its lines' bookkeeping costs.
const MinBudget = linesSize + ChunkSize + 2*linesPerChunk

// before is the writer's call before it changes bytes [off, off+n) of
// the held array, all in one chunk.
func (h *Hold) before(off, n uint64) {
	f, c := h.f, off/ChunkSize
	if f.done.Load() {
		h.d.unfreeze()
		return
	}
	if !h.isPending(c) {
		return // read already: the array's own from now on
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.held[h.d] != h || f.done.Load() {
		h.d.unfreeze()
		return
	}
	if !h.isPending(c) {
		return
	}
	end := min(off%ChunkSize+n, h.chunkLen(c)) // past the held size: nothing to keep
	lo, hi := off%ChunkSize/LineSize, (end+LineSize-1)/LineSize
	l := h.linesOf(c)
	var k uint64 // lines to copy
	for i := lo; i < hi; i++ {
		if l == nil || !l.has(i) {
			k++
		}
	}
	if k == 0 {
		return
	}
	// What the copies will cost: their lines' room, grown as append
	// would, and the struct for a chunk's first.
	var data []byte
	var at []uint16
	if l != nil {
		data, at = l.data, l.at
	}
	dataCap := grown(len(data), cap(data), k*LineSize, ChunkSize)
	atCap := grown(len(at), cap(at), k, linesPerChunk)
	need := (dataCap - uint64(cap(data))) + 2*(atCap-uint64(cap(at)))
	if l == nil {
		need += linesSize
	}
	if f.copied+need > f.budget && f.toSpill(h, c) {
		return
	}
	for f.copied+need > f.budget && h.isPending(c) && !f.done.Load() {
		f.Waits++
		f.waiting++
		f.cond.Wait()
		f.waiting--
	}
	if !h.isPending(c) || f.done.Load() {
		return
	}
	if l == nil {
		if h.copies == nil {
			h.copies = make([]*lines, (h.size+ChunkSize-1)/ChunkSize)
		}
		l = &lines{}
		h.copies[c] = l
		f.Copies++
	}
	if dataCap > uint64(cap(l.data)) {
		l.data = append(make([]byte, 0, dataCap), l.data...)
	}
	if atCap > uint64(cap(l.at)) {
		l.at = append(make([]uint16, 0, atCap), l.at...)
	}
	base := c * ChunkSize
	for i := lo; i < hi; {
		if l.has(i) {
			i++
			continue
		}
		j := i + 1
		for j < hi && !l.has(j) {
			j++
		}
		// A run of lines not copied yet, read in one go.
		at := uint64(len(l.data))
		l.data = l.data[:at+(j-i)*LineSize]
		h.read(l.data[at:at+min((j-i)*LineSize, h.chunkLen(c)-i*LineSize)], base+i*LineSize)
		for ; i < j; i++ {
			l.at = append(l.at, uint16(i))
			l.copied[i>>6] |= 1 << (i & 63)
			f.Lines++
		}
	}
	f.copied += need
	f.Peak = max(f.Peak, f.copied)
}

// grown is the capacity a slice of length n and capacity c takes to hold
// add more, growing as append does but never past limit.
func grown(n, c int, add, limit uint64) uint64 {
	if uint64(n)+add <= uint64(c) {
		return uint64(c)
	}
	return max(uint64(n)+add, min(2*uint64(c), limit))
}

// chunk puts held chunk c of h into dst (its length) as it was when the
// hold was taken: the lines the writer copied from their copies, the rest
// from the array (which the writer has not changed: it copies a line
// before it changes it, under f.mu, held here). f.mu is held; the chunk
// is still pending.
func (h *Hold) chunk(dst []byte, c uint64) {
	base := c * ChunkSize
	l := h.linesOf(c)
	if l == nil {
		h.read(dst, base)
		return
	}
	// The lines not copied, a run at a time: the writer may be changing
	// the copied ones meanwhile, which must not be read.
	n := uint64(len(dst))
	for i := uint64(0); i*LineSize < n; {
		if l.has(i) {
			i++
			continue
		}
		j := i + 1
		for j*LineSize < n && !l.has(j) {
			j++
		}
		h.read(dst[i*LineSize:min(j*LineSize, n)], base+i*LineSize)
		i = j
	}
	for k, i := range l.at {
		copy(dst[uint64(i)*LineSize:n], l.data[k*LineSize:(k+1)*LineSize])
	}
}

// linesOf is chunk c's lines copied, nil if none.
func (h *Hold) linesOf(c uint64) *lines {
	if c < uint64(len(h.copies)) {
		return h.copies[c]
	}
	return nil
}

// drop lets go of chunk c's copies, which are no longer needed: the
// chunk was read or spilled. f.mu is held.
func (h *Hold) drop(c uint64) {
	if l := h.linesOf(c); l != nil {
		h.copies[c] = nil
		h.f.copied -= l.cost()
		h.f.wake()
	}
}

// toSpill puts chunk c of h, as held, in the spill, if there is one with
// room; f.mu is held. A spill that fails once is not tried again: the
// writer waits on the budget instead, as without one.
func (f *Freeze) toSpill(h *Hold, c uint64) bool {
	n := h.chunkLen(c)
	if f.spill == nil || f.spillFailed || f.spillOff+int64(n) > f.spillLimit {
		return false
	}
	if f.spillBuf == nil {
		f.spillBuf = make([]byte, ChunkSize)
	}
	buf := f.spillBuf[:n]
	h.chunk(buf, c)
	if _, err := f.spill.WriteAt(buf, f.spillOff); err != nil {
		f.spillFailed = true
		return false
	}
	h.drop(c)
	if h.spilled == nil {
		h.spilled = map[uint64]int64{}
	}
	h.spilled[c] = f.spillOff
	f.spillOff += int64(n)
	h.done(c)
	f.Spills++
	return true
}

// unfreeze drops a hold's mark from the array; only its writer calls it.
func (d *Dirty) unfreeze() {
	if d.x == nil {
		return
	}
	d.x.hold = nil
	if d.x.bits == nil {
		d.x = nil
	}
}

// Read calls fn with each held chunk, in order, as it was when the hold
// was taken: from the spill, or read into buf (ChunkSize bytes) now from
// the array and the writer's copies of its lines (Hold.chunk). fn must be
// done with data when it returns. Then the hold ends.
func (h *Hold) Read(buf []byte, fn func(chunk uint64, data []byte) error) error {
	f := h.f
	defer h.Release()
	if h.inline != nil {
		return EachChunk(h.all, func(c uint64) error {
			return fn(c, h.inline[c*ChunkSize:c*ChunkSize+h.chunkLen(c)])
		})
	}
	n := 0
	return EachChunk(h.all, func(c uint64) error {
		if n++; n%readYield == 0 {
			// The writer waits on f.mu for a chunk not read yet, readied
			// on this P by each Unlock; a read that never blocks kept the
			// P (as the walk over small filters did, keyspace walkYield).
			runtime.Gosched()
		}
		f.mu.Lock()
		if off, ok := h.spilled[c]; ok {
			delete(h.spilled, c)
			spill := f.spill
			f.mu.Unlock()
			// Written once at an offset no other chunk takes: read
			// without the lock.
			data := buf[:h.chunkLen(c)]
			if _, err := spill.ReadAt(data, off); err != nil {
				return err
			}
			return fn(c, data)
		}
		if !h.isPending(c) {
			f.mu.Unlock()
			return nil // cannot happen: a chunk is either pending or spilled
		}
		data := buf[:h.chunkLen(c)]
		h.chunk(data, c)
		h.drop(c)
		h.done(c)
		f.wake()
		f.mu.Unlock()
		return fn(c, data)
	})
}

// readYield is how many chunks Read reads between its yields to the
// writer (a MiB).
const readYield = 16

// wake lets writers waiting on the budget look again. f.mu is held.
func (f *Freeze) wake() {
	if f.waiting > 0 {
		f.cond.Broadcast()
	}
}

// Release ends the hold: the writer changes the array freely again, and
// the copies left are dropped.
func (h *Hold) Release() {
	f := h.f
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.held[h.d] == h {
		delete(f.held, h.d)
		for _, l := range h.copies {
			if l != nil {
				f.copied -= l.cost()
			}
		}
		f.wake()
	}
	// pending stays: the writer may be reading it (isPending).
	h.copies, h.spilled, h.all, h.read, h.inline = nil, nil, nil, nil, nil
}

// End ends every hold of the Freeze: the image write has read what it
// needed, or gave up.
func (f *Freeze) End() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.done.Store(true)
	for _, h := range f.held {
		h.copies, h.spilled, h.read = nil, nil, nil
	}
	f.spill, f.spillBuf = nil, nil
	clear(f.held)
	f.copied = 0
	f.cond.Broadcast()
}

// Merge puts the change record the hold took back into the array: the
// write that read it failed. The writer is excluded.
func (h *Hold) Merge() { h.d.Merge(h.Bits) }

// Kept is what Merge needs of a hold that has ended: the array's record
// and the bits the hold took from it, without the hold. A record of one
// word (nearly every array) is kept by value: it may be the hold's own
// word, and the hold's memory is reused once it has ended.
type Kept struct {
	d    *Dirty
	bits []uint64 // nil: word
	word uint64
}

// Kept returns the part of the hold that Merge needs.
func (h *Hold) Kept() Kept {
	if len(h.Bits) == 1 {
		return Kept{d: h.d, word: h.Bits[0]}
	}
	return Kept{d: h.d, bits: h.Bits}
}

// Merge is Hold.Merge for a hold that has ended.
func (k Kept) Merge() {
	if k.bits == nil {
		w := [1]uint64{k.word}
		k.d.Merge(w[:])
		return
	}
	k.d.Merge(k.bits)
}
