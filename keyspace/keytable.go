package keyspace

import (
	"hash/maphash"
	"iter"
	"math/bits"
	"sync/atomic"
	"unsafe"
)

// keyTable is a database's keys: an open-addressing hash table that one
// writer changes (Apply, under the db's lock) while readers look keys up
// without any lock (Keyspace.Lookup).
//
// Why not a Go map behind the db's RWMutex: every lookup then wrote the
// lock's reader count, one cache line that every core's lookups share;
// two cores looking up in parallel took 66–74 ns a lookup against 28 ns
// on one (BenchmarkLookupParallel), so lookups got slower, not faster,
// with more cores. And a Go map cannot be read while it is written.
//
// Why the hash is kept in the slot: growing the table moves each slot by
// its hash, never touching its key, whose bytes live in its filter's entry
// (keyedBloomEntry), scattered over the heap: rehashing a Go map's string
// keys cost a cache miss a key, 18% of the state machine's CPU while a
// million small filters were created.
//
// How readers stay safe without a lock:
//   - A slot is filled once: its hash and key's length are written, then
//     its key and value, then the control byte that makes it visible. A
//     slot is never emptied nor given to another key, so a reader that
//     saw its control byte reads the hash and length the writer wrote
//     before it. Its key pointer changes only to equal bytes (set takes the
//     new string), its value by an atomic store.
//   - A deleted key's slot keeps its key with a nil value (dead). A dead
//     slot is filled again only by its own key, and only in the newest
//     table.
//   - Growing is incremental, as Redis's rehash: the writer allocates the
//     next table, links it from the current one and, at each change, moves
//     a few groups' live slots into it, marking each moved slot (moved).
//     New keys go to the next table. A key is live in one table only.
//     A reader starts at the current table and goes on to the next one
//     when it finds the key moved, dead or absent there, so a move or a
//     growth that overlaps its lookup never hides a key. An old table is
//     garbage once no reader holds it.
//
// The seed is drawn per table: layout and iteration order differ between
// processes, as a Go map's do, and nothing may depend on them.
type keyTable struct {
	seed maphash.Seed
	// mask is all ones; a test narrows it to make hashes collide.
	mask uint64
	// cur is where lookups start: the table being moved from while the
	// table grows, else the only one.
	cur atomic.Pointer[ktTable]

	// The writer's own state.
	next      *ktTable // the table cur moves into; nil unless growing
	moveAt    int      // cur's first group not yet moved
	step      int      // groups moved at each change
	live      int      // keys held
	iterating int      // all() walks under way: nothing moves meanwhile
}

// ktTable is one generation of a keyTable: groups of eight slots whose
// control bytes sit in one word, read and written whole.
type ktTable struct {
	groups []ktGroup
	filled int // slots filled, dead or moved ones included (the writer's)
	// next is the table this one's keys move into, set before any key
	// goes there.
	next atomic.Pointer[ktTable]
}

type ktGroup struct {
	ctrl  atomic.Uint64 // byte i: 0 while slot i is empty, else its tag
	slots [groupSlots]ktSlot
}

type ktSlot struct {
	h   uint64 // written before the slot is visible, then never
	n   int    // the key's length, likewise
	key atomic.Pointer[byte]
	v   atomic.Pointer[Value] // nil: the key is dead here; moved: look in next
}

const (
	groupSlots = 8
	// A table grows past 7/8 of its slots filled, as a Go map's.
	maxFillNum, maxFillDen = 7, 8
	ctrlLows               = 0x0101010101010101
	ctrlHighs              = 0x8080808080808080
)

// moved marks a slot whose key went on to the next table.
var moved = new(Value)

// newKeyTable is an empty table.
func newKeyTable() *keyTable {
	t := &keyTable{}
	t.init()
	return t
}

func (t *keyTable) init() {
	t.seed, t.mask = maphash.MakeSeed(), ^uint64(0)
	t.cur.Store(newKtTable(1))
}

// newKtTable is an empty table. Empty is zero, so its memory is touched
// only as slots fill: writing every control byte of a new table of 512k
// groups first held the writer for about 100 ms of page faults.
func newKtTable(groups int) *ktTable {
	return &ktTable{groups: make([]ktGroup, groups)}
}

func (t *keyTable) hash(key string) uint64 { return maphash.String(t.seed, key) & t.mask }

