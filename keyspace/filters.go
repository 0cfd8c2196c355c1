package keyspace

import (
	"errors"
	"unsafe"

	"github.com/bfserver/bfserver/command"
	"github.com/bfserver/bfserver/scalable"
)

// ofKind classifies a looked-up value: nil and no error for an empty key,
// ErrWrongType for another kind.
func ofKind(v *Value, want Kind) (*Value, error) {
	if v != nil && v.Kind != want {
		return nil, ErrWrongType
	}
	return v, nil
}

// lookupKind fetches key for a write (expiring it if due) and classifies it.
func (k *Keyspace) lookupKind(c *command.Cmd, want Kind) (*Value, error) {
	return ofKind(k.writeLookup(c.DB, c.Key, c.Now), want)
}

func mapScalable(err error) error {
	switch {
	case errors.Is(err, scalable.ErrNonScalingFull):
		return ErrNonScalingFull
	case errors.Is(err, scalable.ErrTooLarge):
		return ErrTooLarge
	case errors.Is(err, scalable.ErrBadHeader), errors.Is(err, scalable.ErrBadChunk):
		return ErrBadData
	case errors.Is(err, scalable.ErrNoLink):
		return ErrNoLink
	case errors.Is(err, scalable.ErrChunkTooBig):
		return ErrChunkTooBig
	}
	return ErrInsertFailed
}

// bloomEntry is a new Bloom filter's Value and chain in one allocation:
// a filter is then three objects (its key, this and its bits) rather
// than four, which the heap packs tighter (docs/STORAGE.md); a small one
// two (smallBloomEntry).
type bloomEntry struct {
	Value
	chain scalable.Chain
}

// smallBloomEntry is a bloomEntry with its first link's bits inline,
// for a filter whose bits fit (an auto-created one at the defaults: 144
// bytes): one object of 224 bytes instead of two of 80 and 144, one
// object fewer a filter for the collector to mark at every cycle.
type smallBloomEntry struct {
	bloomEntry
	bits [smallBloomWords]uint64
}

// keyedBloomEntry is a smallBloomEntry that holds its key's bytes too,
// for a key of up to 32 bytes: the key table's key then points into the
// entry, and a small filter is one object instead of two. Marking is most
// of what a million small filters cost the collector, and most of marking
// is finding the span of each object a pointer leads to: the key's and
// the value's are now one (a million creations: 4–9% less server CPU;
// docs/BENCHMARKS.md). A key of up to 16 bytes takes the 240-byte size
// class (shortKeyedEntry), as much as the entry and the key took apart;
// one of 17–24 bytes 8 bytes more, of 25–32 none.
type keyedBloomEntry struct {
	smallBloomEntry
	key [32]byte
}

type shortKeyedEntry struct {
	smallBloomEntry
	key [16]byte
}

const smallBloomWords = 18

// keyInside reports whether key is the copy held in v's own entry
// (keyedBloomEntry, shortKeyedEntry). It compares addresses only: v need
// not be one.
func keyInside(v *Value, key string) bool {
	return len(key) > 0 && uintptr(unsafe.Pointer(unsafe.StringData(key))) == uintptr(unsafe.Pointer(v))+keyOffset
}

// keyOffset is where both keyed entries hold their key.
const keyOffset = unsafe.Offsetof(keyedBloomEntry{}.key)

var _ [keyOffset - unsafe.Offsetof(shortKeyedEntry{}.key)]struct{}
var _ [unsafe.Offsetof(shortKeyedEntry{}.key) - keyOffset]struct{}

