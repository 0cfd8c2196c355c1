package keyspace

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"io"
	"slices"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/bfserver/bfserver/command"
	"github.com/bfserver/bfserver/scalable"
)

// NumDBs is the number of databases, as Redis.
const NumDBs = command.NumDBs

// Kind is what a key holds.
type Kind uint8

const (
	KindNone Kind = iota
	KindBloom
	KindCuckoo
	KindString
	KindWindow  // a sliding-window filter (BFX.W*, bfserver's own)
	KindCMS     // a Count-Min Sketch (CMS.*; sketches.go)
	KindTopK    // a Top-K (TOPK.*; sketches.go)
	KindTDigest // a t-digest (TDIGEST.*; sketches.go, tdigest.go)
)

// TypeName is the TYPE reply for a kind.
func (k Kind) TypeName() string {
	switch k {
	case KindBloom:
		return "MBbloom--"
	case KindCuckoo:
		return "MBbloomCF"
	case KindString:
		return "string"
	case KindWindow:
		return "BFXwindow"
	}
	if t := sketchByKind[k]; t != nil {
		return t.name
	}
	return "none"
}

// Value is what a key holds: a Bloom chain, a Cuckoo filter or a string,
// by Kind. One pointer holds whichever it is, so that a Value is 24 bytes:
// a server may hold hundreds of thousands of small filters, and each
// has one (docs/STORAGE.md, Memory).
type Value struct {
	Kind Kind
	// ver is the stamp of the key's last touch, for WATCH (watch.go), in
	// the 7 bytes that would otherwise pad Kind. 0 until one; under the
	// db's mu. Until WATCH turns tracking on, nothing is stamped, and the
	// change record keeps its mark there instead (recorded): local
	// bookkeeping that never reaches a reader, the image or a peer.
	ver      [7]byte
	ExpireAt int64          // unix ms; 0 = no expiry; changed in place atomically (setExpire)
	obj      unsafe.Pointer // *scalable.Chain, *scalable.Cuckoo or *string, by Kind
}

// BloomValue, CuckooValue and StringValue make a Value of each kind.
func BloomValue(ch *scalable.Chain) *Value {
	return &Value{Kind: KindBloom, obj: unsafe.Pointer(ch)}
}

func CuckooValue(cf *scalable.Cuckoo) *Value {
	return &Value{Kind: KindCuckoo, obj: unsafe.Pointer(cf)}
}

func StringValue(s string) *Value { return &Value{Kind: KindString, obj: unsafe.Pointer(&s)} }

// Bloom is the value's chain, nil unless it is a Bloom filter.
func (v *Value) Bloom() *scalable.Chain {
	if v.Kind != KindBloom {
		return nil
	}
	return (*scalable.Chain)(v.obj)
}

// Cuckoo is the value's filter, nil unless it is a Cuckoo filter.
func (v *Value) Cuckoo() *scalable.Cuckoo {
	if v.Kind != KindCuckoo {
		return nil
	}
	return (*scalable.Cuckoo)(v.obj)
}

// Str is the value's string, "" unless it is one. It is immutable: SET
// replaces the Value.
func (v *Value) Str() string {
	if v.Kind != KindString || v.obj == nil {
		return ""
	}
	return *(*string)(v.obj)
}

// expired reads ExpireAt atomically: Lookup takes no lock.
func (v *Value) expired(now int64) bool { return expiredAt(atomic.LoadInt64(&v.ExpireAt), now) }

// expiredAt reports whether an expiry of at (0: none) is past at now.
func expiredAt(at, now int64) bool { return at != 0 && at <= now }

type db struct {
	// mu guards changes to keys, ttl and every Value's ExpireAt and ver,
	// and the readers of more than one key. Lookup takes no lock: the key
	// table is read lock-free (keytable.go), ExpireAt atomically.
	mu   sync.RWMutex
	keys keyTable
	// ttl holds the keys whose value has an expiry, as Redis's expires
	// dict does, so that active expiry (Due) looks at those only: a scan
	// of every key held the read lock, and with it every write, for tens
	// of milliseconds each round at 400,000 filters.
	ttl map[string]struct{}
}

