package acl

import (
	"bytes"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/bfserver/bfserver/cmdinfo"
)

// testTable is Redis's commands as captured (cmdinfo.Captured), with
// the categories COMMAND INFO gives them.
var testTable = func() *Table {
	var defs []Def
	var def func(c *cmdinfo.Command) Def
	def = func(c *cmdinfo.Command) Def {
		d := Def{Meta: c, Categories: c.Info.Categories, NoAuth: slices.Contains(c.Info.Flags, "no_auth")}
		for _, sub := range c.Subs {
			d.Subs = append(d.Subs, def(sub))
		}
		return d
	}
	for _, c := range cmdinfo.Captured() {
		defs = append(defs, def(c))
	}
	return NewTable(defs)
}()

func parseOps(t testing.TB, ops ...string) *User {
	t.Helper()
	u, err := newUser(testTable, "u").Apply(ops, false)
	if err != nil {
		t.Fatalf("%q: %v", ops, err)
	}
	return u
}

func argv(s ...string) [][]byte {
	out := make([][]byte, len(s))
	for i, x := range s {
		out[i] = []byte(x)
	}
	return out
}

// allowed runs the permission check for a command line.
func allowed(u *User, args ...string) (Result, string) {
	a := argv(args...)
	c := testTable.Lookup(args[0])
	if c.Subs != nil && len(a) > 1 {
		c = c.Subs[strings.ToLower(args[1])]
	}
	r, pos := u.Check(c, a)
	if r == OK {
		return r, ""
	}
	return r, string(a[pos])
}

// TestACLRuleErrors: each malformed rule is refused with Redis's text, and
// changes nothing (ACL SETUSER is all or none).
func TestACLRuleErrors(t *testing.T) {
	for _, c := range []struct {
		ops  []string
		want string
	}{
		{[]string{"bogus"}, "ERR Error in ACL SETUSER modifier 'bogus': Syntax error"},
		{[]string{"on", "bogus", "off"}, "ERR Error in ACL SETUSER modifier 'bogus': Syntax error"},
		{[]string{"+nosuch"}, "ERR Error in ACL SETUSER modifier '+nosuch': Unknown command or category name in ACL"},
		{[]string{"-@nosuch"}, "ERR Error in ACL SETUSER modifier '-@nosuch': Unknown command or category name in ACL"},
		{[]string{"+"}, "ERR Error in ACL SETUSER modifier '+': Unknown command or category name in ACL"},
		{[]string{"+@"}, "ERR Error in ACL SETUSER modifier '+@': Unknown command or category name in ACL"},
		{[]string{"-select|0"}, "ERR Error in ACL SETUSER modifier '-select|0': Unknown command or category name in ACL"},
		{[]string{"+config|get|x"}, "ERR Error in ACL SETUSER modifier '+config|get|x': Allowing first-arg of a subcommand is not supported"},
		{[]string{"+config|nosuch"}, "ERR Error in ACL SETUSER modifier '+config|nosuch': Unknown command or category name in ACL"},
		{[]string{"+select|"}, "ERR Error in ACL SETUSER modifier '+select|': Syntax error"},
		{[]string{"%X~k"}, "ERR Error in ACL SETUSER modifier '%X~k': Syntax error"},
		{[]string{"%~k"}, "ERR Error in ACL SETUSER modifier '%~k': Syntax error"},
		{[]string{"%R"}, "ERR Error in ACL SETUSER modifier '%R': Syntax error"},
		{[]string{"%RR~k"}, "ERR Error in ACL SETUSER modifier '%RR~k': Syntax error"},
		{[]string{"allkeys", "~x"}, "ERR Error in ACL SETUSER modifier '~x': Adding a pattern after the * pattern (or the 'allkeys' flag) is not valid and does not have any effect. Try 'resetkeys' to start with an empty list of patterns"},
		{[]string{"&*", "&x"}, "ERR Error in ACL SETUSER modifier '&x': Adding a pattern after the * pattern (or the 'allchannels' flag) is not valid and does not have any effect. Try 'resetchannels' to start with an empty list of channels"},
		{[]string{"<nosuch"}, "ERR Error in ACL SETUSER modifier '<nosuch': The password you are trying to remove from the user does not exist"},
		{[]string{"#abc"}, "ERR Error in ACL SETUSER modifier '#abc': The password hash must be exactly 64 characters and contain only lowercase hexadecimal characters"},
		{[]string{"!" + strings.Repeat("A", 64)}, "ERR Error in ACL SETUSER modifier '!" + strings.Repeat("A", 64) + "': The password hash must be exactly 64 characters and contain only lowercase hexadecimal characters"},
		{[]string{"(on)"}, "ERR Error in ACL SETUSER modifier '(on)': Syntax error"},
		{[]string{"(~a) (~b)"}, "ERR Error in ACL SETUSER modifier '(~a) (~b)': Syntax error"},
		{[]string{"(~x +nosuch)"}, "ERR Error in ACL SETUSER modifier '(~x +nosuch)': Unknown command or category name in ACL"},
		{[]string{"(~x"}, "ERR Unmatched parenthesis in acl selector starting at '(~x'."},
		{[]string{"on", "(~x", "+get"}, "ERR Unmatched parenthesis in acl selector starting at '(~x'."},
		{[]string{"bo\x00gus"}, "ERR Error in ACL SETUSER modifier 'bo': Syntax error"},
	} {
		base := parseOps(t, "on", ">p", "~k*", "+@read")
		before := strings.Join(base.describe(false), " ")
		_, err := base.Apply(c.ops, false)
		if err == nil || err.Error() != c.want {
			t.Errorf("%q: %v, want %q", c.ops, err, c.want)
		}
		if after := strings.Join(base.describe(false), " "); after != before {
			t.Errorf("%q changed the user: %s → %s", c.ops, before, after)
		}
	}
}