// smallEntry allocates the entry of a filter whose first link's bits fit
// smallBloomWords, with key's bytes in it when they fit (keyedBloomEntry,
// shortKeyedEntry): the entry, the room for the bits, and the key to file
// it under.
func smallEntry[K ~string | ~[]byte](key K) (*bloomEntry, []uint64, string) {
	switch n := len(key); {
	case n > 0 && n <= 16:
		ke := new(shortKeyedEntry)
		copy(ke.key[:], key)
		return &ke.bloomEntry, ke.bits[:], unsafe.String(&ke.key[0], n)
	case n > 16 && n <= 32:
		ke := new(keyedBloomEntry)
		copy(ke.key[:], key)
		return &ke.bloomEntry, ke.bits[:], unsafe.String(&ke.key[0], n)
	}
	se := new(smallBloomEntry)
	return &se.bloomEntry, se.bits[:], string(key)
}

// newBloom is the Value of a new filter as c (BF.RESERVE, or an add's
// auto-create) sizes it, and the key to file it under: c.Key's bytes,
// held in the entry itself when they fit beside small bits. The entry's
// key bytes are never written again, so the string is immutable as Go
// requires. It keeps the whole entry alive while anything holds it, so
// the change record, which outlives deleted keys until the image's next
// flush, keeps copies of such keys instead (Keyspace.recordKey).
func newBloom(c *command.Cmd) (*Value, string, error) {
	nonScaling := c.NonScaling || c.Expansion == 0
	var e *bloomEntry
	var buf []uint64
	var key string
	if n, ok := scalable.ChainBytes(c.Capacity, c.ErrorRate, nonScaling); ok && n <= smallBloomWords*8 && n <= c.MaxBytes {
		e, buf, key = smallEntry(c.Key)
	} else {
		e, key = new(bloomEntry), string(c.Key)
	}
	if err := e.chain.InitIn(c.Capacity, c.ErrorRate, c.Expansion, nonScaling, c.MaxBytes, buf); err != nil {
		if errors.Is(err, scalable.ErrGrow) {
			return nil, "", ErrBFCreate
		}
		return nil, "", mapScalable(err)
	}
	e.Kind, e.obj = KindBloom, unsafe.Pointer(&e.chain)
	return &e.Value, key, nil
}

// reserve is every RESERVE (BF, CF, BFX.W): a new key of kind, made by
// mk (with the key to file it under), refused over a key of that kind
// (and, by lookupKind, of another).
func (k *Keyspace) reserve(c *command.Cmd, kind Kind, mk func(*command.Cmd) (*Value, string, error)) Result {
	v, err := k.lookupKind(c, kind)
	if err != nil {
		return Result{Err: err}
	}
	if v != nil {
		return Result{Err: ErrItemExists}
	}
	nv, key, err := mk(c)
	if err != nil {
		return Result{Err: err}
	}
	k.create(c.DB, key, nv)
	return Result{}
}

func (k *Keyspace) bfReserve(c *command.Cmd) Result { return k.reserve(c, KindBloom, newBloom) }

func (k *Keyspace) bfAdd(c *command.Cmd) Result {
	v, err := k.lookupKind(c, KindBloom)
	if err != nil {
		return Result{Err: err}
	}
	if v == nil {
		if c.NoCreate {
			return Result{Err: ErrNotFound}
		}
		var key string
		v, key, err = newBloom(c)
		if err != nil {
			return Result{Err: err}
		}
		k.create(c.DB, key, v)
	}
	r := Result{Ints: itemInts(len(c.Items))}
	ch := v.Bloom()
	if len(c.Items) == 1 {
		// One item (BF.ADD) answers from shared memory (appendInt): no
		// allocation on the commonest write.
		var added bool
		if added, err = ch.Add(c.Items[0], c.MaxBytes); err == nil {
			r.Ints = appendInt(r.Ints, b2i(added))
		}
	} else {
		r.Ints, err = ch.AddManyTested(c.Items, c.MaxBytes, r.Ints, k.older)
	}
	k.changed(c.DB, c.Key)
	if err != nil {
		if !c.Multi {
			return Result{Err: mapScalable(err)}
		}
		r.more().Tail = mapScalable(err)
	}
	return r
}