// track records whether key's value v (nil: none) has an expiry. d.mu is
// held for writing.
func (d *db) track(key string, v *Value) {
	if v != nil && v.ExpireAt != 0 {
		if d.ttl == nil {
			d.ttl = make(map[string]struct{})
		}
		d.ttl[key] = struct{}{}
	} else if d.ttl != nil {
		delete(d.ttl, key)
		if len(d.ttl) == 0 {
			d.ttl = nil // a map never shrinks: Due would walk its empty table
		}
	}
}

// Keyspace holds every database. Apply must be called from one goroutine at
// a time; reads (Read, Lookup) may run concurrently with it: map changes are
// made under a write lock, and the filters are safe for one writer with many
// readers.
type Keyspace struct {
	dbs   [NumDBs]db
	bytes atomic.Int64 // sum of MemoryUsage over every value
	// dirty lists the keys changed since the last TakeChanges, true when the
	// stored image of the key must be rewritten whole. Only Apply writes it;
	// nil until TrackChanges (a keyspace nobody persists tracks nothing).
	dirty map[dirtyKey]change
	// fresh lists keys created since the last cut with no record of them
	// before (fresh), while versions are not tracked: each one's value
	// carries the record's epoch as its mark (Value.ver), which stands in
	// for a map entry, so that creating a key costs the record an append
	// rather than a hash of the key and a map's growth (issue #25: a
	// million filters created). The record is the map and the list
	// together: a key in both merges to the larger change.
	fresh blocks[dirtyKey]
	// recordKeys holds the bytes of the keys the record lists whose own
	// string is in their entry (keyInside), in 64 KiB slabs dropped with
	// the record: a listed key must not keep its filter alive after it
	// is deleted, until the next cut, and one slab is one object for the
	// collector where copies of their own would be one a key.
	recordKeys []byte
	// epochLo..epoch are the marks of the record being kept: a value so
	// marked is the value of a key in fresh. epoch moves at every cut (and
	// whenever the record is emptied); 0 is never one.
	epochLo, epoch uint64
	// voids: a key may be recorded in dirty with no value (removed,
	// renamed away, flushed), so that created must look it up there.
	voids bool
	// marked is the key changed or replaced last recorded in dirty, and
	// markedFull its value there: a log entry's hundreds of writes to one
	// filter then cost one map write instead of one each. Cleared with
	// dirty.
	marked     dirtyKey
	markedOK   bool
	markedFull bool
	// rewrite lists the keys a load found in a form the image no longer
	// writes (a window stored whole): TrackChanges records them as
	// replaced, so the first flush writes them in chunks.
	rewrite []dirtyKey
	// hot is the entry the Apply side (Apply, Prefetch) found last: a log
	// entry's writes mostly name one filter, and each looks its key up
	// several times (prefetch, memory before and after, the command).
	// Every change to a key table forgets it; readers never use it.
	// hotSet says hot is known, nil included: a command creating a key
	// looks it up several times before it exists.
	hot    *Value
	hotKey []byte
	hotDB  uint8
	hotSet bool
	// pt is the helper ApplyEntry starts for an entry it may speed up
	// (pretest.go), kept for its buffers; older is what it found of the
	// command Apply runs, nil outside such an entry.
	pt    pretest
	older *scalable.Older
	// loading marks the stand-in served while a snapshot replaces the
	// state: it holds nothing, and answers every read ErrLoading.
	loading bool
	// watch is the version tracking for WATCH (watch.go).
	watch watchState
	// cutting is the cut being written (image.go), nil when none is: Apply
	// tells it of every key before changing it. Set by Cut (Apply
	// excluded), cleared when the cut ends (beside Apply).
	cutting atomic.Pointer[Cut]
	// cutBudget bounds a cut's copies (SetCutBudget).
	cutBudget uint64
}

// change is what the change record holds of a key since the last cut,
// in the order Restore merges them (the larger wins).
type change uint8

const (
	// inPlace: the key's value was modified in place; its changed chunks
	// are to be written.
	inPlace change = 0
	// fresh: created where the image holds nothing of the key (it had no
	// value and no recorded change since the last cut): written whole,
	// with no stored chunk to drop first. A million auto-created filters
	// otherwise put a million range deletions in a flush's table, which
	// Pebble then spent seconds of CPU on (table stats, compaction).
	fresh change = 1
	// whole: created over a value, replaced or removed: the stored chunks
	// are dropped and the key written whole. Its bits include fresh's,
	// so that created sets either with one map operation.
	whole change = 3
)

