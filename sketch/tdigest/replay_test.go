package tdigest

import (
	"bytes"
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/bfserver/bfserver/internal/golden"
	"github.com/bfserver/bfserver/internal/redisnum"
	"github.com/bfserver/bfserver/rdb"
)

// The replay tests run the captures of testdata/ (RedisBloom 8.8.0's own
// replies) against this package: a small model server (refServer) keeps
// the keys, and each TDIGEST command is answered only with the package's
// functions — argument checks, digest operations, reply formatting — so
// a byte-identical reply proves the package, not the harness. refServer
// is also the reference for wiring the package into the command layer:
// its order of checks is RedisBloom's.

func readRecords(t testing.TB, path string) []golden.Record {
	t.Helper()
	recs, err := golden.LoadFile(path)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return recs
}

// reply builds RESP replies.
type reply struct {
	b     []byte
	proto int
}

func (w *reply) simple(s string) { w.b = append(w.b, '+'); w.b = append(w.b, s...); w.crlf() }
func (w *reply) err(e error)     { w.b = append(w.b, '-'); w.b = append(w.b, e.Error()...); w.crlf() }
func (w *reply) crlf()           { w.b = append(w.b, '\r', '\n') }
func (w *reply) integer(n int64) {
	w.b = append(w.b, ':')
	w.b = strconv.AppendInt(w.b, n, 10)
	w.crlf()
}
func (w *reply) header(c byte, n int) {
	w.b = append(w.b, c)
	w.b = strconv.AppendInt(w.b, int64(n), 10)
	w.crlf()
}
func (w *reply) bulk(s []byte) { w.header('$', len(s)); w.b = append(w.b, s...); w.crlf() }
func (w *reply) null() {
	if w.proto == 3 {
		w.b = append(w.b, "_\r\n"...)
	} else {
		w.b = append(w.b, "$-1\r\n"...)
	}
}
func (w *reply) double(f float64) {
	if w.proto == 3 {
		w.b = redisnum.AppendRESP3Double(w.b, f)
	} else {
		w.b = redisnum.AppendRESP2Double(w.b, f)
	}
}

// refServer holds keys: *Digest or string.
type refServer struct {
	keys  map[string]any
	multi map[string][][][]byte // queued commands per connection
	abort map[string]bool
}

func newRefServer() *refServer {
	return &refServer{keys: map[string]any{}, multi: map[string][][][]byte{}, abort: map[string]bool{}}
}

// genericArity is Redis's arity of the core commands the captures use.
var genericArity = map[string]int{
	"flushall": -1, "set": -3, "del": -2, "exists": -2, "type": 2, "rename": 3, "dump": 2,
	"restore": -4, "multi": 1,
}

func arityOK(a, argc int) bool {
	if a >= 0 {
		return argc == a
	}
	return argc >= -a
}

var errNotModelled = errors.New("not modelled")

// do answers one command; errNotModelled for commands the harness does
// not model (they are then not compared).
func (s *refServer) do(conn string, proto int, args [][]byte) ([]byte, error) {
	w := &reply{proto: proto}
	name := strings.ToLower(string(args[0]))
	if q, ok := s.multi[conn]; ok {
		switch name {
		case "exec":
			delete(s.multi, conn)
			if s.abort[conn] {
				delete(s.abort, conn)
				w.err(Error("EXECABORT Transaction discarded because of previous errors."))
				return w.b, nil
			}
			w.header('*', len(q))
			for _, c := range q {
				b, err := s.do(conn, proto, c)
				if err != nil {
					return nil, err
				}
				w.b = append(w.b, b...)
			}
			return w.b, nil
		case "discard":
			delete(s.multi, conn)
			delete(s.abort, conn)
			w.simple("OK")
			return w.b, nil
		}
		if a, ok := Arity[name]; ok && !arityOK(a, len(args)) {
			s.abort[conn] = true
			w.err(ArityError(name))
			return w.b, nil
		}
		s.multi[conn] = append(q, args)
		w.simple("QUEUED")
		return w.b, nil
	}
	if _, ok := Arity[name]; ok {
		if err := CheckArity(name, len(args)); err != nil {
			w.err(err)
			return w.b, nil
		}
		s.tdigest(w, name, args)
		return w.b, nil
	}
	if a, ok := genericArity[name]; ok && !arityOK(a, len(args)) {
		w.err(ArityError(name))
		return w.b, nil
	}
	switch name {
	case "multi":
		s.multi[conn] = nil
		w.simple("OK")
	case "flushall":
		s.keys = map[string]any{}
		w.simple("OK")
	case "set":
		s.keys[string(args[1])] = string(args[2])
		w.simple("OK")
	case "del":
		n := 0
		for _, k := range args[1:] {
			if _, ok := s.keys[string(k)]; ok {
				delete(s.keys, string(k))
				n++
			}
		}
		w.integer(int64(n))
	case "exists":
		n := 0
		for _, k := range args[1:] {
			if _, ok := s.keys[string(k)]; ok {
				n++
			}
		}
		w.integer(int64(n))
	case "type":
		switch s.keys[string(args[1])].(type) {
		case *Digest:
			w.simple(TypeName)
		case string:
			w.simple("string")
		default:
			w.simple("none")
		}
	case "rename":
		v, ok := s.keys[string(args[1])]
		if !ok {
			w.err(Error("ERR no such key"))
			break
		}
		delete(s.keys, string(args[1]))
		s.keys[string(args[2])] = v
		w.simple("OK")
	case "dump":
		switch v := s.keys[string(args[1])].(type) {
		case *Digest:
			v.Compress() // RedisBloom's rdb_save compresses the live digest
			w.bulk(dumpPayload(v))
		case string:
			w.bulk(rdb.Seal(rdb.AppendRawString([]byte{0}, []byte(v))))
		default:
			w.null()
		}
	case "restore":
		replace := len(args) > 4 && strings.EqualFold(string(args[4]), "REPLACE")
		if _, ok := s.keys[string(args[1])]; ok && !replace {
			w.err(Error("BUSYKEY Target key name already exists."))
			break
		}
		v, err := restorePayload(args[3])
		if err != nil {
			w.err(err)
			break
		}
		s.keys[string(args[1])] = v
		w.simple("OK")
	case "hello", "expire", "persist", "ttl", "memory", "copy", "object", "scan", "command", "acl":
		return nil, errNotModelled
	default:
		return nil, fmt.Errorf("unexpected command %q", name)
	}
	return w.b, nil
}