// Prefetch starts loading the bits a BF.ADD-family command will touch (its
// first items), for the state machine to call a few commands ahead of
// Apply, on the goroutine that applies: it reads the key table as Apply
// does, without a lock. It changes nothing, and never expires or creates a
// key, so calling it or not gives the same state.
func (k *Keyspace) Prefetch(c *command.Cmd) {
	if c.Op != command.BFAdd {
		return
	}
	v := k.get(c.DB, c.Key)
	if v == nil || v.Kind != KindBloom {
		return
	}
	v.Bloom().PrefetchFirst(c.Items)
}

// PrefetchKey starts loading where the key table files c's key, for the
// state machine to call a few commands before Prefetch: it changes
// nothing and waits for nothing. The key the apply side looked up last
// (an entry's writes to one filter) needs no table, nor a hash.
func (k *Keyspace) PrefetchKey(c *command.Cmd) {
	if len(c.Key) > 0 && !k.isHot(c.DB, c.Key) {
		k.db(c.DB).keys.prefetch(c.Key)
	}
}

// itemInts is the room for n per-item replies: none for one, which
// appendInt gives from shared memory.
func itemInts(n int) []int64 {
	if n <= 1 {
		return nil
	}
	return make([]int64, 0, n)
}

// oneInts holds the per-item replies an add gives (-1, 0, 1), for a
// command of one item, the common BF.ADD and CF.ADD, to answer without an
// allocation: a slice of it, of capacity 1, so that no append writes it.
// Nothing writes it; the replies are only read.
var oneInts = [3]int64{-1, 0, 1}

// appendInt appends v to s, the first reply from oneInts.
func appendInt(s []int64, v int64) []int64 {
	if s == nil && v >= -1 && v <= 1 {
		return oneInts[v+1 : v+2 : v+2]
	}
	return append(s, v)
}

