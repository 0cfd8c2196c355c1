package server_test

import (
	"strings"
	"testing"

	"github.com/bfserver/bfserver/internal/golden"
	"github.com/bfserver/bfserver/memstore"
	"github.com/bfserver/bfserver/server"
)

// TestOracleASCIIFold replays testdata/oracle/asciifold.jsonl
// (capture_asciifold.py): keywords, subcommand, parameter, type and INFO
// section names spelled with a letter that Go's Unicode case folding maps
// onto an ASCII one (ſ, the Kelvin sign, İ, ı), then what the command did.
// Redis compares with strcasecmp, so each spelling is unknown: an option
// RedisBloom ignores (BF.RESERVE … EXPANſION 4 keeps expansion 2), a
// syntax error, an unknown subcommand, type or parameter, an empty INFO.
// SLOWLOG GET is compared but for its entries' ids, times, durations and
// addresses: which arguments it hides follows the same parsing.
func TestOracleASCIIFold(t *testing.T) {
	const file = "asciifold.jsonl"
	recs := loadAdmin(t, file)
	o := newOracleReplay(t)
	entries, want := 0, 0
	var chunk []golden.Record
	for _, r := range recs {
		if !r.Volatile {
			want++
		}
		if r.VolatilePositions == nil {
			chunk = append(chunk, r.Record)
			continue
		}
		o.run(chunk, file)
		chunk = nil
		got := o.conn(r.Conn).do(t, r.Argv())
		if err := sameEntries(t, got, r.Want(), r.VolatilePositions); err != nil {
			t.Errorf("[%s] %s: %v\n got %q\nwant %q", r.Section, show(r.Argv()), err, got, r.Want())
		}
		entries++
	}
	o.run(chunk, file)
	o.report()
	if entries == 0 || o.compared[file] != want {
		t.Errorf("compared %d replies and %d SLOWLOG GETs, want %d and some", o.compared[file], entries, want)
	}
}

// TestASCIIKeywordsOwn: bfserver's own commands and settings fold keywords
// as C does too: a look-alike letter leaves the keyword unknown, and
// nothing changes.
func TestASCIIKeywordsOwn(t *testing.T) {
	srv := startWith(t, server.Options{}, memstore.New())
	cl := dial(t, srv)
	const syntax = "-ERR syntax error\r\n"
	for _, c := range []struct {
		args []string
		want string // a reply, or a prefix ending in "…"
	}{
		{[]string{"BFX.WRESERVE", "w1", "0.01", "EX", "10", "CAPACITY", "100", "\u212aEEPRATE"}, syntax},
		{[]string{"EXISTS", "w1"}, ":0\r\n"},
		{[]string{"BFX.WINSERT", "w2", "COUNT", "10", "ITEM\u017f", "a"}, syntax},
		{[]string{"EXISTS", "w2"}, ":0\r\n"},
		{[]string{"BFX.WRESERVE", "w3", "0.01", "EX", "10", "CAPACITY", "100", "keeprate"}, "+OK\r\n"},
		{[]string{"CONSISTENCY", "\u017ftale"}, syntax},
		{[]string{"CONSISTENCY"}, "+linearizable\r\n"},
		{[]string{"CONSISTENCY", "STALE"}, "+stale\r\n"},
		{[]string{"CONFIG", "SET", "read-consistency", "stale"}, "+OK\r\n"},
		{[]string{"CONFIG", "SET", "read-consistency", "l\u0130nearizable"}, "-ERR CONFIG SET failed (possibly related to argument 'read-consistency')…"},
		{[]string{"CONFIG", "GET", "read-consistency"}, "*2\r\n$16\r\nread-consistency\r\n$5\r\nstale\r\n"},
	} {
		got := cl.run(t, c.args...)
		if want, prefix := strings.CutSuffix(c.want, "…"); got != c.want && !(prefix && strings.HasPrefix(got, want)) {
			t.Errorf("%q: got %q, want %q", c.args, got, c.want)
		}
	}
}
