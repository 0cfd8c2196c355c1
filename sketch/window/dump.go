package window

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"iter"
	"math"
	"math/bits"
	"unsafe"

	"github.com/bfserver/bfserver/engine"
)

// Dump format, version 1 (all integers little-endian). A header of
// HeaderSize bytes:
//
//	 0  "BFXW"            magic
//	 4  u8  version       1
//	 5  u8  kind          1 count, 2 time
//	 6  u8  overflow      0 keep-time, 1 keep-rate (0 for count windows)
//	 7  u8  0
//	 8  u16 k
//	10  u16 l
//	12  u32 head          physical index of the youngest slice
//	16  u64 words         64-bit words per slice
//	24  f64 error rate
//	32  u64 window        N inserts, or T ms
//	40  u64 capacity      inserts per window sized for (N for counts)
//	48  u64 g             inserts per generation
//	56  i64 d             generation length in ms (0 for counts)
//	64  u64 generation    shifts so far
//	72  u64 in generation inserts since the last shift
//	80  u64 inserts       inserts ever (saturating)
//	88  i64 last          latest time seen (unix ms)
//	96  u64 data bytes    (k+l)·words·8
//	104 u32 0
//	108 u32 CRC-32C of bytes 0..108
//
// then the bit array: the k+l slices in physical order, each its words
// little-endian (bit x of a slice is byte x>>3, mask 1<<(x&7)). A whole
// dump (Marshal) appends a CRC-32C of everything before it; a chunked
// one (ScanDump) sends the header, then the bit array in pieces.
const (
	HeaderSize = 112
	version    = 1
	magic      = "BFXW"
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

func (f *Filter) dataBytes() uint64 { return f.shape.Bytes() }

// Header is the dump header of f's current state.
func (f *Filter) Header() []byte {
	b := make([]byte, HeaderSize)
	copy(b, magic)
	b[4], b[5], b[6] = version, byte(f.kind), byte(f.overflow)
	le := binary.LittleEndian
	le.PutUint16(b[8:], uint16(f.shape.K))
	le.PutUint16(b[10:], uint16(f.shape.L))
	le.PutUint32(b[12:], f.head)
	le.PutUint64(b[16:], f.shape.Words)
	le.PutUint64(b[24:], math.Float64bits(f.errRate))
	le.PutUint64(b[32:], f.window)
	le.PutUint64(b[40:], f.capacity)
	le.PutUint64(b[48:], f.shape.Gen)
	le.PutUint64(b[56:], uint64(f.genMs))
	le.PutUint64(b[64:], f.gen)
	le.PutUint64(b[72:], f.inGen)
	le.PutUint64(b[80:], f.inserts)
	le.PutUint64(b[88:], uint64(f.last))
	le.PutUint64(b[96:], f.dataBytes())
	le.PutUint32(b[108:], crc32.Checksum(b[:108], castagnoli))
	return b
}

// corrupt wraps ErrCorrupt with what was wrong.
func corrupt(format string, a ...any) error {
	return fmt.Errorf("%w: %s", ErrCorrupt, fmt.Sprintf(format, a...))
}

// LoadHeader validates a dump header and makes the filter it describes,
// its bits all clear (LoadChunk fills them). The bit array is allocated
// only once its size is known to be within maxBytes (0: DefaultMaxBytes).
func LoadHeader(b []byte, maxBytes uint64) (*Filter, error) {
	if maxBytes == 0 {
		maxBytes = DefaultMaxBytes
	}
	if len(b) != HeaderSize {
		return nil, corrupt("header is %d bytes, want %d", len(b), HeaderSize)
	}
	if string(b[:4]) != magic {
		return nil, corrupt("bad magic")
	}
	if b[4] != version {
		return nil, corrupt("unknown version %d", b[4])
	}
	le := binary.LittleEndian
	if crc32.Checksum(b[:108], castagnoli) != le.Uint32(b[108:]) {
		return nil, corrupt("header checksum mismatch")
	}
	if b[7] != 0 || le.Uint32(b[104:]) != 0 {
		return nil, corrupt("reserved bytes set")
	}
	f := &Filter{
		kind: Kind(b[5]), overflow: Overflow(b[6]),
		head:     le.Uint32(b[12:]),
		errRate:  math.Float64frombits(le.Uint64(b[24:])),
		window:   le.Uint64(b[32:]),
		capacity: le.Uint64(b[40:]),
		genMs:    int64(le.Uint64(b[56:])),
		gen:      le.Uint64(b[64:]),
		inGen:    le.Uint64(b[72:]),
		inserts:  le.Uint64(b[80:]),
		last:     int64(le.Uint64(b[88:])),
	}
	f.shape = Shape{K: int(le.Uint16(b[8:])), L: int(le.Uint16(b[10:])), Words: le.Uint64(b[16:]), Gen: le.Uint64(b[48:])}
	s := f.shape
	if s.K < 1 || s.K > MaxK || s.L < 1 || s.L > MaxL {
		return nil, corrupt("k=%d l=%d out of range", s.K, s.L)
	}
	if !(f.errRate >= MinErrorRate && f.errRate <= MaxErrorRate) {
		return nil, corrupt("error rate %g out of range", f.errRate)
	}
	if f.capacity < 1 || f.capacity > MaxItems || s.Gen < 1 || s.Gen > f.capacity {
		return nil, corrupt("capacity %d, generation size %d", f.capacity, s.Gen)
	}
	// The window guarantee: l generations cover the window.
	switch f.kind {
	case Count:
		if f.overflow != KeepTime || f.genMs != 0 || f.window != f.capacity ||
			uint64(s.L)*s.Gen < f.window || f.inGen > s.Gen {
			return nil, corrupt("inconsistent count window")
		}
	case Time:
		if f.overflow != KeepTime && f.overflow != KeepRate {
			return nil, corrupt("unknown overflow policy %d", f.overflow)
		}
		if f.window < 1 || f.window > MaxWindowMs || f.genMs < 1 || uint64(f.genMs) > f.window ||
			uint64(s.L)*uint64(f.genMs) < f.window || uint64(s.L)*s.Gen < f.capacity {
			return nil, corrupt("inconsistent time window")
		}
		if f.overflow == KeepRate && f.inGen > s.Gen {
			return nil, corrupt("generation over its share")
		}
	default:
		return nil, corrupt("unknown kind %d", f.kind)
	}
	if f.inGen > f.inserts {
		return nil, corrupt("more inserts in the generation than ever")
	}
	if f.head >= uint32(s.Slices()) {
		return nil, corrupt("head %d of %d slices", f.head, s.Slices())
	}
	if s.Words < 1 || s.Words > maxBytes/8/uint64(s.Slices()) {
		return nil, fmt.Errorf("%w: %d words per slice, %d slices, cap %d bytes", ErrTooLarge, s.Words, s.Slices(), maxBytes)
	}
	if le.Uint64(b[96:]) != s.Bytes() {
		return nil, corrupt("data size %d, shape says %d", le.Uint64(b[96:]), s.Bytes())
	}
	f.alloc()
	return f, nil
}

// Size is the bit array's size in bytes, as the image and the dump lay
// it out.
func (f *Filter) Size() uint64 { return f.dataBytes() }

// ReadBytes copies the bit array's bytes [off, off+len(dst)) as the dump
// lays them out (words little-endian). The caller keeps the range within
// Size. An image write reads a held chunk with it beside the filter's
// writer (engine.Freeze orders the two).
func (f *Filter) ReadBytes(dst []byte, off uint64) {
	for i := 0; i < len(dst); {
		p := off + uint64(i)
		w := f.bits[p>>3]
		if p&7 == 0 && len(dst)-i >= 8 {
			binary.LittleEndian.PutUint64(dst[i:], w)
			i += 8
			continue
		}
		dst[i] = byte(w >> (8 * (p & 7)))
		i++
	}
}

// writeBytes overwrites the bit array's bytes [off, off+len(src)). It
// keeps the slices' counts up to date when count is set (a command's
// chunk), and leaves them to Recount otherwise (an image loaded by
// several workers at once).
func (f *Filter) writeBytes(src []byte, off uint64, count bool) {
	W := f.shape.Words
	for i := 0; i < len(src); {
		p := off + uint64(i)
		w := &f.bits[p>>3]
		old := *w
		if p&7 == 0 && len(src)-i >= 8 {
			*w = binary.LittleEndian.Uint64(src[i:])
			i += 8
		} else {
			sh := 8 * (p & 7)
			*w = old&^(0xff<<sh) | uint64(src[i])<<sh
			i++
		}
		if count {
			s := (p >> 3) / W
			f.ones[s] += uint64(bits.OnesCount64(*w)) - uint64(bits.OnesCount64(old))
		}
	}
}

// LoadBytes fills the bit array at byte offset off from a stored image
// (a chunk of it, in Size's range: ErrCursor otherwise). The filter must
// not be visible to anyone else yet; several loaders may fill disjoint
// word-aligned ranges at once. It records no change, and leaves the
// slices' counts to Recount, which the loader calls once it is done.
func (f *Filter) LoadBytes(src []byte, off uint64) error {
	if off > f.dataBytes() || uint64(len(src)) > f.dataBytes()-off {
		return ErrCursor
	}
	f.writeBytes(src, off, false)
	return nil
}

// LoadTarget is the bit array's memory as the image lays it out, for a
// loader to read a stored copy straight into, or nil on a big-endian
// host. As LoadBytes, it is for a filter nobody sees yet, and Recount
// follows.
func (f *Filter) LoadTarget() []byte {
	if !littleEndian || len(f.bits) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&f.bits[0])), len(f.bits)*8)
}

