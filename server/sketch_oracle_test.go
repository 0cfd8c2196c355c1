package server_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/bfserver/bfserver/internal/golden"
	"github.com/bfserver/bfserver/memstore"
	"github.com/bfserver/bfserver/server"
)

// TestOracleCMS replays testdata/oracle/cms.jsonl (every CMS command, arity,
// argument and key error in RedisBloom's order, INITBYPROB's sizing at its
// floating-point edges, overflow, MERGE with weights, DUMP/RESTORE of
// RedisBloom's own payloads and crafted ones, TYPE, MEMORY USAGE, RENAME,
// EXPIRE, COPY, WATCH and MULTI; RESP2 then RESP3) and the seeded random
// sessions cms-random-NNN.jsonl, byte for byte.
func TestOracleCMS(t *testing.T) { replayOracleFiles(t, "cms") }

// replayOracleFiles replays <name>.jsonl and <name>-random-NNN.jsonl from
// testdata/oracle, each on a fresh server, byte for byte.
func replayOracleFiles(t *testing.T, name string) {
	files := []string{name + ".jsonl"}
	more, _ := filepath.Glob(filepath.Join(golden.OracleDir(), name+"-random-*.jsonl"))
	for _, m := range more {
		files = append(files, filepath.Base(m))
	}
	if len(files) < 9 {
		t.Fatalf("only %d capture files", len(files))
	}
	for i, f := range files {
		files[i] = filepath.Join(golden.OracleDir(), f)
	}
	replayFiles(t, files)
}

