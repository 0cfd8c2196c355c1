package server_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bfserver/bfserver/internal/golden"
	"github.com/bfserver/bfserver/memstore"
	"github.com/bfserver/bfserver/server"
)

// fakeCluster is a memstore that answers server.Cluster: one voter that
// always leads, with snapshots and reloads that only count.
type fakeCluster struct {
	*memstore.Store
	snapshots atomic.Int64
	reloads   atomic.Int64
	last      atomic.Int64
	fail      atomic.Bool
}

func newFakeCluster() *fakeCluster {
	f := &fakeCluster{Store: memstore.New()}
	f.last.Store(time.Now().Unix())
	return f
}

func (f *fakeCluster) ReplicationInfo() [][2]string {
	return [][2]string{{"role", "master"}, {"connected_slaves", "0"}, {"master_failover_state", "no-failover"},
		{"master_replid", strings.Repeat("ab", 20)}, {"master_replid2", strings.Repeat("0", 40)},
		{"master_repl_offset", "0"}, {"second_repl_offset", "-1"}, {"repl_backlog_active", "0"},
		{"repl_backlog_size", "0"}, {"repl_backlog_first_byte_offset", "0"}, {"repl_backlog_histlen", "0"},
		{"raft_role", "leader"}}
}
func (f *fakeCluster) Join(context.Context, string, string, string) error { return errors.New("no") }
func (f *fakeCluster) Remove(context.Context, string) error               { return errors.New("no") }
func (f *fakeCluster) Members() ([][3]string, error) {
	return [][3]string{{"n1", "127.0.0.1:1", "127.0.0.1:2"}}, nil
}
func (f *fakeCluster) IsLeader() bool { return true }
func (f *fakeCluster) Snapshot(ctx context.Context) error {
	if f.fail.Load() {
		return errors.New("disk full")
	}
	f.snapshots.Add(1)
	f.last.Store(time.Now().Unix())
	return nil
}
func (f *fakeCluster) LastSnapshot() time.Time          { return time.Unix(f.last.Load(), 0) }
func (f *fakeCluster) Reload(ctx context.Context) error { f.reloads.Add(1); return nil }
func (f *fakeCluster) Backup(context.Context, string) (uint64, error) {
	return 0, errors.New("no backups here")
}

// adminRecord is a record of testdata/oracle/admin.jsonl (or another
// capture of admin commands) with the fields only those files use.
type adminRecord struct {
	golden.Record
	Fields            []string `json:"fields"`
	Info              *string  `json:"info"`
	VolatileFields    []string `json:"volatile_fields"`
	VolatilePositions []int    `json:"volatile_positions"`
}

func loadAdmin(t *testing.T, file string) []adminRecord {
	t.Helper()
	f, err := os.Open(filepath.Join(golden.OracleDir(), file))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 16<<20)
	var out []adminRecord
	for sc.Scan() {
		var r adminRecord
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatal(err)
		}
		out = append(out, r)
	}
	return out
}

// Records whose reply differs on purpose (docs/COMMANDS.md), by line.
var adminDeviations = map[int]string{
	210: "CONFIG GET maxmemory*: bfserver has no eviction tunables (maxmemory-samples, -eviction-tenacity, -clients)",
	197: "CONFIG SET maxmemory-policy allkeys-lru: bfserver never evicts filters",
	198: "CONFIG GET maxmemory-policy after a refused SET",
	199: "CONFIG SET maxmemory-policy volatile-lfu: bfserver never evicts filters",
	200: "CONFIG GET maxmemory-policy after a refused SET",
	255: "DEBUG OBJECT: not implemented (DEBUG is kept to SLEEP and RELOAD)",
}