var littleEndian = func() bool { x := uint16(1); return *(*byte)(unsafe.Pointer(&x)) == 1 }()

// Recount counts each slice's set bits again, after LoadBytes or
// LoadTarget filled the array.
func (f *Filter) Recount() {
	for p := range f.ones {
		n := 0
		for _, w := range f.slice(p) {
			n += bits.OnesCount64(w)
		}
		f.ones[p] = uint64(n)
	}
}

// Dirty is the record of the chunks of bits changed since the image last
// took them (see engine.Dirty). Only the filter's writer marks it.
func (f *Filter) Dirty() *engine.Dirty { return &f.dirty }

// MaxChunk bounds a ScanDump chunk.
const MaxChunk = 16 << 20

// ScanDump is one step of a SCANDUMP-style transfer: cursor 0 gives the
// header and cursor 1; a cursor c ≥ 1 gives the bit array's bytes from
// offset c−1, at most max of them (clamped to 1..MaxChunk), and the
// cursor after them; past the end it gives 0 and nil. Each step is a
// snapshot of that moment: a transfer interleaved with writes is torn.
func (f *Filter) ScanDump(cursor int64, max int) (next int64, data []byte) {
	if cursor <= 0 {
		return 1, f.Header()
	}
	max = min(MaxChunk, maxInt(max, 1))
	off := uint64(cursor - 1)
	total := f.dataBytes()
	if off >= total {
		return 0, nil
	}
	n := min(uint64(max), total-off)
	data = make([]byte, n)
	f.ReadBytes(data, off)
	return cursor + int64(n), data
}

