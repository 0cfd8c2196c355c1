package server

import (
	"math"

	"github.com/bfserver/bfserver/command"
	"github.com/bfserver/bfserver/internal/ascii"
	"github.com/bfserver/bfserver/internal/memtune"
	"github.com/bfserver/bfserver/internal/redisnum"
	"github.com/bfserver/bfserver/keyspace"
	"github.com/bfserver/bfserver/resp"
)

var (
	catKeyW   = []string{"@keyspace", "@write", "@fast"}
	catKeyWS  = []string{"@keyspace", "@write", "@slow"}
	catKeyR   = []string{"@keyspace", "@read", "@fast"}
	catKeyRS  = []string{"@keyspace", "@read", "@slow"}
	catDanger = []string{"@keyspace", "@write", "@slow", "@dangerous"}
)

func keyCmd(name string, arity int, flags, cats []string, first, last, step int,
	parse func(*session, [][]byte) (command.Cmd, string),
	render func(*resp.Writer, *command.Cmd, *keyspace.Result)) {
	register(&spec{name: name, arity: arity, flags: flags, first: first, last: last, step: step,
		cats: cats, keyFlags: kRW, parse: parse, render: render})
}

func registerKeys() {
	wr := []string{"write"}
	wrFast := []string{"write", "fast"}
	rdFast := []string{"readonly", "fast"}
	rd := []string{"readonly"}
	keyCmd("del", -2, wr, catKeyWS, 1, -1, 1, parseKeys(command.Del), renderInt)
	keyCmd("unlink", -2, wrFast, catKeyW, 1, -1, 1, parseKeys(command.Del), renderInt)
	keyCmd("exists", -2, rdFast, catKeyR, 1, -1, 1, parseKeys(command.Exists), renderInt)
	keyCmd("type", 2, rdFast, catKeyR, 1, 1, 1, parseKeyOnly(command.Type), renderStatus)
	keyCmd("rename", 3, wr, catKeyWS, 1, 2, 1, parseRename(false), renderOK)
	keyCmd("renamenx", 3, wrFast, catKeyW, 1, 2, 1, parseRename(true), renderInt)
	keyCmd("copy", -3, []string{"write", "denyoom"}, catKeyWS, 1, 2, 1, parseCopy, renderInt)
	keyCmd("expire", -3, wrFast, catKeyW, 1, 1, 1, parseExpire(1000, false), renderInt)
	keyCmd("pexpire", -3, wrFast, catKeyW, 1, 1, 1, parseExpire(1, false), renderInt)
	keyCmd("expireat", -3, wrFast, catKeyW, 1, 1, 1, parseExpire(1000, true), renderInt)
	keyCmd("pexpireat", -3, wrFast, catKeyW, 1, 1, 1, parseExpire(1, true), renderInt)
	keyCmd("persist", 2, wrFast, catKeyW, 1, 1, 1, parseKeyOnly(command.Persist), renderInt)
	keyCmd("ttl", 2, rdFast, catKeyR, 1, 1, 1, parseTTL(false), renderInt)
	keyCmd("pttl", 2, rdFast, catKeyR, 1, 1, 1, parseTTL(true), renderInt)
	// EXPIRETIME and PEXPIRETIME are PTTL read at the command's stamped
	// clock, made absolute again: the same instant on every node.
	keyCmd("expiretime", 2, rdFast, catKeyR, 1, 1, 1, parseTTL(true), renderExpireTime(1000))
	keyCmd("pexpiretime", 2, rdFast, catKeyR, 1, 1, 1, parseTTL(true), renderExpireTime(1))
	keyCmd("keys", 2, rd, []string{"@keyspace", "@read", "@slow", "@dangerous"}, 0, 0, 0, parseKeysPattern, renderList)
	keyCmd("scan", -2, rd, catKeyRS, 0, 0, 0, parseScan, renderScan)
	keyCmd("dbsize", 1, rdFast, catKeyR, 0, 0, 0, parseNoKey(command.DBSize), renderInt)
	keyCmd("randomkey", 1, rd, catKeyRS, 0, 0, 0, parseNoKey(command.RandomKey), renderBulk)
	keyCmd("flushdb", -1, wr, catDanger, 0, 0, 0, parseFlush(command.FlushDB), renderOK)
	keyCmd("flushall", -1, wr, catDanger, 0, 0, 0, parseFlush(command.FlushAll), renderOK)
	keyCmd("set", -3, []string{"write", "denyoom"}, []string{"@write", "@string", "@slow"}, 1, 1, 1, parseSet, renderSet)
	keyCmd("get", 2, rdFast, []string{"@read", "@string", "@fast"}, 1, 1, 1, parseKeyOnly(command.Get), renderBulk)
	keyCmd("dump", 2, rd, catKeyRS, 1, 1, 1, parseKeyOnly(command.Dump), renderBulk)
	keyCmd("restore", -4, []string{"write", "denyoom"}, []string{"@keyspace", "@write", "@slow", "@dangerous"}, 1, 1, 1, parseRestore, renderOK)
	keyCmd("bfx.digest", 2, rd, []string{"@read", "@slow"}, 1, 1, 1, parseKeyOnly(command.Digest), renderBulk)
	// bfserver's own (the BFX. prefix, which RedisBloom does not use): ACL CAT
	// bloom lists only what RedisBloom lists.
	commands["bfx.digest"].keyFlags = []string{"RO", "access"} // it reads the value: %R~ patterns allow it
	register(&spec{name: "object", arity: -2, subs: map[string]*spec{
		"encoding": {name: "encoding", arity: 3, flags: rd, first: 2, last: 2, step: 1, cats: catKeyRS,
			parse: func(s *session, a [][]byte) (command.Cmd, string) {
				return command.Cmd{Op: command.Encoding, Key: a[2]}, ""
			}, render: renderBulk},
	}})
	register(&spec{name: "memory", arity: -2, cats: []string{"@slow"}, subs: map[string]*spec{
		"purge": {name: "purge", arity: 2, run: func(s *session, a [][]byte) {
			memtune.Release()
			s.w.Simple("OK")
		}},
		"usage": {name: "usage", arity: -3, flags: rd, first: 2, last: 2, step: 1, cats: []string{"@read", "@slow"},
			parse: parseMemoryUsage, render: renderMemUsage},
	}})
}

