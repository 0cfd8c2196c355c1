package server_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/bfserver/bfserver/internal/golden"
	"github.com/bfserver/bfserver/server"
)

// TestCommandsDoc: docs/COMMANDS.md's "Every command" table has a row for
// every command Redis 8 lists and every command this server registers,
// and says yes exactly for those it registers, with the subcommands it has.
func TestCommandsDoc(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join(golden.Dir(), "..", "..", "docs", "COMMANDS.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, table, ok := strings.Cut(string(doc), "\n## Every command\n")
	if !ok {
		t.Fatal("docs/COMMANDS.md has no \"Every command\" section")
	}
	rows := map[string][2]string{}
	for _, l := range strings.Split(table, "\n") {
		f := strings.Split(l, "|")
		if len(f) != 5 || !strings.HasPrefix(strings.TrimSpace(f[1]), "`") {
			continue
		}
		name := strings.ToLower(strings.Trim(strings.TrimSpace(f[1]), "`"))
		rows[name] = [2]string{strings.TrimSpace(f[2]), strings.TrimSpace(f[3])}
	}
	recs, err := golden.LoadOracle("commanddocs.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	subs := map[string][]string{}
	names := map[string]bool{}
	for _, r := range recs {
		if a := r.Argv(); len(a) == 2 && string(a[0]) == "COMMAND" && string(a[1]) == "LIST" && r.Proto == 2 {
			for _, n := range listSet(parseReply(t, r.Want())) {
				if p, s, ok := strings.Cut(n, "|"); ok {
					subs[p] = append(subs[p], s)
				} else {
					names[n] = true
				}
			}
		}
	}
	if len(names) == 0 {
		t.Fatal("no COMMAND LIST in the capture")
	}
	// This server's own commands, from its COMMAND LIST.
	srv := startServer(t, nil)
	for _, n := range listSet(parseReply(t, dial(t, srv).do(t, argv("COMMAND", "LIST")))) {
		if !strings.Contains(n, "|") {
			names[n] = true
		}
	}
	for n := range names {
		row, ok := rows[n]
		if !ok {
			t.Errorf("no row for %s", strings.ToUpper(n))
			continue
		}
		want := "no"
		if server.Registered(n) {
			want = "yes"
		}
		if row[0] != want {
			t.Errorf("%s: the table says %s, the server %s", strings.ToUpper(n), row[0], want)
			continue
		}
		if want == "no" || len(subs[n]) == 0 {
			continue
		}
		var have, lack []string
		for _, s := range subs[n] {
			if server.Registered(n + "|" + s) {
				have = append(have, strings.ToUpper(s))
			} else {
				lack = append(lack, strings.ToUpper(s))
			}
		}
		note := "every subcommand"
		if len(lack) > 0 {
			slices.Sort(have)
			slices.Sort(lack)
			note = "subcommands " + strings.Join(have, ", ") + "; not " + strings.Join(lack, ", ")
		}
		if row[1] != note {
			t.Errorf("%s: the table says %q, the server has %q", strings.ToUpper(n), row[1], note)
		}
	}
	for n := range rows {
		if !names[n] {
			t.Errorf("the table lists %s, which neither Redis nor this server has", strings.ToUpper(n))
		}
	}
}
