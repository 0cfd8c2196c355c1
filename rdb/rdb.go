// Package rdb encodes and decodes the pieces of Redis's RDB format that
// DUMP/RESTORE payloads of module values use: length encoding, module
// opcodes, strings (plain, integer and LZF-compressed), the module type id,
// and the payload trailer (RDB version and CRC64). It knows nothing of
// filters; scalable uses it to write and read RedisBloom's values.
package rdb

import (
	"encoding/binary"
	"errors"
	"math"
	"strconv"
)

// Errors.
var (
	// ErrChecksum: the payload's version or CRC64 is wrong (Redis's "DUMP
	// payload version or checksum are wrong").
	ErrChecksum = errors.New("rdb: payload version or checksum are wrong")
	// ErrFormat: the payload is well framed but its content is malformed.
	ErrFormat = errors.New("rdb: bad data format")
)

// Version is the RDB version written into payloads (Redis 7.4 – 8.x).
const Version = 12

// TypeModule2 is RDB_TYPE_MODULE_2, the value type of module keys.
const TypeModule2 = 7

// Module field opcodes (RDB_MODULE_OPCODE_*).
const (
	OpEOF    = 0
	OpSInt   = 1
	OpUInt   = 2
	OpFloat  = 3
	OpDouble = 4
	OpString = 5
)

const charset = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"

// ModuleID is Redis's 64-bit id of a 9-character module type name and its
// encoding version (moduleTypeEncodeId).
func ModuleID(name string, encver uint64) uint64 {
	var id uint64
	for i := 0; i < 9; i++ {
		id = id<<6 | uint64(indexByte(charset, name[i]))
	}
	return id<<10 | encver&1023
}

func indexByte(s string, c byte) int {
	for i := 0; i < len(s); i++ {
		if s[i] == c {
			return i
		}
	}
	return 0
}

// AppendLen appends rdbSaveLen's encoding of n.
func AppendLen(b []byte, n uint64) []byte {
	switch {
	case n < 1<<6:
		return append(b, byte(n))
	case n < 1<<14:
		return append(b, byte(n>>8)|0x40, byte(n))
	case n <= math.MaxUint32:
		return binary.BigEndian.AppendUint32(append(b, 0x80), uint32(n))
	}
	return binary.BigEndian.AppendUint64(append(b, 0x81), n)
}

// AppendUInt appends a module unsigned field.
func AppendUInt(b []byte, n uint64) []byte { return AppendLen(append(b, OpUInt), n) }

// AppendDouble appends a module double field.
func AppendDouble(b []byte, f float64) []byte {
	return binary.LittleEndian.AppendUint64(append(b, OpDouble), math.Float64bits(f))
}

// AppendString appends a module string field as Redis writes it (lzf.go).
func AppendString(b, s []byte) []byte { return AppendRawString(append(b, OpString), s) }

// AppendRawString appends an RDB string as Redis writes it: integer
// encoded, LZF-compressed or plain (lzf.go).
func AppendRawString(b, s []byte) []byte { return appendRedisString(b, s) }

// Seal appends the RDB version and CRC64 that end a DUMP payload.
func Seal(b []byte) []byte {
	b = binary.LittleEndian.AppendUint16(b, Version)
	return binary.LittleEndian.AppendUint64(b, CRC64(0, b))
}

// Open checks a payload's trailer (verifyDumpPayload) and returns the value
// before it.
func Open(p []byte) ([]byte, error) {
	if len(p) < 10 {
		return nil, ErrChecksum
	}
	body := p[:len(p)-10]
	ver := binary.LittleEndian.Uint16(p[len(p)-10:])
	if ver > Version {
		return nil, ErrChecksum
	}
	if CRC64(0, p[:len(p)-8]) != binary.LittleEndian.Uint64(p[len(p)-8:]) {
		return nil, ErrChecksum
	}
	return body, nil
}

// Reader decodes module fields. The first error sticks; callers check Err
// once at the end.
type Reader struct {
	b   []byte
	err error
	// MaxString bounds any decoded string, compressed or not.
	MaxString uint64
}

// NewReader reads fields from b.
func NewReader(b []byte, maxString uint64) *Reader { return &Reader{b: b, MaxString: maxString} }

// Err is the first error met.
func (r *Reader) Err() error { return r.err }

// Rest is what has not been read.
func (r *Reader) Rest() []byte { return r.b }

func (r *Reader) fail() {
	if r.err == nil {
		r.err = ErrFormat
	}
}

// Byte reads one byte.
func (r *Reader) Byte() byte {
	if r.err != nil || len(r.b) < 1 {
		r.fail()
		return 0
	}
	c := r.b[0]
	r.b = r.b[1:]
	return c
}

