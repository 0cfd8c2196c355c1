package keyspace

import (
	"math/rand/v2"
	"sync/atomic"

	"github.com/bfserver/bfserver/command"
	"github.com/bfserver/bfserver/internal/ascii"
	"github.com/bfserver/bfserver/internal/glob"
	"github.com/bfserver/bfserver/scalable"
)

// BF.INFO fields (command.Cmd.Field).
const (
	InfoAll uint8 = iota
	InfoCapacity
	InfoSize
	InfoFilters
	InfoItems
	InfoExpansion
)

// ReadInto is Read into a caller's Result, reusing its per-item slice: the
// membership reads then allocate nothing. r must be one ReadInto filled
// (or empty), never a write's Result: a write's Ints may be shared memory
// that an append must not write (appendInt).
func (k *Keyspace) ReadInto(c *command.Cmd, r *Result) {
	if k.loading {
		*r = Result{Err: ErrLoading}
		return
	}
	switch c.Op {
	case command.BFExists, command.CFExists, command.CFCount:
		ints := r.Ints[:0]
		*r = Result{}
		v := k.Lookup(c.DB, c.Key, c.Now)
		r.Found = v != nil
		var ch *scalable.Chain
		var cf *scalable.Cuckoo
		if v != nil {
			ch, cf = v.Bloom(), v.Cuckoo()
		}
		bloom := ch != nil && c.Op == command.BFExists
		if bloom && len(c.Items) > 1 {
			ch.PrefetchFirst(c.Items)
		}
		for i, it := range c.Items {
			var x int64
			switch {
			case bloom:
				ch.PrefetchNext(c.Items, i)
				x = b2i(ch.Test(it))
			case c.Op == command.CFExists && cf != nil:
				x = b2i(cf.Exists(it))
			case c.Op == command.CFCount && cf != nil:
				x = int64(cf.Count(it))
			}
			ints = append(ints, x)
		}
		r.Ints = ints
	default:
		*r = k.Read(c)
	}
}

// PrefetchExists starts loading the bits a BF.EXISTS of item in the key
// would test (the buckets, for CF.EXISTS), and returns at once. A session
// calls it one command ahead of the read in a pipeline of lookups, so
// that the cache misses of a filter larger than the cache (a test of a
// random item in a 120 MB one took 300 ns, 130 ns with the next one's
// bits loading beside it) overlap the work between them instead of
// adding up. It reads as ReadInto does and changes nothing.
func (k *Keyspace) PrefetchExists(dbi uint8, key, item []byte, now int64) {
	if k.loading {
		return
	}
	if v := k.Lookup(dbi, key, now); v != nil {
		if ch := v.Bloom(); ch != nil {
			ch.Prefetch(item)
		} else if cf := v.Cuckoo(); cf != nil {
			cf.Prefetch(item)
		}
	}
}