// parseMemoryUsage is MEMORY USAGE key [SAMPLES count]: options are
// checked before the key, as memoryCommand does. The count is parsed and
// otherwise unused: a filter's size does not depend on sampling.
func parseMemoryUsage(s *session, a [][]byte) (command.Cmd, string) {
	for j := 3; j < len(a); j++ {
		if !ascii.EqualFold(a[j], "SAMPLES") || j+1 >= len(a) {
			return command.Cmd{}, msgSyntax
		}
		n, ok := redisnum.ParseLL(a[j+1])
		if !ok {
			return command.Cmd{}, msgNotInteger
		}
		if n < 0 {
			return command.Cmd{}, msgSyntax
		}
		j++
	}
	return command.Cmd{Op: command.MemUsage, Key: a[2]}, ""
}

func parseKeys(op command.Op) func(*session, [][]byte) (command.Cmd, string) {
	return func(s *session, args [][]byte) (command.Cmd, string) {
		return command.Cmd{Op: op, Keys: args[1:]}, ""
	}
}

func parseNoKey(op command.Op) func(*session, [][]byte) (command.Cmd, string) {
	return func(s *session, args [][]byte) (command.Cmd, string) { return command.Cmd{Op: op}, "" }
}

func parseFlush(op command.Op) func(*session, [][]byte) (command.Cmd, string) {
	return func(s *session, args [][]byte) (command.Cmd, string) {
		for _, a := range args[1:] {
			if !ascii.EqualFold(a, "ASYNC") && !ascii.EqualFold(a, "SYNC") {
				return command.Cmd{}, msgSyntax
			}
		}
		if len(args) > 2 {
			return command.Cmd{}, msgSyntax
		}
		return command.Cmd{Op: op}, ""
	}
}

