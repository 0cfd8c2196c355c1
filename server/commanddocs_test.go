package server_test

import (
	"bytes"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/bfserver/bfserver/internal/golden"
	"github.com/bfserver/bfserver/server"
)

// rnode is a parsed RESP2/RESP3 reply that encodes back to the same bytes.
type rnode struct {
	t    byte
	s    string // a scalar's body, a bulk's content
	null bool   // $-1 / *-1
	kids []rnode
}

func parseReply(t *testing.T, b []byte) rnode {
	t.Helper()
	n, rest, err := parseNode(b)
	if err != nil || len(rest) != 0 {
		t.Fatalf("cannot parse reply %q: %v", b, err)
	}
	return n
}

func parseNode(b []byte) (rnode, []byte, error) {
	i := bytes.Index(b, []byte("\r\n"))
	if i < 1 {
		return rnode{}, nil, fmt.Errorf("no line in %q", b)
	}
	t, body, rest := b[0], string(b[1:i]), b[i+2:]
	switch t {
	case '$', '=', '!', '*', '~', '%', '>':
		n, err := strconv.Atoi(body)
		if err != nil {
			return rnode{}, nil, err
		}
		if n < 0 {
			return rnode{t: t, null: true}, rest, nil
		}
		switch t {
		case '$', '=', '!':
			if len(rest) < n+2 {
				return rnode{}, nil, fmt.Errorf("short bulk")
			}
			return rnode{t: t, s: string(rest[:n])}, rest[n+2:], nil
		}
		if t == '%' {
			n *= 2
		}
		nd := rnode{t: t, kids: []rnode{}}
		for k := 0; k < n; k++ {
			var c rnode
			var err error
			if c, rest, err = parseNode(rest); err != nil {
				return rnode{}, nil, err
			}
			nd.kids = append(nd.kids, c)
		}
		return nd, rest, nil
	}
	return rnode{t: t, s: body}, rest, nil
}

func (n rnode) encode(b *bytes.Buffer) {
	b.WriteByte(n.t)
	switch {
	case n.null:
		b.WriteString("-1\r\n")
	case n.kids != nil:
		c := len(n.kids)
		if n.t == '%' {
			c /= 2
		}
		fmt.Fprintf(b, "%d\r\n", c)
		for _, k := range n.kids {
			k.encode(b)
		}
	case n.t == '$' || n.t == '=' || n.t == '!':
		fmt.Fprintf(b, "%d\r\n%s\r\n", len(n.s), n.s)
	default:
		b.WriteString(n.s + "\r\n")
	}
}

func (n rnode) bytes() []byte {
	var b bytes.Buffer
	n.encode(&b)
	return b.Bytes()
}

// pairs treats a map (RESP3) or a flat array (RESP2) as key/value pairs.
func (n rnode) pairs() [][2]rnode {
	var out [][2]rnode
	for i := 0; i+1 < len(n.kids); i += 2 {
		out = append(out, [2]rnode{n.kids[i], n.kids[i+1]})
	}
	return out
}

func withPairs(n rnode, ps [][2]rnode) rnode {
	n.kids = []rnode{}
	for _, p := range ps {
		n.kids = append(n.kids, p[0], p[1])
	}
	return n
}

// docsView keeps the COMMAND DOCS entries, and the subcommands in them,
// that keep accepts; with sorted, subcommands are put in name order.
func docsView(n rnode, keep func(string) bool, sorted bool) rnode {
	var ps [][2]rnode
	for _, p := range n.pairs() {
		if keep(p[0].s) {
			ps = append(ps, [2]rnode{p[0], docView(p[1], keep, sorted)})
		}
	}
	return withPairs(n, ps)
}

func docView(d rnode, keep func(string) bool, sorted bool) rnode {
	ps := d.pairs()
	for i, p := range ps {
		if p[0].s == "subcommands" {
			sub := docsView(p[1], keep, sorted)
			if sorted {
				sp := sub.pairs()
				slices.SortFunc(sp, func(a, b [2]rnode) int { return strings.Compare(a[0].s, b[0].s) })
				sub = withPairs(sub, sp)
			}
			ps[i][1] = sub
		}
	}
	return withPairs(d, ps)
}