// TestOracleAdmin replays testdata/oracle/admin.jsonl: SLOWLOG, LATENCY,
// CLIENT, CONFIG, SAVE/BGSAVE/LASTSAVE, DEBUG, SHUTDOWN, MONITOR and INFO
// as Redis 8 with RedisBloom answered them, on several connections.
// Volatile replies are compared where the capture says what varies (the
// fields of CLIENT LIST lines, the positions of SLOWLOG and LATENCY
// entries); INFO is compared by its field names, section by section.
func TestOracleAdmin(t *testing.T) {
	recs := loadAdmin(t, "admin.jsonl")
	newSrv := func() (*server.Server, *fakeCluster) {
		fc := newFakeCluster()
		srv := newServer(t, server.Options{Addr: "127.0.0.1:0", EnableDebugCommand: "yes"}, fc)
		if err := srv.Listen(); err != nil {
			t.Fatal(err)
		}
		go srv.Serve()
		t.Cleanup(func() { srv.Close() })
		return srv, fc
	}
	srv, _ := newSrv()
	conns := map[string]*client{}
	protos := map[string]int{}
	// What a connection was, kept after it closes: CLIENT KILL ID of a
	// connection already gone names its old id.
	ids, addrs, laddrs := map[string]int64{}, map[string]string{}, map[string]string{}
	open := func(name string) *client {
		cl := conns[name]
		if cl != nil && !alive(cl) {
			cl = nil // killed along with others (CLIENT KILL LADDR)
		}
		if cl == nil {
			cl = dial(t, srv)
			conns[name], protos[name] = cl, 2
			deadline := time.Now().Add(5 * time.Second)
			for ids[name] = 0; ids[name] == 0; ids[name] = srv.ClientID(cl.c.LocalAddr().String()) {
				if time.Now().After(deadline) {
					t.Fatalf("the server never listed connection %s", name)
				}
				time.Sleep(time.Millisecond) // polling for the accept
			}
			addrs[name], laddrs[name] = cl.c.LocalAddr().String(), cl.c.RemoteAddr().String()
		}
		return cl
	}
	noACL := !server.Registered("acl|setuser")
	compared, bad := 0, 0
	fail := func(i int, args [][]byte, format string, v ...any) {
		bad++
		if bad <= 20 {
			t.Errorf("line %d %s: "+format, append([]any{i + 1, show(args)}, v...)...)
		}
	}
	var lastGot []byte
	section := ""
	for i, r := range recs {
		line := i + 1
		if r.Section != section {
			section = r.Section
			if section == "unknown-renamed" {
				srv, _ = newSrv()
				conns, protos = map[string]*client{}, map[string]int{}
				ids = map[string]int64{}
			}
			if section == "client" {
				// The capture opened the connections it kills later, and
				// read the ids of those it names, when this section began.
				for _, name := range []string{"c1", "c2", "c3", "l1"} {
					cl := open(name)
					if name != "l1" {
						cl.do(t, [][]byte{[]byte("CLIENT"), []byte("INFO")})
					}
				}
			}
		}
		if r.Fields != nil {
			if r.Info != nil {
				checkInfoFields(t, line, *r.Info, r.Fields, lastGot)
			} else if err := sameFieldNames(lastGot, r.Fields); err != nil {
				fail(i, nil, "CLIENT LIST field names: %v", err)
			}
			continue
		}
		if !r.IsCommand() && !r.Recv {
			continue
		}
		name := connName(r.Conn)
		if noACL && line >= 146 && line <= 151 {
			continue // needs ACL SETUSER
		}
		cl := conns[name]
		if !r.Closed || cl == nil {
			cl = open(name)
		}
		args := r.Argv()
		if r.Recv {
			cl.c.SetReadDeadline(time.Now().Add(5 * time.Second))
			got, err := golden.ReadFrame(cl.r)
			if err != nil {
				fail(i, nil, "MONITOR line: %v", err)
				continue
			}
			if !monitorLine(got) {
				fail(i, nil, "MONITOR line %q", got)
			}
			continue
		}
		for pos, what := range r.Subst {
			p, _ := strconv.Atoi(pos)
			kind, conn, _ := strings.Cut(what, ":")
			if _, ok := ids[conn]; !ok {
				open(conn)
			}
			switch kind {
			case "addr":
				args[p] = []byte(addrs[conn])
			case "laddr":
				args[p] = []byte(laddrs[conn])
			case "id":
				args[p] = []byte(strconv.FormatInt(ids[conn], 10))
			}
		}
		verb := strings.ToUpper(string(args[0]))
		if r.Proto == 3 && protos[name] != 3 && verb != "HELLO" {
			cl.do(t, [][]byte{[]byte("HELLO"), []byte("3")})
			protos[name] = 3
		}
		cl.c.SetDeadline(time.Now().Add(10 * time.Second))
		if _, err := cl.c.Write(golden.Encode(args)); err != nil {
			t.Fatal(err)
		}
		if r.Closed {
			if _, err := golden.ReadFrame(cl.r); err == nil {
				fail(i, args, "the connection should have closed")
			}
			delete(conns, name)
			if verb == "SHUTDOWN" {
				select {
				case <-srv.ShutdownRequested():
				case <-time.After(5 * time.Second):
					fail(i, args, "SHUTDOWN did not ask the server to stop")
				}
			}
			continue
		}
		if r.NoReply {
			continue
		}
		got, err := golden.ReadFrame(cl.r)
		if err != nil {
			t.Fatalf("line %d %s: %v", line, show(args), err)
		}
		lastGot = got
		if verb == "HELLO" {
			protos[name] = r.Proto
			continue // its version and module path are bfserver's
		}
		want := r.Want()
		switch {
		case adminDeviations[line] != "":
			continue
		case r.Section == "unknown-in-redis":
			// Redis has these; bfserver answers as Redis does without them.
			if !server.Registered(strings.ToLower(string(args[0]))) && !bytes.HasPrefix(got, []byte("-ERR unknown command '")) {
				fail(i, args, "got %q, want an unknown-command error", got)
			}
			continue
		case r.Section == "unknown-renamed" && server.Registered(strings.ToLower(string(args[0]))):
			continue
		case r.VolatileFields != nil:
			if err := sameClientLines(got, want, r.VolatileFields); err != nil {
				fail(i, args, "%v\n got %q\nwant %q", err, got, want)
				continue
			}
		case r.VolatilePositions != nil:
			if err := sameEntries(t, got, want, r.VolatilePositions); err != nil {
				fail(i, args, "%v\n got %q\nwant %q", err, got, want)
				continue
			}
		case r.Volatile:
			continue
		case r.Unordered:
			if g, w := sortedElems(t, got), sortedElems(t, want); !slices.Equal(g, w) {
				fail(i, args, "\n got %q\nwant %q", g, w)
				continue
			}
		default:
			if !bytes.Equal(got, want) {
				fail(i, args, "\n got %q\nwant %q", got, want)
				continue
			}
		}
		compared++
	}
	if bad > 20 {
		t.Errorf("%d mismatches in all", bad)
	}
	t.Logf("%d replies compared", compared)
}

