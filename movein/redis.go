package movein

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/bfserver/bfserver/rdb"
	"github.com/bfserver/bfserver/sketch/cms"
	"github.com/bfserver/bfserver/sketch/tdigest"
	"github.com/bfserver/bfserver/sketch/topk"
	"github.com/redis/go-redis/v9"
)

// endpoint is one server named by a redis:// or rediss:// URL. It hands out
// one client per database (a Redis connection has one selected database).
type endpoint struct {
	url           string // for messages, without the password
	opt           *redis.Options
	hasDB         bool // the URL names a database (/N)
	mu            sync.Mutex
	clients       map[int]*redis.Client
	noPExpireTime atomic.Bool // the server does not know PEXPIRETIME
}

// dial parses u with go-redis's ParseURL. Every client speaks RESP2 (the
// replies compared here are the same bytes either way), never retries a
// command on its own (CF.INSERT is not idempotent), and waits up to timeout
// for a reply: a 16 MiB LOADCHUNK on a durable server takes a while.
func dial(u, caFile string, timeout time.Duration) (*endpoint, error) {
	opt, err := redis.ParseURL(u)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", redactURL(u), err)
	}
	opt.Protocol = 2
	opt.MaxRetries = -1
	opt.DisableIdentity = true
	opt.ReadTimeout = timeout
	opt.WriteTimeout = timeout
	opt.PoolSize = 8
	if opt.TLSConfig != nil && caFile != "" {
		pem, err := os.ReadFile(caFile)
		if err != nil {
			return nil, err
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("%s: no certificates found", caFile)
		}
		opt.TLSConfig.RootCAs = pool
		opt.TLSConfig.MinVersion = tls.VersionTLS12
	}
	p, _ := url.Parse(u)
	hasDB := p != nil && strings.Trim(p.Path, "/") != ""
	return &endpoint{url: redactURL(u), opt: opt, hasDB: hasDB, clients: map[int]*redis.Client{}}, nil
}

func redactURL(u string) string {
	p, err := url.Parse(u)
	if err != nil || p.User == nil {
		return u
	}
	if _, ok := p.User.Password(); ok {
		p.User = url.UserPassword(p.User.Username(), "xxxxx")
	}
	return p.String()
}

func (e *endpoint) db(n int) *redis.Client {
	e.mu.Lock()
	defer e.mu.Unlock()
	if c, ok := e.clients[n]; ok {
		return c
	}
	o := *e.opt
	o.DB = n
	c := redis.NewClient(&o)
	e.clients[n] = c
	return c
}

func (e *endpoint) close() {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, c := range e.clients {
		c.Close()
	}
}

// keyspaceDBs lists the databases that hold keys (INFO keyspace).
func (e *endpoint) keyspaceDBs(ctx context.Context) ([]int, error) {
	s, err := e.db(e.opt.DB).Info(ctx, "keyspace").Result()
	if err != nil {
		return nil, err
	}
	var dbs []int
	for _, line := range strings.Split(s, "\n") {
		name, _, ok := strings.Cut(strings.TrimSpace(line), ":")
		if n, found := strings.CutPrefix(name, "db"); ok && found {
			if i, err := strconv.Atoi(n); err == nil {
				dbs = append(dbs, i)
			}
		}
	}
	return dbs, nil
}

// kind is a key type: Bloom (BF.*) or Cuckoo (CF.*), moved chunk by chunk
// with SCANDUMP/LOADCHUNK, or a sketch (CMS.*, TOPK.*, TDIGEST.*), moved
// whole with DUMP/RESTORE (RedisBloom has no SCANDUMP for them).
type kind int

const (
	bloom kind = iota
	cuckoo
	cmsKind
	topkKind
	tdigestKind
)

// kinds are the types migrate moves, in its order.
var kinds = []kind{bloom, cuckoo, cmsKind, topkKind, tdigestKind}

// whole reports whether the kind moves as one DUMP payload.
func (k kind) whole() bool { return k == cmsKind || k == topkKind || k == tdigestKind }

func (k kind) cmd(name string) string {
	switch k {
	case cuckoo:
		return "CF." + name
	case cmsKind:
		return "CMS." + name
	case topkKind:
		return "TOPK." + name
	case tdigestKind:
		return "TDIGEST." + name
	}
	return "BF." + name
}

// typeName is the TYPE reply for the kind.
func (k kind) typeName() string {
	switch k {
	case cuckoo:
		return "MBbloomCF"
	case cmsKind:
		return cms.TypeName
	case topkKind:
		return topk.TypeName
	case tdigestKind:
		return tdigest.TypeName
	}
	return "MBbloom--"
}

func (k kind) String() string {
	switch k {
	case cuckoo:
		return "cuckoo"
	case cmsKind:
		return "cms"
	case topkKind:
		return "topk"
	case tdigestKind:
		return "tdigest"
	}
	return "bloom"
}

// info is a BF.INFO or CF.INFO reply as (field, value) pairs in order.
type info []infoField

