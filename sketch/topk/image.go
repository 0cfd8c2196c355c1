package topk

import (
	"unsafe"

	"github.com/bfserver/bfserver/engine"
)

// In the image a sketch is its header (Header) as metadata and its
// buckets (Array: fingerprint and count, 4 bytes each, little-endian,
// row after row) in 64 KiB chunks, of which a flush writes those marked
// changed. The header is Marshal without the buckets, after four zero
// bytes: Marshal starts with k, which is never 0, so FromImage tells the
// two apart, and a build that reads only Marshal's form (builds before
// this one stored it) refuses a header as a sketch of k = 0. The heap
// stays in the header: k slots and their items, written whole by every
// flush that finds the sketch changed.

// Header is the sketch's image metadata: everything but the buckets.
func (t *TopK) Header() []byte {
	b := make([]byte, 4, 32+13*len(t.Heap))
	return t.appendHeap(t.appendFields(b))
}

// FromImage reads a sketch's image metadata: a Header, giving a sketch
// whose buckets are empty until LoadBytes fills them, or (whole)
// Marshal's bytes as older builds stored them. A sketch over maxBytes is
// refused with ErrTooLarge before anything is allocated.
func FromImage(b []byte, maxBytes uint64) (t *TopK, whole bool, err error) {
	if len(b) < 4 || b[0]|b[1]|b[2]|b[3] != 0 {
		t, err = Unmarshal(b, maxBytes)
		return t, true, err
	}
	t, rest, err := parseFields(b[4:], maxBytes)
	if err != nil {
		return nil, false, err
	}
	if uint64(len(rest)) < uint64(t.K)*13 {
		return nil, false, ErrFormat // the heap cannot be there
	}
	t.alloc()
	if err := t.parseHeap(rest); err != nil {
		return nil, false, err
	}
	return t, false, nil
}

// Array is the buckets as the image keeps them: their size in bytes, the
// record of the chunks changed, and a reader of their bytes. The reader
// may run beside the writer (an image write holding the array), which
// marks a chunk before it changes it.
func (t *TopK) Array() (uint64, *engine.Dirty, func(dst []byte, off uint64)) {
	return BucketBytes * uint64(len(t.Buckets)), &t.dirty, t.readBytes
}

// words is the buckets as 32-bit words (fingerprint, count, ...): a
// Bucket is two uint32s, without padding.
func (t *TopK) words() []uint32 {
	var _ [8]struct{} = [unsafe.Sizeof(Bucket{})]struct{}{} // the layout this relies on
	if len(t.Buckets) == 0 {
		return nil
	}
	return unsafe.Slice((*uint32)(unsafe.Pointer(unsafe.SliceData(t.Buckets))), 2*len(t.Buckets))
}

func (t *TopK) readBytes(dst []byte, off uint64) { engine.ReadWords(dst, t.words(), off) }

// LoadBytes fills the buckets at byte offset off from a stored chunk;
// ErrFormat if it is not whole words inside the array. The sketch must
// not be visible to anyone else yet; it records no change.
func (t *TopK) LoadBytes(src []byte, off uint64) error {
	size := BucketBytes * uint64(len(t.Buckets))
	if off%4 != 0 || len(src)%4 != 0 || off > size || uint64(len(src)) > size-off {
		return ErrFormat
	}
	engine.WriteWords(t.words(), src, off)
	return nil
}

// LoadTarget is the buckets' memory as the image lays it out, for a
// loader to read a stored copy straight into, or nil where it is not
// (a big-endian host). As LoadBytes, for a sketch nobody sees yet.
func (t *TopK) LoadTarget() []byte { return engine.WordsTarget(t.words()) }
