package server_test

import (
	"testing"

	"github.com/bfserver/bfserver/internal/golden"
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
