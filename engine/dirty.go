package engine

import "math/bits"

// ChunkSize is the granularity at which changes to a bit or bucket array
// are tracked, so that a persistence layer rewrites only what changed.
const ChunkSize = 64 << 10

// Dirty records which ChunkSize regions of an array changed since the
// last Swap. Only the single writer marks it; whoever calls Swap must
// exclude that writer (the state machine's apply lock does).
//
// An array of up to 64 chunks (4 MiB), which is nearly every array, keeps
// its record in one word of the struct; a larger one in a bitmap of its
// own. Small filters are many: this saves each one a slice and an
// allocation.
//
// The writer marks what it is about to change before it changes it (Mark:
// the 64-byte line holding a byte; MarkRange: a range), so that an image
// write holding the chunk (Freeze) can copy those lines first.
type Dirty struct {
	word uint64    // chunks 0..63, when x is nil or x.bits is
	x    *dirtyExt // a large array's bitmap, or a Freeze's hold
}

// dirtyExt is what few arrays need: a bitmap for one of more than 64
// chunks, and the Freeze's hold on some of its chunks (a flush is reading
// them), which the writer must tell before it changes one.
type dirtyExt struct {
	bits []uint64 // one bit per chunk; nil for an array of up to 64
	hold *Hold
}

func newDirty(size uint64) Dirty {
	chunks := (size + ChunkSize - 1) / ChunkSize
	if chunks <= 64 {
		return Dirty{}
	}
	return Dirty{x: &dirtyExt{bits: make([]uint64, (chunks+63)/64)}}
}

// NewDirty is the change record of an array of size bytes kept outside
// this package (sketch/window's bit array): its owner marks what it
// changes with Mark and MarkRange, as Bloom does, so that the image
// writes only those chunks and a Freeze can hold the array.
func NewDirty(size uint64) Dirty { return newDirty(size) }

// Grow makes the record fit its array grown to size bytes (a t-digest's
// nodes grow as they arrive): the chunks recorded stay recorded, and a
// Freeze holding the array holds what it held. Only the writer calls it,
// before it writes past the old size; a record never shrinks.
func (d *Dirty) Grow(size uint64) {
	chunks := (size + ChunkSize - 1) / ChunkSize
	if chunks <= 64 {
		return
	}
	words := int((chunks + 63) / 64)
	if d.x == nil {
		d.x = &dirtyExt{}
	}
	switch {
	case d.x.bits == nil:
		d.x.bits = make([]uint64, words)
		d.x.bits[0], d.word = d.word, 0
	case len(d.x.bits) < words:
		d.x.bits = append(d.x.bits, make([]uint64, words-len(d.x.bits))...)
	}
}

// Mark flags the chunk holding byte offset off; the caller then changes
// bytes of the LineSize-aligned line holding off, no others (a Freeze
// holding the chunk copies that line first; MarkRange is for more). It is
// mark written out again, not a call to it: either fits the inlining
// budget alone, not one inside the other.
func (d *Dirty) Mark(off uint64) {
	if d.x != nil {
		d.markExt(off, 1)
		return
	}
	d.word |= 1 << (off / ChunkSize & 63)
}

// MarkRange is Mark for every byte of [off, off+n).
func (d *Dirty) MarkRange(off, n uint64) { d.markRange(off, n) }

// mark flags the chunk holding byte offset off. The caller changes the
// line holding it after it returns. Kept within the inlining budget: it
// runs for every bit an add sets.
func (d *Dirty) mark(off uint64) {
	if d.x != nil {
		d.markExt(off, 1)
		return
	}
	d.word |= 1 << (off / ChunkSize & 63)
}

// markExt flags the chunk of bytes [off, off+n), all in one chunk, and
// tells a Freeze holding it what is about to change.
func (d *Dirty) markExt(off, n uint64) {
	c := off / ChunkSize
	if h := d.x.hold; h != nil {
		h.before(off, n)
		if d.x == nil {
			d.word |= 1 << (c & 63)
			return
		}
	}
	if d.x.bits == nil {
		d.word |= 1 << (c & 63)
		return
	}
	d.x.bits[c>>6] |= 1 << (c & 63)
}

func (d *Dirty) markRange(off, n uint64) {
	for end := off + n; off < end; {
		next := min(end, (off/ChunkSize+1)*ChunkSize)
		if d.x != nil {
			d.markExt(off, next-off)
		} else {
			d.word |= 1 << (off / ChunkSize & 63)
		}
		off = next
	}
}

// Swap takes the record (the caller holds the chunk bits until it Merges
// them back or drops them) and starts an empty one.
func (d *Dirty) Swap() []uint64 {
	if d.x == nil || d.x.bits == nil {
		set := []uint64{d.word}
		d.word = 0
		return set
	}
	set := d.x.bits
	d.x.bits = make([]uint64, len(set))
	return set
}

// Merge adds chunks taken by Swap back to the record: their write failed,
// so they are still to be written.
func (d *Dirty) Merge(set []uint64) {
	if d.x == nil || d.x.bits == nil {
		if len(set) > 0 {
			d.word |= set[0]
		}
		return
	}
	b := d.x.bits
	for i := range min(len(set), len(b)) {
		b[i] |= set[i]
	}
}

// EachChunk calls fn for each chunk index set in set, in order.
func EachChunk(set []uint64, fn func(chunk uint64) error) error {
	for w, v := range set {
		for v != 0 {
			b := uint64(bits.TrailingZeros64(v))
			if err := fn(uint64(w)*64 + b); err != nil {
				return err
			}
			v &^= 1 << b
		}
	}
	return nil
}

// CountChunks is the number of chunk indexes set in set.
func CountChunks(set []uint64) int {
	n := 0
	for _, v := range set {
		n += bits.OnesCount64(v)
	}
	return n
}
