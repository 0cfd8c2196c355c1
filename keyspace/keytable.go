package keyspace

import (
	"hash/maphash"
	"iter"
	"unsafe"
)

// keyTable is a database's keys: a Go map from each key's 64-bit hash to
// the key and its value, and a second map, almost always empty, for the
// keys whose hash another key already holds.
//
// Why not map[string]*Value: a Go map rehashes every key when a table
// of it splits, and a key's bytes live in its filter's entry
// (keyedBloomEntry), scattered over the heap, so growing the table cost a
// cache miss a key. Creating a million small filters spent 18% of the
// state machine's CPU there (table.split; aeshashbody was 11.6% alone).
// Here the map's key is the hash itself, rehashed from the slot.
//
// The seed is drawn per table: layout and iteration order differ between
// processes, as a Go map's do, and nothing may depend on them.
type keyTable struct {
	seed   maphash.Seed
	byHash map[uint64]keySlot
	// spill holds each key whose hash was held by another key when it
	// was inserted. A key is in byHash under its hash or in spill, never
	// both. nil while empty.
	spill map[string]*Value
	// mask is all ones; a test narrows it to make hashes collide.
	mask uint64
}

type keySlot struct {
	key string
	v   *Value
}

func newKeyTable() keyTable {
	return keyTable{seed: maphash.MakeSeed(), byHash: make(map[uint64]keySlot), mask: ^uint64(0)}
}

func (t *keyTable) hash(key string) uint64 { return maphash.String(t.seed, key) & t.mask }

func (t *keyTable) len() int { return len(t.byHash) + len(t.spill) }

// get is the value filed under key, nil if none.
func (t *keyTable) get(key string) *Value {
	if s, ok := t.byHash[t.hash(key)]; ok && s.key == key {
		return s.v
	}
	if t.spill != nil {
		return t.spill[key]
	}
	return nil
}

// getBytes is get for a key held in bytes, without copying them.
func (t *keyTable) getBytes(key []byte) *Value {
	return t.get(unsafe.String(unsafe.SliceData(key), len(key)))
}

// set files v under key. The slot takes this key's string even when the
// key was there, as a Go map's assignment does: the string may point into
// v's own entry (keyInside), and the old one into the value replaced.
func (t *keyTable) set(key string, v *Value) {
	h := t.hash(key)
	s, ok := t.byHash[h]
	if ok && s.key != key || !ok && t.spilled(key) {
		if t.spill == nil {
			t.spill = make(map[string]*Value)
		}
		t.spill[key] = v // a Go map's assignment takes the new key string
		return
	}
	t.byHash[h] = keySlot{key: key, v: v}
}

func (t *keyTable) spilled(key string) bool {
	_, ok := t.spill[key]
	return ok
}

// del removes key, and reports whether it was there.
func (t *keyTable) del(key string) bool {
	h := t.hash(key)
	if s, ok := t.byHash[h]; ok && s.key == key {
		delete(t.byHash, h)
		return true
	}
	if _, ok := t.spill[key]; ok {
		delete(t.spill, key)
		if len(t.spill) == 0 {
			t.spill = nil
		}
		return true
	}
	return false
}

// all yields every key and its value, in no order. The body may delete
// keys, and set those already there, as in a range over a Go map.
func (t *keyTable) all() iter.Seq2[string, *Value] {
	return func(yield func(string, *Value) bool) {
		for _, s := range t.byHash {
			if !yield(s.key, s.v) {
				return
			}
		}
		for key, v := range t.spill {
			if !yield(key, v) {
				return
			}
		}
	}
}
