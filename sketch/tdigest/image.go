package tdigest

import (
	"encoding/binary"
	"hash/crc32"
	"math"

	"github.com/bfserver/bfserver/engine"
)

// In the image a digest is its header (Header: the dump's fields as
// version 2, the room its node arrays have, and its CRC) as metadata and
// its nodes (Array: mean and weight, 8 bytes each, little-endian, as the
// dump lays them out) in 64 KiB chunks, of which a flush writes those
// marked changed: an ADD the chunk it appends to, a compress every node.
// The array's length is the node count at the time, so it shrinks at a
// compress or RESET (the keyspace then rewrites the key whole, dropping
// the chunks past the end). The room is kept because the byte cap is
// checked against it (FootprintAfterAdd): a node that loaded a digest
// with less room than its peers' would refuse an ADD they take. Builds
// before this form stored the whole dump (version 1) as the metadata,
// and refuse version 2.

// headerVersion is Header's version byte (the dump's is 1), and
// headerSize its length.
const (
	headerVersion = 2
	headerSize    = DumpHeaderSize + 4 + 4
)

// Header is the digest's image metadata: everything but the nodes.
func (d *Digest) Header() []byte {
	b := d.appendFields(make([]byte, 0, headerSize), headerVersion)
	b = binary.LittleEndian.AppendUint32(b, uint32(cap(d.mean)))
	return binary.LittleEndian.AppendUint32(b, crc32.Checksum(b, castagnoli))
}

// FromImage reads a digest's image metadata: a Header, giving a digest
// of merged+unmerged zero nodes that LoadBytes fills, or (whole) the dump
// as older builds stored it. Nodes over maxBytes (16 bytes a node, as
// many as the arrays have room for) are refused with ErrTooLarge before
// they are allocated.
func FromImage(b []byte, maxBytes uint64) (d *Digest, whole bool, err error) {
	if len(b) > 4 && b[4] == headerVersion {
		d, _, err = parseFields(b, headerVersion, maxBytes)
		return d, false, err
	}
	d, err = Unmarshal(b, maxBytes)
	return d, true, err
}

// Array is the nodes as the image keeps them: their size in bytes, the
// record of the chunks changed, and a reader of their bytes as they are
// now. The reader keeps the arrays of now: the writer marks a node (or a
// range) before it changes it, and a grow moves the nodes to new arrays and
// leaves these as they are, so it may run beside the writer (an image
// write holding the nodes).
func (d *Digest) Array() (uint64, *engine.Dirty, func(dst []byte, off uint64)) {
	m, w := d.mean, d.weight
	return 16 * uint64(len(m)), &d.dirty, func(dst []byte, off uint64) {
		for i := uint64(0); 16*i < uint64(len(dst)); i++ {
			n := off/16 + i
			binary.LittleEndian.PutUint64(dst[16*i:], math.Float64bits(m[n]))
			binary.LittleEndian.PutUint64(dst[16*i+8:], uint64(w[n]))
		}
	}
}

// LoadBytes fills the nodes at byte offset off from a stored chunk;
// ErrBadFormat if it is not whole nodes inside the array. The digest
// must not be visible to anyone else yet; it records no change.
func (d *Digest) LoadBytes(src []byte, off uint64) error {
	size := 16 * uint64(len(d.mean))
	if off%16 != 0 || len(src)%16 != 0 || off > size || uint64(len(src)) > size-off {
		return ErrBadFormat
	}
	for i := 0; i < len(src); i += 16 {
		n := off/16 + uint64(i/16)
		d.mean[n] = math.Float64frombits(binary.LittleEndian.Uint64(src[i:]))
		d.weight[n] = int64(binary.LittleEndian.Uint64(src[i+8:]))
	}
	return nil
}

// LoadTarget is nil: the nodes' memory (two arrays) is not laid out as
// their image, so a loader copies them in with LoadBytes.
func (d *Digest) LoadTarget() []byte { return nil }