// TestACLDescribe: rules read back as Redis describes them (the captured
// forms are in testdata/oracle/acl.jsonl; these are the cases around
// them).
func TestACLDescribe(t *testing.T) {
	for _, c := range []struct {
		ops  []string
		want string
	}{
		{nil, "off sanitize-payload resetchannels -@all"},
		{[]string{"on", "nopass", "skip-sanitize-payload"}, "on nopass skip-sanitize-payload resetchannels -@all"},
		{[]string{">p", ">p", ">"}, "off sanitize-payload #148de9c5a7a44d19e56cd9ae1a554bf67847afb0c58f6e12fa29ac7ddfca9940 #e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855 resetchannels -@all"},
		{[]string{">p", "nopass"}, "off nopass sanitize-payload resetchannels -@all"},
		{[]string{"%R~", "~", "%RW~*"}, "off sanitize-payload ~ ~* resetchannels -@all"},
		{[]string{"%R~*", "%W~*"}, "off sanitize-payload ~* resetchannels -@all"},
		{[]string{"~a", "~*"}, "off sanitize-payload ~* resetchannels -@all"},
		{[]string{"&a", "&a", "&b"}, "off sanitize-payload resetchannels &a &b -@all"},
		{[]string{"+select|0", "+select|1", "+SELECT|2"}, "off sanitize-payload resetchannels -@all +select|0 +select|1 +select|2"},
		{[]string{"+select|0", "+select"}, "off sanitize-payload resetchannels -@all +select"},
		{[]string{"+select|0", "-select"}, "off sanitize-payload resetchannels -@all -select"},
		{[]string{"+@all", "-@bloom", "-bf.add", "+bf.add", "+@bloom"}, "off sanitize-payload resetchannels +@all +bf.add +@bloom"},
		{[]string{"+@all", "-config|get", "+config"}, "off sanitize-payload resetchannels +@all +config"},
		{[]string{"+bf.add|x", "+bf.add|y", "-bf.add"}, "off sanitize-payload resetchannels -@all -bf.add"},
		{[]string{"+config|set", "-config"}, "off sanitize-payload resetchannels -@all -config"},
		{[]string{"-@all", "+@connection", "+@BLOOM", "-@dangerous", "+info"}, "off sanitize-payload resetchannels -@all +@connection +@bloom -@dangerous +info"},
		{[]string{"(", "~a", ")"}, "off sanitize-payload resetchannels -@all (~a resetchannels -@all)"},
		{[]string{"()", "( ~x* +get )"}, "off sanitize-payload resetchannels -@all (resetchannels -@all) (~x* resetchannels -@all +get)"},
		{[]string{"(~x* +get", "resetkeys)"}, "off sanitize-payload resetchannels -@all (resetchannels -@all +get)"},
		{[]string{"(~a +get)", "clearselectors", "(~b)"}, "off sanitize-payload resetchannels -@all (~b resetchannels -@all)"},
		{[]string{"on", ">p", "~k", "&c", "+@all", "(~s)", "reset"}, "off sanitize-payload resetchannels -@all"},
		{[]string{"", "ON", "ALLKEYS", "ALLCHANNELS", "ALLCOMMANDS"}, "on sanitize-payload ~* &* +@all"},
	} {
		u := parseOps(t, c.ops...)
		if got := strings.Join(u.describe(false), " "); got != c.want {
			t.Errorf("%q:\n got %s\nwant %s", c.ops, got, c.want)
		}
	}
}