func connName(c string) string {
	if c == "" {
		return "main"
	}
	return c
}

// alive reports whether the server has not closed the connection.
func alive(cl *client) bool {
	cl.c.SetReadDeadline(time.Now().Add(time.Millisecond))
	_, err := cl.r.Peek(1)
	cl.c.SetReadDeadline(time.Time{})
	var ne net.Error
	return err == nil || (errors.As(err, &ne) && ne.Timeout())
}

func monitorLine(b []byte) bool {
	s := string(b)
	if !strings.HasPrefix(s, "+") || !strings.HasSuffix(s, "\r\n") {
		return false
	}
	ts, rest, ok := strings.Cut(s[1:], " [")
	if _, err := strconv.ParseFloat(ts, 64); !ok || err != nil || !strings.Contains(ts, ".") || len(ts[strings.IndexByte(ts, '.')+1:]) != 6 {
		return false
	}
	return strings.Contains(rest, "] \"")
}

// sortedElems is a flat array's elements (or map's pairs), sorted.
func sortedElems(t *testing.T, b []byte) []string {
	n := parseReply(t, b)
	var out []string
	if n.t == '%' {
		for _, p := range n.pairs() {
			out = append(out, p[0].s+"="+p[1].s)
		}
	} else {
		for i := 0; i+1 < len(n.kids); i += 2 {
			out = append(out, n.kids[i].s+"="+n.kids[i+1].s)
		}
	}
	slices.Sort(out)
	return out
}

// clientLines parses CLIENT LIST/INFO text into name=value lines.
func clientLines(b []byte) ([][][2]string, error) {
	n, _, err := parseNode(b)
	if err != nil {
		return nil, err
	}
	text := strings.TrimPrefix(n.s, "txt:")
	var out [][][2]string
	for _, l := range strings.Split(strings.TrimSuffix(text, "\n"), "\n") {
		if l == "" {
			continue
		}
		var fields [][2]string
		for _, f := range strings.Split(l, " ") {
			k, v, _ := strings.Cut(f, "=")
			fields = append(fields, [2]string{k, v})
		}
		out = append(out, fields)
	}
	return out, nil
}

func sameClientLines(got, want []byte, volatile []string) error {
	g, err := clientLines(got)
	if err != nil {
		return err
	}
	w, err := clientLines(want)
	if err != nil {
		return err
	}
	if len(g) != len(w) {
		return errors.New("not the same number of clients")
	}
	for i := range g {
		if len(g[i]) != len(w[i]) {
			return errors.New("not the same fields")
		}
		for j := range g[i] {
			if g[i][j][0] != w[i][j][0] {
				return errors.New("field " + g[i][j][0] + " where Redis has " + w[i][j][0])
			}
			if !slices.Contains(volatile, g[i][j][0]) && g[i][j][1] != w[i][j][1] {
				return errors.New("field " + g[i][j][0] + "=" + g[i][j][1] + ", Redis " + w[i][j][1])
			}
		}
	}
	return nil
}

