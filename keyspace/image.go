package keyspace

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"unsafe"

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

// Metadata versions: 1 is kind, expiry and body; 2 adds the key's WATCH
// version after the expiry. A key is written as version 1 while its
// version is 0 (never touched since tracking began), so an image stays
// readable by a build without WATCH until WATCH is used.
const (
	metaVersion    = 1
	metaVersionVer = 2
)

// Chunk is one piece of a value's arrays.
type Chunk struct {
	Part, Index uint32
	Data        []byte
}

// A Cut is the change record taken at one point of the log: every key
// changed since the last cut, and which chunks of it changed, so that the
// image can be brought to exactly that point. It copies no filter data:
// the caller writes the chunks from the live arrays (CutKey.Chunks) while
// Apply is still excluded, so what it writes is the state at the cut, and
// memory does not grow with the filters. If the write fails, Restore puts
// the record back and the next cut carries it again.
type Cut struct {
	k    *Keyspace
	Keys []CutKey
	// Records are the keyspace's own changed records (version tracking),
	// copied at the cut.
	Records []Record
	head    bool   // the tracking header is among Records
	pages   uint64 // the pages of missing keys' stamps among Records
}

// CutKey is one changed key of a Cut.
type CutKey struct {
	DB  uint8
	Key string
	// Full: drop every stored chunk of the key before writing its chunks
	// (it was created, replaced or removed).
	Full  bool
	v     *Value    // what the key holds at the cut; nil when it is gone
	parts []cutPart // for a key changed in place: the chunks that changed
}

type cutPart struct {
	d    *engine.Dirty
	bits []uint64
}

// TrackChanges starts recording changes for Cut.
func (k *Keyspace) TrackChanges() { k.dirty, k.markedOK = map[dirtyKey]bool{}, false }

// Cut takes the change record and starts a new one. The caller must
// exclude Apply from here until it has read every chunk it writes.
func (k *Keyspace) Cut() *Cut {
	c := &Cut{k: k, Keys: make([]CutKey, 0, len(k.dirty))}
	for dk, full := range k.dirty {
		ck := CutKey{DB: dk.db, Key: dk.key, Full: full, v: k.db(dk.db).keys[dk.key]}
		if ck.v == nil {
			ck.Full = true
		}
		eachPart(ck.v, func(_ uint32, _ uint64, d *engine.Dirty, _ func([]byte, uint64)) {
			bits := d.Swap()
			if !ck.Full {
				ck.parts = append(ck.parts, cutPart{d, bits})
			}
		})
		c.Keys = append(c.Keys, ck)
	}
	k.clearDirty()
	k.cutWatch(c)
	return c
}

// Restore puts a cut whose write failed back into the change record, so
// the next cut writes it again. The caller excludes Apply.
func (c *Cut) Restore() {
	k := c.k
	k.watch.head = k.watch.head || c.head
	k.watch.dirty |= c.pages
	for _, ck := range c.Keys {
		dk := dirtyKey{ck.DB, ck.Key}
		if ck.Full {
			k.dirty[dk] = true
			continue
		}
		if _, ok := k.dirty[dk]; !ok {
			k.dirty[dk] = false
		}
		for _, p := range ck.parts {
			p.d.Merge(p.bits)
		}
	}
	k.markedOK = false
}

// Bytes is about what writing the cut takes: the chunks it will write.
func (c *Cut) Bytes() uint64 {
	var n uint64
	for _, r := range c.Records {
		n += 64 + uint64(len(r.Data))
	}
	for i := range c.Keys {
		ck := &c.Keys[i]
		n += 64 + uint64(len(ck.Key))
		if ck.Full {
			eachPart(ck.v, func(_ uint32, size uint64, _ *engine.Dirty, _ func([]byte, uint64)) { n += size })
			if ck.v != nil && ck.v.Kind == KindString {
				n += uint64(len(ck.v.Str()))
			}
			continue
		}
		for _, p := range ck.parts {
			n += uint64(engine.CountChunks(p.bits)) * engine.ChunkSize
		}
	}
	return n
}

// Gone reports whether the key no longer exists at the cut.
func (ck *CutKey) Gone() bool { return ck.v == nil }

// Largest is the size of the key's largest array at the cut, 0 when it
// holds none or is gone.
func (ck *CutKey) Largest() uint64 {
	var n uint64
	eachPart(ck.v, func(_ uint32, size uint64, _ *engine.Dirty, _ func([]byte, uint64)) { n = max(n, size) })
	return n
}

// Meta is the key's stored metadata at the cut, or nil when it is gone.
func (ck *CutKey) Meta() []byte {
	if ck.v == nil {
		return nil
	}
	return encodeMeta(ck.v)
}

// Chunks reads each chunk the key's image needs into buf (ChunkSize
// bytes, reused) and calls fn with it, in (part, index) order: every
// chunk that is not all zeros for a full key, the changed ones otherwise.
// fn must be done with the data when it returns.
func (ck *CutKey) Chunks(buf []byte, fn func(Chunk) error) error {
	var err error
	pi := 0
	eachPart(ck.v, func(part uint32, size uint64, _ *engine.Dirty, read func([]byte, uint64)) {
		emit := func(i uint64) error {
			off := i * engine.ChunkSize
			if off >= size {
				return nil
			}
			data := buf[:min(engine.ChunkSize, size-off)]
			read(data, off)
			if ck.Full && allZero(data) {
				return nil
			}
			return fn(Chunk{Part: part, Index: uint32(i), Data: data})
		}
		if err != nil {
			return
		}
		if ck.Full {
			for i := uint64(0); i*engine.ChunkSize < size && err == nil; i++ {
				err = emit(i)
			}
			return
		}
		if pi < len(ck.parts) {
			err = engine.EachChunk(ck.parts[pi].bits, emit)
			pi++
		}
	})
	return err
}

