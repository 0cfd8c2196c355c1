package keyspace

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"runtime"
	"strings"
	"sync/atomic"
	"unsafe"

	"github.com/bfserver/bfserver/engine"
	"github.com/bfserver/bfserver/scalable"
	"github.com/bfserver/bfserver/sketch/window"
)

// A key's durable image is its metadata (kind, expiry, dump header,
// sketch header or string) and the chunks of its bit, bucket, counter or
// node arrays, each addressed by
// (part, index): part is the link or sub-filter, index the ChunkSize piece.
// Chunks never written stay absent and load as zeros.

// ErrCorruptImage: a stored record does not decode. The node must stop
// rather than serve a state that may differ from its peers'.
var ErrCorruptImage = errors.New("keyspace: corrupt stored image")

// ErrCutAborted: the walk of a cut stopped because its owner gave it up
// (Cut.Abort): a snapshot needs a cut now, and takes this one's keys with
// it once this one is restored.
var ErrCutAborted = errors.New("keyspace: the cut was given up for a newer one")

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
// image can be brought to exactly that point.
//
// Taking it (Keyspace.Cut) costs Apply a pointer swap: the record becomes
// the cut's and a fresh one starts. The image write then walks the cut
// (Walk) while Apply goes on, and reads every key as it was at the cut:
//
//   - A key is captured (its metadata encoded, its change records taken,
//     its chunks held) once, by whichever comes first: the walk reaching
//     it, or Apply about to change it (every change to a key looks it up
//     first, through get, or replaces it, through set or remove). Until
//     then it is as it was at the cut.
//   - A held chunk that Apply is about to change is copied first
//     (engine.Freeze, copy-on-write), within the cut's budget; the walk
//     reads the copy. A small key the walk captures is copied at once and
//     not held at all.
//
// If the write fails, Restore puts the record back and the next cut
// carries it again.
type Cut struct {
	k *Keyspace
	// Keys are the keys walked so far, in walk (chunk-key) order: what
	// the image's marks and metadata need of each, by value.
	Keys WalkedKeys
	// kept is what Restore merges back of the walked keys changed in
	// place (not Full, not gone): the chunks their captures took. Only
	// this is kept of them, not their captures, whose slab slots the walk
	// reuses: a flush of a million keys changed in place otherwise kept
	// 336 bytes of pointers a key until the cut ended.
	kept blocks[engine.Kept]
	// Records are the keyspace's own changed records (version tracking),
	// copied at the cut.
	Records []Record
	head    bool   // the tracking header is among Records
	pages   uint64 // the pages of missing keys' stamps among Records

	pending map[dirtyKey]change // the change record taken; read only
	// fresh and lo..hi are the rest of it (Keyspace.fresh): keys created
	// fresh, known from their values' marks.
	fresh   blocks[dirtyKey]
	lo, hi  uint64
	freeze  *engine.Freeze // its lock guards what follows
	early   map[dirtyKey]*CutKey
	cursor  dirtyKey // the last key the walk captured
	scratch []byte   // the walk's copy of the small key it writes now
	// slab and metas are where captures put their keys and metadata, a
	// few hundred at a time: a cut of a million small filters would
	// otherwise allocate several objects a key, and the collector's work
	// behind them slowed every write of the node.
	slab   []CutKey
	metas  []byte
	walked bool // cursor is set
	ended  bool
	// stash holds the values a FLUSHDB or FLUSHALL took away from the
	// cut's keys the walk had not reached (nor Apply captured): no write
	// reaches them any more, so they stay as they were at the cut, and
	// capture takes them from here. Captured at the flush instead, a
	// million small filters' captures held about 570 MB until the walk
	// reached each.
	stash   map[dirtyKey]*Value
	aborted atomic.Bool
}

// Walked is a key the walk has written, as the image's later sections
// (marks, metadata) need it. A cut used to keep every key's whole
// capture (a CutKey, ~320 bytes of pointers) until its table was
// written: with a million filters just created, that doubled the live
// heap for the length of the flush and the collector scanned all of it
// at every cycle, while the writes creating them waited.
type Walked struct {
	Key     string
	meta    []byte
	largest uint64
	DB      uint8
	// Full: the key was created, replaced or removed (CutKey.Full).
	Full bool
	gone bool
}