// infoView does the same for COMMAND INFO: an entry the server does not
// have becomes null; subcommands (element 10) are filtered and sorted.
func infoView(n rnode, proto int, keep func(string) bool, sorted bool) rnode {
	out := n
	out.kids = []rnode{}
	for _, e := range n.kids {
		if e.null || e.t == '_' || len(e.kids) != 10 {
			out.kids = append(out.kids, e)
			continue
		}
		if !keep(e.kids[0].s) {
			if proto == 3 {
				out.kids = append(out.kids, rnode{t: '_'})
			} else {
				out.kids = append(out.kids, rnode{t: '$', null: true})
			}
			continue
		}
		e.kids = slices.Clone(e.kids)
		e.kids[9] = infoView(e.kids[9], proto, keep, sorted)
		subs := e.kids[9].kids[:0:0]
		for _, s := range e.kids[9].kids {
			if len(s.kids) == 10 {
				subs = append(subs, s)
			}
		}
		if sorted {
			slices.SortFunc(subs, func(a, b rnode) int { return strings.Compare(a.kids[0].s, b.kids[0].s) })
		}
		e.kids[9].kids = subs
		out.kids = append(out.kids, e)
	}
	return out
}

func listSet(n rnode) []string {
	var out []string
	for _, k := range n.kids {
		out = append(out, strings.ToLower(k.s))
	}
	slices.Sort(out)
	return out
}

