package server

import (
	"slices"
	"testing"
)

// catsRegisteredElsewhere are the categories conn.go registers differently
// from Redis 8.0-m01 (COMMAND INFO reports Redis's, and ACL uses COMMAND
// INFO's, subcommands their own). Containers: Redis gives the bare
// container @slow only.
var catsRegisteredElsewhere = map[string]bool{
	"client": true, "config": true, "module": true, // containers
	"lastsave": true, // Redis adds @dangerous
	"wait":     true, // Redis adds @blocking
}

// TestSpecsAgreeWithInfo checks that what a command does agrees with what
// COMMAND INFO says of it: the arity the dispatcher checks, deny-oom, and
// the ACL categories.
func TestSpecsAgreeWithInfo(t *testing.T) {
	check := func(full string, sp *spec) {
		if !sp.meta.Captured {
			return
		}
		in := sp.meta.Info
		if in.Arity != sp.arity {
			t.Errorf("%s: registered arity %d, COMMAND INFO %d", full, sp.arity, in.Arity)
		}
		if sp.flags != nil && slices.Contains(in.Flags, "denyoom") != slices.Contains(sp.flags, "denyoom") {
			t.Errorf("%s: deny-oom registered %v, COMMAND INFO flags %v", full, sp.flags, in.Flags)
		}
		if sp.cats != nil && !slices.Equal(in.Categories, sp.cats) && !catsRegisteredElsewhere[full] {
			t.Errorf("%s: categories registered %v, COMMAND INFO %v", full, sp.cats, in.Categories)
		}
	}
	n := 0
	for _, name := range sortedKeys(commandTable()) {
		sp := commands[name]
		if sp.meta.Captured {
			n++
		}
		check(name, sp)
		for _, sub := range sortedKeys(sp.subs) {
			check(name+"|"+sub, sp.subs[sub])
		}
	}
	if n < 60 {
		t.Errorf("only %d registered commands have captured COMMAND INFO", n)
	}
}

// TestDocsForEveryCommand: every registered command and subcommand has a
// COMMAND DOCS entry with a summary and a group (redis-cli's help needs them).
func TestDocsForEveryCommand(t *testing.T) {
	for _, name := range sortedKeys(commandTable()) {
		sp := commands[name]
		fulls := map[string]*spec{name: sp}
		for _, sub := range sortedKeys(sp.subs) {
			fulls[name+"|"+sub] = sp.subs[sub]
		}
		for full, s := range fulls {
			d := s.meta.Doc
			if d.Group == "" || (d.Summary == "" && !s.module) {
				t.Errorf("%s: docs %+v", full, d)
			}
		}
	}
}

func TestKeyPositions(t *testing.T) {
	b := func(s ...string) [][]byte {
		out := make([][]byte, len(s))
		for i, x := range s {
			out[i] = []byte(x)
		}
		return out
	}
	cases := []struct {
		full string
		args [][]byte
		want []int
	}{
		{"del", b("del", "a", "b", "c"), []int{1, 2, 3}},
		{"rename", b("rename", "a", "b"), []int{1, 2}},
		{"bf.debug", b("bf.debug"), nil},
		{"bf.debug", b("bf.debug", "k", "x"), []int{1}},
		{"memory|usage", b("memory", "usage", "k", "SAMPLES", "5"), []int{2}},
		{"copy", b("copy", "a", "b", "DB", "1"), []int{1, 2}},
	}
	for _, c := range cases {
		sp, _ := lookupFull([]byte(c.full))
		if sp == nil {
			t.Fatalf("%s not registered", c.full)
		}
		got, _ := sp.meta.Keys(c.args)
		if !slices.Equal(got, c.want) {
			t.Errorf("%s %q: keys at %v, want %v", c.full, c.args, got, c.want)
		}
	}
}