// tag is a hash's control byte: its high bit marks a filled slot; the
// group index comes from the bits above the tag's seven.
func tag(h uint64) uint64 { return h&0x7f | 0x80 }

// matches has the high bit set in each filled slot's byte of ctrl equal to
// tg, and perhaps in other filled ones' (each candidate's key is compared).
func matches(ctrl, tg uint64) uint64 {
	x := ctrl ^ (ctrlLows * tg)
	return (x - ctrlLows) &^ x & ctrl & ctrlHighs
}

// empties has the high bit set in each empty slot's byte of ctrl.
func empties(ctrl uint64) uint64 { return ^ctrl & ctrlHighs }

// find is the slot holding key in tb, nil if none does. It stops at the
// first group with an empty slot on the key's probe sequence: a key goes
// into the first group that had room, and slots are never emptied.
func (tb *ktTable) find(h uint64, key string) *ktSlot {
	mask := uint64(len(tb.groups) - 1)
	g := (h >> 7) & mask
	for i := uint64(1); ; i++ {
		grp := &tb.groups[g]
		ctrl := grp.ctrl.Load()
		for m := matches(ctrl, tag(h)); m != 0; m &= m - 1 {
			s := &grp.slots[bits.TrailingZeros64(m)/8]
			if s.h == h && s.n == len(key) && unsafe.String(s.key.Load(), s.n) == key {
				return s
			}
		}
		if empties(ctrl) != 0 || i > mask {
			return nil
		}
		g = (g + i) & mask // triangular probing visits every group
	}
}

func (t *keyTable) len() int { return t.live }

// get is the value filed under key, nil if none. Any goroutine may call
// it beside the writer.
func (t *keyTable) get(key string) *Value {
	_, v := t.liveSlot(t.hash(key), key)
	return v
}

// getBytes is get for a key held in bytes, without copying them.
func (t *keyTable) getBytes(key []byte) *Value {
	return t.get(unsafe.String(unsafe.SliceData(key), len(key)))
}

// liveSlot is the slot where key is live and the value it held when
// read (a second read could find it moved), or nils.
func (t *keyTable) liveSlot(h uint64, key string) (*ktSlot, *Value) {
	for tb := t.cur.Load(); tb != nil; tb = tb.next.Load() {
		if s := tb.find(h, key); s != nil {
			if v := s.v.Load(); v != nil && v != moved {
				return s, v
			}
		}
	}
	return nil, nil
}

// newest is the table new keys go to.
func (t *keyTable) newest() *ktTable {
	if t.next != nil {
		return t.next
	}
	return t.cur.Load()
}

// set files v under key. The slot takes this key's string even when the
// key was there, as a Go map's assignment does: the string may point into
// v's own entry (keyInside), and the old one into the value replaced.
func (t *keyTable) set(key string, v *Value) {
	h := t.hash(key)
	tb := t.newest()
	var dead *ktSlot // key's dead slot in tb, which its own key revives
	for at := t.cur.Load(); at != nil; at = at.next.Load() {
		if s := at.find(h, key); s != nil {
			if x := s.v.Load(); x != nil && x != moved {
				s.key.Store(unsafe.StringData(key))
				s.v.Store(v)
				t.moveSome()
				return
			}
			if at == tb {
				dead = s
			}
		}
	}
	if dead != nil {
		dead.key.Store(unsafe.StringData(key))
		dead.v.Store(v)
	} else {
		tb.insert(h, key, v)
	}
	t.live++
	if tb.filled*maxFillDen > len(tb.groups)*groupSlots*maxFillNum {
		t.grow()
	}
	t.moveSome()
}

// insert fills a new slot of tb for key, which tb does not hold: in the
// first group on its probe sequence with room.
func (tb *ktTable) insert(h uint64, key string, v *Value) {
	mask := uint64(len(tb.groups) - 1)
	g := (h >> 7) & mask
	for i := uint64(1); ; i++ {
		grp := &tb.groups[g]
		ctrl := grp.ctrl.Load()
		if empty := empties(ctrl); empty != 0 {
			j := bits.TrailingZeros64(empty) / 8
			s := &grp.slots[j]
			s.h, s.n = h, len(key)
			s.key.Store(unsafe.StringData(key))
			s.v.Store(v)
			grp.ctrl.Store(ctrl&^(0xff<<(8*j)) | tag(h)<<(8*j))
			tb.filled++
			return
		}
		if i > mask {
			// Unreachable: a table grows before it fills (set), and a
			// move ends before its next table does (grow's step).
			panic("keyspace: key table full")
		}
		g = (g + i) & mask
	}
}