var tdigestID = rdb.ModuleID(TypeName, EncodingVer)

// dumpPayload is DUMP's payload for a digest: RDB_TYPE_MODULE_2, the
// module id, the value, the EOF opcode, then rdb.Seal's trailer.
func dumpPayload(d *Digest) []byte {
	b := rdb.AppendLen([]byte{rdb.TypeModule2}, tdigestID)
	b = append(d.AppendRDB(b), rdb.OpEOF)
	return rdb.Seal(b)
}

// restorePayload decodes a DUMP payload: a t-digest or a string.
func restorePayload(p []byte) (any, error) {
	body, err := rdb.Open(p)
	if err != nil {
		return nil, Error("ERR DUMP payload version or checksum are wrong")
	}
	bad := Error("ERR Bad data format")
	r := rdb.NewReader(body, 1<<30)
	switch r.Byte() {
	case 0:
		s := r.RawString()
		if r.Err() != nil || len(r.Rest()) != 0 {
			return nil, bad
		}
		return string(s), nil
	case rdb.TypeModule2:
	default:
		return nil, bad
	}
	if r.Len() != tdigestID {
		return nil, bad
	}
	d, err := FromRDB(r, 1<<30)
	if err != nil || r.Len() != rdb.OpEOF || r.Err() != nil || len(r.Rest()) != 0 {
		return nil, bad
	}
	return d, nil
}

// digestFor is _TDigest_KeyCheck.
func (s *refServer) digestFor(key []byte) (*Digest, error) {
	switch v := s.keys[string(key)].(type) {
	case *Digest:
		return v, nil
	case nil:
		return nil, ErrKeyMissing
	default:
		return nil, ErrWrongType
	}
}