func parseRename(nx bool) func(*session, [][]byte) (command.Cmd, string) {
	return func(s *session, args [][]byte) (command.Cmd, string) {
		return command.Cmd{Op: command.Rename, Key: args[1], Dst: args[2], NX: nx}, ""
	}
}

func parseCopy(s *session, args [][]byte) (command.Cmd, string) {
	c := command.Cmd{Op: command.Copy, Key: args[1], Dst: args[2]}
	for i := 3; i < len(args); i++ {
		switch {
		case ascii.EqualFold(args[i], "REPLACE"):
			c.NX = true
		case ascii.EqualFold(args[i], "DB") && i+1 < len(args):
			i++
			db, ok := redisnum.ParseLL(args[i])
			if !ok {
				return command.Cmd{}, msgNotInteger
			}
			if db != int64(s.db) {
				return command.Cmd{}, "ERR COPY to another database is not supported"
			}
		default:
			return command.Cmd{}, msgSyntax
		}
	}
	return c, ""
}

func parseExpire(unit int64, absolute bool) func(*session, [][]byte) (command.Cmd, string) {
	return func(s *session, args [][]byte) (command.Cmd, string) {
		v, ok := redisnum.ParseLL(args[2])
		if !ok {
			return command.Cmd{}, msgNotInteger
		}
		c := command.Cmd{Op: command.Expire, Key: args[1]}
		for _, a := range args[3:] {
			var cond uint8
			switch ascii.ToUpper(a) {
			case "NX":
				cond = command.CondNX
			case "XX":
				cond = command.CondXX
			case "GT":
				cond = command.CondGT
			case "LT":
				cond = command.CondLT
			default:
				return command.Cmd{}, "ERR Unsupported option " + sanitize(string(a), 128)
			}
			if c.Field != command.CondNone && c.Field != cond {
				return command.Cmd{}, "ERR NX and XX, GT or LT options at the same time are not compatible"
			}
			c.Field = cond
		}
		name := ascii.ToLower(args[0])
		if v > math.MaxInt64/unit || v < math.MinInt64/unit {
			return command.Cmd{}, "ERR invalid expire time in '" + name + "' command"
		}
		ms := v * unit
		now := s.now.UnixMilli()
		if !absolute {
			if ms > math.MaxInt64-now {
				return command.Cmd{}, "ERR invalid expire time in '" + name + "' command"
			}
			ms += now
		}
		c.Iter = ms
		return c, ""
	}
}

func parseTTL(ms bool) func(*session, [][]byte) (command.Cmd, string) {
	return func(s *session, args [][]byte) (command.Cmd, string) {
		return command.Cmd{Op: command.TTL, Key: args[1], Flag: ms}, ""
	}
}

// renderExpireTime answers a key's expiry as a Unix time in units of
// unit ms, rounded as Redis's expiretimeCommand rounds seconds; -1 for
// none, -2 for no key.
func renderExpireTime(unit int64) func(*resp.Writer, *command.Cmd, *keyspace.Result) {
	return func(w *resp.Writer, c *command.Cmd, r *keyspace.Result) {
		if r.Int < 0 {
			w.Int(r.Int)
			return
		}
		w.Int((c.Now + r.Int + unit/2) / unit)
	}
}

func parseKeysPattern(s *session, args [][]byte) (command.Cmd, string) {
	return command.Cmd{Op: command.Keys, Data: args[1]}, ""
}

// knownTypes are the type names SCAN TYPE takes (lower case): Redis's,
// the module types of RedisBloom, and bfserver's own window type.
var knownTypes = map[string]bool{"string": true, "list": true, "set": true, "zset": true, "hash": true,
	"stream": true, "mbbloom--": true, "mbbloomcf": true,
	// RedisBloom's sketches: Count-Min Sketch, Top-K, t-digest.
	"cmsk-type": true, "topk-type": true, "tdis-type": true,
	// bfserver's own: sliding windows.
	"bfxwindow": true}