type dirtyKey struct {
	db  uint8
	key string
}

// New returns an empty keyspace.
func New() *Keyspace {
	k := &Keyspace{}
	for i := range k.dbs {
		k.dbs[i].keys.init()
	}
	return k
}

// NewLoading returns the stand-in a node serves while it loads a snapshot:
// empty, and answering every read ErrLoading, never a false "not found".
func NewLoading() *Keyspace {
	k := New()
	k.loading = true
	return k
}

// Result is the typed outcome of a command; resp renders it per protocol.
// A log entry's commands each get one, so it holds what writes answer
// (an error, an integer, per-item integers) and points to the rest: 64
// bytes instead of 136 (BenchmarkCreateSmallEntries).
type Result struct {
	Err  error   // the command failed: the reply is this error alone
	Int  int64   // integer replies
	Ints []int64 // per-item replies; a write's may be shared, read-only memory (appendInt)
	More *More   // the rarer replies; nil when none
	Null bool    // the bulk reply is null
	// Found: the key a membership read (BF/CF EXISTS, CF.COUNT) looked up
	// exists, of whatever type (INFO's keyspace_hits).
	Found bool
}

// A Result stays within 64 bytes.
var _ [64 - unsafe.Sizeof(Result{})]struct{}

// More is what a Result rarely holds.
type More struct {
	Tail  error    // an error element after Ints (BF.MADD on a full filter)
	Bytes []byte   // bulk replies (chunks, strings)
	List  [][]byte // KEYS, SCAN, BF.DEBUG lines
	BF    *BFInfo
	CF    *scalable.CuckooInfo
}

// Tail, Bytes, List, BF and CF are r.More's, zero when it is nil.
func (r Result) Tail() error {
	if r.More == nil {
		return nil
	}
	return r.More.Tail
}

func (r Result) Bytes() []byte {
	if r.More == nil {
		return nil
	}
	return r.More.Bytes
}

func (r Result) List() [][]byte {
	if r.More == nil {
		return nil
	}
	return r.More.List
}

func (r Result) BF() *BFInfo {
	if r.More == nil {
		return nil
	}
	return r.More.BF
}

func (r Result) CF() *scalable.CuckooInfo {
	if r.More == nil {
		return nil
	}
	return r.More.CF
}

// more is r.More, made if need be.
func (r *Result) more() *More {
	if r.More == nil {
		r.More = new(More)
	}
	return r.More
}

// bytesResult is a bulk reply of b (nil: none).
func bytesResult(b []byte) Result { return Result{More: bytesMore(b)} }

// bytesMore is a More of b, nil when b is.
func bytesMore(b []byte) *More {
	if b == nil {
		return nil
	}
	return &More{Bytes: b}
}

// listResult is a list reply of l.
func listResult(l [][]byte) Result { return Result{More: &More{List: l}} }

// BFInfo is BF.INFO's fields.
type BFInfo struct {
	Capacity, Size, Filters, Items, Expansion uint64
	NonScaling                                bool
}

func (k *Keyspace) db(i uint8) *db {
	if int(i) >= NumDBs {
		return &k.dbs[0]
	}
	return &k.dbs[i]
}

// lookup returns a live value as of now; an expired one is not returned.
func (d *db) lookup(key []byte, now int64) *Value {
	v := d.keys.getBytes(key)
	if v == nil || v.expired(now) {
		return nil
	}
	return v
}

// Lookup finds a live key for a reader.
func (k *Keyspace) Lookup(dbi uint8, key []byte, now int64) *Value {
	return k.db(dbi).lookup(key, now)
}

// changed records that a key's value was modified in place.
func (k *Keyspace) changed(dbi uint8, key []byte) {
	if k.dirty == nil || k.markedOK && k.marked.db == dbi && k.marked.key == string(key) {
		return
	}
	// The value Apply just looked up (hot) may be marked in the record.
	if v := k.hot; v != nil && k.hotDB == dbi && string(k.hotKey) == string(key) && k.recorded(v) {
		return
	}
	dk := dirtyKey{dbi, string(key)}
	ch := k.dirty[dk]
	k.dirty[dk] = ch
	k.marked, k.markedOK, k.markedFull = dk, true, ch == whole
}

