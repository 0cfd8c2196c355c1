package keyspace

import (
	"hash/maphash"
	"iter"
	"math/bits"
	"strings"
	"sync/atomic"
	"unsafe"

	"github.com/bfserver/bfserver/engine"
	"github.com/bfserver/bfserver/internal/release"
)

// keyTable is a database's keys: a hash table that one writer changes
// (Apply, under the db's lock) while readers look keys up without any
// lock (Keyspace.Lookup).
//
// Why not a Go map behind the db's RWMutex: every lookup then wrote the
// lock's reader count, one cache line that every core's lookups share;
// two cores looking up together managed one lookup every 66–74 ns, one
// core alone one every 28 ns (BenchmarkLookupParallel): more cores made
// lookups slower, not faster. And a Go map cannot be read while it is
// written.
//
// The layout is a Go map's (extendible hashing): a directory, indexed by
// the hash's top bits, of small open-addressing tables of eight-slot
// groups whose control bytes sit in one word. A full table is replaced
// by two of its size (split by the next hash bit) or, while small, by one
// twice its size: the keys move a table at a time, and memory grows by a
// table at a time. One table of a million keys' size instead, allocated
// at once, made the collector charge the writer for it: creating a
// million filters saw a write wait 185-224 ms.
//
// Why the hash is kept in the slot: a table is rebuilt from its slots'
// hashes, never touching the keys, whose bytes live in their filters'
// entries (keyedBloomEntry), scattered over the heap: rehashing a Go
// map's string keys cost a cache miss a key, 18% of the state machine's
// CPU while a million small filters were created.
//
// How readers stay safe without a lock:
//   - A slot is filled once: its hash and key's length are written, then
//     its key and value, then the control byte that makes it visible. A
//     slot is never emptied nor given to another key, so a reader that
//     saw its control byte reads the hash and length written before it.
//     Its key pointer changes only to equal bytes (set takes the new
//     string), its value by one store (internal/release).
//   - A deleted key's slot keeps its key with a nil value (dead); only its
//     own key fills it again. Its key is then a copy, not the string in
//     the deleted filter's entry (keyInside), which it would keep alive.
//   - A table being replaced first links its replacements (next), then
//     copies each live key into one and marks it moved, then the directory
//     names the replacements. A reader that finds its key moved, dead or
//     absent in a table goes on to the replacement its hash picks, so a
//     rebuild that overlaps its lookup never hides a key. A replaced table
//     is garbage once no reader holds it.
//
// The seed is drawn per table: layout and iteration order differ between
// processes, as a Go map's do, and nothing may depend on them.
type keyTable struct {
	seed maphash.Seed
	// mask is all ones; a test narrows it to make hashes collide.
	mask uint64
	dir  atomic.Pointer[ktDir]
	live int // keys held (the writer's)
}

// ktDir maps a hash's top depth bits to the table holding it; a table of
// local depth d fills the 1<<(depth-d) entries its top d bits name. It is
// replaced, never changed.
type ktDir struct {
	depth  uint8
	tables []*ktTable
}

// ktTable is one table: groups of eight slots whose control bytes sit in
// one word, read and written whole.
type ktTable struct {
	groups []ktGroup
	depth  uint8 // the hash's top bits all its keys share
	filled int   // slots filled, dead ones included (the writer's)
	live   int   // slots live (the writer's)
	// next are the tables replacing this one, by the hash's bit after
	// depth (the same table twice when it grew or was rebuilt), set before
	// any key moves there.
	next atomic.Pointer[[2]*ktTable]
}

// A group's control word and a slot's key and value are loaded with
// sync/atomic and stored with internal/release by the table's one writer:
// on amd64 plain stores, which publish in order without the wait of a
// locked one (three of those a slot were about a tenth of creating a
// million small filters).
type ktGroup struct {
	ctrl  uint64 // byte i: 0 while slot i is empty, else its tag
	slots [groupSlots]ktSlot
}

// A group's size is a multiple of 8 bytes, so that every ctrl in a
// slice of groups is 8-aligned, as 64-bit atomics need on 32-bit
// platforms (an atomic.Uint64 would align itself; a plain uint64 does
// not).
var _ [0]struct{} = [unsafe.Sizeof(ktGroup{}) % 8]struct{}{}

func (g *ktGroup) loadCtrl() uint64   { return atomic.LoadUint64(&g.ctrl) }
func (g *ktGroup) storeCtrl(c uint64) { release.Store64(&g.ctrl, c) }

type ktSlot struct {
	h   uint64         // written before the slot is visible, then never
	n   int            // the key's length, likewise
	key unsafe.Pointer // *byte: the key's bytes
	v   unsafe.Pointer // *Value; nil: the key is dead here; moved: look in next
}

