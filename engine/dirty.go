package engine

import "math/bits"

// ChunkSize is the granularity at which changes to a bit or bucket array
// are tracked, so that a persistence layer rewrites only what changed.
const ChunkSize = 64 << 10

// Dirty records which ChunkSize regions of an array changed since the last
// Take. Only the single writer marks it; whoever calls Take must exclude
// that writer (the state machine's apply lock does).
type Dirty struct{ bits []uint64 }

func newDirty(size uint64) Dirty {
	chunks := (size + ChunkSize - 1) / ChunkSize
	return Dirty{bits: make([]uint64, (chunks+63)/64)}
}

// mark flags the chunk holding byte offset off.
func (d *Dirty) mark(off uint64) {
	c := off / ChunkSize
	d.bits[c>>6] |= 1 << (c & 63)
}

func (d *Dirty) markRange(off, n uint64) {
	if n == 0 {
		return
	}
	for c := off / ChunkSize; c <= (off+n-1)/ChunkSize; c++ {
		d.bits[c>>6] |= 1 << (c & 63)
	}
}

// TakeDirty calls fn for each changed chunk index, in order, and clears the
// record.
func (d *Dirty) TakeDirty(fn func(chunk uint64)) {
	for w, v := range d.bits {
		for v != 0 {
			b := uint64(0)
			for v&(1<<b) == 0 {
				b++
			}
			fn(uint64(w)*64 + b)
			v &^= 1 << b
		}
		d.bits[w] = 0
	}
}

// MarkAll flags every chunk (a value that must be written whole).
func (d *Dirty) MarkAll() {
	for i := range d.bits {
		d.bits[i] = ^uint64(0)
	}
}

// Swap takes the record (the caller holds the chunk bits until it Merges
// them back or drops them) and starts an empty one. Only the single
// writer's side may call it, as TakeDirty.
func (d *Dirty) Swap() []uint64 {
	set := d.bits
	d.bits = make([]uint64, len(set))
	return set
}

// Merge adds chunks taken by Swap back to the record: their write failed,
// so they are still to be written.
func (d *Dirty) Merge(set []uint64) {
	for i := range min(len(set), len(d.bits)) {
		d.bits[i] |= set[i]
	}
}

// EachChunk calls fn for each chunk index set in bits, in order.
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

// CountChunks is the number of chunk indexes set in bits.
func CountChunks(set []uint64) int {
	n := 0
	for _, v := range set {
		n += bits.OnesCount64(v)
	}
	return n
}
