package keyspace

import (
	"encoding/binary"
	"math/bits"
	"sync/atomic"

	"github.com/bfserver/bfserver/command"
	"github.com/bfserver/bfserver/scalable"
)

// Versions for WATCH.
//
// A key's version moves whenever a command touches it in Redis's sense
// (signalModifiedKey): every BF/CF write that opens the key, whatever it
// finds or answers (BF.ADD of a present item, CF.DEL of an absent one or
// on a missing key, a refused RESERVE or LOADCHUNK, CF.COMPACT), and the
// core commands that change it (DEL, RENAME's two keys, EXPIRE/PERSIST
// that act, SET, RESTORE, COPY's destination, FLUSHDB/FLUSHALL of a live
// key). Versions are replicated state: Apply moves them, so every replica
// holds the same ones at the same point of the log, and the image keeps
// them (a restarted node, or one that installed a snapshot, has its
// peers').
//
// Stamps come from one counter, the clock, that every touch advances, so
// no two touches share a stamp (but for one flush's keys, which all go
// missing at once, and take one stamp: the order a map is walked in must
// decide nothing). A live key keeps the stamp of its last
// touch in 7 bytes of its Value that were padding (no byte more per key;
// 2^56 stamps last centuries). A missing key cannot hold one: a
// touch of a missing key (CF.DEL on it, a deletion) stamps its slot in a
// fixed table of goneSlots stamps, by a hash of its database and name,
// allocated a page at a time as slots are first used. Two missing keys
// that share a slot share a version, so a WATCH of a missing key may abort
// because another missing key of its slot was touched (about 1 in 65,536
// for each such touch): an abort Redis would not give, never a commit it
// would refuse.
//
// A key's version is 2*Ver+1 while it is live and 2*slot while it is not:
// the two never meet. A key whose expiry passed counts as missing, and
// its deletion by expiry stamps nothing: it was already gone. So a key
// watched live that expires before EXEC aborts it, and one already expired
// when watched does not (Redis 7's wk->expired rule).
//
// Tracking starts off and is turned on once, for good, by the log: by the
// first Watch command applied (WATCH proposes an empty one when it finds
// tracking off). Until then nothing is stamped. So every replica starts
// tracking at the same point of the log, whichever build applied the
// entries before it (a build without WATCH stamped nothing either), and
// images that older builds wrote load the same way everywhere.
const (
	goneSlots = 1 << 16
	pageSlots = 1024
	numPages  = goneSlots / pageSlots // 64: one bit each in watchState.dirty
)

type watchState struct {
	on    atomic.Bool
	clock uint64 // the last stamp given; Apply's (and Cut's, with Apply excluded)
	gone  [numPages]atomic.Pointer[[pageSlots]uint64]
	// dirty has a bit per page changed since the last Cut; head: on or
	// clock changed.
	dirty uint64
	head  bool
}

// goneSlot is a missing key's slot: FNV-1a of its database and name, a
// fixed function, so that every replica agrees.
func goneSlot(dbi uint8, key []byte) uint32 {
	h := uint64(14695981039346656037)
	h = (h ^ uint64(dbi)) * 1099511628211
	for _, b := range key {
		h = (h ^ uint64(b)) * 1099511628211
	}
	return uint32(h^h>>32) % goneSlots
}

func (w *watchState) goneAt(s uint32) uint64 {
	p := w.gone[s/pageSlots].Load()
	if p == nil {
		return 0
	}
	return atomic.LoadUint64(&p[s%pageSlots])
}

func (w *watchState) setGone(s uint32, stamp uint64) {
	p := w.gone[s/pageSlots].Load()
	if p == nil {
		p = new([pageSlots]uint64)
		w.gone[s/pageSlots].Store(p)
	}
	atomic.StoreUint64(&p[s%pageSlots], stamp)
	w.dirty |= 1 << (s / pageSlots)
}

// touch records that a command touched key, after it changed whatever it
// changed (a reader that sees the new version sees the change too).
func (k *Keyspace) touch(dbi uint8, key []byte, now int64) {
	w := &k.watch
	if !w.on.Load() {
		return
	}
	stamp := w.tick()
	if v := k.get(dbi, key); v != nil && !v.expired(now) {
		d := k.db(dbi)
		d.mu.Lock()
		v.setStamp(stamp)
		d.mu.Unlock()
		k.changed(dbi, key) // the image keeps the version with the key
		return
	}
	w.setGone(goneSlot(dbi, key), stamp)
}