// replaced records that a key now holds another value, or none.
func (k *Keyspace) replaced(dbi uint8, key string) {
	if k.dirty == nil || k.markedOK && k.markedFull && k.marked.db == dbi && k.marked.key == key {
		return
	}
	dk := dirtyKey{dbi, key}
	k.dirty[dk] = whole
	k.marked, k.markedOK, k.markedFull = dk, true, true
}

// created records a key created where it had no value (the caller just
// looked it up, expired keys removed): fresh, unless a change to it is
// recorded since the last cut. Such a change can only be its removal
// (whole: the image may still hold it), since a key without a value was
// removed if it changed at all; or'ing fresh in keeps whole and makes an
// absent record fresh, in one map operation (a lookup first cost the
// creation of a million filters 0.5 s more in the collector and maps).
//
// While versions are not tracked and no key is recorded without a value,
// the record holds nothing of the key: it is listed in fresh and its new
// value v (not yet in the key table) marked, with no hash at all.
func (k *Keyspace) created(dbi uint8, key string, v *Value) {
	if k.dirty == nil {
		return
	}
	key = k.recordKey(v, key)
	dk := dirtyKey{dbi, key}
	if !k.voids && !k.watch.on.Load() {
		v.setStamp(k.epoch)
		k.fresh.add(dk)
		k.marked, k.markedOK, k.markedFull = dk, true, false
		return
	}
	k.dirty[dk] |= fresh
	// Not known without a second lookup; false only costs replaced a map
	// write it could have skipped.
	k.marked, k.markedOK, k.markedFull = dk, true, false
}

// recordKey is key as the record may hold it, v's key: a copy in
// recordKeys when key is the one v's entry holds (keyInside), which the
// record would otherwise keep alive with its whole entry after v is
// deleted, until the image's next flush. The slab's bytes are never
// written again once appended (a full slab is replaced, not reused), so
// the string is immutable.
func (k *Keyspace) recordKey(v *Value, key string) string {
	if !keyInside(v, key) {
		return key
	}
	if len(k.recordKeys)+len(key) > cap(k.recordKeys) {
		k.recordKeys = make([]byte, 0, max(64<<10, len(key)))
	}
	n := len(k.recordKeys)
	k.recordKeys = append(k.recordKeys, key...)
	return unsafe.String(&k.recordKeys[n], len(key))
}

// removed is replaced for a key left without a value.
func (k *Keyspace) removed(dbi uint8, key string) {
	if k.dirty != nil {
		k.voids = true
	}
	k.replaced(dbi, key)
}

// recorded reports whether v's mark puts its key in the record (fresh).
func (k *Keyspace) recorded(v *Value) bool {
	if k.watch.on.Load() {
		return false // ver is the version
	}
	m := v.stamp()
	return m >= k.epochLo && m <= k.epoch && m != 0
}

// nextEpoch starts a record with nothing in fresh: the marks of the one
// before mean nothing to it.
func (k *Keyspace) nextEpoch() {
	k.fresh, k.voids, k.recordKeys = blocks[dirtyKey]{}, false, nil
	k.epoch++
	k.epochLo = k.epoch
}

// clearDirty empties the change record (and what marked remembers of it).
func (k *Keyspace) clearDirty() {
	if len(k.dirty) > 1024 {
		// A map keeps its table after clear: 100,000 changed keys would
		// cost their slots until the next restart.
		k.dirty = map[dirtyKey]change{}
	} else {
		clear(k.dirty)
	}
	k.nextEpoch()
	k.markedOK = false
}

