package keyspace

import (
	"encoding/binary"
	"errors"
	"math"

	"github.com/bfserver/bfserver/scalable"
)

// errorCodes numbers every keyspace error for EncodeResults; append only.
var errorCodes = []error{nil, ErrNotFound, ErrWrongType, ErrItemExists, ErrNonScalingFull,
	ErrInsertFailed, ErrTooLarge, ErrIterNotNumeric, ErrBadData, ErrNoLink, ErrChunkTooBig,
	ErrCFNotFound, ErrMaxExpansions, ErrFilterFull, ErrNoMemory, ErrCompactNotFound,
	ErrInvalidHeader, ErrCantCreate, ErrCantLoad, ErrNoSuchKey, ErrModuleKeyCopy, ErrBusyKey,
	ErrBadPayload, ErrBadFormat, ErrUnknownOp}

func errorCode(err error) uint64 {
	for i, e := range errorCodes {
		if e == err {
			return uint64(i)
		}
	}
	return uint64(len(errorCodes) - 1) // ErrUnknownOp: never produced by Apply
}

// ErrBadResults: an encoded result list does not decode.
var ErrBadResults = errors.New("keyspace: corrupt results")

// EncodeResults serialises results so a node that forwarded a write can
// answer with the leader's results.
func EncodeResults(rs []Result) []byte {
	b := binary.AppendUvarint(nil, uint64(len(rs)))
	for _, r := range rs {
		b = binary.AppendUvarint(b, errorCode(r.Err))
		b = binary.AppendUvarint(b, errorCode(r.Tail))
		b = binary.AppendVarint(b, r.Int)
		b = binary.AppendUvarint(b, uint64(len(r.Ints)))
		for _, v := range r.Ints {
			b = binary.AppendVarint(b, v)
		}
		flags := byte(0)
		if r.Null {
			flags |= 1
		}
		if r.Bytes != nil {
			flags |= 2
		}
		if r.BF != nil {
			flags |= 4
		}
		if r.CF != nil {
			flags |= 8
		}
		b = append(b, flags)
		b = binary.AppendUvarint(b, uint64(len(r.Bytes)))
		b = append(b, r.Bytes...)
		b = binary.AppendUvarint(b, uint64(len(r.List)))
		for _, l := range r.List {
			b = binary.AppendUvarint(b, uint64(len(l)))
			b = append(b, l...)
		}
		if r.BF != nil {
			for _, v := range []uint64{r.BF.Capacity, r.BF.Size, r.BF.Filters, r.BF.Items, r.BF.Expansion} {
				b = binary.AppendUvarint(b, v)
			}
			b = append(b, boolByte(r.BF.NonScaling))
		}
		if r.CF != nil {
			c := r.CF
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

type decoder struct {
	b   []byte
	bad bool
}

func (d *decoder) uvarint() uint64 {
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.bad = true
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) varint() int64 {
	v, n := binary.Varint(d.b)
	if n <= 0 {
		d.bad = true
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) bytes() []byte {
	n := d.uvarint()
	if d.bad || n > uint64(len(d.b)) {
		d.bad = true
		return nil
	}
	if n == 0 {
		return nil
	}
	v := d.b[:n:n]
	d.b = d.b[n:]
	return v
}

func (d *decoder) count() int {
	n := d.uvarint()
	if n > uint64(len(d.b)) { // every element takes at least one byte
		d.bad = true
		return 0
	}
	return int(n)
}

func (d *decoder) err() error {
	e := d.uvarint()
	if e >= uint64(len(errorCodes)) {
		d.bad = true
		return nil
	}
	return errorCodes[e]
}

// DecodeResults reverses EncodeResults.
func DecodeResults(b []byte) ([]Result, error) {
	d := &decoder{b: b}
	out := make([]Result, d.count())
	for i := range out {
		r := &out[i]
		r.Err, r.Tail, r.Int = d.err(), d.err(), d.varint()
		if n := d.count(); n > 0 {
			r.Ints = make([]int64, n)
			for j := range r.Ints {
				r.Ints[j] = d.varint()
			}
		}
		if len(d.b) == 0 {
			return nil, ErrBadResults
		}
		flags := d.b[0]
		d.b = d.b[1:]
		r.Null = flags&1 != 0
		r.Bytes = d.bytes()
		if flags&2 != 0 && r.Bytes == nil {
			r.Bytes = []byte{}
		}
		if n := d.count(); n > 0 {
			r.List = make([][]byte, n)
			for j := range r.List {
				if r.List[j] = d.bytes(); r.List[j] == nil {
					r.List[j] = []byte{}
				}
			}
		}
		if flags&4 != 0 {
			r.BF = &BFInfo{Capacity: d.uvarint(), Size: d.uvarint(), Filters: d.uvarint(), Items: d.uvarint(), Expansion: d.uvarint()}
			if len(d.b) == 0 {
				return nil, ErrBadResults
			}
			r.BF.NonScaling = d.b[0] == 1
			d.b = d.b[1:]
		}
		if flags&8 != 0 {
			r.CF = &scalable.CuckooInfo{Size: d.uvarint(), NumBuckets: d.uvarint(), NumFilters: d.uvarint(),
				NumItems: d.uvarint(), NumDeletes: d.uvarint()}
			bs, mi, ex := d.uvarint(), d.uvarint(), d.uvarint()
			if bs > math.MaxUint16 || mi > math.MaxUint16 || ex > math.MaxUint16 {
				return nil, ErrBadResults
			}
			r.CF.BucketSize, r.CF.MaxIterations, r.CF.Expansion = uint16(bs), uint16(mi), uint16(ex)
			r.CF.Slots = d.uvarint()
		}
		if d.bad {
			return nil, ErrBadResults
		}
	}
	if d.bad || len(d.b) != 0 {
		return nil, ErrBadResults
	}
	return out, nil
}