// stamp is the value's last stamp (7 bytes, little endian). The caller
// holds the db's mu, or is Apply.
func (v *Value) stamp() uint64 {
	var b [8]byte
	copy(b[:], v.ver[:])
	return binary.LittleEndian.Uint64(b[:])
}

// setStamp sets the value's stamp, below 2^56. The caller holds the db's
// mu for writing, or nobody else sees the value yet.
func (v *Value) setStamp(s uint64) {
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], s)
	copy(v.ver[:], b[:7])
}

// tick gives the next stamp.
func (w *watchState) tick() uint64 {
	w.clock++
	w.head = true
	return w.clock
}

// opensKey lists the ops that open their key for writing, as RedisBloom's
// commands do: each touches the key whatever it then finds.
func opensKey(op command.Op) bool {
	switch op {
	case command.BFReserve, command.BFAdd, command.BFLoadChunk, command.CFReserve,
		command.CFAdd, command.CFDel, command.CFCompact, command.CFLoadChunk,
		command.BFLoadPart, command.CFLoadPart,
		command.CMSInit, command.CMSIncrBy, command.CMSMerge, command.TopKReserve, command.TopKAdd,
		command.TDCreate, command.TDReset, command.TDAdd:
		return true
	}
	return false
}

// version is key's version as of now.
func (k *Keyspace) version(dbi uint8, key []byte, now int64) uint64 {
	d := k.db(dbi)
	d.mu.RLock()
	v := d.lookup(key, now)
	var ver uint64
	if v != nil && k.watch.on.Load() { // until then ver is the change record's
		ver = v.stamp()
	}
	d.mu.RUnlock()
	if v != nil {
		return 2*ver + 1
	}
	return 2 * k.watch.goneAt(goneSlot(dbi, key))
}

// Versioned reports whether versions are tracked yet (see above); WATCH
// turns tracking on through the log before it reads a version.
func (k *Keyspace) Versioned() bool { return !k.loading && k.watch.on.Load() }

// Version is key's version as of now, for WATCH. It may run concurrently
// with Apply.
func (k *Keyspace) Version(dbi uint8, key []byte, now int64) (uint64, error) {
	if k.loading {
		return 0, ErrLoading
	}
	return k.version(dbi, key, now), nil
}

// AppendWatch adds one watched key's database and version to a Watch
// command's Data.
func AppendWatch(data []byte, dbi uint8, ver uint64) []byte {
	return binary.LittleEndian.AppendUint64(append(data, dbi), ver)
}

// WatchMoved reports whether a watched key's version moved: a Watch
// command's check, as Apply makes it, for a transaction that checks
// against local state (EXEC of no keyspace write, after a read barrier).
// It may run concurrently with Apply.
func (k *Keyspace) WatchMoved(c *command.Cmd) (bool, error) {
	if k.loading {
		return false, ErrLoading
	}
	if command.Validate(c) != nil {
		return true, nil
	}
	return k.moved(c), nil
}

func (k *Keyspace) moved(c *command.Cmd) bool {
	if !k.watch.on.Load() {
		// Versions seen before tracking began mean nothing.
		return len(c.Keys) > 0
	}
	for i, key := range c.Keys {
		e := c.Data[i*command.WatchEntryBytes:]
		if k.version(e[0], key, c.Now) != binary.LittleEndian.Uint64(e[1:command.WatchEntryBytes]) {
			return true
		}
	}
	return false
}

// applyWatch is Apply of a Watch: Int is 1 when a watched key's version
// moved, and the transaction after it must not be applied (Skip). It
// turns tracking on.
func (k *Keyspace) applyWatch(c *command.Cmd) Result {
	moved := k.moved(c)
	if !k.watch.on.Load() {
		k.unmark() // turns it on
		k.watch.head = true
	}
	return Result{Int: b2i(moved)}
}