// unmark makes ver the version again, once versions are tracked: the
// record's marks become map entries (and a running cut captures the keys
// it knows by their mark only), and every value's ver is zeroed. Once in
// a node's life, at one point of the log, like the WATCH that causes it.
func (k *Keyspace) unmark() {
	if k.epoch == 0 {
		k.watch.on.Store(true) // changes never tracked: nothing was marked
		return
	}
	c := k.cutting.Load()
	if c != nil {
		c.freeze.Lock()
		c.captureStash()
		c.freeze.Unlock()
		for dk := range c.fresh.all() {
			c.before(dk.db, dk.key, k.db(dk.db).keys.get(dk.key))
		}
		// The walk reads marks under the freeze's lock until on is set.
		c.freeze.Lock()
		defer c.freeze.Unlock()
	}
	if k.dirty != nil {
		for dk := range k.fresh.all() {
			k.dirty[dk] = max(k.dirty[dk], fresh)
		}
	}
	k.fresh = blocks[dirtyKey]{}
	k.voids = true
	for i := range k.dbs {
		d := &k.dbs[i]
		d.mu.Lock()
		for _, v := range d.keys.all() {
			v.setStamp(0)
		}
		d.mu.Unlock()
	}
	k.watch.on.Store(true)
}

// get is the Apply side's raw lookup (expired keys included), through hot.
func (k *Keyspace) get(dbi uint8, key []byte) *Value {
	if k.isHot(dbi, key) {
		return k.hot
	}
	v := k.db(dbi).keys.getBytes(key)
	k.hold(dbi, key, v)
	k.remember(dbi, key, v)
	return v
}

// isHot reports whether hot is key's entry.
func (k *Keyspace) isHot(dbi uint8, key []byte) bool {
	return k.hotSet && k.hotDB == dbi && string(k.hotKey) == string(key)
}

// remember makes v (nil: none) the hot entry of key.
func (k *Keyspace) remember(dbi uint8, key []byte, v *Value) {
	if len(key) <= 1024 { // a huge key is not worth keeping a copy of
		k.hot, k.hotSet, k.hotKey, k.hotDB = v, true, append(k.hotKey[:0], key...), dbi
	}
}

// forget drops hot; every change to a key table calls it.
func (k *Keyspace) forget() { k.hot, k.hotSet = nil, false }

// writeLookup is lookup under Apply: an expired key is deleted first, so
// every replica removes it at the same point of the log.
func (k *Keyspace) writeLookup(dbi uint8, key []byte, now int64) *Value {
	v := k.get(dbi, key)
	if v != nil && v.expired(now) {
		k.remove(dbi, string(key))
		return nil
	}
	return v
}

func (k *Keyspace) set(dbi uint8, key string, v *Value) {
	k.put(dbi, key, v)
	k.replaced(dbi, key)
}

// create is set for a key the caller found without a value. The record
// comes first: it may mark v, which nobody else sees yet.
func (k *Keyspace) create(dbi uint8, key string, v *Value) {
	k.created(dbi, key, v)
	k.put(dbi, key, v)
}

func (k *Keyspace) put(dbi uint8, key string, v *Value) {
	d := k.db(dbi)
	k.holdKey(dbi, key)
	d.mu.Lock()
	d.keys.set(key, v)
	d.track(key, v)
	d.mu.Unlock()
	k.forget()
	k.remember(dbi, unsafe.Slice(unsafe.StringData(key), len(key)), v)
}

func (k *Keyspace) remove(dbi uint8, key string) bool {
	d := k.db(dbi)
	k.holdKey(dbi, key)
	k.forget()
	d.mu.Lock()
	ok := d.keys.del(key)
	d.track(key, nil)
	d.mu.Unlock()
	if ok {
		k.removed(dbi, key)
	}
	return ok
}

// Apply executes one command. Write commands must come from the log, in
// order; read commands are accepted too so that EXEC can run a mixed
// transaction at one point of the log.
func (k *Keyspace) Apply(c *command.Cmd) Result {
	if command.Validate(c) != nil {
		return Result{Err: ErrInvalidCommand}
	}
	switch c.Op {
	case command.Watch:
		return k.applyWatch(c)
	case command.FlushDB, command.FlushAll:
		r := k.apply(c)
		k.bytes.Store(int64(k.countBytes()))
		return r
	}
	// Keep the memory total exact: measure the keys the command touches
	// before and after it.
	before := k.usageOf(c)
	r := k.apply(c)
	k.bytes.Add(k.usageOf(c) - before)
	if opensKey(c.Op) {
		k.touch(c.DB, c.Key, c.Now)
	}
	return r
}