func parseScan(s *session, args [][]byte) (command.Cmd, string) {
	cur, err := parseUint(args[1])
	if err {
		return command.Cmd{}, "ERR invalid cursor"
	}
	c := command.Cmd{Op: command.Scan, Iter: cur}
	for i := 2; i < len(args); i += 2 {
		if i+1 >= len(args) {
			return command.Cmd{}, msgSyntax
		}
		switch ascii.ToUpper(args[i]) {
		case "MATCH":
			c.Data = args[i+1]
		case "COUNT":
			n, ok := redisnum.ParseLL(args[i+1])
			if !ok {
				return command.Cmd{}, msgNotInteger
			}
			if n < 1 {
				return command.Cmd{}, msgSyntax
			}
			c.Count = n
		case "TYPE":
			t := ascii.ToLower(args[i+1])
			if !knownTypes[t] {
				return command.Cmd{}, "ERR unknown type name '" + sanitize(string(args[i+1]), 128) + "'"
			}
			c.Dst = args[i+1]
		default:
			return command.Cmd{}, msgSyntax
		}
	}
	return c, ""
}

func parseUint(b []byte) (int64, bool) {
	v, ok := redisnum.ParseLL(b)
	if !ok || v < 0 {
		return 0, true
	}
	return v, false
}

func parseSet(s *session, args [][]byte) (command.Cmd, string) {
	if len(args) != 3 {
		return command.Cmd{}, msgSyntax
	}
	return command.Cmd{Op: command.Set, Key: args[1], Data: args[2]}, ""
}

// parseRestore: RESTORE key ttl payload [REPLACE] [ABSTTL] [IDLETIME s]
// [FREQ f]. The expiry is made absolute here, on the receiving node.
func parseRestore(s *session, args [][]byte) (command.Cmd, string) {
	ttl, ok := redisnum.ParseLL(args[2])
	if !ok {
		return command.Cmd{}, msgNotInteger
	}
	if ttl < 0 {
		return command.Cmd{}, "ERR Invalid TTL value, must be >= 0"
	}
	c := command.Cmd{Op: command.Restore, Key: args[1], Data: args[3]}
	abs := false
	for i := 4; i < len(args); i++ {
		switch ascii.ToUpper(args[i]) {
		case "REPLACE":
			c.NX = true
		case "ABSTTL":
			abs = true
		case "IDLETIME", "FREQ":
			if i+1 >= len(args) {
				return command.Cmd{}, msgSyntax
			}
			if v, ok := redisnum.ParseLL(args[i+1]); !ok || v < 0 {
				return command.Cmd{}, msgNotInteger
			}
			i++
		default:
			return command.Cmd{}, msgSyntax
		}
	}
	if ttl > 0 && !abs {
		now := s.now.UnixMilli()
		if ttl > math.MaxInt64-now {
			return command.Cmd{}, "ERR Invalid TTL value, must be >= 0"
		}
		ttl += now
	}
	c.Iter = ttl
	return c, ""
}

func renderStatus(w *resp.Writer, c *command.Cmd, r *keyspace.Result) { w.Simple(string(r.Bytes())) }

func renderSet(w *resp.Writer, c *command.Cmd, r *keyspace.Result) { w.Simple("OK") }

func renderMemUsage(w *resp.Writer, c *command.Cmd, r *keyspace.Result) {
	if r.Null {
		w.Null()
		return
	}
	w.Int(r.Int)
}

func renderList(w *resp.Writer, c *command.Cmd, r *keyspace.Result) {
	w.Array(len(r.List()))
	for _, k := range r.List() {
		w.Bulk(k)
	}
}

func renderScan(w *resp.Writer, c *command.Cmd, r *keyspace.Result) {
	w.Array(2)
	w.BulkString(itoa(r.Int))
	renderList(w, c, r)
}