// TestOracleCommandDocs replays testdata/oracle/commanddocs.jsonl: COMMAND
// DOCS, INFO, LIST, COUNT, GETKEYS, GETKEYSANDFLAGS and HELP as the real
// server answered, in RESP2 and RESP3. Entries for commands this server does
// not have are left out of the comparison (and must be absent or null in
// its reply); every BF/CF command must be compared byte for byte.
func TestOracleCommandDocs(t *testing.T) {
	recs, err := golden.LoadOracle("commanddocs.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	// Every command Redis lists, by protocol (from the plain COMMAND LIST).
	universe := map[int]map[string]bool{}
	for _, r := range recs {
		if args := r.Argv(); len(args) == 2 && string(args[0]) == "COMMAND" && string(args[1]) == "LIST" {
			u := map[string]bool{}
			for _, n := range listSet(parseReply(t, r.Want())) {
				u[n] = true
			}
			universe[r.Proto] = u
		}
	}
	if len(universe) != 2 {
		t.Fatal("no COMMAND LIST in both protocols")
	}
	srv := startServer(t, nil)
	conns := map[string]*client{}
	protos := map[string]int{}
	seen := map[string]int{} // "DOCS bf.add" -> replies compared
	compared, skipped, bad := 0, 0, 0
	fail := func(i int, args [][]byte, got, want []byte) {
		bad++
		if bad <= 15 {
			t.Errorf("line %d %s\n got %q\nwant %q", i+1, show(args), got, want)
		}
	}
	for i, r := range recs {
		if !r.IsCommand() {
			continue
		}
		name := r.Conn
		if name == "" {
			name = "main"
		}
		cl := conns[name]
		if cl == nil {
			cl = dial(t, srv)
			conns[name], protos[name] = cl, 2
		}
		args := r.Argv()
		verb := strings.ToUpper(string(args[0]))
		if r.Proto == 3 && protos[name] != 3 && verb != "HELLO" {
			cl.do(t, [][]byte{[]byte("HELLO"), []byte("3")})
			protos[name] = 3
		}
		got := cl.do(t, args)
		if verb == "HELLO" {
			protos[name] = r.Proto
		}
		want := r.Want()
		sub := ""
		if len(args) > 1 && verb == "COMMAND" {
			sub = strings.ToUpper(string(args[1]))
		}
		// Compare what both servers have; this one may have more (its own
		// commands, newer subcommands such as CLIENT MAINT_NOTIFICATIONS).
		both := func(n string) bool { return server.Registered(n) && universe[r.Proto][n] }
		if r.Volatile && !r.Subset {
			continue
		}
		switch {
		case (sub == "DOCS" || sub == "INFO") && len(args) > 2 && want[0] != '-':
			view := func(b []byte, keep func(string) bool) rnode {
				if sub == "DOCS" {
					return docsView(parseReply(t, b), keep, r.SubcommandsUnordered)
				}
				return infoView(parseReply(t, b), r.Proto, keep, r.SubcommandsUnordered)
			}
			if own := view(got, server.Registered).bytes(); !bytes.Equal(own, got) && !r.SubcommandsUnordered {
				fail(i, args, got, own) // the server listed something it does not have
				continue
			}
			g, w := view(got, both), view(want, both)
			if !bytes.Equal(g.bytes(), w.bytes()) {
				fail(i, args, g.bytes(), w.bytes())
				continue
			}
			if len(args) == 3 && server.Registered(string(args[2])) {
				seen[fmt.Sprintf("%s %d %s", sub, r.Proto, args[2])]++
			}
		case r.Subset:
			u := universe[r.Proto]
			var g, w []string
			for _, n := range listSet(parseReply(t, got)) {
				if u[n] {
					g = append(g, n)
				}
			}
			for _, n := range listSet(parseReply(t, want)) {
				if server.Registered(n) {
					w = append(w, n)
				}
			}
			if !slices.Equal(g, w) {
				fail(i, args, []byte(strings.Join(g, " ")), []byte(strings.Join(w, " ")))
				continue
			}
		case (sub == "GETKEYS" || sub == "GETKEYSANDFLAGS") && len(args) > 2 &&
			universe[r.Proto][strings.ToLower(string(args[2]))] && !server.Registered(string(args[2])):
			skipped++
			continue
		default:
			if !bytes.Equal(got, want) {
				fail(i, args, got, want)
				continue
			}
		}
		compared++
	}
	if bad > 15 {
		t.Errorf("%d mismatches in all", bad)
	}
	for _, p := range []int{2, 3} {
		for _, c := range bfcfCommands {
			for _, sub := range []string{"DOCS", "INFO"} {
				if seen[fmt.Sprintf("%s %d %s", sub, p, c)] == 0 {
					t.Errorf("COMMAND %s %s was not compared in RESP%d", sub, c, p)
				}
			}
		}
	}
	t.Logf("%d replies compared, %d skipped (commands this server does not have)", compared, skipped)
}

var bfcfCommands = []string{"bf.add", "bf.card", "bf.debug", "bf.exists", "bf.info", "bf.insert", "bf.loadchunk",
	"bf.madd", "bf.mexists", "bf.reserve", "bf.scandump", "cf.add", "cf.addnx", "cf.compact", "cf.count",
	"cf.debug", "cf.del", "cf.exists", "cf.info", "cf.insert", "cf.insertnx", "cf.loadchunk", "cf.mexists",
	"cf.reserve", "cf.scandump"}

// TestCommandIntrospectionOddNames: names and filters Redis never showed us
// must not break the server, and answer in Redis's shapes.
func TestCommandIntrospectionOddNames(t *testing.T) {
	srv := startServer(t, nil)
	cl := dial(t, srv)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"COMMAND", "INFO", "|"}, "*1\r\n$-1\r\n"},
		{[]string{"COMMAND", "INFO", "config|get|x"}, "*1\r\n$-1\r\n"},
		{[]string{"COMMAND", "INFO", "|get"}, "*1\r\n$-1\r\n"},
		{[]string{"COMMAND", "INFO", ""}, "*1\r\n$-1\r\n"},
		{[]string{"COMMAND", "DOCS", "|", "config|", "x|y|z"}, "*0\r\n"},
		{[]string{"COMMAND", "LIST", "FILTERBY", "PATTERN", "["}, "*0\r\n"},
		{[]string{"COMMAND", "LIST", "FILTERBY", "PATTERN", "bf.add"}, "*1\r\n$6\r\nbf.add\r\n"},
		{[]string{"COMMAND", "GETKEYS", "DEL"}, "-ERR Invalid number of arguments specified for command\r\n"},
		{[]string{"COMMAND", "GETKEYS", "CONFIG"}, "-ERR The command has no key arguments\r\n"},
		{[]string{"COMMAND", "GETKEYS", "CONFIG", "NOSUCH"}, "-ERR Invalid command specified\r\n"},
		{[]string{"COMMAND", "GETKEYS", "bfx.digest", "k"}, "*1\r\n$1\r\nk\r\n"},
		{[]string{"COMMAND", "GETKEYSANDFLAGS", "SET", "k", "v", "gEt"}, "*1\r\n*2\r\n$1\r\nk\r\n*3\r\n+RW\r\n+access\r\n+update\r\n"},
		{[]string{"COMMAND", "GETKEYS", "COMMAND", "GETKEYS", "BF.ADD", "k", "x"}, "-ERR The command has no key arguments\r\n"},
	} {
		if got := cl.do(t, argv(c.args...)); string(got) != c.want {
			t.Errorf("%q: got %q, want %q", c.args, got, c.want)
		}
	}
	// Whole-table forms: one entry per command, and they parse.
	count := cl.do(t, argv("COMMAND", "COUNT"))
	for _, args := range [][]string{{"COMMAND"}, {"COMMAND", "INFO"}, {"COMMAND", "DOCS"}} {
		got := parseReply(t, cl.do(t, argv(args...)))
		n := len(got.kids)
		if args[len(args)-1] == "DOCS" {
			n /= 2
		}
		if fmt.Sprintf(":%d\r\n", n) != string(count) {
			t.Errorf("%q: %d entries, COMMAND COUNT %q", args, n, count)
		}
	}
}