// usageOf sums MemoryUsage over the keys a command names (present or not,
// expired included: they hold memory until removed), each once. Counting a
// key the command does not touch is harmless: it adds the same before and
// after. A nil key is the empty key, as it decodes from the log.
func (k *Keyspace) usageOf(c *command.Cmd) int64 {
	var n int64
	add := func(key []byte) {
		if v := k.get(c.DB, key); v != nil {
			n += int64(MemoryUsage(v))
		}
	}
	add(c.Key)
	// Only RENAME and COPY write Dst (and "" is a key): every other op would
	// pay a second map lookup per command for it.
	hasDst := c.Op == command.Rename || c.Op == command.Copy
	if hasDst && string(c.Dst) != string(c.Key) {
		add(c.Dst)
	}
	if len(c.Keys) == 0 {
		return n
	}
	// Each key once: DEL k k frees k's memory once.
	seen := make(map[string]bool, len(c.Keys)+2)
	seen[string(c.Key)] = true
	if hasDst {
		seen[string(c.Dst)] = true
	}
	for _, key := range c.Keys {
		if !seen[string(key)] {
			seen[string(key)] = true
			add(key)
		}
	}
	return n
}

func (k *Keyspace) apply(c *command.Cmd) Result {
	switch c.Op {
	case command.BFReserve:
		return k.bfReserve(c)
	case command.BFAdd:
		return k.bfAdd(c)
	case command.BFLoadChunk, command.BFLoadPart:
		return k.bfLoadChunk(c)
	case command.CFReserve:
		return k.cfReserve(c)
	case command.CFAdd:
		return k.cfAdd(c)
	case command.CFDel:
		return k.cfDel(c)
	case command.CFCompact:
		return k.cfCompact(c)
	case command.CFLoadChunk, command.CFLoadPart:
		return k.cfLoadChunk(c)
	case command.Del:
		n := 0
		for _, key := range c.Keys {
			if k.writeLookup(c.DB, key, c.Now) != nil && k.remove(c.DB, string(key)) {
				k.touch(c.DB, key, c.Now)
				n++
			}
		}
		return Result{Int: int64(n)}
	case command.ExpireDue:
		for _, key := range c.Keys {
			k.writeLookup(c.DB, key, c.Now)
		}
		return Result{}
	case command.Rename:
		return k.rename(c)
	case command.Expire:
		return k.expire(c)
	case command.Persist:
		v := k.writeLookup(c.DB, c.Key, c.Now)
		if v == nil || v.ExpireAt == 0 {
			return Result{Int: 0}
		}
		k.setExpire(c.DB, c.Key, v, 0)
		k.touch(c.DB, c.Key, c.Now)
		return Result{Int: 1}
	case command.FlushDB:
		k.flush(c.DB, c.Now)
		return Result{}
	case command.FlushAll:
		for i := range k.dbs {
			k.flush(uint8(i), c.Now)
		}
		return Result{}
	case command.Set:
		k.writeLookup(c.DB, c.Key, c.Now)
		k.set(c.DB, string(c.Key), StringValue(string(c.Data)))
		k.touch(c.DB, c.Key, c.Now)
		return Result{}
	case command.WReserve:
		return k.wReserve(c)
	case command.WAdd:
		return k.wAdd(c)
	case command.WLoadChunk:
		return k.wLoadChunk(c)
	case command.CMSInit:
		return k.cmsInit(c)
	case command.CMSIncrBy:
		return k.cmsIncrBy(c)
	case command.CMSMerge:
		return k.cmsMerge(c)
	case command.TopKReserve:
		return k.topkReserve(c)
	case command.TopKAdd:
		return k.topkAdd(c)
	case command.TDCreate:
		return k.tdCreate(c)
	case command.TDReset, command.TDAdd:
		return k.tdWrite(c)
	case command.TDMerge:
		return k.tdMerge(c)
	case command.TDMin, command.TDMax, command.TDInfo, command.TDQuantile, command.TDCDF,
		command.TDTrimmedMean, command.TDRank, command.TDByRank:
		return k.tdQuery(c, true)
	case command.Dump:
		return k.applyDump(c)
	case command.Restore:
		return k.restore(c)
	case command.Copy:
		return k.copyKey(c)
	}
	if !c.Op.IsWrite() {
		for _, key := range c.Keys {
			k.writeLookup(c.DB, key, c.Now)
		}
		if c.Key != nil {
			k.writeLookup(c.DB, c.Key, c.Now)
		}
		return k.Read(c)
	}
	return Result{Err: ErrInvalidCommand} // SetMember, DelMember: not the keyspace's
}