// Gone reports whether the key no longer exists at the cut.
func (w *Walked) Gone() bool { return w.gone }

// WalkedKeys are a cut's walked keys, kept in pages (pages: never one
// allocation of them all).
type WalkedKeys struct{ p pages[Walked] }

// Len is how many keys were walked.
func (w *WalkedKeys) Len() int { return w.p.Len() }

// At is the i'th key walked, 0 <= i < Len.
func (w *WalkedKeys) At(i int) *Walked { return w.p.at(i) }

// WalkedKeysOf lists ws as a walk would have (tests of what reads them).
func WalkedKeysOf(ws ...Walked) *WalkedKeys {
	w := new(WalkedKeys)
	for _, x := range ws {
		w.p.add(x)
	}
	return w
}

// Largest is the size of the key's largest array at the cut, 0 when it
// holds none or is gone.
func (w *Walked) Largest() uint64 { return w.largest }

// Meta is the key's stored metadata at the cut, or nil when it is gone.
func (w *Walked) Meta() []byte { return w.meta }

// CutKey is one changed key of a Cut, as it was at the cut.
type CutKey struct {
	DB  uint8
	Key string
	// Full: drop every stored chunk of the key before writing its chunks
	// (it was created, replaced or removed), unless Fresh: created where
	// the image holds nothing of it, so there is nothing to drop.
	Full    bool
	Fresh   bool
	cut     *Cut
	gone    bool
	meta    []byte
	largest uint64
	parts   []cutPart
	kept    []engine.Kept // once written (release): what Restore merges back
	// Room for a key of one array (nearly every key): its part, its hold
	// when the walk copies it whole, and what Restore needs of it.
	part0 [1]cutPart
	hold0 engine.Hold
	kept0 [1]engine.Kept
}

// release ends the key's holds once it is written, keeping only what
// Restore needs of them (a key changed in place: the chunks its capture
// took), so that a cut of a million keys keeps tens of bytes for each
// until it ends rather than its holds.
func (ck *CutKey) release() {
	if !ck.Full && !ck.gone && len(ck.parts) == 1 {
		ck.kept = ck.kept0[:0]
	}
	for _, p := range ck.parts {
		p.h.Release()
		if !ck.Full && !ck.gone {
			ck.kept = append(ck.kept, p.h.Kept())
		}
	}
	ck.parts = nil
}

type cutPart struct {
	index uint32
	h     *engine.Hold
}

// DefaultCutBudget is how many bytes a cut's copies of chunks Apply
// changed while it was written may hold at once in memory
// (docs/OPERATIONS.md, memory); past it they go to the cut's spill
// (SetSpill), a write of 64 KiB each.
const DefaultCutBudget = 32 << 20

// inlineBytes: a key the walk captures whose arrays hold no more is
// copied whole at once rather than held (no mark on its arrays, no
// copy-on-write: the walk writes it next).
const inlineBytes = 256 << 10

// SetCutBudget sets the budget of the cuts taken from now on
// (DefaultCutBudget when never set).
func (k *Keyspace) SetCutBudget(n uint64) { k.cutBudget = n }

// TrackChanges starts recording changes for Cut. Keys loaded in an older
// form (rewrite) are recorded at once, to be written whole.
func (k *Keyspace) TrackChanges() {
	k.dirty, k.markedOK = map[dirtyKey]change{}, false
	k.nextEpoch()
	for _, dk := range k.rewrite {
		k.dirty[dk] = whole
	}
	k.rewrite = nil
}