// TestOracleSketchDocs replays testdata/oracle/sketchdocs.jsonl: COMMAND
// DOCS, INFO, GETKEYS and GETKEYSANDFLAGS of the sketch commands, ACL CAT
// of their categories (and of bloom and cuckoo, which must list exactly
// RedisBloom's commands, none of bfserver's own) and COMMAND LIST by
// category and pattern, RESP2 and RESP3. Unordered replies compare as
// sets; records about a sketch family this build lacks are skipped.
func TestOracleSketchDocs(t *testing.T) {
	recs, err := golden.LoadOracle("sketchdocs.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	o := newOracleReplay(t)
	compared := 0
	for i, r := range recs {
		if !r.IsCommand() {
			continue
		}
		args := r.Argv()
		about := strings.ToLower(string(args[len(args)-1]))
		if len(args) > 3 && strings.EqualFold(string(args[1]), "GETKEYS") || len(args) > 3 && strings.EqualFold(string(args[1]), "GETKEYSANDFLAGS") {
			about = strings.ToLower(string(args[2]))
		}
		if strings.HasPrefix(about, "topk") && !server.Registered("topk.add") {
			continue
		}
		if r.Proto == 3 && !o.hello[r.Conn] {
			o.conn(r.Conn).do(t, [][]byte{[]byte("HELLO"), []byte("3")})
			o.hello[r.Conn] = true
		}
		got := o.conn(r.Conn).do(t, args)
		if r.Volatile {
			continue
		}
		want := r.Want()
		if r.Unordered {
			if g, w := listSet(parseReply(t, got)), listSet(parseReply(t, want)); !slices.Equal(g, w) {
				t.Errorf("line %d %s\n got %v\nwant %v", i+1, show(args), g, w)
			}
		} else if !bytes.Equal(got, want) {
			t.Errorf("line %d %s\n got %q\nwant %q", i+1, show(args), got, want)
		}
		compared++
	}
	if compared < 50 {
		t.Errorf("compared only %d records", compared)
	}
}

// TestOracleTopK replays testdata/oracle/topk.jsonl (every TOPK command,
// arity, argument and key error in RedisBloom's order, the heap's order
// and ties, decay on a shared counter, INCRBY's bounds, binary and empty
// items, DUMP/RESTORE, TYPE, MEMORY USAGE, RENAME, EXPIRE, COPY, WATCH and
// MULTI; RESP2 then RESP3) and the seeded random sessions
// topk-random-NNN.jsonl, byte for byte. RedisBloom's decay coin is rand():
// the captures use items that share no counter, or decay 1 (a shared
// counter always decays), so that its replies do not depend on it.
func TestOracleTopK(t *testing.T) { replayOracleFiles(t, "topk") }

// TestOracleTopKRefused replays testdata/oracle/topk-refused.jsonl: Top-K
// payloads RedisBloom's loader refuses (bucket or heap string of the wrong
// length, k or width 0, encoding version 1, an item missing).
func TestOracleTopKRefused(t *testing.T) {
	recs, err := golden.LoadOracle("topk-refused.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	o := newOracleReplay(t)
	o.run(recs, "topk-refused.jsonl")
	o.report()
	if o.compared["topk-refused.jsonl"] != 8 {
		t.Fatalf("compared %d records", o.compared["topk-refused.jsonl"])
	}
}

// TestTopKIncrByBadMidway: RedisBloom answers a TOPK.INCRBY whose bad
// increment is not the last item with a header counting every item and
// fewer elements, so its client reads the next reply as this one's last
// element. bfserver adds the items before the bad one, as RedisBloom does,
// and counts in its header only the elements it sends.
func TestTopKIncrByBadMidway(t *testing.T) {
	cl := dial(t, startServer(t, nil))
	cl.do(t, argv("TOPK.RESERVE", "t", "3", "50", "3", "1"))
	got := cl.do(t, argv("TOPK.INCRBY", "t", "a", "2", "b", "x", "c", "3"))
	want := "*2\r\n$-1\r\n-TopK: increment must be an integer greater or equal to 0                            and smaller or equal to 100,000\r\n"
	if string(got) != want {
		t.Fatalf("got %q, want %q", got, want)
	}
	if got := cl.do(t, argv("TOPK.LIST", "t", "WITHCOUNT")); string(got) != "*2\r\n$1\r\na\r\n:2\r\n" {
		t.Fatalf("after it: %q", got)
	}
	if got := cl.do(t, argv("PING")); string(got) != "+PONG\r\n" {
		t.Fatalf("the next reply: %q", got)
	}
}

// TestOracleTDigest replays, byte for byte through the server, the
// t-digest's captures of RedisBloom 8.8.0: sketch/tdigest/testdata's
// transcript (every command, option and error in RESP2 and RESP3, DUMP
// and RESTORE, TTLs, MULTI), its 8 random sessions (queries that compress
// and DUMPs among ADDs, MERGEs and RESETs) and its 50 000-value streams;
// its MEMORY USAGE and INFO for compressions 1 to 100000 and keys of
// 1 to 300 bytes; and testdata/oracle/tdigest.jsonl (WATCH against every command,
// compressing reads inside MULTI, other types, RESTORE with a TTL).
// Queries that compress go through the log here: the replies must be
// RedisBloom's all the same.
func TestOracleTDigest(t *testing.T) {
	own := filepath.Join("..", "sketch", "tdigest", "testdata")
	files := []string{filepath.Join(golden.OracleDir(), "tdigest.jsonl"), filepath.Join(own, "transcript.jsonl"),
		filepath.Join(own, "stream.jsonl"), filepath.Join(own, "memusage.jsonl")}
	more, _ := filepath.Glob(filepath.Join(own, "random-*.jsonl"))
	files = append(files, more...)
	if len(files) < 11 {
		t.Fatalf("only %d capture files", len(files))
	}
	replayFiles(t, files)
}

// replayFiles replays each capture on a fresh server, byte for byte; at
// least half of each file's records must be compared.
func replayFiles(t *testing.T, paths []string) {
	for _, path := range paths {
		f := filepath.Base(path)
		t.Run(f, func(t *testing.T) {
			recs, err := golden.LoadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			o := newOracleReplay(t)
			o.run(recs, f)
			o.report()
			if n := o.compared[f]; n < len(recs)/2 {
				t.Errorf("compared only %d of %d records", n, len(recs))
			}
		})
	}
}

// TestOracleTDigestFormat replays sketch/tdigest/testdata/format.jsonl
// through the server: 3 812 numbers, each added alone to a reset digest
// (RedisModule_StringToDouble's parsing: ADD's reply) and read back with
// TDIGEST.MIN (Redis's double formatting), in RESP2 and RESP3. The
// commands are pipelined, a few hundred at a time.
func TestOracleTDigestFormat(t *testing.T) {
	f, err := os.Open(filepath.Join("..", "sketch", "tdigest", "testdata", "format.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	type rec struct{ Input, Add, Resp2, Resp3 string }
	var recs []rec
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var r rec
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatal(err)
		}
		recs = append(recs, r)
	}
	if len(recs) < 3800 {
		t.Fatalf("only %d records", len(recs))
	}
	srv := startServer(t, nil)
	for _, proto := range []int{2, 3} {
		cl := dial(t, srv)
		if proto == 3 {
			cl.do(t, argv("HELLO", "3"))
		}
		cl.do(t, argv("TDIGEST.CREATE", "k"))
		bad := 0
		for start := 0; start < len(recs); start += 300 {
			batch := recs[start:min(start+300, len(recs))]
			var out []byte
			for _, r := range batch {
				out = append(out, golden.Encode(argv("TDIGEST.RESET", "k"))...)
				out = append(out, golden.Encode(argv("TDIGEST.ADD", "k", r.Input))...)
				out = append(out, golden.Encode(argv("TDIGEST.MIN", "k"))...)
			}
			cl.c.SetDeadline(time.Now().Add(30 * time.Second))
			if _, err := cl.c.Write(out); err != nil {
				t.Fatal(err)
			}
			for _, r := range batch {
				want := r.Resp2
				if proto == 3 {
					want = r.Resp3
				}
				var got [3][]byte
				for i := range got {
					if got[i], err = golden.ReadFrame(cl.r); err != nil {
						t.Fatal(err)
					}
				}
				if string(got[0]) != "+OK\r\n" || string(got[1]) != r.Add || string(got[2]) != want {
					if bad++; bad <= 10 {
						t.Errorf("RESP%d %q: ADD %q MIN %q, want %q %q", proto, r.Input, got[1], got[2], r.Add, want)
					}
				}
			}
		}
	}
}

// TestTDigestMemoryLimits: a compression RedisBloom accepts is never
// refused for its size (its nodes are allocated as values arrive, where
// MEMORY USAGE reports RedisBloom's full arrays); an ADD that would grow
// a digest past the per-filter cap is refused whole; digests count
// towards maxmemory, which refuses their writes but not their reads.
func TestTDigestMemoryLimits(t *testing.T) {
	srv := startWith(t, server.Options{MaxMemory: 200_000, MaxFilterBytes: 64 << 10}, memstore.New())
	cl := dial(t, srv)
	run := func(args ...string) string { t.Helper(); return strings.TrimSuffix(cl.run(t, args...), "\r\n") }
	if got := run("TDIGEST.CREATE", "big", "COMPRESSION", "100000000"); got != "+OK" {
		t.Fatalf("CREATE of a huge compression: %q", got)
	}
	if got := run("MEMORY", "USAGE", "big"); got != ":"+strconv.Itoa(80+16*600000010+32) {
		t.Errorf("MEMORY USAGE %q", got)
	}
	add := []string{"TDIGEST.ADD", "big"}
	for i := 0; i < 5000; i++ {
		add = append(add, strconv.Itoa(i))
	}
	if got := run(add...); got != "-ERR filter would exceed max-filter-bytes" {
		t.Fatalf("ADD past the per-filter cap: %q", got)
	}
	if got := run("TDIGEST.ADD", "big", "1", "2"); got != "+OK" {
		t.Fatalf("a small ADD: %q", got)
	}
	oom := false
	for i := 0; i < 100 && !oom; i++ {
		key := "d" + strconv.Itoa(i)
		if got := run("TDIGEST.CREATE", key); strings.HasPrefix(got, "-OOM ") {
			oom = true
			break
		}
		if got := run(append([]string{"TDIGEST.ADD", key}, add[2:602]...)...); strings.HasPrefix(got, "-OOM ") {
			oom = true
		}
	}
	if !oom {
		t.Fatal("a hundred digests of 600 values never reached maxmemory")
	}
	if got := run("TDIGEST.QUANTILE", "d0", "0.5"); !strings.HasPrefix(got, "*1") {
		t.Fatalf("a read over maxmemory: %q", got)
	}
}