// flush empties a database. It touches the keys that were live (one whose
// expiry had passed was gone already), all with one stamp: the map's
// order is random, and must not decide anything.
func (k *Keyspace) flush(dbi uint8, now int64) {
	d := k.db(dbi)
	if c := k.cutting.Load(); c != nil {
		c.beforeDB(dbi)
	}
	k.forget()
	d.mu.Lock()
	old := d.keys.takeAll()
	d.ttl = nil
	d.mu.Unlock()
	var stamp uint64
	for key, v := range old.all() {
		key = k.recordKey(v, key) // the map's key, perhaps v's own
		k.removed(dbi, key)
		if k.watch.on.Load() && !v.expired(now) {
			if stamp == 0 {
				stamp = k.watch.tick()
			}
			k.watch.setGone(goneSlot(dbi, []byte(key)), stamp)
		}
	}
}

func (k *Keyspace) setExpire(dbi uint8, key []byte, v *Value, at int64) {
	d := k.db(dbi)
	d.mu.Lock()
	atomic.StoreInt64(&v.ExpireAt, at) // Lookup reads it without the lock
	d.track(string(key), v)
	d.mu.Unlock()
	k.changed(dbi, key)
}

func (k *Keyspace) expire(c *command.Cmd) Result {
	v := k.writeLookup(c.DB, c.Key, c.Now)
	if v == nil {
		return Result{Int: 0}
	}
	at := c.Iter
	cur := v.ExpireAt
	switch c.Field {
	case command.CondNX:
		if cur != 0 {
			return Result{Int: 0}
		}
	case command.CondXX:
		if cur == 0 {
			return Result{Int: 0}
		}
	case command.CondGT:
		if cur == 0 || at <= cur {
			return Result{Int: 0}
		}
	case command.CondLT:
		if cur != 0 && at >= cur {
			return Result{Int: 0}
		}
	}
	if at <= c.Now {
		k.remove(c.DB, string(c.Key))
	} else {
		k.setExpire(c.DB, c.Key, v, at)
	}
	k.touch(c.DB, c.Key, c.Now)
	return Result{Int: 1}
}

func (k *Keyspace) rename(c *command.Cmd) Result {
	v := k.writeLookup(c.DB, c.Key, c.Now)
	if v == nil {
		return Result{Err: ErrNoSuchKey}
	}
	dst := k.writeLookup(c.DB, c.Dst, c.Now)
	if c.NX {
		if dst != nil {
			return Result{Int: 0}
		}
	} else if string(c.Key) == string(c.Dst) {
		return Result{}
	}
	d := k.db(c.DB)
	k.forget()
	d.mu.Lock()
	d.keys.del(string(c.Key))
	d.track(string(c.Key), nil)
	d.keys.set(string(c.Dst), v)
	d.track(string(c.Dst), v)
	if !k.watch.on.Load() {
		v.setStamp(0) // a mark names the key it was made for (recorded)
	}
	d.mu.Unlock()
	k.removed(c.DB, string(c.Key))
	k.replaced(c.DB, string(c.Dst))
	k.touch(c.DB, c.Key, c.Now)
	k.touch(c.DB, c.Dst, c.Now)
	return Result{Int: 1}
}

func (k *Keyspace) copyKey(c *command.Cmd) Result {
	v := k.writeLookup(c.DB, c.Key, c.Now)
	if v == nil {
		return Result{Int: 0}
	}
	if v.Kind != KindString && v.Kind != KindWindow {
		return Result{Err: ErrModuleKeyCopy}
	}
	if !c.NX && k.writeLookup(c.DB, c.Dst, c.Now) != nil {
		return Result{Int: 0}
	}
	nv := &Value{Kind: KindString, ExpireAt: v.ExpireAt, obj: v.obj}
	if v.Kind == KindWindow {
		// bfserver's own type copies, as a key of Redis's own does.
		var err error
		if nv, err = cloneWindow(v.Window()); err != nil {
			return Result{Err: err}
		}
		nv.ExpireAt = v.ExpireAt
	}
	k.set(c.DB, string(c.Dst), nv)
	k.touch(c.DB, c.Dst, c.Now)
	return Result{Int: 1}
}