func (r *Reader) take(n uint64) []byte {
	if r.err != nil || n > uint64(len(r.b)) {
		r.fail()
		return nil
	}
	v := r.b[:n]
	r.b = r.b[n:]
	return v
}

// lenOrEnc reads rdbLoadLen; enc reports the 0xC0 "encoded string" form.
func (r *Reader) lenOrEnc() (n uint64, enc bool) {
	c := r.Byte()
	switch c >> 6 {
	case 0:
		return uint64(c & 0x3f), false
	case 1:
		return uint64(c&0x3f)<<8 | uint64(r.Byte()), false
	case 3:
		return uint64(c & 0x3f), true
	}
	switch c {
	case 0x80:
		if b := r.take(4); b != nil {
			return uint64(binary.BigEndian.Uint32(b)), false
		}
	case 0x81:
		if b := r.take(8); b != nil {
			return binary.BigEndian.Uint64(b), false
		}
	default:
		r.fail()
	}
	return 0, false
}

// Len reads a plain length.
func (r *Reader) Len() uint64 {
	n, enc := r.lenOrEnc()
	if enc {
		r.fail()
	}
	return n
}

func (r *Reader) opcode(want byte) {
	if n := r.Len(); n != uint64(want) {
		r.fail()
	}
}

// UInt reads a module unsigned field.
func (r *Reader) UInt() uint64 {
	r.opcode(OpUInt)
	return r.Len()
}

// Double reads a module double field.
func (r *Reader) Double() float64 {
	r.opcode(OpDouble)
	if b := r.take(8); b != nil {
		return math.Float64frombits(binary.LittleEndian.Uint64(b))
	}
	return 0
}

// String reads a module string field in any of Redis's encodings.
func (r *Reader) String() []byte {
	r.opcode(OpString)
	return r.RawString()
}

// RawString reads an RDB string (a string key's value has no opcode).
func (r *Reader) RawString() []byte {
	n, enc := r.lenOrEnc()
	if !enc {
		if n > r.MaxString {
			r.fail()
			return nil
		}
		return r.take(n)
	}
	switch n {
	case 0:
		return []byte(strconv.Itoa(int(int8(r.Byte()))))
	case 1:
		if b := r.take(2); b != nil {
			return []byte(strconv.Itoa(int(int16(binary.LittleEndian.Uint16(b)))))
		}
	case 2:
		if b := r.take(4); b != nil {
			return []byte(strconv.Itoa(int(int32(binary.LittleEndian.Uint32(b)))))
		}
	case 3:
		clen, ulen := r.Len(), r.Len()
		if ulen > r.MaxString {
			r.fail()
			return nil
		}
		in := r.take(clen)
		if r.err != nil {
			return nil
		}
		out, ok := lzfDecompress(in, int(ulen))
		if !ok {
			r.fail()
			return nil
		}
		return out
	default:
		r.fail()
	}
	return nil
}

// lzfDecompress is liblzf's lzf_decompress with every reference checked.
func lzfDecompress(in []byte, outLen int) ([]byte, bool) {
	out := make([]byte, 0, outLen)
	for i := 0; i < len(in); {
		ctrl := int(in[i])
		i++
		if ctrl < 32 {
			n := ctrl + 1
			if i+n > len(in) || len(out)+n > outLen {
				return nil, false
			}
			out = append(out, in[i:i+n]...)
			i += n
			continue
		}
		n := ctrl >> 5
		ref := len(out) - (ctrl&0x1f)<<8 - 1
		if n == 7 {
			if i >= len(in) {
				return nil, false
			}
			n += int(in[i])
			i++
		}
		if i >= len(in) {
			return nil, false
		}
		ref -= int(in[i])
		i++
		n += 2
		if ref < 0 || len(out)+n > outLen {
			return nil, false
		}
		for k := 0; k < n; k++ {
			out = append(out, out[ref+k])
		}
	}
	return out, len(out) == outLen
}

var crcTable = func() (t [256]uint64) {
	const poly = 0x95ac9329ac4bc9b5 // 0xad93d23594c935a9 reflected (Jones)
	for i := range t {
		c := uint64(i)
		for k := 0; k < 8; k++ {
			if c&1 != 0 {
				c = c>>1 ^ poly
			} else {
				c >>= 1
			}
		}
		t[i] = c
	}
	return
}()

// CRC64 is Redis's crc64 (Jones polynomial, reflected, no final xor).
func CRC64(crc uint64, b []byte) uint64 {
	for _, c := range b {
		crc = crcTable[byte(crc)^c] ^ crc>>8
	}
	return crc
}