func maxInt(a, b int) int {
	if a > b {
		return a
	}
	return b
}

// Chunks iterates a whole SCANDUMP-style transfer: (cursor, data) pairs as
// ScanDump returns them, the header first, to be given to LoadHeader and
// LoadChunk in order.
func (f *Filter) Chunks(max int) iter.Seq2[int64, []byte] {
	return func(yield func(int64, []byte) bool) {
		var c int64
		for {
			next, data := f.ScanDump(c, max)
			if next == 0 || !yield(next, data) {
				return
			}
			c = next
		}
	}
}

// LoadChunk writes one chunk of bits from a transfer: next is the cursor
// ScanDump returned with data, so the chunk starts at byte next−1−len.
// Any bit pattern is a valid state, so a chunk needs no other check than
// its range.
func (f *Filter) LoadChunk(next int64, data []byte) error {
	n := uint64(len(data))
	if next < 2 || n == 0 || uint64(next-1) < n {
		return ErrCursor
	}
	off := uint64(next-1) - n
	if off+n > f.dataBytes() {
		return ErrCursor
	}
	f.dirty.MarkRange(off, n)
	f.writeBytes(data, off, true)
	return nil
}

// Load rebuilds a filter from a whole transfer as Chunks yields it.
func Load(chunks iter.Seq2[int64, []byte], maxBytes uint64) (*Filter, error) {
	var f *Filter
	for next, data := range chunks {
		var err error
		if f == nil {
			if next != 1 {
				return nil, corrupt("transfer does not start with a header")
			}
			f, err = LoadHeader(data, maxBytes)
		} else {
			err = f.LoadChunk(next, data)
		}
		if err != nil {
			return nil, err
		}
	}
	if f == nil {
		return nil, corrupt("empty transfer")
	}
	return f, nil
}

// Marshal is the whole dump: header, bit array, CRC-32C of both.
func (f *Filter) Marshal() []byte {
	total := f.dataBytes()
	b := make([]byte, HeaderSize+total+4)
	copy(b, f.Header())
	for i, w := range f.bits {
		binary.LittleEndian.PutUint64(b[HeaderSize+8*i:], w)
	}
	binary.LittleEndian.PutUint32(b[HeaderSize+total:], crc32.Checksum(b[:HeaderSize+total], castagnoli))
	return b
}

// Unmarshal validates and loads a whole dump; it allocates nothing
// before the header has been checked against maxBytes and the input's
// length.
func Unmarshal(b []byte, maxBytes uint64) (*Filter, error) {
	if len(b) < HeaderSize+4 {
		return nil, corrupt("dump is %d bytes", len(b))
	}
	// The header's data size must match the input before anything is
	// allocated.
	if want := binary.LittleEndian.Uint64(b[96:]); want != uint64(len(b)-HeaderSize-4) {
		return nil, corrupt("dump is %d bytes, header says %d of bits", len(b), want)
	}
	end := len(b) - 4
	if crc32.Checksum(b[:end], castagnoli) != binary.LittleEndian.Uint32(b[end:]) {
		return nil, corrupt("checksum mismatch")
	}
	f, err := LoadHeader(b[:HeaderSize], maxBytes)
	if err != nil {
		return nil, err
	}
	for i := range f.bits {
		f.bits[i] = binary.LittleEndian.Uint64(b[HeaderSize+8*i:])
	}
	f.Recount()
	return f, nil
}

// Digest is the SHA-256 of the whole dump: two replicas that applied the
// same operations have the same digest.
func (f *Filter) Digest() [32]byte { return sha256.Sum256(f.Marshal()) }

// Equal reports whether two filters have the same parameters, state and
// bits.
func Equal(a, b *Filter) bool {
	return bytes.Equal(a.Header(), b.Header()) && slicesEqual(a.bits, b.bits)
}

func slicesEqual(a, b []uint64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
