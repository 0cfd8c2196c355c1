package server_test

import (
	"bytes"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/bfserver/bfserver/internal/golden"
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
	for _, f := range files {
		t.Run(f, func(t *testing.T) {
			recs, err := golden.LoadOracle(f)
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
