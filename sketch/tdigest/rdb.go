package tdigest

import "github.com/bfserver/bfserver/rdb"

// RedisBloom's module type for t-digest keys (TYPE answers the name) and
// the encoding version of its RDB values.
const (
	TypeName    = "TDIS-TYPE"
	EncodingVer = 0
)

// AppendRDB appends the digest as TDigestRdbSave writes it (the module
// value of a DUMP payload or RDB file): compression, min, max as doubles;
// capacity, merged and unmerged node counts and total compressions as
// signed integers; merged and unmerged weight as doubles; then the merged
// nodes' means, then their weights, as doubles. RedisBloom compresses
// the live digest first, so its DUMP changes the key (Merged nodes, Total
// compressions, and the centroids later values merge into); AppendRDB
// does not change d — it encodes what that compression leaves — so a
// caller reproducing DUMP applies Compress to the key itself, as a write.
//
// Only merged nodes are written: a digest holding a single value (which
// compress leaves unmerged) loads back as one unmerged node of mean 0 and
// weight 0, in RedisBloom and here alike.
func (d *Digest) AppendRDB(b []byte) []byte {
	s := d
	if d.unmerged != 0 {
		s = d.Clone()
		s.compress()
	}
	b = rdb.AppendDouble(b, s.compression)
	b = rdb.AppendDouble(b, s.min)
	b = rdb.AppendDouble(b, s.max)
	b = rdb.AppendUInt(b, uint64(int64(s.cap)))
	b = rdb.AppendUInt(b, uint64(int64(s.merged)))
	b = rdb.AppendUInt(b, uint64(int64(s.unmerged)))
	b = rdb.AppendUInt(b, uint64(s.totalCompressions))
	b = rdb.AppendDouble(b, float64(s.mergedWeight))
	b = rdb.AppendDouble(b, float64(s.unmergedWeight))
	for i := 0; i < int(s.merged); i++ {
		b = rdb.AppendDouble(b, s.mean[i])
	}
	for i := 0; i < int(s.merged); i++ {
		b = rdb.AppendDouble(b, float64(s.weight[i]))
	}
	return b
}

// FromRDB reads a value written by TDigestRdbSave (encoding 0), as
// TDigestRdbLoad does: a digest for the compression, then the fields as
// stored (doubles converted to long long as C converts them), merged
// nodes read, any unmerged nodes zero. It refuses what RedisBloom would
// crash on or never writes: a compression td_init refuses, a capacity
// other than the compression's, node counts outside [0, capacity]; and
// node arrays over maxBytes (16 bytes a node) or longer than the input.
func FromRDB(r *rdb.Reader, maxBytes uint64) (*Digest, error) {
	c, lo, hi := r.Double(), r.Double(), r.Double()
	capacity, merged, unmerged := int64(r.UInt()), int64(r.UInt()), int64(r.UInt())
	tc := int64(r.UInt())
	mw, uw := r.Double(), r.Double()
	if r.Err() != nil {
		return nil, ErrBadFormat
	}
	d, ok := newDigest(c)
	if !ok || capacity != int64(d.cap) {
		return nil, ErrBadFormat
	}
	if err := d.setNodes(merged, unmerged, -1, maxBytes, uint64(len(r.Rest()))/18); err != nil {
		return nil, err
	}
	d.min, d.max = lo, hi
	d.totalCompressions = tc
	d.mergedWeight, d.unmergedWeight = cvtt(mw), cvtt(uw)
	for i := range d.merged {
		d.mean[i] = r.Double()
	}
	for i := range d.merged {
		d.weight[i] = cvtt(r.Double())
	}
	if r.Err() != nil {
		return nil, ErrBadFormat
	}
	return d, nil
}

// setNodes sizes the node arrays for merged+unmerged nodes, zeroed, with
// room for room nodes (-1: as many as there are), after checking the
// counts against the capacity, maxBytes, and avail (how many merged
// nodes the input can still hold), and room against the counts and the
// capacity: no more than grow would have made.
func (d *Digest) setNodes(merged, unmerged, room int64, maxBytes, avail uint64) error {
	limit := max(int64(d.cap), 0)
	if merged < 0 || unmerged < 0 || merged > limit || unmerged > limit-merged {
		return ErrBadFormat
	}
	n := merged + unmerged
	if room < 0 {
		room = n
	}
	if room < n || room > limit {
		return ErrBadFormat
	}
	if uint64(room) > maxBytes/16 {
		return ErrTooLarge
	}
	if uint64(merged) > avail {
		return ErrBadFormat
	}
	d.merged, d.unmerged = int32(merged), int32(unmerged)
	d.mean = make([]float64, n, room)
	d.weight = make([]int64, n, room)
	d.dirty.Grow(16 * uint64(room))
	return nil
}
