package cms

import (
	"encoding/binary"

	"github.com/bfserver/bfserver/engine"
)

// In the image a sketch is its header (Header: width, depth and total, 8
// bytes each, little-endian) as metadata and its counters (Array: 4 bytes
// each, little-endian, row after row) in 64 KiB chunks, of which a flush
// writes those marked changed. Builds before this form stored Marshal's
// bytes as the metadata; FromImage reads both. Marshal starts with the
// same 24 bytes and always holds at least one counter after them, so the
// two never meet, and a build that reads only Marshal's form refuses a
// header (its length does not match its dimensions).

// HeaderSize is the length of Header.
const HeaderSize = 24

// Header is the sketch's image metadata: everything but the counters.
func (s *Sketch) Header() []byte {
	b := make([]byte, 0, HeaderSize)
	b = binary.LittleEndian.AppendUint64(b, s.Width)
	b = binary.LittleEndian.AppendUint64(b, s.Depth)
	return binary.LittleEndian.AppendUint64(b, s.Count)
}

// FromImage reads a sketch's image metadata: a Header, giving a sketch
// whose counters are zero until LoadBytes fills them, or (whole) Marshal's
// bytes as older builds stored them. A sketch over maxBytes is refused
// with ErrTooLarge before anything is allocated.
func FromImage(b []byte, maxBytes uint64) (s *Sketch, whole bool, err error) {
	if len(b) != HeaderSize {
		s, err = Unmarshal(b, maxBytes)
		return s, true, err
	}
	w, d := binary.LittleEndian.Uint64(b), binary.LittleEndian.Uint64(b[8:])
	size, ok := Bytes(w, d)
	if !ok || w*d > uint64(^uint(0)>>1)/4 {
		return nil, false, ErrFormat
	}
	if size > maxBytes {
		return nil, false, ErrTooLarge
	}
	return newSketch(w, d, binary.LittleEndian.Uint64(b[16:])), false, nil
}

// Array is the counters as the image keeps them: their size in bytes,
// the record of the chunks changed, and a reader of their bytes. The
// reader may run beside the writer (an image write holding the array),
// which marks a chunk before it changes it.
func (s *Sketch) Array() (uint64, *engine.Dirty, func(dst []byte, off uint64)) {
	return 4 * uint64(len(s.Cells)), &s.dirty, s.readBytes
}

func (s *Sketch) readBytes(dst []byte, off uint64) { engine.ReadWords(dst, s.Cells, off) }

// LoadBytes fills the counters at byte offset off from a stored chunk;
// ErrFormat if it is not whole counters inside the array. The sketch must
// not be visible to anyone else yet; it records no change.
func (s *Sketch) LoadBytes(src []byte, off uint64) error {
	size := 4 * uint64(len(s.Cells))
	if off%4 != 0 || len(src)%4 != 0 || off > size || uint64(len(src)) > size-off {
		return ErrFormat
	}
	engine.WriteWords(s.Cells, src, off)
	return nil
}

// LoadTarget is the counters' memory as the image lays it out, for a
// loader to read a stored copy straight into, or nil where it is not
// (a big-endian host). As LoadBytes, for a sketch nobody sees yet.
func (s *Sketch) LoadTarget() []byte { return engine.WordsTarget(s.Cells) }
