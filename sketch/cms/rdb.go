package cms

import (
	"encoding/binary"
	"errors"
	"math"

	"github.com/bfserver/bfserver/engine"
	"github.com/bfserver/bfserver/rdb"
)

// TypeName and EncodingVer are RedisBloom 8.8's module type of a sketch
// (DUMP, RESTORE and RDB files).
const (
	TypeName    = "CMSk-TYPE"
	EncodingVer = 0
)

// Errors of decoding.
var (
	// ErrFormat: the bytes are not a sketch (RESTORE's "Bad data format").
	ErrFormat = errors.New("cms: bad data format")
	// ErrTooLarge: the sketch is larger than the caller's cap.
	ErrTooLarge = errors.New("cms: sketch larger than the cap")
)

// AppendRDB appends the sketch's module fields as CMSRdbSave writes them:
// width, depth and total as unsigned, then the counters as one string of
// little-endian 32-bit words.
func (s *Sketch) AppendRDB(b []byte) []byte {
	b = rdb.AppendUInt(b, s.Width)
	b = rdb.AppendUInt(b, s.Depth)
	b = rdb.AppendUInt(b, s.Count)
	return rdb.AppendString(b, appendCells(make([]byte, 0, 4*len(s.Cells)), s.Cells))
}

func appendCells(b []byte, cells []uint32) []byte {
	for _, c := range cells {
		b = binary.LittleEndian.AppendUint32(b, c)
	}
	return b
}

// FromRDB reads CMSRdbSave's fields. The counters must be exactly
// width·depth words and the sketch within maxBytes (as MemUsage counts).
func FromRDB(r *rdb.Reader, maxBytes uint64) (*Sketch, error) {
	w, d, n := r.UInt(), r.UInt(), r.UInt()
	if r.Err() != nil {
		return nil, ErrFormat
	}
	size, ok := Bytes(w, d)
	if !ok {
		return nil, ErrFormat
	}
	if size > maxBytes {
		return nil, ErrTooLarge
	}
	if size-StructBytes > uint64(len(r.Rest()))*1100 {
		return nil, ErrFormat // more than LZF could have packed into what is left
	}
	cells := r.String()
	if r.Err() != nil || uint64(len(cells)) != w*d*4 {
		return nil, ErrFormat
	}
	return fromCells(w, d, n, cells), nil
}

func fromCells(w, d, n uint64, cells []byte) *Sketch {
	s := newSketch(w, d, n)
	engine.WriteWords(s.Cells, cells, 0)
	return s
}

// Marshal is the sketch's full state: width, depth and total (8 bytes
// each, little-endian) and the counters. The image and replica digests use
// it; Unmarshal reads it.
func (s *Sketch) Marshal() []byte {
	b := make([]byte, 0, 24+4*len(s.Cells))
	b = binary.LittleEndian.AppendUint64(b, s.Width)
	b = binary.LittleEndian.AppendUint64(b, s.Depth)
	b = binary.LittleEndian.AppendUint64(b, s.Count)
	return appendCells(b, s.Cells)
}

// Unmarshal reads Marshal's bytes, refusing a sketch over maxBytes.
func Unmarshal(b []byte, maxBytes uint64) (*Sketch, error) {
	if len(b) < 24 {
		return nil, ErrFormat
	}
	w, d, n := binary.LittleEndian.Uint64(b), binary.LittleEndian.Uint64(b[8:]), binary.LittleEndian.Uint64(b[16:])
	size, ok := Bytes(w, d)
	if !ok || size-StructBytes != uint64(len(b)-24) {
		return nil, ErrFormat
	}
	if size > maxBytes {
		return nil, ErrTooLarge
	}
	return fromCells(w, d, n, b[24:]), nil
}

// MaxDim is the largest width or depth CMS.INITBYDIM accepts before its
// product check (LLONG_MAX).
const MaxDim = math.MaxInt64