// sameUser compares everything a user is: what it shows and what it may do.
func sameUser(a, b *User) bool {
	if !slices.Equal(a.describe(false), b.describe(false)) || !slices.Equal(a.describe(true), b.describe(true)) ||
		a.enabled != b.enabled || a.nopass != b.nopass || a.all != b.all || !slices.Equal(a.hashes, b.hashes) ||
		len(a.sels) != len(b.sels) {
		return false
	}
	for i, s := range a.sels {
		o := b.sels[i]
		if !slices.Equal(s.allowed, o.allowed) || s.allCommands != o.allCommands || s.future != o.future ||
			s.allKeys != o.allKeys || !slices.Equal(s.patterns, o.patterns) || len(s.firstArgs) != len(o.firstArgs) {
			return false
		}
		for id, args := range s.firstArgs { // a set: order does nothing
			if !slices.Equal(slices.Sorted(slices.Values(args)), slices.Sorted(slices.Values(o.firstArgs[id]))) {
				return false
			}
		}
	}
	return true
}

var ruleWords = []string{"on", "off", "nopass", "resetpass", ">p", ">q", "<p", "#" + strings.Repeat("ab", 32),
	"~k*", "~*", "%R~r*", "%W~w*", "%RW~*", "~a b", "allkeys", "resetkeys", "&c*", "&*", "allchannels", "resetchannels",
	"+@all", "-@all", "allcommands", "nocommands", "+@bloom", "-@bloom", "+@read", "-@write", "+@dangerous", "-@admin",
	"+bf.add", "-bf.add", "+config", "-config", "+config|get", "-config|get", "+select|0", "+select|1", "-select",
	"+bf.add|x", "+acl|whoami", "-acl", "reset", "skip-sanitize-payload", "sanitize-payload", "clearselectors",
	"(~s* +get)", "(%R~r* +@read -get)", "(+select|0 ~\"a b\")", "(&x +config|get)"}

// TestACLRulesRoundTrip: whatever rules made a user, its stored rules
// read back as the same user: the replicated table loses nothing.
func TestACLRulesRoundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for n := 0; n < 3000; n++ {
		u := newUser(testTable, "u")
		u.finish()
		for k := 1 + r.IntN(12); k > 0; k-- {
			op := ruleWords[r.IntN(len(ruleWords))]
			if nu, err := u.Apply([]string{op}, false); err == nil {
				u = nu
			}
		}
		back, err := ParseRules(testTable, "u", u.StoredRules())
		if err != nil {
			t.Fatalf("%q: %v", u.StoredRules(), err)
		}
		if !sameUser(u, back) {
			t.Fatalf("stored %q read back as %q", u.StoredRules(), back.StoredRules())
		}
	}
}

