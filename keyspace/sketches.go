package keyspace

import (
	"errors"
	"sync"
	"unsafe"

	"github.com/bfserver/bfserver/engine"
	"github.com/bfserver/bfserver/rdb"
)

// A sketch is a key type of RedisBloom's (CMS, Top-K, t-digest) whose
// state is one value with one large array: it changes under its own
// lock, beside concurrent reads. The image keeps it as a filter is kept:
// its Header as the key's metadata and its Array in 64 KiB chunks, of
// which a flush writes those marked changed, and a cut holds the array
// (engine.Freeze) rather than copying it. DUMP writes RedisBloom's
// module encoding (AppendRDB) and RESTORE reads it, MEMORY USAGE answers
// RedisBloom's mem_usage, and the replica digest hashes Marshal. A new
// sketch type registers a sketchType and handles its own ops; nothing
// else in the keyspace names it.
type sketch interface {
	// Marshal is the full state, exactly: equal on every replica that
	// applied the same log.
	Marshal() []byte
	// AppendRDB appends RedisBloom's module fields (rdb_save).
	AppendRDB(b []byte) []byte
	// MemUsage is RedisBloom's mem_usage of the value.
	MemUsage() uint64
	// Header is the image's metadata: the state but the array.
	Header() []byte
	// Array is the large array as the image keeps it: its size in bytes,
	// its record of changed chunks (every change marks a chunk before it
	// writes it) and a reader of its bytes as they are when Array is
	// called, which may run beside the sketch's writer.
	Array() (size uint64, d *engine.Dirty, read func(dst []byte, off uint64))
	// LoadBytes fills the array at off from a stored chunk, and LoadTarget
	// is its memory as the image lays it out (or nil), for a sketch being
	// loaded.
	LoadBytes(src []byte, off uint64) error
	LoadTarget() []byte
}

// sketchType is what the keyspace knows of one sketch kind.
type sketchType struct {
	kind Kind
	name string // the module type name: TYPE's answer, and the RDB id's
	id   uint64 // rdb.ModuleID(name, encver)
	// fromRDB reads RedisBloom's module fields (rdb_load), refusing a
	// value over maxBytes with errTooLarge and anything RedisBloom
	// would refuse with ErrBadFormat.
	fromRDB func(r *rdb.Reader, maxBytes uint64) (sketch, error)
	// fromImage reads the image's metadata: a Header, or (whole) the
	// Marshal bytes that builds before the chunked form stored.
	fromImage func(b []byte, maxBytes uint64) (s sketch, whole bool, err error)
	// tooLarge is the type's error for a value over the cap.
	tooLarge error
}

var (
	sketchByKind = map[Kind]*sketchType{}
	sketchByID   = map[uint64]*sketchType{}
)

func registerSketch(t *sketchType) {
	t.id = rdb.ModuleID(t.name, t.id)
	sketchByKind[t.kind] = t
	sketchByID[t.id] = t
}

// registerSketchOf registers a sketch package's type from its decoders
// (FromRDB, FromImage) and its error for a value over the cap.
func registerSketchOf[T sketch](kind Kind, name string, encVer uint64,
	fromRDB func(*rdb.Reader, uint64) (T, error), fromImage func([]byte, uint64) (T, bool, error), tooLarge error) {
	registerSketch(&sketchType{kind: kind, name: name, id: encVer, tooLarge: tooLarge,
		fromRDB: func(r *rdb.Reader, maxBytes uint64) (sketch, error) {
			s, err := fromRDB(r, maxBytes)
			if err != nil {
				return nil, err
			}
			return s, nil
		},
		fromImage: func(b []byte, maxBytes uint64) (sketch, bool, error) {
			s, whole, err := fromImage(b, maxBytes)
			if err != nil {
				return nil, false, err
			}
			return s, whole, nil
		}})
}

// Sketch is a sketch value as a key holds it: the value and the lock
// that orders Apply's changes against readers.
type Sketch struct {
	mu sync.RWMutex
	s  sketch
}

func sketchValue(kind Kind, s sketch) *Value {
	return &Value{Kind: kind, obj: unsafe.Pointer(&Sketch{s: s})}
}

// Sketch is the value's sketch, nil unless it holds one.
func (v *Value) Sketch() *Sketch {
	if sketchByKind[v.Kind] == nil {
		return nil
	}
	return (*Sketch)(v.obj)
}

// Marshal is the sketch's full state, under its lock.
func (s *Sketch) Marshal() []byte {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.s.Marshal()
}

// MemUsage is RedisBloom's mem_usage of the sketch, under its lock.
func (s *Sketch) MemUsage() uint64 {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.s.MemUsage()
}

// footprinter is a sketch that allocates as it fills (the t-digest's
// nodes): its Footprint, not RedisBloom's mem_usage (which counts every
// node from creation, and wraps for huge compressions), is what it holds.
type footprinter interface{ Footprint() uint64 }

// Bytes is the memory the sketch holds, for the keyspace's total (the
// memory cap, INFO): its Footprint when it grows as it fills, else its
// mem_usage.
func (s *Sketch) Bytes() uint64 {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if f, ok := s.s.(footprinter); ok {
		return f.Footprint()
	}
	return s.s.MemUsage()
}

func (s *Sketch) appendRDB(b []byte) []byte {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.s.AppendRDB(b)
}

// sketchFromRDB reads a sketch's module value by its type id; ok is false
// for an id that is no sketch's.
func sketchFromRDB(id uint64, r *rdb.Reader, maxBytes uint64) (v *Value, ok bool, err error) {
	t := sketchByID[id]
	if t == nil {
		return nil, false, nil
	}
	s, err := t.fromRDB(r, maxBytes)
	if err != nil {
		if errors.Is(err, t.tooLarge) {
			return nil, true, ErrTooLarge
		}
		return nil, true, ErrBadFormat
	}
	return sketchValue(t.kind, s), true, nil
}

// loadSketch reads a sketch's image metadata; whole says it was stored
// whole, as builds before the chunked form stored it.
func loadSketch(kind Kind, body []byte, maxBytes uint64) (p unsafe.Pointer, whole bool, err error) {
	t := sketchByKind[kind]
	if t == nil {
		return nil, false, ErrCorruptImage
	}
	s, whole, err := t.fromImage(body, maxBytes)
	if err != nil {
		if errors.Is(err, t.tooLarge) {
			return nil, false, ErrTooLarge
		}
		return nil, false, ErrCorruptImage
	}
	return unsafe.Pointer(&Sketch{s: s}), whole, nil
}

// header is the sketch's image metadata, under its lock.
func (s *Sketch) header() []byte {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.s.Header()
}

// chunks is how many chunks the sketch's array spans. Only Apply calls
// it (the array's only writer), without the lock.
func (s *Sketch) chunks() uint64 {
	size, _, _ := s.s.Array()
	return (size + engine.ChunkSize - 1) / engine.ChunkSize
}

// sketchChanged records an in-place change of sketch s at key, whose
// array spanned chunks before it (Sketch.chunks): one whose array now
// spans fewer (a t-digest compressed or reset) is recorded as replaced,
// so that the image drops the chunks past its end instead of keeping
// them.
func (k *Keyspace) sketchChanged(dbi uint8, key []byte, s *Sketch, chunks uint64) {
	if s.chunks() < chunks {
		k.replaced(dbi, string(key))
		return
	}
	k.changed(dbi, key)
}