// Cut takes the change record and starts a new one. The caller excludes
// Apply for the call only (it costs O(1) and the copy of the WATCH pages
// that changed); Walk, Records and the chunks then read the state at the
// cut with Apply going on. A cut not walked to its end must be ended
// (Walk does, Restore does); the next Cut ends the one before.
func (k *Keyspace) Cut() *Cut {
	if prev := k.cutting.Load(); prev != nil {
		prev.end()
	}
	budget := k.cutBudget
	if budget == 0 {
		budget = DefaultCutBudget
	}
	c := &Cut{k: k, pending: k.dirty, fresh: k.fresh, lo: k.epochLo, hi: k.epoch, freeze: engine.NewFreeze(budget), early: map[dirtyKey]*CutKey{}}
	if k.dirty != nil {
		k.dirty = map[dirtyKey]change{}
		k.nextEpoch()
	}
	k.markedOK = false
	k.forget() // the next lookup of every key goes through the cut
	k.cutWatch(c)
	if len(c.pending) > 0 || c.fresh.Len() > 0 {
		k.cutting.Store(c)
	} else {
		c.ended = true
	}
	return c
}

// Len is the number of keys the cut changes, at most: a key created
// fresh and then changed otherwise counts twice.
func (c *Cut) Len() int { return len(c.pending) + c.fresh.Len() }

// marks reports whether v's mark is one of the cut's: its key is in
// fresh. The caller is Apply, or holds the freeze's lock.
func (c *Cut) marks(v *Value) bool {
	if c.fresh.Len() == 0 || c.k.watch.on.Load() {
		return false
	}
	m := v.stamp()
	return m >= c.lo && m <= c.hi && m != 0
}

// has reports whether the cut changes key, whose value is v now.
func (c *Cut) has(dk dirtyKey, v *Value) bool {
	if v != nil && c.marks(v) {
		return true
	}
	if len(c.pending) == 0 {
		return false
	}
	_, ok := c.pending[dk]
	return ok
}

// chunkOrder orders keys as their chunks are stored: database, key
// length, key.
func chunkOrder(a, b dirtyKey) int {
	if a.db != b.db {
		return int(a.db) - int(b.db)
	}
	if len(a.key) != len(b.key) {
		return len(a.key) - len(b.key)
	}
	return strings.Compare(a.key, b.key)
}

// walkYield is how many keys the walk captures between its yields to
// Apply (a few hundred microseconds' work).
const walkYield = 64