// TestACLChecks: commands by their own categories (subcommands by
// theirs), first arguments, key patterns by the permissions the command's
// key specs need, and selectors, reporting what Redis reports.
func TestACLChecks(t *testing.T) {
	type c struct {
		args []string
		r    Result
		arg  string
	}
	for _, tc := range []struct {
		ops   []string
		cases []c
	}{
		{[]string{"+@bloom", "-bf.reserve", "~bf:*", "%R~ro:*"}, []c{
			{[]string{"bf.add", "bf:1", "x"}, OK, ""},
			{[]string{"bf.add", "other", "x"}, DeniedKey, "other"},
			{[]string{"bf.add", "ro:1", "x"}, OK, ""}, // RedisBloom's key specs: RW without access/update
			{[]string{"bf.reserve", "bf:1", "0.1", "10"}, DeniedCmd, "bf.reserve"},
			{[]string{"cf.add", "bf:1", "x"}, DeniedCmd, "cf.add"},
			{[]string{"bf.debug", "ro:1"}, DeniedKey, "ro:1"}, // RW access update: needs %RW
			{[]string{"bf.debug"}, OK, ""},
		}},
		{[]string{"+@all", "%R~r*", "%W~w*"}, []c{
			{[]string{"get", "r1"}, OK, ""},
			{[]string{"get", "w1"}, DeniedKey, "w1"},
			{[]string{"set", "w1", "v"}, OK, ""},
			{[]string{"set", "w1", "v", "get"}, DeniedKey, "w1"}, // SET … GET reads too
			{[]string{"del", "w1", "r1", "zz"}, DeniedKey, "r1"},
			{[]string{"copy", "r1", "w2"}, OK, ""},
			{[]string{"rename", "r1", "w2"}, DeniedKey, "r1"},
			{[]string{"exists", "w1"}, OK, ""},
			{[]string{"ttl", "w1"}, DeniedKey, "w1"},
			{[]string{"memory", "usage", "w1"}, OK, ""},
			{[]string{"ping"}, OK, ""},
		}},
		{[]string{"+@read", "-@dangerous", "allkeys"}, []c{
			{[]string{"bf.exists", "k", "x"}, OK, ""},
			{[]string{"keys", "*"}, DeniedCmd, "keys"},
			{[]string{"config", "get", "x"}, DeniedCmd, "config|get"},
			{[]string{"acl", "whoami"}, DeniedCmd, "acl|whoami"},
			{[]string{"auth", "x"}, OK, ""}, // no_auth commands are always allowed
			{[]string{"hello"}, OK, ""},
		}},
		{[]string{"+@admin", "allkeys"}, []c{
			{[]string{"config", "get", "x"}, OK, ""},
			{[]string{"config", "set", "x", "y"}, OK, ""},
			{[]string{"acl", "setuser", "x"}, OK, ""},
			{[]string{"acl", "whoami"}, DeniedCmd, "acl|whoami"}, // @slow only: not admin
		}},
		{[]string{"+config|get", "+select|0", "+bf.add|k"}, []c{
			{[]string{"config", "get", "x"}, OK, ""},
			{[]string{"config", "set", "x", "y"}, DeniedCmd, "config|set"},
			{[]string{"select", "0"}, OK, ""},
			{[]string{"select", "1"}, DeniedCmd, "select"},
			{[]string{"bf.add", "K", "x"}, DeniedKey, "K"}, // the first argument matches; no key pattern
		}},
		{[]string{"+auth", "+dbsize", "~a", "(+bf.add ~b)", "(+bf.exists ~c)"}, []c{
			{[]string{"bf.add", "b", "x"}, OK, ""},
			{[]string{"bf.add", "z", "x"}, DeniedKey, "z"},
			{[]string{"bf.add", "c", "x"}, DeniedKey, "c"},
			{[]string{"bf.exists", "c", "x"}, OK, ""},
			{[]string{"bf.exists", "b", "x"}, DeniedKey, "b"},
			{[]string{"bf.debug", "z"}, DeniedCmd, "bf.debug"},
			{[]string{"dbsize"}, OK, ""},
		}},
	} {
		u := parseOps(t, tc.ops...)
		for _, cs := range tc.cases {
			r, arg := allowed(u, cs.args...)
			want := cs.arg
			if cs.r == DeniedCmd {
				want = cs.args[0]
			}
			if r != cs.r || r != OK && arg != want {
				t.Errorf("%q %q: denial %d at %q, want %d at %q", tc.ops, cs.args, r, arg, cs.r, want)
			}
			if r == DeniedCmd {
				c := testTable.Lookup(cs.args[0])
				if c.Subs != nil {
					c = c.Subs[cs.args[1]]
				}
				if got := Denial(r, u, c, nil, false); !strings.Contains(got, "'"+cs.arg+"' command") {
					t.Errorf("%q %q: %s, want the command named %s", tc.ops, cs.args, got, cs.arg)
				}
			}
		}
	}
}

