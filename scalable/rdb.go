package scalable

import (
	"encoding/binary"
	"math"

	"github.com/bfserver/bfserver/rdb"
)

// Module type names and the encoding version RedisBloom writes (DUMP,
// RESTORE and RDB files).
const (
	BloomTypeName  = "MBbloom--"
	CuckooTypeName = "MBbloomCF"
	EncodingVer    = 4
)

// AppendRDB appends the chain as BFRdbSave writes it.
func (c *Chain) AppendRDB(b []byte) []byte {
	var one [1]*Link
	links := c.LinksIn(&one)
	b = rdb.AppendUInt(b, c.Size())
	b = rdb.AppendUInt(b, uint64(len(links)))
	b = rdb.AppendUInt(b, uint64(c.Options))
	b = rdb.AppendUInt(b, uint64(c.Growth))
	for _, l := range links {
		b = rdb.AppendUInt(b, l.Entries)
		b = rdb.AppendDouble(b, l.Error)
		b = rdb.AppendUInt(b, uint64(l.Hashes))
		b = rdb.AppendDouble(b, l.BPE)
		b = rdb.AppendUInt(b, l.Bits)
		b = rdb.AppendUInt(b, uint64(l.N2))
		data := make([]byte, l.BloomParams.Bytes)
		l.ReadBytes(data, 0)
		b = rdb.AppendString(b, data)
		b = rdb.AppendUInt(b, l.Size())
	}
	return b
}

// ChainFromRDB reads a chain written by BFRdbSave (encoding 4). The fields
// are turned into a dump header, so RDB input gets exactly the validation
// and byte cap that LOADCHUNK input gets.
func ChainFromRDB(r *rdb.Reader, maxBytes uint64) (*Chain, error) {
	size, n, opts, growth := r.UInt(), r.UInt(), r.UInt(), r.UInt()
	if r.Err() != nil || n == 0 || n > uint64(len(r.Rest()))/10 || opts > math.MaxUint32 || growth > math.MaxUint32 {
		return nil, ErrBadHeader
	}
	hdr := make([]byte, chainHeaderSize, chainHeaderSize+linkHeaderSize*n)
	binary.LittleEndian.PutUint64(hdr[0:], size)
	binary.LittleEndian.PutUint32(hdr[8:], uint32(n))
	binary.LittleEndian.PutUint32(hdr[12:], uint32(opts))
	binary.LittleEndian.PutUint32(hdr[16:], uint32(growth))
	data := make([][]byte, n)
	for i := range data {
		entries, errRate, hashes, bpe := r.UInt(), r.Double(), r.UInt(), r.Double()
		bits, n2 := r.UInt(), r.UInt()
		data[i] = r.String()
		lsize := r.UInt()
		if r.Err() != nil || hashes > math.MaxUint32 || n2 > math.MaxUint8 {
			return nil, ErrBadHeader
		}
		var l [linkHeaderSize]byte
		binary.LittleEndian.PutUint64(l[0:], uint64(len(data[i])))
		binary.LittleEndian.PutUint64(l[8:], bits)
		binary.LittleEndian.PutUint64(l[16:], lsize)
		binary.LittleEndian.PutUint64(l[24:], math.Float64bits(errRate))
		binary.LittleEndian.PutUint64(l[32:], math.Float64bits(bpe))
		binary.LittleEndian.PutUint32(l[40:], uint32(hashes))
		binary.LittleEndian.PutUint64(l[44:], entries)
		l[52] = uint8(n2)
		hdr = append(hdr, l[:]...)
	}
	c, err := ParseChainHeader(hdr, maxBytes)
	if err != nil {
		return nil, err
	}
	var one [1]*Link
	for i, l := range c.LinksIn(&one) {
		l.WriteBytes(data[i], 0)
	}
	return c, nil
}

// AppendRDB appends the filter as CFRdbSave writes it.
func (c *Cuckoo) AppendRDB(b []byte) []byte {
	c.mu.RLock()
	defer c.mu.RUnlock()
	b = rdb.AppendUInt(b, uint64(len(c.filters)))
	b = rdb.AppendUInt(b, c.numBuckets)
	b = rdb.AppendUInt(b, c.numItems)
	b = rdb.AppendUInt(b, c.numDeletes)
	b = rdb.AppendUInt(b, uint64(c.bucketSize))
	b = rdb.AppendUInt(b, uint64(c.maxIterations))
	b = rdb.AppendUInt(b, uint64(c.expansion))
	for _, t := range c.filters {
		b = rdb.AppendUInt(b, uint64(t.NumBuckets))
		b = rdb.AppendString(b, t.Data)
	}
	return b
}

// CuckooFromRDB reads a filter written by CFRdbSave (encoding 4), validated
// like a LOADCHUNK header.
func CuckooFromRDB(r *rdb.Reader, maxBytes uint64) (*Cuckoo, error) {
	var hdr [CuckooHeaderSize]byte
	nf, nb, items, dels := r.UInt(), r.UInt(), r.UInt(), r.UInt()
	bs, mi, exp := r.UInt(), r.UInt(), r.UInt()
	if r.Err() != nil || nf > math.MaxUint16 || bs > math.MaxUint16 || mi > math.MaxUint16 || exp > math.MaxUint16 {
		return nil, ErrBadHeader
	}
	binary.LittleEndian.PutUint64(hdr[0:], items)
	binary.LittleEndian.PutUint64(hdr[8:], nb)
	binary.LittleEndian.PutUint64(hdr[16:], dels)
	binary.LittleEndian.PutUint64(hdr[24:], nf)
	binary.LittleEndian.PutUint16(hdr[32:], uint16(bs))
	binary.LittleEndian.PutUint16(hdr[34:], uint16(mi))
	binary.LittleEndian.PutUint16(hdr[36:], uint16(exp))
	c, err := ParseCuckooHeader(hdr[:], maxBytes)
	if err != nil {
		return nil, err
	}
	for _, t := range c.filters {
		n := r.UInt()
		data := r.String()
		if r.Err() != nil || n != uint64(t.NumBuckets) || len(data) != len(t.Data) {
			return nil, ErrBadHeader
		}
		t.Write(0, data)
	}
	return c, nil
}
