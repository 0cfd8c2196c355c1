package tdigest

import (
	"crypto/sha256"
	"encoding/binary"
	"hash/crc32"
	"math"
)

// Dump format, version 1, little-endian: magic "BFTD", version, then
// compression, min, max (float64 bits), capacity, merged and unmerged
// node counts (int32), total compressions, merged and unmerged weight
// (int64), then merged+unmerged nodes as (mean float64 bits, weight
// int64), then a CRC-32C (Castagnoli) of everything before it. Unlike
// the RDB value it keeps the whole state — unmerged nodes and all — so
// an image or snapshot restores a digest that answers and evolves
// exactly as the one saved.
const (
	dumpMagic   = "BFTD"
	dumpVersion = 1
	// DumpHeaderSize is the bytes before the nodes.
	DumpHeaderSize = 4 + 1 + 3*8 + 3*4 + 3*8
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Marshal is the digest's dump.
func (d *Digest) Marshal() []byte {
	return d.AppendMarshal(make([]byte, 0, DumpHeaderSize+16*len(d.mean)+4))
}

// AppendMarshal appends the digest's dump.
func (d *Digest) AppendMarshal(b []byte) []byte {
	start := len(b)
	b = d.appendFields(b, dumpVersion)
	for i := range d.mean {
		b = binary.LittleEndian.AppendUint64(b, math.Float64bits(d.mean[i]))
		b = binary.LittleEndian.AppendUint64(b, uint64(d.weight[i]))
	}
	return binary.LittleEndian.AppendUint32(b, crc32.Checksum(b[start:], castagnoli))
}

// appendFields appends the magic, version v and every field but the
// nodes (DumpHeaderSize bytes).
func (d *Digest) appendFields(b []byte, v byte) []byte {
	b = append(b, dumpMagic...)
	b = append(b, v)
	for _, f := range [...]float64{d.compression, d.min, d.max} {
		b = binary.LittleEndian.AppendUint64(b, math.Float64bits(f))
	}
	for _, n := range [...]int32{d.cap, d.merged, d.unmerged} {
		b = binary.LittleEndian.AppendUint32(b, uint32(n))
	}
	for _, n := range [...]int64{d.totalCompressions, d.mergedWeight, d.unmergedWeight} {
		b = binary.LittleEndian.AppendUint64(b, uint64(n))
	}
	return b
}

// Unmarshal reads a dump, checking what FromRDB checks (and the CRC),
// with nodes over maxBytes (16 bytes a node) refused before allocating.
func Unmarshal(b []byte, maxBytes uint64) (*Digest, error) {
	d, body, err := parseFields(b, dumpVersion, maxBytes)
	if err != nil {
		return nil, err
	}
	for i := range d.mean {
		off := DumpHeaderSize + 16*i
		d.mean[i] = math.Float64frombits(binary.LittleEndian.Uint64(body[off:]))
		d.weight[i] = int64(binary.LittleEndian.Uint64(body[off+8:]))
	}
	return d, nil
}

// parseFields reads the fields of a dump of version v (its magic, fields,
// nodes for version 1, and CRC) into a digest whose nodes are allocated
// and zero, refusing more nodes than maxBytes holds; it returns the bytes
// before the CRC. A header (version 2) carries, after the fields, how
// many nodes the arrays had room for (Footprint), which the digest gets
// again: growing from there, it grows as the digest saved would have.
func parseFields(b []byte, v byte, maxBytes uint64) (*Digest, []byte, error) {
	if len(b) < DumpHeaderSize+4 || string(b[:4]) != dumpMagic || b[4] != v {
		return nil, nil, ErrBadFormat
	}
	body := b[:len(b)-4]
	if crc32.Checksum(body, castagnoli) != binary.LittleEndian.Uint32(b[len(b)-4:]) {
		return nil, nil, ErrBadFormat
	}
	f := func(off int) float64 { return math.Float64frombits(binary.LittleEndian.Uint64(b[off:])) }
	i32 := func(off int) int64 { return int64(int32(binary.LittleEndian.Uint32(b[off:]))) }
	i64 := func(off int) int64 { return int64(binary.LittleEndian.Uint64(b[off:])) }
	d, ok := newDigest(f(5))
	if !ok || i32(29) != int64(d.cap) {
		return nil, nil, ErrBadFormat
	}
	merged, unmerged := i32(33), i32(37)
	// A dump carries its nodes (and they bound what may be allocated); a
	// header does not, but says how many the arrays had room for.
	nodes, avail, room := uint64(merged+unmerged), uint64(math.MaxUint64), int64(-1)
	if v == dumpVersion {
		nodes = uint64(len(body)-DumpHeaderSize) / 16
		avail = nodes
	} else if len(body) != headerSize-4 {
		return nil, nil, ErrBadFormat
	} else {
		room = int64(binary.LittleEndian.Uint32(body[DumpHeaderSize:]))
	}
	if err := d.setNodes(merged, unmerged, room, maxBytes, avail); err != nil {
		return nil, nil, err
	}
	if uint64(merged+unmerged) != nodes || v == dumpVersion && (len(body)-DumpHeaderSize)%16 != 0 {
		return nil, nil, ErrBadFormat
	}
	d.min, d.max = f(13), f(21)
	d.totalCompressions, d.mergedWeight, d.unmergedWeight = i64(41), i64(49), i64(57)
	return d, body, nil
}

// Digest is the SHA-256 of Marshal: replicas that applied the same
// operations have equal digests.
func (d *Digest) Digest() [32]byte { return sha256.Sum256(d.Marshal()) }

// Equal reports whether two digests have bit-identical state.
func (d *Digest) Equal(o *Digest) bool {
	if math.Float64bits(d.compression) != math.Float64bits(o.compression) ||
		math.Float64bits(d.min) != math.Float64bits(o.min) ||
		math.Float64bits(d.max) != math.Float64bits(o.max) ||
		d.cap != o.cap || d.merged != o.merged || d.unmerged != o.unmerged ||
		d.totalCompressions != o.totalCompressions || d.mergedWeight != o.mergedWeight ||
		d.unmergedWeight != o.unmergedWeight || len(d.mean) != len(o.mean) {
		return false
	}
	for i := range d.mean {
		if math.Float64bits(d.mean[i]) != math.Float64bits(o.mean[i]) || d.weight[i] != o.weight[i] {
			return false
		}
	}
	return true
}

// Nodes returns copies of the node arrays: the merged centroids first
// (sorted by mean after a compress), then the unmerged buffer.
func (d *Digest) Nodes() (means []float64, weights []int64) {
	return append([]float64(nil), d.mean...), append([]int64(nil), d.weight...)
}

// NodeCounts is the merged and unmerged node counts.
func (d *Digest) NodeCounts() (merged, unmerged int) { return int(d.merged), int(d.unmerged) }
