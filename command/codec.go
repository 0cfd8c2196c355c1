package command

import (
	"encoding/binary"
	"errors"
	"math"
)

// Codec errors.
var (
	// ErrVersion: the entry was written by a newer, unknown format.
	ErrVersion = errors.New("command: unknown encoding version")
	// ErrCorrupt: the entry is truncated or malformed.
	ErrCorrupt = errors.New("command: corrupt entry")
)

const version = 1

// Limits on decoded sizes, so that a corrupt entry cannot make the decoder
// allocate without bound: counts are checked against the bytes remaining.
const maxBatch = 1 << 20

// minCmdBytes is the smallest encoding of a command (every field empty or
// zero): a count beyond the bytes left divided by it is corrupt, which
// bounds what decoding allocates to a small multiple of the entry's size.
const minCmdBytes = 26

// EncodeBatch encodes commands that are applied together as one log entry.
func EncodeBatch(cmds []*Cmd) []byte {
	b := make([]byte, 0, 64*len(cmds))
	b = append(b, version)
	b = binary.AppendUvarint(b, uint64(len(cmds)))
	for _, c := range cmds {
		b = appendCmd(b, c)
	}
	return b
}

func appendBytes(b, v []byte) []byte {
	b = binary.AppendUvarint(b, uint64(len(v)))
	return append(b, v...)
}

func appendList(b []byte, l [][]byte) []byte {
	b = binary.AppendUvarint(b, uint64(len(l)))
	for _, v := range l {
		b = appendBytes(b, v)
	}
	return b
}

func bit(v bool, n uint) uint64 {
	if v {
		return 1 << n
	}
	return 0
}

func appendCmd(b []byte, c *Cmd) []byte {
	b = append(b, byte(c.Op), c.DB)
	b = binary.AppendVarint(b, c.Now)
	b = appendBytes(b, c.Key)
	b = appendBytes(b, c.Dst)
	b = appendList(b, c.Keys)
	b = appendList(b, c.Items)
	b = appendBytes(b, c.Data)
	b = binary.AppendVarint(b, c.Iter)
	b = binary.AppendVarint(b, c.Count)
	flags := bit(c.Multi, 0) | bit(c.NX, 1) | bit(c.NoCreate, 2) | bit(c.NonScaling, 3) | bit(c.Flag, 4)
	b = binary.AppendUvarint(b, flags)
	b = binary.LittleEndian.AppendUint64(b, math.Float64bits(c.ErrorRate))
	b = binary.AppendUvarint(b, c.Capacity)
	b = binary.AppendUvarint(b, uint64(c.Expansion))
	b = binary.AppendUvarint(b, uint64(c.BucketSize))
	b = binary.AppendUvarint(b, uint64(c.MaxIterations))
	b = binary.AppendUvarint(b, uint64(c.MaxExpansions))
	b = binary.AppendUvarint(b, c.MaxBytes)
	return append(b, c.Field)
}

type reader struct {
	b   []byte
	err error
}

func (r *reader) fail() {
	if r.err == nil {
		r.err = ErrCorrupt
	}
}

func (r *reader) byte() byte {
	if len(r.b) < 1 {
		r.fail()
		return 0
	}
	v := r.b[0]
	r.b = r.b[1:]
	return v
}

func (r *reader) uvarint() uint64 {
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.fail()
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *reader) varint() int64 {
	v, n := binary.Varint(r.b)
	if n <= 0 {
		r.fail()
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *reader) u64() uint64 {
	if len(r.b) < 8 {
		r.fail()
		return 0
	}
	v := binary.LittleEndian.Uint64(r.b)
	r.b = r.b[8:]
	return v
}

func (r *reader) bytes() []byte {
	n := r.uvarint()
	if r.err != nil || n > uint64(len(r.b)) {
		r.fail()
		return nil
	}
	if n == 0 {
		return nil
	}
	v := r.b[:n:n]
	r.b = r.b[n:]
	return v
}

func (r *reader) list() [][]byte {
	n := r.uvarint()
	if r.err != nil || n > uint64(len(r.b)) { // every element takes at least one byte
		r.fail()
		return nil
	}
	if n == 0 {
		return nil
	}
	l := make([][]byte, n)
	for i := range l {
		l[i] = r.bytes()
		if l[i] == nil {
			l[i] = []byte{}
		}
	}
	return l
}

func (r *reader) small(max uint64) uint64 {
	v := r.uvarint()
	if v > max {
		r.fail()
	}
	return v
}

// DecodeBatch decodes an entry written by EncodeBatch. The commands alias b.
func DecodeBatch(b []byte) ([]*Cmd, error) {
	if len(b) == 0 {
		return nil, ErrCorrupt
	}
	if b[0] != version {
		return nil, ErrVersion
	}
	r := &reader{b: b[1:]}
	n := r.uvarint()
	if r.err != nil || n > maxBatch || n > uint64(len(r.b))/minCmdBytes {
		return nil, ErrCorrupt
	}
	// One allocation for every command of the entry: an entry holds up to
	// thousands, and the state machine decodes each on the write path.
	slab := make([]Cmd, n)
	cmds := make([]*Cmd, 0, n)
	for i := uint64(0); i < n && r.err == nil; i++ {
		c := &slab[i]
		c.Op, c.DB, c.Now = Op(r.byte()), r.byte(), r.varint()
		c.Key = r.bytes()
		c.Dst = r.bytes()
		c.Keys = r.list()
		c.Items = r.list()
		c.Data = r.bytes()
		c.Iter = r.varint()
		c.Count = r.varint()
		f := r.uvarint()
		c.Multi, c.NX, c.NoCreate, c.NonScaling, c.Flag = f&1 != 0, f&2 != 0, f&4 != 0, f&8 != 0, f&16 != 0
		c.ErrorRate = math.Float64frombits(r.u64())
		c.Capacity = r.uvarint()
		c.Expansion = uint32(r.small(math.MaxUint32))
		c.BucketSize = uint16(r.small(math.MaxUint16))
		c.MaxIterations = uint16(r.small(math.MaxUint16))
		c.MaxExpansions = uint32(r.small(math.MaxUint32))
		c.MaxBytes = r.uvarint()
		c.Field = r.byte()
		cmds = append(cmds, c)
	}
	if r.err != nil {
		return nil, r.err
	}
	if len(r.b) != 0 {
		return nil, ErrCorrupt
	}
	return cmds, nil
}