// Digest is a SHA-256 over a filter's full state: its dump header and every
// chunk, so replicas can be compared byte for byte.
func Digest(v *Value) string {
	h := sha256.New()
	var n [8]byte
	switch v.Kind {
	case KindBloom:
		h.Write(v.Bloom().Header())
		for it := int64(1); ; {
			next, b := v.Bloom().Chunk(it)
			if next == 0 {
				break
			}
			h.Write(b)
			it = next
		}
	case KindCuckoo:
		h.Write(v.Cuckoo().Header())
		for it := int64(1); ; {
			next, b, ok := v.Cuckoo().Chunk(it)
			if !ok {
				break
			}
			h.Write(b)
			it = next
		}
	case KindString:
		io.WriteString(h, v.Str())
	case KindWindow:
		h.Write(v.Window().Marshal())
	default:
		if sk := v.Sketch(); sk != nil {
			h.Write(sk.Marshal())
		}
	}
	binary.LittleEndian.PutUint64(n[:], uint64(atomic.LoadInt64(&v.ExpireAt))) // after a lock-free Lookup (BFX.DIGEST)
	h.Write(n[:])
	return hex.EncodeToString(h.Sum(nil))
}

// Count returns how many live keys a database holds and how many of them
// have an expiry, without sorting (DBSIZE, INFO keyspace).
func (k *Keyspace) Count(dbi uint8, now int64) (keys, expires int) {
	d := k.db(dbi)
	d.mu.RLock()
	defer d.mu.RUnlock()
	// Only a key with an expiry can have expired: count those (ttl), not
	// every key.
	keys = d.keys.len()
	for key := range d.ttl {
		if v := d.keys.get(key); v != nil && v.expired(now) {
			keys--
		} else if v != nil {
			expires++
		}
	}
	return keys, expires
}

// Bytes is the memory the values of every database account for (the sum
// of MemoryUsage), kept exact as commands apply, for the total memory cap.
func (k *Keyspace) Bytes() uint64 { return uint64(max(0, k.bytes.Load())) }

func (k *Keyspace) countBytes() uint64 {
	var n uint64
	for i := range k.dbs {
		d := &k.dbs[i]
		d.mu.RLock()
		for _, v := range d.keys.all() {
			n += MemoryUsage(v)
		}
		d.mu.RUnlock()
	}
	return n
}

// Due lists up to max keys of a database whose expiry time has passed, for
// the active expiry that proposes their deletion.
func (k *Keyspace) Due(dbi uint8, now int64, max int) [][]byte {
	d := k.db(dbi)
	d.mu.RLock()
	defer d.mu.RUnlock()
	var out [][]byte
	for key := range d.ttl {
		if len(out) >= max {
			break
		}
		if v := d.keys.get(key); v != nil && v.expired(now) {
			out = append(out, []byte(key))
		}
	}
	return out
}

// Put installs a value outside the log (loading a stored image).
func (k *Keyspace) Put(dbi uint8, key string, v *Value) {
	d := k.db(dbi)
	k.forget()
	d.mu.Lock()
	if old := d.keys.get(key); old != nil {
		k.bytes.Add(-int64(MemoryUsage(old)))
	}
	d.keys.set(key, v)
	d.track(key, v)
	d.mu.Unlock()
	k.bytes.Add(int64(MemoryUsage(v)))
}

// Range calls fn for every key of a database, in sorted order, under the
// read lock. fn must not call back into the keyspace.
func (k *Keyspace) Range(dbi uint8, fn func(key string, v *Value) bool) {
	d := k.db(dbi)
	d.mu.RLock()
	defer d.mu.RUnlock()
	keys := make([]string, 0, d.keys.len())
	for key := range d.keys.all() {
		keys = append(keys, key)
	}
	slices.Sort(keys)
	for _, key := range keys {
		if !fn(key, d.keys.get(key)) {
			return
		}
	}
}