// eachPart calls fn for each bit or bucket array of a value, in order:
// its index, size, change record and a reader of its bytes.
func eachPart(v *Value, fn func(part uint32, size uint64, d *engine.Dirty, read func(dst []byte, off uint64))) {
	if v == nil {
		return
	}
	switch v.Kind {
	case KindBloom:
		var one [1]*scalable.Link
		for i, l := range v.Bloom().LinksIn(&one) {
			fn(uint32(i), l.BloomParams.Bytes, &l.Dirty, l.ReadBytes)
		}
	case KindCuckoo:
		for i, t := range v.Cuckoo().Tables() {
			fn(uint32(i), uint64(len(t.Data)), &t.Dirty, func(dst []byte, off uint64) { copy(dst, t.Data[off:]) })
		}
	}
}

func encodeMeta(v *Value) []byte {
	ver := v.stamp() // Apply is excluded: no stamp moves
	b := []byte{metaVersion, byte(v.Kind)}
	if ver != 0 {
		b[0] = metaVersionVer
	}
	b = binary.LittleEndian.AppendUint64(b, uint64(v.ExpireAt))
	if ver != 0 {
		b = binary.LittleEndian.AppendUint64(b, ver)
	}
	switch v.Kind {
	case KindBloom:
		return append(b, v.Bloom().Header()...)
	case KindCuckoo:
		return append(b, v.Cuckoo().Header()...)
	}
	return append(b, v.Str()...)
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
	if len(meta) < 10 || (meta[0] != metaVersion && meta[0] != metaVersionVer) || int(dbi) >= NumDBs {
		return ErrCorruptImage
	}
	v := &Value{Kind: Kind(meta[1]), ExpireAt: int64(binary.LittleEndian.Uint64(meta[2:]))}
	body := meta[10:]
	if meta[0] == metaVersionVer {
		if len(body) < 8 {
			return ErrCorruptImage
		}
		s := binary.LittleEndian.Uint64(body)
		if s >= 1<<56 {
			return ErrCorruptImage
		}
		v.setStamp(s)
		body = body[8:]
	}
	var err error
	switch v.Kind {
	case KindBloom:
		var ch *scalable.Chain
		ch, err = scalable.ParseChainHeader(body, maxBytes)
		v.obj = unsafe.Pointer(ch)
	case KindCuckoo:
		var cf *scalable.Cuckoo
		cf, err = scalable.ParseCuckooHeader(body, maxBytes)
		v.obj = unsafe.Pointer(cf)
	case KindString:
		str := string(body)
		v.obj = unsafe.Pointer(&str)
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
		var one [1]*scalable.Link
		links := v.Bloom().LinksIn(&one)
		if int(c.Part) >= len(links) || off+uint64(len(c.Data)) > links[c.Part].BloomParams.Bytes {
			return ErrCorruptImage
		}
		links[c.Part].LoadBytes(c.Data, off)
		return nil
	case KindCuckoo:
		tables := v.Cuckoo().Tables()
		if int(c.Part) >= len(tables) || off+uint64(len(c.Data)) > uint64(len(tables[c.Part].Data)) {
			return ErrCorruptImage
		}
		copy(tables[c.Part].Data[off:], c.Data) // not visible to readers yet; no change to record
		return nil
	}
	return ErrCorruptImage
}

// LoadTarget is one array's bytes (as EachArray names it), for a loader
// to read a stored copy straight into, or nil if there is no such array or
// its memory is not laid out as its image (engine.Bloom.LoadTarget). Only
// for a keyspace being loaded.
func (k *Keyspace) LoadTarget(dbi uint8, key string, part uint32) []byte {
	v := k.Lookup(dbi, []byte(key), math.MinInt64)
	if v == nil {
		return nil
	}
	switch v.Kind {
	case KindBloom:
		var one [1]*scalable.Link
		if links := v.Bloom().LinksIn(&one); int(part) < len(links) {
			return links[part].LoadTarget()
		}
	case KindCuckoo:
		if tables := v.Cuckoo().Tables(); int(part) < len(tables) {
			return tables[part].Data
		}
	}
	return nil
}

// EachArray calls fn for every bit or bucket array of every key, with its
// size, so a loader can split the stored chunks between workers. Only for
// a keyspace being loaded.
func (k *Keyspace) EachArray(fn func(db uint8, key string, part uint32, size uint64)) {
	for i := range k.dbs {
		for key, v := range k.dbs[i].keys {
			eachPart(v, func(part uint32, size uint64, _ *engine.Dirty, _ func([]byte, uint64)) { fn(uint8(i), key, part, size) })
		}
	}
}

// ForgetChanges drops recorded changes and dirty chunks after a load: the
// loaded state is what is stored.
func (k *Keyspace) ForgetChanges() {
	for i := range k.dbs {
		for _, v := range k.dbs[i].keys {
			eachPart(v, func(_ uint32, _ uint64, d *engine.Dirty, _ func([]byte, uint64)) { d.Swap() })
		}
	}
	if k.dirty != nil {
		k.clearDirty()
	}
	k.watch.head, k.watch.dirty = false, 0
}