func (s *ktSlot) loadKey() string { return unsafe.String((*byte)(atomic.LoadPointer(&s.key)), s.n) }
func (s *ktSlot) storeKey(key string) {
	release.StorePointer(&s.key, unsafe.Pointer(unsafe.StringData(key)))
}
func (s *ktSlot) loadV() *Value   { return (*Value)(atomic.LoadPointer(&s.v)) }
func (s *ktSlot) storeV(v *Value) { release.StorePointer(&s.v, unsafe.Pointer(v)) }

const (
	groupSlots = 8
	// A table is replaced past 7/8 of its slots filled, as a Go map's.
	maxFillNum, maxFillDen = 7, 8
	// maxGroups is the most groups a table grows to before it splits
	// (4,096 slots, 132 KiB): a split moves at most this many keys.
	maxGroups = 512
	// maxDepth bounds splitting, and the directory to a million entries
	// (8 MiB): a table of that depth grows instead. Real hashes reach it
	// past three billion keys; only hashes that share their top bits
	// (a test's narrowed ones) come sooner.
	maxDepth  = 20
	ctrlLows  = 0x0101010101010101
	ctrlHighs = 0x8080808080808080
)

// moved marks a slot whose key went on to a replacing table.
var moved = new(Value)

// newKeyTable is an empty table.
func newKeyTable() *keyTable {
	t := &keyTable{}
	t.init()
	return t
}

func (t *keyTable) init() {
	t.seed, t.mask = maphash.MakeSeed(), ^uint64(0)
	t.dir.Store(&ktDir{tables: []*ktTable{newKtTable(1, 0)}})
}

// newKtTable is an empty table; empty is zero, so its memory is touched
// only as its slots fill.
func newKtTable(groups int, depth uint8) *ktTable {
	return &ktTable{groups: make([]ktGroup, groups), depth: depth}
}

func (t *keyTable) hash(key string) uint64 { return maphash.String(t.seed, key) & t.mask }

// tag is a hash's control byte: its high bit marks a filled slot. The
// group comes from the bits above the tag's seven, the directory entry
// from the top ones.
func tag(h uint64) uint64 { return h&0x7f | 0x80 }

// matches has the high bit set in each filled slot's byte of ctrl equal to
// tg, and perhaps in other filled ones' (each candidate's key is compared).
func matches(ctrl, tg uint64) uint64 {
	x := ctrl ^ (ctrlLows * tg)
	return (x - ctrlLows) &^ x & ctrl & ctrlHighs
}

// empties has the high bit set in each empty slot's byte of ctrl.
func empties(ctrl uint64) uint64 { return ^ctrl & ctrlHighs }

// topBits is h's top d bits.
func topBits(h uint64, d uint8) uint64 {
	if d == 0 {
		return 0
	}
	return h >> (64 - d)
}

// table is the directory's table for h.
func (d *ktDir) table(h uint64) *ktTable { return d.tables[topBits(h, d.depth)] }

// find is the slot holding key in tb, nil if none does. It stops at the
// first group with an empty slot on the key's probe sequence: a key goes
// into the first group that had room, and slots are never emptied.
func (tb *ktTable) find(h uint64, key string) *ktSlot {
	mask := uint64(len(tb.groups) - 1)
	g := (h >> 7) & mask
	for i := uint64(1); ; i++ {
		grp := &tb.groups[g]
		ctrl := grp.loadCtrl()
		for m := matches(ctrl, tag(h)); m != 0; m &= m - 1 {
			s := &grp.slots[bits.TrailingZeros64(m)/8]
			if s.h == h && s.n == len(key) && s.loadKey() == key {
				return s
			}
		}
		if empties(ctrl) != 0 || i > mask {
			return nil
		}
		g = (g + i) & mask // triangular probing visits every group
	}
}

// prefetch starts loading the first line of the group where a lookup of
// key starts (its control word), without waiting for it: the state
// machine calls it a few commands ahead, so that a lookup's first cache
// miss, which creating a key always takes, overlaps the work before it.
func (t *keyTable) prefetch(key []byte) {
	h := t.hash(unsafe.String(unsafe.SliceData(key), len(key)))
	tb := t.dir.Load().table(h)
	engine.PrefetchLine(unsafe.Pointer(&tb.groups[(h>>7)&uint64(len(tb.groups)-1)]))
}

func (t *keyTable) len() int { return t.live }

// get is the value filed under key, nil if none. Any goroutine may call
// it beside the writer.
func (t *keyTable) get(key string) *Value {
	h := t.hash(key)
	tb := t.dir.Load().table(h)
	for {
		if s := tb.find(h, key); s != nil {
			if v := s.loadV(); v != nil && v != moved {
				return v
			}
		}
		next := tb.next.Load()
		if next == nil {
			return nil
		}
		tb = next[topBits(h, tb.depth+1)&1]
	}
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
	tb := t.dir.Load().table(h) // the writer's directory is current: no key is moved there
	if s := tb.find(h, key); s != nil {
		if s.loadV() == nil { // dead: its own key revives it
			tb.live++
			t.live++
		}
		s.storeKey(key)
		s.storeV(v)
		return
	}
	tb.insert(h, key, v)
	tb.live++
	t.live++
	if tb.filled > len(tb.groups)*groupSlots*maxFillNum/maxFillDen {
		t.replace(tb)
	}
}