func sameFieldNames(got []byte, want []string) error {
	lines, err := clientLines(got)
	if err != nil || len(lines) == 0 {
		return errors.New("no CLIENT LIST line")
	}
	var names []string
	for _, f := range lines[0] {
		names = append(names, f[0])
	}
	if !slices.Equal(names, want) {
		return errors.New(strings.Join(names, " ") + " is not " + strings.Join(want, " "))
	}
	return nil
}

// sameEntries compares SLOWLOG GET / LATENCY LATEST replies but for the
// positions of each entry that vary.
func sameEntries(t *testing.T, got, want []byte, volatile []int) error {
	g, w := parseReply(t, got), parseReply(t, want)
	if len(g.kids) != len(w.kids) {
		return errors.New("not the same number of entries")
	}
	for i := range g.kids {
		ge, we := g.kids[i], w.kids[i]
		if len(ge.kids) != len(we.kids) {
			return errors.New("entries of different lengths")
		}
		for j := range ge.kids {
			if !slices.Contains(volatile, j) && !bytes.Equal(ge.kids[j].bytes(), we.kids[j].bytes()) {
				return errors.New("entry " + strconv.Itoa(i) + " position " + strconv.Itoa(j) + " differs")
			}
		}
	}
	return nil
}

// Fields bfserver leaves out of INFO, and why.
var infoOmitted = map[string]string{
	"used_cpu_sys_main_thread": "no main thread", "used_cpu_user_main_thread": "no main thread",
	"reply_buffer_shrinks": "no reply buffer resizing", "reply_buffer_expands": "no reply buffer resizing",
	"eventloop_cycles": "no event loop", "eventloop_duration_sum": "no event loop",
	"eventloop_duration_cmd_sum": "no event loop", "instantaneous_eventloop_cycles_per_sec": "no event loop",
	"instantaneous_eventloop_duration_usec": "no event loop",
}

// Sections whose field names are data (commands, error codes, dbs).
var infoDataSections = map[string]bool{"# Commandstats": true, "# Errorstats": true, "# Latencystats": true, "# Keyspace": true}

// checkInfoFields checks that our INFO reply has Redis's field names, in
// Redis's order, section by section; bfserver may add fields of its own.
func checkInfoFields(t *testing.T, line int, info string, want []string, got []byte) {
	t.Helper()
	n, _, err := parseNode(got)
	if err != nil {
		t.Errorf("line %d INFO %s: %v", line, info, err)
		return
	}
	var names []string
	for _, l := range strings.Split(strings.TrimPrefix(n.s, "txt:"), "\r\n") {
		if l == "" {
			continue
		}
		k, _, _ := strings.Cut(l, ":")
		names = append(names, k)
	}
	sec, wantSec := "", ""
	ours := map[string][]string{}
	for _, k := range names {
		if strings.HasPrefix(k, "# ") {
			sec = k
		}
		ours[sec] = append(ours[sec], k)
	}
	theirs := map[string][]string{}
	var order, gotOrder []string
	for _, k := range want {
		if strings.HasPrefix(k, "# ") {
			wantSec = k
			order = append(order, k)
		}
		if !infoDataSections[wantSec] || k == wantSec {
			if infoOmitted[k] == "" {
				theirs[wantSec] = append(theirs[wantSec], k)
			}
		}
	}
	for _, k := range names {
		if strings.HasPrefix(k, "# ") {
			gotOrder = append(gotOrder, k)
		}
	}
	if !slices.Equal(gotOrder, order) {
		t.Errorf("line %d INFO %q sections %q, Redis %q", line, info, gotOrder, order)
		return
	}
	for _, s := range order {
		if infoDataSections[s] {
			continue
		}
		in := map[string]bool{}
		for _, k := range theirs[s] {
			in[k] = true
		}
		var common []string
		for _, k := range ours[s] {
			if in[k] {
				common = append(common, k)
			}
		}
		if !slices.Equal(common, theirs[s]) {
			t.Errorf("line %d INFO %q section %s:\n ours  %q\nRedis %q", line, info, s, common, theirs[s])
		}
	}
}
