package keyspace

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"

	"github.com/bfserver/bfserver/engine"
	"github.com/bfserver/bfserver/scalable"
)

// A key's durable image is its metadata (kind, expiry, dump header or
// string) and the chunks of its bit or bucket arrays, each addressed by
// (part, index): part is the link or sub-filter, index the ChunkSize piece.
// Chunks never written stay absent and load as zeros.

// ErrCorruptImage: a stored record does not decode. The node must stop
// rather than serve a state that may differ from its peers'.
var ErrCorruptImage = errors.New("keyspace: corrupt stored image")

const metaVersion = 1

// Chunk is one piece of a value's arrays.
type Chunk struct {
	Part, Index uint32
	Data        []byte
}

// Change is what a key's stored image needs since the last TakeChanges.
type Change struct {
	DB  uint8
	Key string
	// Meta is the new metadata, or nil if the key no longer exists.
	Meta []byte
	// Full: drop every stored chunk of the key before writing Chunks.
	Full   bool
	Chunks []Chunk
}

// TrackChanges starts recording changes for TakeChanges.
func (k *Keyspace) TrackChanges() { k.dirty, k.markedOK = map[dirtyKey]bool{}, false }

// TakeChanges returns every change since the last call and clears the
// record. The caller must exclude Apply while it runs; the chunk data is
// copied, so the result may be written out after Apply resumes.
func (k *Keyspace) TakeChanges() []Change {
	out := make([]Change, 0, len(k.dirty))
	for dk, full := range k.dirty {
		ch := Change{DB: dk.db, Key: dk.key, Full: full}
		if v := k.db(dk.db).keys[dk.key]; v != nil {
			ch.Meta = encodeMeta(v)
			ch.Chunks = chunksOf(v, full)
		}
		out = append(out, ch)
	}
	k.clearDirty()
	return out
}

func encodeMeta(v *Value) []byte {
	b := []byte{metaVersion, byte(v.Kind)}
	b = binary.LittleEndian.AppendUint64(b, uint64(v.ExpireAt))
	switch v.Kind {
	case KindBloom:
		return append(b, v.Bloom.Header()...)
	case KindCuckoo:
		return append(b, v.Cuckoo.Header()...)
	}
	return append(b, v.Str...)
}

// chunksOf copies the changed chunks of a value, or with full every chunk
// that is not all zeros.
func chunksOf(v *Value, full bool) []Chunk {
	var out []Chunk
	part := func(p uint32, size uint64, d *engine.Dirty, read func(dst []byte, off uint64)) {
		add := func(i uint64) {
			off := i * engine.ChunkSize
			n := min(engine.ChunkSize, size-off)
			buf := make([]byte, n)
			read(buf, off)
			if full && allZero(buf) {
				return
			}
			out = append(out, Chunk{Part: p, Index: uint32(i), Data: buf})
		}
		if full {
			d.TakeDirty(func(uint64) {})
			for i := uint64(0); i*engine.ChunkSize < size; i++ {
				add(i)
			}
			return
		}
		d.TakeDirty(add)
	}
	switch v.Kind {
	case KindBloom:
		for i, l := range v.Bloom.Links() {
			part(uint32(i), l.BloomParams.Bytes, &l.Dirty, l.ReadBytes)
		}
	case KindCuckoo:
		for i, t := range v.Cuckoo.Tables() {
			part(uint32(i), uint64(len(t.Data)), &t.Dirty, func(dst []byte, off uint64) { copy(dst, t.Data[off:]) })
		}
	}
	return out
}

func allZero(b []byte) bool {
	var zero [4096]byte
	for len(b) > 0 {
		n := min(len(b), len(zero))
		if !bytes.Equal(b[:n], zero[:n]) {
			return false
		}
		b = b[n:]
	}
	return true
}

// LoadValue installs a key from its stored metadata. Loading fills a fresh
// keyspace that nobody serves from yet.
// A filter larger than maxBytes is refused before allocation.
func (k *Keyspace) LoadValue(dbi uint8, key string, meta []byte, maxBytes uint64) error {
	if len(meta) < 10 || meta[0] != metaVersion || int(dbi) >= NumDBs {
		return ErrCorruptImage
	}
	v := &Value{Kind: Kind(meta[1]), ExpireAt: int64(binary.LittleEndian.Uint64(meta[2:]))}
	body := meta[10:]
	var err error
	switch v.Kind {
	case KindBloom:
		v.Bloom, err = scalable.ParseChainHeader(body, maxBytes)
	case KindCuckoo:
		v.Cuckoo, err = scalable.ParseCuckooHeader(body, maxBytes)
	case KindString:
		v.Str = append([]byte(nil), body...)
	default:
		err = ErrCorruptImage
	}
	if errors.Is(err, scalable.ErrTooLarge) {
		return ErrTooLarge
	}
	if err != nil {
		return ErrCorruptImage
	}
	k.Put(dbi, key, v)
	return nil
}

// LoadChunk writes a stored chunk into a loaded key.
func (k *Keyspace) LoadChunk(dbi uint8, key string, c Chunk) error {
	v := k.Lookup(dbi, []byte(key), math.MinInt64)
	if v == nil {
		return ErrCorruptImage
	}
	off := uint64(c.Index) * engine.ChunkSize
	switch v.Kind {
	case KindBloom:
		links := v.Bloom.Links()
		if int(c.Part) >= len(links) || off+uint64(len(c.Data)) > links[c.Part].BloomParams.Bytes {
			return ErrCorruptImage
		}
		links[c.Part].WriteBytes(c.Data, off)
		return nil
	case KindCuckoo:
		tables := v.Cuckoo.Tables()
		if int(c.Part) >= len(tables) || off+uint64(len(c.Data)) > uint64(len(tables[c.Part].Data)) {
			return ErrCorruptImage
		}
		tables[c.Part].Write(int(off), c.Data)
		return nil
	}
	return ErrCorruptImage
}

// ForgetChanges drops recorded changes and dirty chunks after a load: the
// loaded state is what is stored.
func (k *Keyspace) ForgetChanges() {
	discard := func(uint64) {}
	for i := range k.dbs {
		for _, v := range k.dbs[i].keys {
			switch v.Kind {
			case KindBloom:
				for _, l := range v.Bloom.Links() {
					l.TakeDirty(discard)
				}
			case KindCuckoo:
				for _, t := range v.Cuckoo.Tables() {
					t.TakeDirty(discard)
				}
			}
		}
	}
	if k.dirty != nil {
		k.clearDirty()
	}
}