// insert fills a new slot of tb for key, which tb does not hold: in the
// first group on its probe sequence with room.
func (tb *ktTable) insert(h uint64, key string, v *Value) {
	mask := uint64(len(tb.groups) - 1)
	g := (h >> 7) & mask
	for i := uint64(1); ; i++ {
		grp := &tb.groups[g]
		ctrl := grp.loadCtrl()
		if empty := empties(ctrl); empty != 0 {
			j := bits.TrailingZeros64(empty) / 8
			s := &grp.slots[j]
			s.h, s.n = h, len(key)
			s.storeKey(key)
			s.storeV(v)
			grp.storeCtrl(ctrl | tag(h)<<(8*j))
			tb.filled++
			return
		}
		if i > mask {
			// Unreachable: a table is replaced before it fills (set), and
			// its replacements have room for its live keys.
			panic("keyspace: key table full")
		}
		g = (g + i) & mask
	}
}

// replace rebuilds a full table: at its size when most of it is dead
// keys, twice its size while small, else split in two by the next bit.
func (t *keyTable) replace(tb *ktTable) {
	n := len(tb.groups)
	var next [2]*ktTable
	switch {
	case tb.live*2*maxFillDen <= n*groupSlots*maxFillNum:
		next[0] = newKtTable(n, tb.depth)
		next[1] = next[0]
	case n < maxGroups || tb.depth >= maxDepth:
		next[0] = newKtTable(2*n, tb.depth)
		next[1] = next[0]
	default:
		next = [2]*ktTable{newKtTable(n, tb.depth+1), newKtTable(n, tb.depth+1)}
	}
	tb.next.Store(&next)
	for g := range tb.groups {
		for s, v := range tb.groups[g].live() {
			dst := next[topBits(s.h, tb.depth+1)&1]
			dst.insert(s.h, s.loadKey(), v)
			dst.live++
			s.storeV(moved)
		}
	}
	t.dir.Store(t.dir.Load().with(tb, next))
}

// with is the directory with tb's entries naming next[0] and next[1].
func (d *ktDir) with(tb *ktTable, next [2]*ktTable) *ktDir {
	nd := &ktDir{depth: d.depth}
	if next[0] != next[1] && tb.depth == d.depth {
		nd.depth++
		nd.tables = make([]*ktTable, 2*len(d.tables))
		for i, x := range d.tables {
			nd.tables[2*i], nd.tables[2*i+1] = x, x
		}
	} else {
		nd.tables = append([]*ktTable(nil), d.tables...)
	}
	for i, x := range nd.tables {
		switch {
		case x != tb:
		case next[0] == next[1]:
			nd.tables[i] = next[0]
		default:
			nd.tables[i] = next[(i>>(nd.depth-tb.depth-1))&1]
		}
	}
	return nd
}

// live yields the group's slots where a key is live, with its value.
func (grp *ktGroup) live() iter.Seq2[*ktSlot, *Value] {
	return func(yield func(*ktSlot, *Value) bool) {
		ctrl := grp.loadCtrl()
		for j := range groupSlots {
			if ctrl>>(8*j)&0x80 == 0 {
				continue // empty
			}
			s := &grp.slots[j]
			if v := s.loadV(); v != nil && v != moved && !yield(s, v) {
				return
			}
		}
	}
}

// del removes key, and reports whether it was there.
func (t *keyTable) del(key string) bool {
	h := t.hash(key)
	tb := t.dir.Load().table(h)
	s := tb.find(h, key)
	if s == nil {
		return false
	}
	old := s.loadV()
	if old == nil {
		return false
	}
	if keyInside(old, s.loadKey()) {
		s.storeKey(strings.Clone(key)) // equal bytes: readers still match
	}
	s.storeV(nil)
	tb.live--
	t.live--
	return true
}

// all yields every key and its value, in no order. The body may delete
// keys, and set those already there, as in a range over a Go map (no
// table is replaced then).
func (t *keyTable) all() iter.Seq2[string, *Value] {
	return func(yield func(string, *Value) bool) {
		var last *ktTable
		for _, tb := range t.dir.Load().tables {
			if tb == last {
				continue // a table fills consecutive entries
			}
			last = tb
			for g := range tb.groups {
				for s, v := range tb.groups[g].live() {
					if !yield(s.loadKey(), v) {
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
	old := &keyTable{seed: t.seed, mask: t.mask, live: t.live}
	old.dir.Store(t.dir.Load())
	t.live = 0
	t.dir.Store(&ktDir{tables: []*ktTable{newKtTable(1, 0)}})
	return old
}