type infoField struct {
	name  string
	value int64
	null  bool   // a nil reply (BF.INFO's expansion of a NONSCALING filter)
	text  string // a string reply (TOPK.INFO's decay)
}

func (in info) String() string {
	var b strings.Builder
	for i, f := range in {
		if i > 0 {
			b.WriteByte(' ')
		}
		if f.null {
			fmt.Fprintf(&b, "%s=nil", f.name)
		} else if f.text != "" {
			fmt.Fprintf(&b, "%s=%s", f.name, f.text)
		} else {
			fmt.Fprintf(&b, "%s=%d", f.name, f.value)
		}
	}
	return b.String()
}

func (in info) get(name string) int64 {
	v, _ := in.lookup(name)
	return v
}

func (in info) lookup(name string) (int64, bool) {
	for _, f := range in {
		if f.name == name {
			return f.value, true
		}
	}
	return 0, false
}

func (in info) equal(o info) bool { return in.String() == o.String() }

// size is the key's memory size as its INFO reports it (a sketch's, from
// its dimensions, as RedisBloom counts it; a t-digest's Memory usage,
// which a wrapped capacity makes negative, counted as none).
func (in info) size() int64 {
	if m, ok := in.lookup("Memory usage"); ok {
		return max(m, 0)
	}
	if k := in.get("k"); k > 0 {
		return topk.StructBytes + topk.BucketBytes*in.get("width")*in.get("depth") + topk.HeapBytes*k
	}
	if w := in.get("width"); w > 0 {
		return cms.StructBytes + 4*w*in.get("depth")
	}
	return in.get("Size")
}

// errGone means the key does not exist (any more).
var errGone = errors.New("key does not exist")

func isNotFound(err error) bool {
	if err == nil {
		return false
	}
	s := err.Error()
	return strings.Contains(s, "not found") || strings.Contains(s, "does not exist")
}

func parseInfo(v any) (info, error) {
	a, ok := v.([]any)
	if !ok || len(a)%2 != 0 {
		return nil, fmt.Errorf("unexpected INFO reply %T", v)
	}
	in := make(info, 0, len(a)/2)
	for i := 0; i < len(a); i += 2 {
		name, _ := a[i].(string)
		switch val := a[i+1].(type) {
		case int64:
			in = append(in, infoField{name: name, value: val})
		case nil:
			in = append(in, infoField{name: name, null: true})
		case string:
			in = append(in, infoField{name: name, text: val})
		case float64:
			in = append(in, infoField{name: name, text: strconv.FormatFloat(val, 'g', -1, 64)})
		default:
			return nil, fmt.Errorf("unexpected INFO value %T for %q", a[i+1], name)
		}
	}
	return in, nil
}

func getInfo(ctx context.Context, c *redis.Client, k kind, key string) (info, error) {
	return infoOf(c.Do(ctx, k.cmd("INFO"), key))
}

// infoOf is the reply of a BF.INFO or CF.INFO command (errGone: no key).
func infoOf(c *redis.Cmd) (info, error) {
	v, err := c.Result()
	if err != nil {
		if isNotFound(err) {
			return nil, errGone
		}
		return nil, err
	}
	return parseInfo(v)
}

// emptyCuckooHeader rebuilds the 38-byte SCANDUMP header of a Cuckoo filter
// that holds no items, from its CF.INFO: CF.SCANDUMP answers such a filter
// with [0, nil] at once, so its dump cannot be read, but all its buckets are
// empty and the header is all there is to it. Loading the header alone
// (CF.LOADCHUNK key 1 header) recreates it exactly.
func emptyCuckooHeader(in info) []byte {
	b := make([]byte, 38)
	binary.LittleEndian.PutUint64(b[0:], uint64(in.get("Number of items inserted")))
	binary.LittleEndian.PutUint64(b[8:], uint64(in.get("Number of buckets")))
	binary.LittleEndian.PutUint64(b[16:], uint64(in.get("Number of items deleted")))
	binary.LittleEndian.PutUint64(b[24:], uint64(in.get("Number of filters")))
	binary.LittleEndian.PutUint16(b[32:], uint16(in.get("Bucket size")))
	binary.LittleEndian.PutUint16(b[34:], uint16(in.get("Max iterations")))
	binary.LittleEndian.PutUint16(b[36:], uint16(in.get("Expansion rate")))
	return b
}