// grow starts moving the keys into a table twice their number's room, or
// finishes a move under way whose next table filled first (many keys
// created while few live ones moved), and then starts the next.
func (t *keyTable) grow() {
	if t.next != nil {
		t.finishMove()
	}
	cur := t.cur.Load()
	groups := 1
	for groups*groupSlots*maxFillNum < 2*t.live*maxFillDen {
		groups *= 2
	}
	next := newKtTable(groups)
	cur.next.Store(next)
	t.next, t.moveAt = next, 0
	// Enough groups a change that the move ends before the next table
	// fills with new keys (one a change at most): room is how many it
	// takes beyond the live ones.
	room := max(1, groups*groupSlots*maxFillNum/maxFillDen-t.live)
	t.step = 1 + len(cur.groups)/room
	if t.iterating == 0 && len(cur.groups) <= 8 {
		t.finishMove() // a small table moves at once
	}
}

// moveSome moves step groups of a growth under way.
func (t *keyTable) moveSome() {
	if t.next == nil || t.iterating > 0 {
		return
	}
	cur := t.cur.Load()
	for range t.step {
		if t.moveAt == len(cur.groups) {
			break
		}
		t.moveGroup(&cur.groups[t.moveAt])
		t.moveAt++
	}
	if t.moveAt == len(cur.groups) {
		t.cur.Store(t.next)
		t.next = nil
	}
}

func (t *keyTable) finishMove() {
	cur := t.cur.Load()
	for ; t.moveAt < len(cur.groups); t.moveAt++ {
		t.moveGroup(&cur.groups[t.moveAt])
	}
	t.cur.Store(t.next)
	t.next = nil
}

// moveGroup moves grp's live keys into the next table: each is filled
// there before it is marked moved here, so a reader finds it in one or
// the other.
func (t *keyTable) moveGroup(grp *ktGroup) {
	for s, v := range grp.live() {
		t.next.insert(s.h, unsafe.String(s.key.Load(), s.n), v)
		s.v.Store(moved)
	}
}

// live yields the group's slots where a key is live, with its value.
func (grp *ktGroup) live() iter.Seq2[*ktSlot, *Value] {
	return func(yield func(*ktSlot, *Value) bool) {
		ctrl := grp.ctrl.Load()
		for j := range groupSlots {
			if ctrl>>(8*j)&0x80 == 0 {
				continue // empty
			}
			s := &grp.slots[j]
			if v := s.v.Load(); v != nil && v != moved && !yield(s, v) {
				return
			}
		}
	}
}

// del removes key, and reports whether it was there.
func (t *keyTable) del(key string) bool {
	s, _ := t.liveSlot(t.hash(key), key)
	if s == nil {
		return false
	}
	s.v.Store(nil)
	t.live--
	t.moveSome()
	return true
}

// all yields every key and its value, in no order. The body may delete
// keys, and set those already there, as in a range over a Go map; no key
// moves between tables while it runs, so none is yielded twice.
func (t *keyTable) all() iter.Seq2[string, *Value] {
	return func(yield func(string, *Value) bool) {
		t.iterating++
		defer func() { t.iterating-- }()
		for tb := t.cur.Load(); tb != nil; tb = tb.next.Load() {
			for g := range tb.groups {
				for s, v := range tb.groups[g].live() {
					if !yield(unsafe.String(s.key.Load(), s.n), v) {
						return
					}
				}
			}
		}
	}
}

// takeAll empties t and returns a table holding what t held, for a walk
// after the db's lock is let go (FLUSHDB). Readers that started before
// may still find the old keys; those after find none.
func (t *keyTable) takeAll() *keyTable {
	old := &keyTable{seed: t.seed, mask: t.mask, next: t.next, moveAt: t.moveAt, step: t.step, live: t.live}
	old.cur.Store(t.cur.Load())
	t.next, t.moveAt, t.step, t.live = nil, 0, 0, 0
	t.cur.Store(newKtTable(1))
	return old
}