func b2i(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

// bfLoadChunk applies BF.LOADCHUNK, and the pieces of one split for the
// log (command.Pieces), which never carry a header.
func (k *Keyspace) bfLoadChunk(c *command.Cmd) Result {
	v, err := k.lookupKind(c, KindBloom)
	if v == nil && err == nil && c.Iter == 1 && c.Op == command.BFLoadChunk {
		ch, err := scalable.ParseChainHeader(c.Data, c.MaxBytes)
		if err != nil {
			return Result{Err: mapScalable(err)}
		}
		k.set(c.DB, string(c.Key), BloomValue(ch))
		return Result{}
	}
	if err != nil {
		return Result{Err: err}
	}
	if v == nil {
		return Result{Err: ErrNotFound}
	}
	if err := v.Bloom().LoadPart(c.Iter, c.Data, rest(c)); err != nil {
		return Result{Err: mapScalable(err)}
	}
	k.changed(c.DB, c.Key)
	return Result{}
}

func (k *Keyspace) cfReserve(c *command.Cmd) Result {
	return k.reserve(c, KindCuckoo, func(c *command.Cmd) (*Value, string, error) {
		cf, err := k.newCuckoo(c)
		if err != nil {
			return nil, "", err
		}
		return CuckooValue(cf), string(c.Key), nil
	})
}

func (k *Keyspace) newCuckoo(c *command.Cmd) (*scalable.Cuckoo, error) {
	cf, err := scalable.NewCuckoo(scalable.CuckooParams{
		Capacity: c.Capacity, BucketSize: c.BucketSize,
		MaxIterations: c.MaxIterations, Expansion: uint16(c.Expansion),
	}, c.MaxBytes)
	if err != nil {
		return nil, ErrTooLarge
	}
	return cf, nil
}

func (k *Keyspace) cfAdd(c *command.Cmd) Result {
	v, err := k.lookupKind(c, KindCuckoo)
	if err != nil {
		return Result{Err: err}
	}
	if v == nil {
		if c.NoCreate {
			return Result{Err: ErrNotFound}
		}
		if c.Capacity < 2*uint64(c.BucketSize) {
			return Result{Err: ErrCantCreate}
		}
		cf, err := k.newCuckoo(c)
		if err != nil {
			return Result{Err: err}
		}
		v = CuckooValue(cf)
		k.set(c.DB, string(c.Key), v)
	}
	if v.Cuckoo().Info().NumFilters >= uint64(c.MaxExpansions) {
		return Result{Err: ErrMaxExpansions}
	}
	r := Result{Ints: itemInts(len(c.Items))}
	var tail error
	for _, it := range c.Items {
		switch v.Cuckoo().Insert(it, c.NX, c.MaxBytes) {
		case scalable.Inserted:
			r.Ints = appendInt(r.Ints, 1)
		case scalable.Exists:
			r.Ints = appendInt(r.Ints, 0)
		case scalable.NoSpace:
			r.Ints = appendInt(r.Ints, -1)
			tail = ErrFilterFull
		case scalable.NoMemory:
			r.Ints = appendInt(r.Ints, -1)
			tail = ErrNoMemory
		}
	}
	k.changed(c.DB, c.Key)
	// CF.INSERT (Multi) reports a full filter per item, as -1.
	if !c.Multi && tail != nil {
		return Result{Err: tail}
	}
	return r
}

func (k *Keyspace) cfDel(c *command.Cmd) Result {
	v, err := k.lookupKind(c, KindCuckoo)
	if err != nil || v == nil {
		return Result{Err: ErrCFNotFound}
	}
	before := v.Cuckoo().Info().NumFilters
	ok := v.Cuckoo().Delete(c.Items[0])
	if ok {
		k.cuckooChanged(c, v, before)
	}
	return Result{Ints: []int64{b2i(ok)}}
}

func (k *Keyspace) cfCompact(c *command.Cmd) Result {
	v, err := k.lookupKind(c, KindCuckoo)
	if err != nil || v == nil {
		return Result{Err: ErrCompactNotFound}
	}
	before := v.Cuckoo().Info().NumFilters
	v.Cuckoo().Compact()
	k.cuckooChanged(c, v, before)
	return Result{}
}

// cuckooChanged records a modified cuckoo filter; one that lost sub-filters
// to compaction is rewritten whole, so no stale chunk of a dropped
// sub-filter stays in the stored image.
func (k *Keyspace) cuckooChanged(c *command.Cmd, v *Value, before uint64) {
	if v.Cuckoo().Info().NumFilters < before {
		k.replaced(c.DB, string(c.Key))
	} else {
		k.changed(c.DB, c.Key)
	}
}

// cfLoadChunk applies CF.LOADCHUNK and its pieces, as bfLoadChunk.
func (k *Keyspace) cfLoadChunk(c *command.Cmd) Result {
	v, err := k.lookupKind(c, KindCuckoo)
	if c.Iter == 1 && c.Op == command.CFLoadChunk {
		if err != nil {
			return Result{Err: err}
		}
		if v != nil {
			return Result{Err: ErrItemExists}
		}
		if len(c.Data) != scalable.CuckooHeaderSize {
			return Result{Err: ErrInvalidHeader}
		}
		cf, err := scalable.ParseCuckooHeader(c.Data, c.MaxBytes)
		if err != nil {
			return Result{Err: ErrCantCreate}
		}
		k.set(c.DB, string(c.Key), CuckooValue(cf))
		return Result{}
	}
	if err != nil {
		return Result{Err: err}
	}
	if v == nil {
		return Result{Err: ErrNotFound}
	}
	if err := v.Cuckoo().LoadPart(c.Iter, c.Data, rest(c)); err != nil {
		return Result{Err: ErrCantLoad}
	}
	k.changed(c.DB, c.Key)
	return Result{}
}

// rest is the length of the chunk a LOADCHUNK or a piece of one is
// checked as: its own data, or for a piece what is left of its chunk.
func rest(c *command.Cmd) int64 {
	if c.Op == command.BFLoadPart || c.Op == command.CFLoadPart {
		return c.Count
	}
	return int64(len(c.Data))
}