// Walk captures every key of the cut, in the order its chunks are stored
// (database, key length, key), and calls fn with each; the key's holds
// end when fn returns, and the cut's when Walk does. It runs beside
// Apply.
func (c *Cut) Walk(fn func(ck *CutKey) error) error {
	defer c.end()
	if c.ended {
		return nil
	}
	keys, err := c.walkOrder()
	if err != nil {
		return err
	}
	// done is the walk's last capture once written, when nothing needs
	// it any more: its slab slot is taken again by the next capture if
	// no early one came after it (most keys of a large cut then cost the
	// walk no allocation).
	var done *CutKey
	for i := range keys.Len() {
		dk := *keys.at(i)
		if c.aborted.Load() {
			return ErrCutAborted
		}
		if i%walkYield == walkYield-1 {
			// Apply waits on the freeze's lock for a key the walk has not
			// captured yet; each Unlock readies it on this P, and the
			// walk, never blocking, kept the P and took the lock again:
			// Apply sat runnable 30-40 ms at a time (an execution trace
			// of a flush of a million small filters), and writes with it.
			runtime.Gosched()
		}
		c.freeze.Lock()
		if n := len(c.slab); done != nil && n > 0 && &c.slab[n-1] == done {
			c.slab = c.slab[:n-1]
		}
		done = nil
		ck := c.early[dk]
		early := ck != nil
		if early {
			delete(c.early, dk)
		} else {
			ck = c.capture(dk, false)
		}
		c.cursor, c.walked = dk, true
		c.freeze.Unlock()
		c.Keys.p.add(Walked{Key: ck.Key, meta: ck.meta, largest: ck.largest, DB: ck.DB, Full: ck.Full, gone: ck.gone})
		err := fn(ck)
		ck.release()
		if !ck.Full && !ck.gone {
			for _, kb := range ck.kept {
				c.kept.add(kb)
			}
		}
		if !early {
			done = ck
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// Abort makes the walk stop at its next key or chunk with ErrCutAborted;
// it may be called from any goroutine. The cut is then to be restored.
func (c *Cut) Abort() { c.aborted.Store(true) }

// Aborted reports whether the cut was given up (Abort): its writer stops
// at the next key it writes, after the walk too.
func (c *Cut) Aborted() bool { return c.aborted.Load() }

// end stops the cut's holds: nothing it holds is read any more.
func (c *Cut) end() {
	c.freeze.Lock()
	ended := c.ended
	c.ended = true
	c.stash = nil // nothing captures any more
	c.freeze.Unlock()
	if !ended {
		c.freeze.End()
		c.k.cutting.CompareAndSwap(c, nil)
	}
}

// Copied is what the cut's copy-on-write cost: chunks some lines of which
// were copied, the lines copied, the most bytes held in copies at once,
// and how often Apply waited on the budget.
func (c *Cut) Copied() (chunks, lines, peak, waits uint64) {
	c.freeze.Lock()
	defer c.freeze.Unlock()
	return c.freeze.Copies, c.freeze.Lines, c.freeze.Peak, c.freeze.Waits
}

// Spilled is how many chunks Apply put in the cut's spill (SetSpill)
// rather than wait on the budget.
func (c *Cut) Spilled() uint64 {
	c.freeze.Lock()
	defer c.freeze.Unlock()
	return c.freeze.Spills
}

// SetSpill gives the cut a scratch file of at most limit bytes for the
// copies past its budget (engine.Freeze.SetSpill), so that Apply never
// waits for the walk. The caller keeps it open until the walk returns.
func (c *Cut) SetSpill(s engine.Spill, limit int64) { c.freeze.SetSpill(s, limit) }

// capture records key dk as it is now, which is as it was at the cut:
// nothing changed it since (before would have captured it first). The
// freeze's lock is held; byApply says the caller is Apply (which owns
// the key tables) rather than the walk.
func (c *Cut) capture(dk dirtyKey, byApply bool) *CutKey {
	d := c.k.db(dk.db)
	var v *Value
	if sv, ok := c.stash[dk]; ok {
		v = sv
		delete(c.stash, dk)
	} else if byApply {
		v = d.keys.get(dk.key)
	} else {
		d.mu.RLock()
		v = d.keys.get(dk.key)
		d.mu.RUnlock()
	}
	if len(c.slab) == cap(c.slab) {
		c.slab = make([]CutKey, 0, 256)
	}
	var ch change
	if len(c.pending) > 0 {
		ch = c.pending[dk]
	}
	if v != nil && c.marks(v) {
		ch = max(ch, fresh)
	}
	c.slab = append(c.slab, CutKey{DB: dk.db, Key: dk.key, Full: ch != inPlace || v == nil, Fresh: ch == fresh && v != nil, cut: c, gone: v == nil})
	ck := &c.slab[len(c.slab)-1]
	if v == nil {
		return ck
	}
	if cap(c.metas)-len(c.metas) < 512 {
		c.metas = make([]byte, 0, 64<<10)
	}
	// Appended in place (or, when it is longer than the room left, where
	// append moves it: the metadata before keeps the old array).
	from := len(c.metas)
	c.metas = appendMeta(c.metas, v, c.k.stampOf(v))
	ck.meta = c.metas[from:len(c.metas):len(c.metas)]
	ck.parts = ck.part0[:0]
	total := partsSize(v)
	// A small key the walk captures is copied whole into the cut's
	// scratch, which the walk reuses for the next key once this one is
	// written.
	var scratch []byte
	if !byApply && total <= inlineBytes {
		if uint64(cap(c.scratch)) < total {
			c.scratch = make([]byte, max(total, 4096))
		}
		scratch = c.scratch[:total]
	}
	eachPart(v, func(part uint32, size uint64, dp *engine.Dirty, read func([]byte, uint64)) {
		ck.largest = max(ck.largest, size)
		var h *engine.Hold
		if scratch != nil {
			var inline []byte
			inline, scratch = scratch[:size:size], scratch[size:]
			if len(ck.parts) == 0 {
				h = &ck.hold0
			} else {
				h = new(engine.Hold)
			}
			c.freeze.HoldIn(h, dp, size, read, ck.Full, inline)
		} else {
			h = c.freeze.Hold(dp, size, read, ck.Full, nil)
		}
		ck.parts = append(ck.parts, cutPart{part, h})
	})
	return ck
}

// before is Apply's call before it changes (or replaces, or removes) a
// key: a key of the cut not yet captured is captured now, as it still is
// at the cut.
func (c *Cut) before(dbi uint8, key string, v *Value) {
	dk := dirtyKey{dbi, key}
	if !c.has(dk, v) {
		return
	}
	c.freeze.Lock()
	defer c.freeze.Unlock()
	if c.ended || c.early[dk] != nil || c.walked && chunkOrder(dk, c.cursor) <= 0 {
		return
	}
	if _, ok := c.stash[dk]; ok {
		return // flushed: the stash keeps it as it was
	}
	c.early[dk] = c.capture(dk, true)
}

// beforeDB is before for every key of the cut in database dbi (FLUSHDB),
// which stashes the keys' values rather than capture each (see stash).
// A key stashed by an earlier flush keeps that value, as at the cut.
func (c *Cut) beforeDB(dbi uint8) {
	keys := &c.k.db(dbi).keys
	c.freeze.Lock()
	defer c.freeze.Unlock()
	if c.ended {
		return
	}
	put := func(dk dirtyKey) {
		if dk.db != dbi || c.early[dk] != nil || c.walked && chunkOrder(dk, c.cursor) <= 0 {
			return
		}
		if _, ok := c.stash[dk]; ok {
			return
		}
		if c.stash == nil {
			c.stash = map[dirtyKey]*Value{}
		}
		c.stash[dk] = keys.get(dk.key)
	}
	for dk := range c.pending {
		put(dk)
	}
	for dk := range c.fresh.all() {
		put(dk)
	}
}

// captureStash captures every stashed key now: versions are about to be
// tracked (Keyspace.unmark), after which neither a stashed value's mark
// (whether it is fresh) nor its stale stamp may be read. The freeze's
// lock is held.
func (c *Cut) captureStash() {
	for dk := range c.stash {
		c.early[dk] = c.capture(dk, true) // removes it from stash
	}
}

// hold is Apply's hook: before it changes a key, whose value is v, the
// running cut (if any) captures it.
func (k *Keyspace) hold(dbi uint8, key []byte, v *Value) {
	if c := k.cutting.Load(); c != nil {
		c.before(dbi, string(key), v)
	}
}

func (k *Keyspace) holdKey(dbi uint8, key string) {
	if c := k.cutting.Load(); c != nil {
		c.before(dbi, key, k.db(dbi).keys.get(key))
	}
}

// Restore puts a cut whose write failed back into the change record, so
// the next cut writes it again: the keys and, for a key changed in place,
// the chunks it recorded (chunks Apply copied-on-write included: Apply
// has changed them since, so they are to be written again in any case).
// The caller excludes Apply.
func (c *Cut) Restore() {
	c.end()
	k := c.k
	k.watch.head = k.watch.head || c.head
	k.watch.dirty |= c.pages
	if k.dirty == nil {
		return
	}
	// The two records merge into the larger: a cut of a million keys
	// restored beside a few new changes costs those few.
	if len(k.dirty) <= len(c.pending) {
		for dk, ch := range k.dirty {
			c.pending[dk] = max(c.pending[dk], ch)
		}
		k.dirty = c.pending
	} else {
		for dk, ch := range c.pending {
			k.dirty[dk] = max(k.dirty[dk], ch)
		}
	}
	c.pending = nil
	if k.watch.on.Load() || c.hi+1 != k.epochLo {
		// Its marks are gone (unmark), or are not next to the record's:
		// the keys go to the map.
		for dk := range c.fresh.all() {
			k.dirty[dk] = max(k.dirty[dk], fresh)
		}
	} else {
		// Its marks join the record's: the values keep them.
		k.fresh = c.fresh.then(k.fresh)
		k.epochLo = c.lo
	}
	c.fresh = blocks[dirtyKey]{}
	k.voids = true
	// A full key that exists is full in the record already (Full is the
	// record's flag or the key's absence); a key changed in place gets
	// back the chunks its capture took.
	merge := func(ck *CutKey) {
		switch {
		case ck.gone:
			k.dirty[dirtyKey{ck.DB, ck.Key}] = whole
		case !ck.Full:
			for _, p := range ck.parts {
				p.h.Merge()
			}
			for _, kb := range ck.kept {
				kb.Merge()
			}
		}
	}
	for i := range c.Keys.Len() {
		if w := c.Keys.At(i); w.gone {
			k.dirty[dirtyKey{w.DB, w.Key}] = whole
		}
	}
	for kb := range c.kept.all() {
		kb.Merge()
	}
	for _, ck := range c.early {
		merge(ck)
	}
	k.markedOK = false
}

// Gone reports whether the key no longer exists at the cut.
func (ck *CutKey) Gone() bool { return ck.gone }

// Largest is the size of the key's largest array at the cut, 0 when it
// holds none or is gone.
func (ck *CutKey) Largest() uint64 { return ck.largest }

// Meta is the key's stored metadata at the cut, or nil when it is gone.
func (ck *CutKey) Meta() []byte { return ck.meta }

// Chunks reads each chunk the key's image needs into buf (ChunkSize
// bytes, reused) and calls fn with it, in (part, index) order: every
// chunk that is not all zeros for a full key, the changed ones otherwise;
// each as it was at the cut. fn must be done with the data when it
// returns. Only within Walk's call for the key, once.
func (ck *CutKey) Chunks(buf []byte, fn func(Chunk) error) error {
	for _, p := range ck.parts {
		if err := p.h.Read(buf, func(i uint64, data []byte) error {
			if ck.cut.aborted.Load() {
				return ErrCutAborted
			}
			if ck.Full && allZero(data) {
				return nil
			}
			return fn(Chunk{Part: p.index, Index: uint32(i), Data: data})
		}); err != nil {
			return err
		}
	}
	return nil
}

// partsSize is the bytes of a value's bit or bucket arrays (eachPart's
// sizes, without the readers it makes).
func partsSize(v *Value) uint64 {
	var total uint64
	switch {
	case v == nil:
	case v.Kind == KindBloom:
		var one [1]*scalable.Link
		for _, l := range v.Bloom().LinksIn(&one) {
			total += l.BloomParams.Bytes
		}
	case v.Kind == KindCuckoo:
		for _, t := range v.Cuckoo().Tables() {
			total += uint64(len(t.Data))
		}
	case v.Kind == KindWindow:
		total = v.Window().f.Size()
	default:
		if sk := v.Sketch(); sk != nil { // eachPart's one array of a sketch
			total, _, _ = sk.s.Array()
		}
	}
	return total
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
	case KindWindow:
		// One array; the image's hold reads it without the window's lock:
		// Apply marks what it changes in a held chunk (and so has those
		// lines copied) before it changes it, under the freeze's lock.
		f := v.Window().f
		fn(0, f.Size(), f.Dirty(), f.ReadBytes)
	default:
		// A sketch's one array, read as a window's is. Apply is its only
		// writer and excluded here (or is the caller).
		if sk := v.Sketch(); sk != nil {
			size, d, read := sk.s.Array()
			fn(0, size, d, read)
		}
	}
}

// stampOf is v's version stamp: 0 until versions are tracked (ver holds
// the change record's mark until then).
func (k *Keyspace) stampOf(v *Value) uint64 {
	if !k.watch.on.Load() {
		return 0
	}
	return v.stamp()
}

// appendMeta appends the key's stored metadata to b; ver is its stamp
// (stampOf).
func appendMeta(b []byte, v *Value, ver uint64) []byte {
	// The key is captured before Apply changes it: no stamp moves.
	if ver != 0 {
		b = append(b, metaVersionVer, byte(v.Kind))
	} else {
		b = append(b, metaVersion, byte(v.Kind))
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
	case KindWindow:
		return append(b, v.Window().header()...) // its bits are chunks, as a Bloom filter's
	}
	if sk := v.Sketch(); sk != nil {
		return append(b, sk.header()...) // its array is chunks (sketches.go)
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
	kind, expireAt, body := Kind(meta[1]), int64(binary.LittleEndian.Uint64(meta[2:])), meta[10:]
	var stamp uint64
	if meta[0] == metaVersionVer {
		if len(body) < 8 {
			return ErrCorruptImage
		}
		stamp = binary.LittleEndian.Uint64(body)
		if stamp >= 1<<56 {
			return ErrCorruptImage
		}
		body = body[8:]
	}
	var v *Value
	if kind != KindBloom {
		v = new(Value)
	}
	var err error
	switch kind {
	case KindBloom:
		// Laid out as newBloom lays out a new filter: a small one's bits,
		// and its key, in its entry.
		var e *bloomEntry
		var bits []uint64
		if scalable.FirstLinkBytes(body) <= smallBloomWords*8 {
			e, bits, key = smallEntry(key)
		} else {
			e = new(bloomEntry)
		}
		err = scalable.ParseChainHeaderIn(body, maxBytes, &e.chain, bits)
		v = &e.Value
		v.obj = unsafe.Pointer(&e.chain)
	case KindCuckoo:
		var cf *scalable.Cuckoo
		cf, err = scalable.ParseCuckooHeader(body, maxBytes)
		v.obj = unsafe.Pointer(cf)
	case KindString:
		str := string(body)
		v.obj = unsafe.Pointer(&str)
	case KindWindow:
		// The dump header, its bits in chunks; or, as the build of
		// 55b879a wrote it, the whole filter (window.Marshal).
		var f *window.Filter
		if len(body) == window.HeaderSize {
			f, err = window.LoadHeader(body, maxBytes)
		} else if f, err = window.Unmarshal(body, maxBytes); err == nil {
			k.rewrite = append(k.rewrite, dirtyKey{dbi, key})
		}
		if err == nil {
			v.obj = unsafe.Pointer(&Window{f: f})
		} else if errors.Is(err, window.ErrTooLarge) {
			err = ErrTooLarge
		}
	default:
		// The sketch's header, its array in chunks; or the whole sketch
		// (Marshal), as builds before the chunked form stored it.
		var whole bool
		if v.obj, whole, err = loadSketch(kind, body, maxBytes); err == nil && whole {
			k.rewrite = append(k.rewrite, dirtyKey{dbi, key})
		}
	}
	if errors.Is(err, scalable.ErrTooLarge) || err == ErrTooLarge {
		return ErrTooLarge
	}
	if err != nil {
		return ErrCorruptImage
	}
	v.Kind, v.ExpireAt = kind, expireAt
	v.setStamp(stamp)
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
	case KindWindow:
		if c.Part != 0 || v.Window().f.LoadBytes(c.Data, off) != nil {
			return ErrCorruptImage
		}
		return nil // its slices are counted once the load is done (ForgetChanges)
	}
	if sk := v.Sketch(); sk != nil && c.Part == 0 && sk.s.LoadBytes(c.Data, off) == nil {
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
	case KindWindow:
		if part == 0 {
			return v.Window().f.LoadTarget()
		}
	default:
		if sk := v.Sketch(); sk != nil && part == 0 {
			return sk.s.LoadTarget()
		}
	}
	return nil
}

// EachArray calls fn for every bit or bucket array of every key, with its
// size, so a loader can split the stored chunks between workers. Only for
// a keyspace being loaded.
func (k *Keyspace) EachArray(fn func(db uint8, key string, part uint32, size uint64)) {
	for i := range k.dbs {
		for key, v := range k.dbs[i].keys.all() {
			eachPart(v, func(part uint32, size uint64, _ *engine.Dirty, _ func([]byte, uint64)) { fn(uint8(i), key, part, size) })
		}
	}
}

// ForgetChanges drops recorded changes and dirty chunks after a load: the
// loaded state is what is stored. It also counts the loaded windows'
// slices (the chunks and the base fill their bits without counting).
func (k *Keyspace) ForgetChanges() {
	on := k.watch.on.Load()
	for i := range k.dbs {
		for _, v := range k.dbs[i].keys.all() {
			if !on {
				v.setStamp(0) // versions stored before tracking began mean nothing; ver is the record's
			}
			eachPart(v, func(_ uint32, _ uint64, d *engine.Dirty, _ func([]byte, uint64)) { d.Swap() })
			if w := v.Window(); w != nil {
				w.f.Recount()
			}
		}
	}
	if k.dirty != nil {
		k.clearDirty()
	}
	k.watch.head, k.watch.dirty = false, 0
}
