package topk

import (
	"encoding/binary"

	"github.com/bfserver/bfserver/rdb"
)

// TypeName and EncodingVer are RedisBloom 8.8's module type of a Top-K.
const (
	TypeName    = "TopK-TYPE"
	EncodingVer = 0
)

// AppendRDB appends the sketch as TopKRdbSave writes it: k, width and
// depth as unsigned, the decay as a double, the buckets and the heap as
// the C structs' bytes (a heap slot's item pointer written as zero: the
// loader never reads it), then each slot's item as a C string with its
// NUL ("\0" alone for an empty slot). The generator is not in RedisBloom's
// encoding: RESTORE seeds a new one.
func (t *TopK) AppendRDB(b []byte) []byte {
	b = rdb.AppendUInt(b, uint64(t.K))
	b = rdb.AppendUInt(b, uint64(t.Width))
	b = rdb.AppendUInt(b, uint64(t.Depth))
	b = rdb.AppendDouble(b, t.Decay)
	buf := make([]byte, 0, max(len(t.Buckets)*BucketBytes, len(t.Heap)*HeapBytes))
	for _, k := range t.Buckets {
		buf = binary.LittleEndian.AppendUint32(buf, k.FP)
		buf = binary.LittleEndian.AppendUint32(buf, k.Count)
	}
	b = rdb.AppendString(b, buf)
	buf = buf[:0]
	for _, h := range t.Heap {
		buf = binary.LittleEndian.AppendUint32(buf, h.FP)
		buf = binary.LittleEndian.AppendUint32(buf, h.ItemLen)
		buf = binary.LittleEndian.AppendUint64(buf, 0)
		buf = binary.LittleEndian.AppendUint32(buf, h.Count)
		buf = binary.LittleEndian.AppendUint32(buf, 0)
	}
	b = rdb.AppendString(b, buf)
	for _, h := range t.Heap {
		b = rdb.AppendString(b, append(append(buf[:0], CString(h.Item)...), 0))
	}
	return b
}

// FromRDB reads TopKRdbSave's fields: the buckets and heap must be exactly
// their dimensions' sizes, and the sketch within maxBytes.
func FromRDB(r *rdb.Reader, maxBytes uint64) (*TopK, error) {
	// RedisBloom loads any decay (0, 2, NaN: RESERVE alone checks it);
	// the coin then always or never decays, here as there.
	k, w, d, decay := r.UInt(), r.UInt(), r.UInt(), r.Double()
	if r.Err() != nil {
		return nil, ErrFormat
	}
	size, ok := Bytes(k, w, d)
	if !ok {
		return nil, ErrFormat
	}
	if size > maxBytes {
		return nil, ErrTooLarge
	}
	if size-StructBytes > uint64(len(r.Rest()))*1100 {
		return nil, ErrFormat // more than LZF could have packed into what is left
	}
	buckets := r.String()
	heap := r.String()
	if r.Err() != nil || uint64(len(buckets)) != w*d*BucketBytes || uint64(len(heap)) != k*HeapBytes {
		return nil, ErrFormat
	}
	t := &TopK{K: uint32(k), Width: uint32(w), Depth: uint32(d), Decay: decay, Rand: seed}
	t.alloc()
	for i := range t.Buckets {
		t.Buckets[i] = Bucket{binary.LittleEndian.Uint32(buckets[8*i:]), binary.LittleEndian.Uint32(buckets[8*i+4:])}
	}
	for i := range t.Heap {
		s := heap[HeapBytes*i:]
		h := &t.Heap[i]
		h.FP, h.ItemLen, h.Count = binary.LittleEndian.Uint32(s), binary.LittleEndian.Uint32(s[4:]), binary.LittleEndian.Uint32(s[16:])
		item := r.String()
		if r.Err() != nil || len(item) == 0 {
			return nil, ErrFormat
		}
		if len(item) > 1 {
			h.Item = append([]byte{}, item[:len(item)-1]...)
		}
	}
	return t, nil
}
