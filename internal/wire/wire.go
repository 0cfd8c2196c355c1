// Package wire reads and writes the project's compact binary encodings
// (log entries, forwarded results): varints and length-prefixed byte
// strings. A Reader never panics and never allocates: on short or corrupt
// input it records Bad and yields zero values, and callers check Bad once.
package wire

import "encoding/binary"

// Reader consumes B from the front.
type Reader struct {
	B   []byte
	Bad bool
}

// Byte reads one byte.
func (r *Reader) Byte() byte {
	if len(r.B) < 1 {
		r.Bad = true
		return 0
	}
	v := r.B[0]
	r.B = r.B[1:]
	return v
}

// Uvarint reads an unsigned varint.
func (r *Reader) Uvarint() uint64 {
	v, n := binary.Uvarint(r.B)
	if n <= 0 {
		r.Bad = true
		return 0
	}
	r.B = r.B[n:]
	return v
}

// Varint reads a signed varint.
func (r *Reader) Varint() int64 {
	v, n := binary.Varint(r.B)
	if n <= 0 {
		r.Bad = true
		return 0
	}
	r.B = r.B[n:]
	return v
}

// U64 reads a little-endian uint64.
func (r *Reader) U64() uint64 {
	if len(r.B) < 8 {
		r.Bad = true
		return 0
	}
	v := binary.LittleEndian.Uint64(r.B)
	r.B = r.B[8:]
	return v
}

// Bytes reads a length-prefixed byte string, aliasing B; nil when empty.
func (r *Reader) Bytes() []byte {
	n := r.Uvarint()
	if r.Bad || n > uint64(len(r.B)) {
		r.Bad = true
		return nil
	}
	if n == 0 {
		return nil
	}
	v := r.B[:n:n]
	r.B = r.B[n:]
	return v
}

// Count reads the length of a list whose elements take at least one byte
// each, so that it can never exceed what is left: a caller may allocate it.
func (r *Reader) Count() int {
	n := r.Uvarint()
	if r.Bad || n > uint64(len(r.B)) {
		r.Bad = true
		return 0
	}
	return int(n)
}

// AppendBytes writes a length-prefixed byte string.
func AppendBytes(b, v []byte) []byte {
	b = binary.AppendUvarint(b, uint64(len(v)))
	return append(b, v...)
}

// AppendList writes a count and that many byte strings.
func AppendList(b []byte, l [][]byte) []byte {
	b = binary.AppendUvarint(b, uint64(len(l)))
	for _, v := range l {
		b = AppendBytes(b, v)
	}
	return b
}