// Skip is how many commands after c, in its log entry, belong to a
// transaction that must not be applied: the ones a Watch guards, when its
// check failed or the Watch itself is invalid. It is 0 for any other
// command. Whoever applies an entry (the replicated state machine,
// memstore) leaves those commands out, with empty results.
func Skip(c *command.Cmd, r *Result) int {
	if c.Op != command.Watch || (r.Int == 0 && r.Err == nil) {
		return 0
	}
	return int(min(max(c.Count, 0), command.MaxItems))
}

// ApplyEntry applies one log entry's commands in order, each result into
// out, as every backend must (the replicated state machine and memstore
// share it, so tests of one are tests of the other): a transaction whose
// WATCH failed is left out (Skip); ACL changes go to a copy of the user
// table that users returns, made at the first of them and returned (nil
// when none changed it); other, if set, takes the ops it reports handling
// (cluster membership). Like Apply, one entry at a time.
func (k *Keyspace) ApplyEntry(cmds []*command.Cmd, out []Result, users func() command.Users, other func(*command.Cmd) bool) command.Users {
	var next command.Users
	pt := k.startPretest(cmds)
	if pt != nil {
		defer func() { pt.finish(); k.older = nil }()
	}
	for i := 0; i < len(cmds); i++ {
		c := cmds[i]
		// An entry holds hundreds of writes, mostly to a few big filters
		// or to many small ones: start loading a later one's key table
		// group, and the bits of the one after this.
		if j := i + 2*scalable.PrefetchAhead; j < len(cmds) {
			k.PrefetchKey(cmds[j])
		}
		if j := i + scalable.PrefetchAhead; j < len(cmds) {
			k.Prefetch(cmds[j])
		}
		switch {
		case other != nil && other(c):
		case c.Op == command.ACLSetUser || c.Op == command.ACLDelUser:
			if command.Validate(c) != nil {
				out[i] = Result{Err: ErrInvalidCommand}
				continue
			}
			if next == nil {
				next = users().Clone()
			}
			out[i] = Result{Int: next.Apply(c)}
		default:
			if pt != nil {
				k.older = pt.take(i)
			}
			out[i] = k.Apply(c)
			// A transaction whose WATCHed keys moved is left out, on
			// every replica alike; its results stay empty.
			i += min(Skip(c, &out[i]), len(cmds)-1-i)
		}
	}
	return next
}

// Record is a piece of the keyspace's own state in the image, besides its
// keys: the version tracking's header and the pages of missing keys'
// stamps. persistence stores them by name.
type Record struct {
	Name string
	Data []byte
}

const watchHeadVersion = 1

// cutWatch takes the changed version records, for a Cut.
func (k *Keyspace) cutWatch(c *Cut) {
	w := &k.watch
	if w.head {
		b := []byte{watchHeadVersion, byte(b2i(w.on.Load()))}
		c.Records = append(c.Records, Record{Name: "h", Data: binary.LittleEndian.AppendUint64(b, w.clock)})
	}
	for m := w.dirty; m != 0; m &= m - 1 {
		i := bits.TrailingZeros64(m)
		p := w.gone[i].Load()
		b := make([]byte, 0, 8*pageSlots)
		for _, s := range p {
			b = binary.LittleEndian.AppendUint64(b, s)
		}
		c.Records = append(c.Records, Record{Name: "p" + string(rune('0'+i)), Data: b})
	}
	c.head, c.pages = w.head, w.dirty
	w.head, w.dirty = false, 0
}

// LoadRecord installs a record of the keyspace's own state from the image.
// Loading fills a fresh keyspace that nobody serves from yet.
func (k *Keyspace) LoadRecord(r Record) error {
	w := &k.watch
	switch {
	case r.Name == "h":
		if len(r.Data) != 10 || r.Data[0] != watchHeadVersion || r.Data[1] > 1 {
			return ErrCorruptImage
		}
		w.on.Store(r.Data[1] == 1)
		w.clock = binary.LittleEndian.Uint64(r.Data[2:])
		return nil
	case len(r.Name) == 2 && r.Name[0] == 'p' && r.Name[1] >= '0' && r.Name[1] < '0'+numPages:
		if len(r.Data) != 8*pageSlots {
			return ErrCorruptImage
		}
		p := new([pageSlots]uint64)
		for i := range p {
			p[i] = binary.LittleEndian.Uint64(r.Data[8*i:])
		}
		w.gone[r.Name[1]-'0'].Store(p)
		return nil
	}
	return ErrCorruptImage
}
