package engine

import (
	"encoding/binary"
	"unsafe"
)

// An array of 32-bit words (a Count-Min Sketch's counters, a Top-K's
// buckets) is kept in the image as its bytes, each word little-endian:
// ReadWords and WriteWords copy between the two, and WordsTarget is the
// words' memory itself where it is laid out so. Offsets and lengths are
// in bytes and multiples of 4.

// ReadWords copies the image bytes [off, off+len(dst)) of words into dst.
func ReadWords(dst []byte, words []uint32, off uint64) {
	w := words[off/4 : off/4+uint64(len(dst))/4]
	if littleEndian {
		copy(dst, unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(w))), 4*len(w)))
		return
	}
	for i, v := range w {
		binary.LittleEndian.PutUint32(dst[4*i:], v)
	}
}

// WriteWords copies src into the image bytes [off, off+len(src)) of words.
func WriteWords(words []uint32, src []byte, off uint64) {
	w := words[off/4 : off/4+uint64(len(src))/4]
	if littleEndian {
		copy(unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(w))), 4*len(w)), src)
		return
	}
	for i := range w {
		w[i] = binary.LittleEndian.Uint32(src[4*i:])
	}
}

// WordsTarget is the words' memory as the image lays it out, for a loader
// to read a stored copy straight into, or nil on a big-endian host (or
// for no words).
func WordsTarget(words []uint32) []byte {
	if !littleEndian || len(words) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(words))), 4*len(words))
}