func TestSplitAndQuote(t *testing.T) {
	for _, w := range []string{"a", "a b", "\"", "'", "\\", "\x00", "\xff\r\n", "~\"x y\"", ""} {
		if got := splitWords(quoteArg(w)); len(got) != 1 || got[0] != w {
			t.Errorf("%q → %q → %q", w, quoteArg(w), got)
		}
	}
	if got := splitWords(`a "b c" 'd'`); !slices.Equal(got, []string{"a", "b c", "d"}) {
		t.Errorf("split %q", got)
	}
	if got := splitWords(`"unterminated`); got != nil {
		t.Errorf("bad quoting gave %q", got)
	}
}

// FuzzACLRules applies hostile rules: the parser never panics; a user it
// accepts reads back from its stored rules as the same user, and checking
// a command against it never panics.
func FuzzACLRules(f *testing.F) {
	for _, w := range ruleWords {
		f.Add([]byte(w))
	}
	f.Add([]byte("on\n>p\n(~x +get\nresetkeys)\n%RW~*\n+select|0"))
	f.Add([]byte("(\"\\x00\" +bf.add)\n~\x00\n&\xff"))
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > 4096 {
			return
		}
		var ops []string
		for _, w := range bytes.Split(data, []byte("\n")) {
			ops = append(ops, string(w))
		}
		u, err := newUser(testTable, "u").Apply(ops, false)
		if err != nil {
			return
		}
		back, err := ParseRules(testTable, "u", u.StoredRules())
		if err != nil {
			t.Fatalf("%q: stored %q: %v", ops, u.StoredRules(), err)
		}
		if !sameUser(u, back) {
			t.Fatalf("%q: stored %q read back as %q", ops, u.StoredRules(), back.StoredRules())
		}
		for _, args := range [][]string{{"bf.add", "k", "x"}, {"get", "\x00"}, {"select", "0"}, {"config", "get", "*"}, {"del", "a", "b"}} {
			allowed(u, args...)
		}
		u.ListLine()
	})
}

// TestACLFileErrors: a bad ACL file is refused whole, with every error
// and its line in Redis's words (captured from 8.0-m01 with an aclfile;
// its crash on an unmatched parenthesis is reported instead).
func TestACLFileErrors(t *testing.T) {
	path := "/etc/users.acl"
	for _, c := range []struct{ file, want string }{
		{"user alice on >apw ~bf:* +@bloom\n\n# comment\nuser bob bogus\nnotuser x\nuser carol on +nosuch\nuser alice off\n",
			path + ":3 should start with user keyword followed by the username. " + path + ":4: Syntax error. " + path + ":5 should start with user keyword followed by the username. " + path + ":6: Error in applying operation '+nosuch': Unknown command or category name in ACL. WARNING: Duplicate user 'alice' found on line 7. WARNING: ACL errors detected, no change to the previously active ACL rules was performed"},
		{"user alice on >apw ~bf:* +@bloom\n  user   bob   on   nopass  \r\nuser x \"quoted rule\"\n",
			path + ":2: Syntax error. " + path + ":3: Syntax error. WARNING: ACL errors detected, no change to the previously active ACL rules was performed"},
		{"user alice on >apw\nuser  on\nuser b\ton\n",
			"'" + path + ":3: username 'b\ton' contains invalid characters. WARNING: ACL errors detected, no change to the previously active ACL rules was performed"},
		{"user\nuser a (~x +get\n",
			path + ":1 should start with user keyword followed by the username. " + path + ":2: Unmatched parenthesis in selector definition.WARNING: ACL errors detected, no change to the previously active ACL rules was performed"},
	} {
		if _, err := ParseFile(testTable, path, []byte(c.file)); err == nil || err.Error() != c.want {
			t.Errorf("%q:\n got %v\nwant %s", c.file, err, c.want)
		}
	}
	users, err := ParseFile(testTable, path, []byte("user alice on >apw\nuser c on (~x +get) \t(~y)  ~z\n"))
	if err != nil {
		t.Fatal(err)
	}
	if got := users["c"].ListLine(); got != "user c on sanitize-payload ~z resetchannels -@all (~x resetchannels -@all +get) (~y resetchannels -@all)" {
		t.Errorf("c: %s", got)
	}
	if users["alice"] == nil || len(users) != 2 {
		t.Errorf("users %v", users)
	}
}