// scanDump reads key's dump in order, calling fn with each piece and the
// iterator LOADCHUNK takes for it: the header first, then each chunk. Only
// one piece is held at a time. For an empty Cuckoo filter fn gets the header
// rebuilt from in (which must then be its CF.INFO).
func scanDump(ctx context.Context, c *redis.Client, k kind, key string, in info, fn func(iter int64, data string) error) error {
	it := int64(0)
	for {
		v, err := c.Do(ctx, k.cmd("SCANDUMP"), key, it).Slice()
		if err != nil {
			if isNotFound(err) {
				return errGone
			}
			return err
		}
		if len(v) != 2 {
			return fmt.Errorf("%s: unexpected reply of %d elements", k.cmd("SCANDUMP"), len(v))
		}
		next, ok := v[0].(int64)
		if !ok {
			return fmt.Errorf("%s: unexpected iterator %T", k.cmd("SCANDUMP"), v[0])
		}
		if next == 0 {
			if it == 0 {
				if k != cuckoo {
					return fmt.Errorf("%s: empty dump", k.cmd("SCANDUMP"))
				}
				if in.get("Number of items inserted") != 0 {
					return fmt.Errorf("CF.SCANDUMP: no dump for a filter with %d items", in.get("Number of items inserted"))
				}
				return fn(1, string(emptyCuckooHeader(in)))
			}
			return nil
		}
		data, _ := v[1].(string)
		if err := fn(next, data); err != nil {
			return err
		}
		it = next
	}
}

// bytesOf views s as bytes without copying (a chunk is up to 16 MiB); the
// caller must not modify them. Hashing only reads them.
func bytesOf(s string) []byte { return unsafe.Slice(unsafe.StringData(s), len(s)) }

// digest is the SHA-256 of a filter's concatenated dump (header and every
// chunk) and its INFO, read in one pass.
type digest struct {
	sum  string
	info info
}

func dumpDigest(ctx context.Context, c *redis.Client, k kind, key string) (digest, error) {
	if k.whole() {
		// DUMP first: a t-digest's compresses it, which INFO shows.
		_, sum, err := dumpWhole(ctx, c, k, key)
		if err != nil {
			return digest{}, err
		}
		in, err := getInfo(ctx, c, k, key)
		return digest{sum: sum, info: in}, err
	}
	in, err := getInfo(ctx, c, k, key)
	if err != nil {
		return digest{}, err
	}
	h := sha256.New()
	err = scanDump(ctx, c, k, key, in, func(_ int64, data string) error {
		h.Write(bytesOf(data))
		return nil
	})
	if err != nil {
		return digest{}, err
	}
	return digest{sum: hex.EncodeToString(h.Sum(nil)), info: in}, nil
}

// expiry is a key's absolute expiry in Unix milliseconds; 0 means none.
// PEXPIRETIME (Redis 7 and later) gives it exactly; where the server does
// not know it (Redis before 7, bfserver before 2026-12), PTTL plus the local clock at the reply gives it to
// within the round trip.
func (e *endpoint) expiry(ctx context.Context, db int, key string) (int64, error) {
	c := e.db(db)
	if !e.noPExpireTime.Load() {
		v, err := c.Do(ctx, "PEXPIRETIME", key).Int64()
		if err == nil {
			switch v {
			case -2:
				return 0, errGone
			case -1:
				return 0, nil
			}
			return v, nil
		}
		if !strings.Contains(strings.ToLower(err.Error()), "unknown command") {
			return 0, err
		}
		e.noPExpireTime.Store(true)
	}
	ms, err := c.Do(ctx, "PTTL", key).Int64()
	if err != nil {
		return 0, err
	}
	switch ms {
	case -2:
		return 0, errGone
	case -1:
		return 0, nil
	}
	return time.Now().UnixMilli() + ms, nil
}

// dumpWhole is a sketch's DUMP payload and the digest of the value it
// holds: the payload decoded (Redis may LZF-compress it, bfserver does
// not), so that the same sketch digests alike on either server.
func dumpWhole(ctx context.Context, c *redis.Client, k kind, key string) (string, string, error) {
	p, err := c.Dump(ctx, key).Result()
	if err == redis.Nil {
		return "", "", errGone
	}
	if err != nil {
		return "", "", err
	}
	v, err := canonical(k, []byte(p))
	if err != nil {
		return "", "", fmt.Errorf("DUMP %s: %w", showKey(key), err)
	}
	sum := sha256.Sum256(v)
	return p, hex.EncodeToString(sum[:]), nil
}

// canonical is the full state a sketch's DUMP payload holds, as the
// sketch's own encoder writes it (a Top-K's item pointers, which differ
// per process, written as zero).
func canonical(k kind, p []byte) ([]byte, error) {
	body, err := rdb.Open(p)
	if err != nil {
		return nil, err
	}
	r := rdb.NewReader(body, uint64(len(p))*1100)
	if r.Byte() != rdb.TypeModule2 || r.Len() != rdb.ModuleID(k.typeName(), 0) {
		return nil, fmt.Errorf("not a %s payload", k.typeName())
	}
	switch k {
	case topkKind:
		t, err := topk.FromRDB(r, math.MaxUint64)
		if err != nil {
			return nil, err
		}
		return t.AppendRDB(nil), nil
	case tdigestKind:
		d, err := tdigest.FromRDB(r, uint64(len(p))*2)
		if err != nil {
			return nil, err
		}
		return d.AppendRDB(nil), nil
	}
	s, err := cms.FromRDB(r, math.MaxUint64)
	if err != nil {
		return nil, err
	}
	return s.Marshal(), nil
}
