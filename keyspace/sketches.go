package keyspace

import (
	"errors"
	"sync"
	"unsafe"

	"github.com/bfserver/bfserver/rdb"
)

// A sketch is a key type of RedisBloom's whose whole state is one value
// (CMS, Top-K; the t-digest slots in the same way): it changes under its
// own lock, beside concurrent reads, and is stored whole: the image keeps
// it as its metadata (Marshal; each flush that finds it changed rewrites
// it), DUMP writes RedisBloom's module encoding (AppendRDB) and RESTORE
// reads it, MEMORY USAGE answers RedisBloom's mem_usage, and the replica
// digest hashes Marshal. A new sketch type registers a sketchType and
// handles its own ops; nothing else in the keyspace names it.
type sketch interface {
	// Marshal is the full state, exactly: equal on every replica that
	// applied the same log.
	Marshal() []byte
	// AppendRDB appends RedisBloom's module fields (rdb_save).
	AppendRDB(b []byte) []byte
	// MemUsage is RedisBloom's mem_usage of the value.
	MemUsage() uint64
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
	// unmarshal reads Marshal's bytes.
	unmarshal func(b []byte, maxBytes uint64) (sketch, error)
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

// loadSketch reads a sketch's image metadata.
func loadSketch(kind Kind, body []byte, maxBytes uint64) (unsafe.Pointer, error) {
	t := sketchByKind[kind]
	if t == nil {
		return nil, ErrCorruptImage
	}
	s, err := t.unmarshal(body, maxBytes)
	if err != nil {
		if errors.Is(err, t.tooLarge) {
			return nil, ErrTooLarge
		}
		return nil, ErrCorruptImage
	}
	return unsafe.Pointer(&Sketch{s: s}), nil
}
