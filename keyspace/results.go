package keyspace

import (
	"encoding/binary"
	"errors"
	"math"

	"github.com/bfserver/bfserver/internal/wire"
	"github.com/bfserver/bfserver/scalable"
)

// errorCode is an error's code in EncodeResults (0: none). Apply and
// Read only ever return keyspace Errors.
func errorCode(err error) uint64 {
	if e, ok := err.(*Error); ok {
		return uint64(e.code)
	}
	return 0
}

// minResultBytes is the shortest encoding of one result: its two error
// codes, integer, count of integers, flags, bytes and count of list
// elements, a byte each. decodeStep is the most elements decoded ahead of
// their bytes.
const (
	minResultBytes = 7
	decodeStep     = 4096
)

// ErrBadResults: an encoded result list does not decode.
var ErrBadResults = errors.New("keyspace: corrupt results")

// EncodeResults serialises results so a node that forwarded a write can
// answer with the leader's results.
func EncodeResults(rs []Result) []byte {
	b := binary.AppendUvarint(nil, uint64(len(rs)))
	var none More
	for _, r := range rs {
		m := r.More
		if m == nil {
			m = &none
		}
		b = binary.AppendUvarint(b, errorCode(r.Err))
		b = binary.AppendUvarint(b, errorCode(m.Tail))
		b = binary.AppendVarint(b, r.Int)
		b = binary.AppendUvarint(b, uint64(len(r.Ints)))
		for _, v := range r.Ints {
			b = binary.AppendVarint(b, v)
		}
		flags := byte(0)
		if r.Null {
			flags |= 1
		}
		if m.Bytes != nil {
			flags |= 2
		}
		if m.BF != nil {
			flags |= 4
		}
		if m.CF != nil {
			flags |= 8
		}
		b = append(b, flags)
		b = wire.AppendBytes(b, m.Bytes)
		b = wire.AppendList(b, m.List)
		if m.BF != nil {
			for _, v := range []uint64{m.BF.Capacity, m.BF.Size, m.BF.Filters, m.BF.Items, m.BF.Expansion} {
				b = binary.AppendUvarint(b, v)
			}
			b = append(b, boolByte(m.BF.NonScaling))
		}
		if m.CF != nil {
			c := m.CF
			for _, v := range []uint64{c.Size, c.NumBuckets, c.NumFilters, c.NumItems, c.NumDeletes,
				uint64(c.BucketSize), uint64(c.MaxIterations), uint64(c.Expansion), c.Slots} {
				b = binary.AppendUvarint(b, v)
			}
		}
	}
	return b
}

func boolByte(v bool) byte {
	if v {
		return 1
	}
	return 0
}

// decoder adds result fields to wire.Reader.
type decoder struct{ wire.Reader }

func (d *decoder) err() error {
	e := d.Uvarint()
	if e == 0 {
		return nil
	}
	if e >= uint64(len(errorsByCode)) || errorsByCode[e] == nil {
		d.Bad = true
		return nil
	}
	return errorsByCode[e]
}

// DecodeResults reverses EncodeResults.
func DecodeResults(b []byte) ([]Result, error) {
	d := &decoder{wire.Reader{B: b}}
	// Memory grows with what decodes, never with the counts the bytes
	// claim: a peer's answer costs at most a small multiple of its size.
	n := d.Count()
	if n > len(d.B)/minResultBytes {
		return nil, ErrBadResults
	}
	out := make([]Result, 0, min(n, decodeStep))
	for i := 0; i < n && !d.Bad; i++ {
		out = append(out, Result{})
		r := &out[i]
		var m More
		r.Err, m.Tail, r.Int = d.err(), d.err(), d.Varint()
		if n := d.Count(); n > 0 {
			r.Ints = make([]int64, 0, min(n, decodeStep))
			for j := 0; j < n && !d.Bad; j++ {
				r.Ints = append(r.Ints, d.Varint())
			}
		}
		flags := d.Byte()
		r.Null = flags&1 != 0
		m.Bytes = d.Bytes()
		if flags&2 != 0 && m.Bytes == nil {
			m.Bytes = []byte{}
		}
		if n := d.Count(); n > 0 {
			m.List = make([][]byte, 0, min(n, decodeStep))
			for j := 0; j < n && !d.Bad; j++ {
				v := d.Bytes()
				if v == nil {
					v = []byte{}
				}
				m.List = append(m.List, v)
			}
		}
		if flags&4 != 0 {
			m.BF = &BFInfo{Capacity: d.Uvarint(), Size: d.Uvarint(), Filters: d.Uvarint(), Items: d.Uvarint(), Expansion: d.Uvarint()}
			m.BF.NonScaling = d.Byte() == 1
		}
		if flags&8 != 0 {
			m.CF = &scalable.CuckooInfo{Size: d.Uvarint(), NumBuckets: d.Uvarint(), NumFilters: d.Uvarint(),
				NumItems: d.Uvarint(), NumDeletes: d.Uvarint()}
			bs, mi, ex := d.Uvarint(), d.Uvarint(), d.Uvarint()
			if bs > math.MaxUint16 || mi > math.MaxUint16 || ex > math.MaxUint16 {
				return nil, ErrBadResults
			}
			m.CF.BucketSize, m.CF.MaxIterations, m.CF.Expansion = uint16(bs), uint16(mi), uint16(ex)
			m.CF.Slots = d.Uvarint()
		}
		if m.Tail != nil || m.Bytes != nil || m.List != nil || m.BF != nil || m.CF != nil {
			mm := m // m's address is not taken: no allocation for a result without More
			r.More = &mm
		}
		if d.Bad {
			return nil, ErrBadResults
		}
	}
	if d.Bad || len(d.B) != 0 {
		return nil, ErrBadResults
	}
	return out, nil
}