// tdigest answers a TDIGEST command that passed CheckArity, in
// RedisBloom's order of checks.
func (s *refServer) tdigest(w *reply, name string, args [][]byte) {
	key := args[1]
	switch name {
	case "tdigest.create":
		switch s.keys[string(key)].(type) {
		case *Digest:
			w.err(ErrKeyExists)
			return
		case string:
			w.err(ErrWrongType)
			return
		}
		c, err := CreateArgs(args[2:])
		if err != nil {
			w.err(err)
			return
		}
		d, ok := New(c)
		if !ok {
			w.err(ErrAlloc)
			return
		}
		s.keys[string(key)] = d
		w.simple("OK")
		return
	case "tdigest.merge":
		s.merge(w, args)
		return
	}
	d, err := s.digestFor(key)
	if err != nil {
		w.err(err)
		return
	}
	rest := args[2:]
	switch name {
	case "tdigest.reset":
		d.Reset()
		w.simple("OK")
	case "tdigest.add":
		vals, err := AddArgs(rest)
		if err == nil {
			err = d.AddValues(vals)
		}
		if err != nil {
			w.err(err)
			return
		}
		w.simple("OK")
	case "tdigest.min":
		w.double(d.Min())
	case "tdigest.max":
		w.double(d.Max())
	case "tdigest.quantile", "tdigest.cdf", "tdigest.byrank", "tdigest.byrevrank":
		var out []float64
		switch name {
		case "tdigest.quantile":
			var qs []float64
			if qs, err = QuantileArgs(rest); err == nil {
				out = d.Quantiles(qs)
			}
		case "tdigest.cdf":
			var vs []float64
			if vs, err = CDFArgs(rest); err == nil {
				out = d.CDF(vs)
			}
		default:
			var rs []int64
			if rs, err = ByRankArgs(rest); err == nil {
				out = d.ByRanks(rs, name == "tdigest.byrevrank")
			}
		}
		if err != nil {
			w.err(err)
			return
		}
		w.header('*', len(out))
		for _, f := range out {
			w.double(f)
		}
	case "tdigest.rank", "tdigest.revrank":
		vs, err := RankArgs(rest)
		if err != nil {
			w.err(err)
			return
		}
		out := d.Ranks(vs, name == "tdigest.revrank")
		w.header('*', len(out))
		for _, n := range out {
			w.integer(n)
		}
	case "tdigest.trimmed_mean":
		lo, hi, err := TrimmedMeanArgs(rest[0], rest[1])
		if err != nil {
			w.err(err)
			return
		}
		w.double(d.TrimmedMean(lo, hi))
	case "tdigest.info":
		vals := d.Info().Values()
		if w.proto == 3 {
			w.header('%', len(vals))
		} else {
			w.header('*', 2*len(vals))
		}
		for i, v := range vals {
			w.simple(InfoFieldNames[i])
			w.integer(v)
		}
	}
}

func (s *refServer) merge(w *reply, args [][]byte) {
	dstKey := args[1]
	var dst *Digest
	switch v := s.keys[string(dstKey)].(type) {
	case *Digest:
		dst = v
	case string:
		w.err(ErrWrongType)
		return
	}
	m, err := ParseMergeArgs(args[2:])
	if err != nil {
		w.err(err)
		return
	}
	srcs := make([]*Digest, m.NumKeys)
	for i := range srcs {
		k := args[3+i]
		if bytes.Equal(k, dstKey) {
			if dst == nil {
				w.err(ErrKeyMissing)
				return
			}
			srcs[i] = dst
			continue
		}
		if srcs[i], err = s.digestFor(k); err != nil {
			w.err(err)
			return
		}
	}
	to, err := Merge(dst, srcs, m)
	if err != nil {
		w.err(err)
		return
	}
	s.keys[string(dstKey)] = to
	w.simple("OK")
}

// replay runs a capture file through refServer; it returns the number of
// compared records.
func replay(t *testing.T, path string) int {
	recs := readRecords(t, path)
	s := newRefServer()
	compared, fails := 0, 0
	for i, r := range recs {
		if !r.IsCommand() {
			continue
		}
		args := r.Argv()
		got, err := s.do(r.Conn, r.Proto, args)
		if errors.Is(err, errNotModelled) || r.Volatile {
			continue
		}
		if err != nil {
			t.Fatalf("%s:%d: %v", filepath.Base(path), i+1, err)
		}
		compared++
		if want := r.Want(); !bytes.Equal(got, want) {
			fails++
			if fails <= 10 {
				t.Errorf("%s:%d [%s] %s\n got %q\nwant %q", filepath.Base(path), i+1, r.Section,
					short(args), got, want)
			}
		}
	}
	if fails > 10 {
		t.Errorf("%s: %d mismatches in all", filepath.Base(path), fails)
	}
	return compared
}

func short(args [][]byte) string {
	var parts []string
	for i, a := range args {
		if i == 8 {
			parts = append(parts, fmt.Sprintf("... (%d args)", len(args)))
			break
		}
		if len(a) > 24 {
			a = append(a[:24:24], "..."...)
		}
		parts = append(parts, strconv.Quote(string(a)))
	}
	return strings.Join(parts, " ")
}

func TestReplayTranscript(t *testing.T) {
	n := replay(t, "testdata/transcript.jsonl")
	t.Logf("%d replies compared", n)
}

func TestReplayRandomSessions(t *testing.T) {
	files, _ := filepath.Glob("testdata/random-*.jsonl")
	if len(files) == 0 {
		t.Fatal("no random sessions")
	}
	total := 0
	for _, f := range files {
		total += replay(t, f)
	}
	t.Logf("%d sessions, %d replies compared", len(files), total)
}

func TestReplayStreams(t *testing.T) {
	n := replay(t, "testdata/stream.jsonl")
	t.Logf("%d replies compared", n)
}