// Read answers a read-only command from current state. It may run
// concurrently with Apply.
func (k *Keyspace) Read(c *command.Cmd) Result {
	if k.loading {
		return Result{Err: ErrLoading}
	}
	switch c.Op {
	case command.WExists, command.WInfo, command.WScanDump:
		return k.readWindow(c)
	case command.CMSQuery, command.CMSInfo:
		return k.readCMS(c)
	case command.TopKQuery, command.TopKCount, command.TopKList, command.TopKInfo:
		return k.readTopK(c)
	case command.TDMin, command.TDMax, command.TDInfo, command.TDQuantile, command.TDCDF,
		command.TDTrimmedMean, command.TDRank, command.TDByRank:
		return k.tdQuery(c, false)
	case command.BFExists, command.CFExists, command.CFCount:
		var r Result
		k.ReadInto(c, &r)
		return r
	case command.BFInfo, command.BFDebug, command.BFScanDump:
		v, err := k.readKind(c, KindBloom)
		if err != nil {
			return Result{Err: err}
		}
		ch := v.Bloom()
		switch c.Op {
		case command.BFInfo:
			var one [1]*scalable.Link
			return Result{More: &More{BF: &BFInfo{Capacity: ch.Capacity(), Size: ch.MemUsage(),
				Filters: uint64(len(ch.LinksIn(&one))), Items: ch.Size(), Expansion: uint64(ch.Growth),
				NonScaling: ch.NonScaling()}}}
		case command.BFDebug:
			lines := ch.Debug()
			out := make([][]byte, len(lines))
			for i, l := range lines {
				out[i] = []byte(l)
			}
			return listResult(out)
		}
		if c.Flag {
			return Result{Err: ErrIterNotNumeric}
		}
		if c.Iter == 0 {
			return Result{Int: 1, More: bytesMore(ch.Header())}
		}
		next, b := ch.Chunk(c.Iter)
		return Result{Int: next, More: bytesMore(b)}
	case command.BFCard:
		v, err := k.readKind(c, KindBloom)
		if err == ErrNotFound {
			return Result{}
		}
		if err != nil {
			return Result{Err: err}
		}
		return Result{Int: int64(v.Bloom().Size())}
	case command.CFInfo, command.CFDebug, command.CFScanDump:
		v, err := k.readKind(c, KindCuckoo)
		if err != nil {
			return Result{Err: err}
		}
		cf := v.Cuckoo()
		switch c.Op {
		case command.CFInfo:
			info := cf.Info()
			return Result{More: &More{CF: &info}}
		case command.CFDebug:
			return bytesResult([]byte(cf.Debug()))
		}
		if cf.Items() == 0 {
			return Result{Null: true}
		}
		if c.Iter == 0 {
			return Result{Int: 1, More: bytesMore(cf.Header())}
		}
		next, b, ok := cf.Chunk(c.Iter)
		if !ok {
			return Result{Null: true}
		}
		return Result{Int: next, More: bytesMore(b)}
	case command.Exists:
		n := 0
		for _, key := range c.Keys {
			if k.Lookup(c.DB, key, c.Now) != nil {
				n++
			}
		}
		return Result{Int: int64(n)}
	case command.Type:
		v := k.Lookup(c.DB, c.Key, c.Now)
		if v == nil {
			return bytesResult([]byte("none"))
		}
		return bytesResult([]byte(v.Kind.TypeName()))
	case command.TTL:
		return k.ttl(c)
	case command.Keys:
		var out [][]byte
		k.Range(c.DB, func(key string, v *Value) bool {
			if !v.expired(c.Now) && glob.Match(c.Data, []byte(key)) {
				out = append(out, []byte(key))
			}
			return true
		})
		return listResult(out)
	case command.Scan:
		return k.scan(c)
	case command.DBSize:
		n, _ := k.Count(c.DB, c.Now)
		return Result{Int: int64(n)}
	case command.RandomKey:
		var keys []string
		k.Range(c.DB, func(key string, v *Value) bool {
			if !v.expired(c.Now) {
				keys = append(keys, key)
			}
			return true
		})
		if len(keys) == 0 {
			return Result{Null: true}
		}
		return bytesResult([]byte(keys[rand.IntN(len(keys))]))
	case command.Get:
		v := k.Lookup(c.DB, c.Key, c.Now)
		if v == nil {
			return Result{Null: true}
		}
		if v.Kind != KindString {
			return Result{Err: ErrWrongType}
		}
		return bytesResult([]byte(v.Str()))
	case command.Encoding:
		v := k.Lookup(c.DB, c.Key, c.Now)
		switch {
		case v == nil:
			return Result{Null: true}
		case v.Kind != KindString:
			return bytesResult([]byte("raw"))
		case intEncoded(v.Str()):
			return bytesResult([]byte("int"))
		case len(v.Str()) <= embstrMax:
			return bytesResult([]byte("embstr"))
		}
		return bytesResult([]byte("raw"))
	case command.MemUsage:
		v := k.Lookup(c.DB, c.Key, c.Now)
		if v == nil {
			return Result{Null: true}
		}
		return Result{Int: int64(KeyMemoryUsage(c.Key, v))}
	case command.Digest:
		v := k.Lookup(c.DB, c.Key, c.Now)
		if v == nil {
			return Result{Null: true}
		}
		return bytesResult([]byte(Digest(v)))
	case command.Dump:
		v := k.Lookup(c.DB, c.Key, c.Now)
		if v == nil {
			return Result{Null: true}
		}
		if dumpWrites(v) {
			return Result{Err: ErrNeedsLog}
		}
		return bytesResult(EncodeDump(v))
	}
	return Result{Err: ErrInvalidCommand}
}

// MemoryUsage is the filter's own accounting (BF.INFO/CF.INFO Size) or the
// string's length.
func MemoryUsage(v *Value) uint64 {
	switch v.Kind {
	case KindBloom:
		return v.Bloom().MemUsage()
	case KindCuckoo:
		return v.Cuckoo().Info().Size
	case KindWindow:
		return v.Window().Bytes()
	case KindString:
		return uint64(len(v.Str()))
	}
	return v.Sketch().Bytes()
}

func (k *Keyspace) readKind(c *command.Cmd, want Kind) (*Value, error) {
	v, err := ofKind(k.Lookup(c.DB, c.Key, c.Now), want)
	if err == nil && v == nil {
		err = ErrNotFound
	}
	return v, err
}

// ttl reads the expiry once, lock-free as Lookup does: that one read
// decides both whether the key is live and what is left of it, which an
// EXPIRE between two reads could make disagree.
func (k *Keyspace) ttl(c *command.Cmd) Result {
	v := k.db(c.DB).keys.getBytes(c.Key)
	var at int64
	if v != nil {
		at = atomic.LoadInt64(&v.ExpireAt)
	}
	switch {
	case v == nil || expiredAt(at, c.Now):
		return Result{Int: -2}
	case at == 0:
		return Result{Int: -1}
	}
	ms := at - c.Now
	if c.Flag {
		return Result{Int: ms}
	}
	return Result{Int: (ms + 500) / 1000}
}

func (k *Keyspace) scan(c *command.Cmd) Result {
	count := c.Count
	if count <= 0 {
		count = 10
	}
	typ := string(c.Dst)
	var out [][]byte
	pos := int64(0)
	next := int64(0)
	k.Range(c.DB, func(key string, v *Value) bool {
		if pos < c.Iter {
			pos++
			return true
		}
		if pos >= c.Iter+count {
			next = pos
			return false
		}
		pos++
		if v.expired(c.Now) || (c.Data != nil && !glob.Match(c.Data, []byte(key))) ||
			(typ != "" && !ascii.EqualFold(typ, v.Kind.TypeName())) {
			return true
		}
		out = append(out, []byte(key))
		return true
	})
	return Result{Int: next, More: &More{List: out}}
}
