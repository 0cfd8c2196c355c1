package server_test

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/bfserver/bfserver/internal/golden"
	"github.com/bfserver/bfserver/memstore"
	"github.com/bfserver/bfserver/server"
)

func argv(s ...string) [][]byte {
	out := make([][]byte, len(s))
	for i, x := range s {
		out[i] = []byte(x)
	}
	return out
}

// run sends one command and returns its raw reply.
func (cl *client) run(t testing.TB, s ...string) string {
	t.Helper()
	return string(cl.do(t, argv(s...)))
}

// startWith starts a server with opts over b.
func startWith(t testing.TB, opts server.Options, b server.Backend) *server.Server {
	t.Helper()
	opts.Addr = "127.0.0.1:0"
	srv := newServer(t, opts, b)
	if err := srv.Listen(); err != nil {
		t.Fatal(err)
	}
	go srv.Serve()
	t.Cleanup(func() { srv.Close() })
	return srv
}

// infoFields reads an INFO section's fields.
func infoFields(t testing.TB, cl *client, section string) map[string]string {
	t.Helper()
	n, _, err := parseNode(cl.do(t, argv("INFO", section)))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, l := range strings.Split(n.s, "\r\n") {
		if k, v, ok := strings.Cut(l, ":"); ok {
			out[k] = v
		}
	}
	return out
}

// infoField reads one field of an INFO section.
func infoField(t testing.TB, cl *client, section, field string) string {
	t.Helper()
	v, ok := infoFields(t, cl, section)[field]
	if !ok {
		t.Fatalf("INFO %s has no %s", section, field)
	}
	return v
}

func dialRaw(srv *server.Server) (net.Conn, error) { return net.Dial("tcp", srv.Addr().String()) }

// waitFor polls cond until it holds or 10 seconds pass.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond) // polling the condition
	}
}

// flagsOf is the flags= field of the CLIENT LIST line of client id.
func flagsOf(t testing.TB, cl *client, id string) string {
	t.Helper()
	lines, err := clientLines(cl.do(t, argv("CLIENT", "LIST", "ID", id)))
	if err != nil || len(lines) != 1 {
		return ""
	}
	for _, f := range lines[0] {
		if f[0] == "flags" {
			return f[1]
		}
	}
	return ""
}

func intReply(t testing.TB, r string) int64 {
	t.Helper()
	n, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimPrefix(r, ":"), "\r\n"), 10, 64)
	if err != nil {
		t.Fatalf("not an integer reply: %q", r)
	}
	return n
}

// TestClientPauseHoldsWrites: under CLIENT PAUSE WRITE reads are served,
// a write waits (its client is blocked, the filter unchanged) until
// UNPAUSE, and the replies of commands before it in a pipeline arrive
// meanwhile; under ALL every command waits.
func TestClientPauseHoldsWrites(t *testing.T) {
	srv := startServer(t, nil)
	admin, app := dial(t, srv), dial(t, srv)
	id := strings.TrimSpace(strings.TrimPrefix(app.run(t, "CLIENT", "ID"), ":"))
	if got := admin.run(t, "CLIENT", "PAUSE", "60000", "WRITE"); got != "+OK\r\n" {
		t.Fatal(got)
	}
	if got := app.run(t, "BF.EXISTS", "k", "x"); got != ":0\r\n" {
		t.Fatalf("read during a WRITE pause: %q", got)
	}
	app.c.SetDeadline(time.Now().Add(20 * time.Second))
	app.c.Write(append(golden.Encode(argv("PING", "before")), golden.Encode(argv("BF.ADD", "k", "x"))...))
	first, err := golden.ReadFrame(app.r)
	if err != nil || string(first) != "$6\r\nbefore\r\n" {
		t.Fatalf("the reply before the held write: %q %v", first, err)
	}
	waitFor(t, "the writer to be blocked", func() bool { return flagsOf(t, admin, id) == "b" })
	if got := infoField(t, admin, "clients", "blocked_clients"); got != "1" {
		t.Fatalf("blocked_clients %s", got)
	}
	if got := admin.run(t, "BF.EXISTS", "k", "x"); got != ":0\r\n" {
		t.Fatalf("the held write was applied: %q", got)
	}
	if got := admin.run(t, "CLIENT", "UNPAUSE"); got != "+OK\r\n" {
		t.Fatal(got)
	}
	if got, err := golden.ReadFrame(app.r); err != nil || string(got) != ":1\r\n" {
		t.Fatalf("the held write after UNPAUSE: %q %v", got, err)
	}
	if got := admin.run(t, "BF.EXISTS", "k", "x"); got != ":1\r\n" {
		t.Fatalf("after UNPAUSE: %q", got)
	}

	// ALL holds reads too; the pause ends by itself at its timeout.
	if got := admin.run(t, "CLIENT", "PAUSE", "300"); got != "+OK\r\n" {
		t.Fatal(got)
	}
	start := time.Now()
	if got := app.run(t, "PING"); got != "+PONG\r\n" {
		t.Fatal(got)
	}
	if d := time.Since(start); d < 250*time.Millisecond {
		t.Fatalf("PING answered %v into a 300ms ALL pause", d)
	}
}

// TestMonitorFromItsOK: a command another client runs once MONITOR's +OK
// has arrived is in the monitor's feed, as in Redis, which adds the
// monitor before it replies. Each round is a new monitor; a command on
// another loop just after the +OK was missed when the monitor was added
// after its writer had sent the +OK.
func TestMonitorFromItsOK(t *testing.T) {
	srv := startServer(t, nil)
	cl := dial(t, srv)
	for i := range 200 {
		mon := dial(t, srv)
		if got := mon.run(t, "MONITOR"); got != "+OK\r\n" {
			t.Fatal(got)
		}
		arg := "round-" + strconv.Itoa(i)
		cl.run(t, "PING", arg)
		mon.c.SetReadDeadline(time.Now().Add(5 * time.Second))
		got, err := golden.ReadFrame(mon.r)
		if err != nil {
			t.Fatalf("round %d: %v", i, err)
		}
		if !strings.HasSuffix(string(got), `"PING" "`+arg+"\"\r\n") {
			t.Fatalf("round %d: the monitor's first line is %q, want the PING %s", i, got, arg)
		}
		mon.c.Close()
	}
}

// TestMonitorLines: a monitor sees the commands other clients ran, after
// they ran, in Redis's format: secrets redacted, admin commands and
// refused commands left out, EXEC's commands before EXEC; it may not
// touch the keyspace itself.
func TestMonitorLines(t *testing.T) {
	srv := startServer(t, nil)
	mon, cl := dial(t, srv), dial(t, srv)
	if got := mon.run(t, "MONITOR"); got != "+OK\r\n" {
		t.Fatal(got)
	}
	addr := cl.c.LocalAddr().String()
	for _, c := range [][]string{
		{"SET", "s", "a\nb\"\\\x01é"},
		{"CONFIG", "GET", "maxmemory"}, // admin: not shown
		{"NOSUCH", "x"},                // refused: not shown
		{"BF.ADD", "k"},                // refused (arity): not shown
		{"AUTH", "secret"},             // fails, shown redacted
		{"MULTI"}, {"BF.ADD", "k", "x"}, {"PING"}, {"EXEC"},
		{"SELECT", "3"}, {"PING", "in db 3"},
	} {
		cl.run(t, c...)
	}
	want := []string{
		`[0 ` + addr + `] "SET" "s" "a\nb\"\\\x01\xc3\xa9"`,
		`[0 ` + addr + `] "AUTH" "(redacted)"`,
		`[0 ` + addr + `] "MULTI"`,
		`[0 ` + addr + `] "BF.ADD" "k" "x"`,
		`[0 ` + addr + `] "PING"`,
		`[0 ` + addr + `] "EXEC"`,
		`[3 ` + addr + `] "SELECT" "3"`,
		`[3 ` + addr + `] "PING" "in db 3"`,
	}
	stamp := regexp.MustCompile(`^\+\d{10}\.\d{6} `)
	for _, w := range want {
		mon.c.SetReadDeadline(time.Now().Add(5 * time.Second))
		got, err := golden.ReadFrame(mon.r)
		if err != nil {
			t.Fatal(err)
		}
		line := string(got)
		if !stamp.MatchString(line) || strings.TrimSuffix(stamp.ReplaceAllString(line, ""), "\r\n") != w {
			t.Fatalf("MONITOR line %q, want +<time> %s", line, w)
		}
	}
	if got := mon.run(t, "BF.EXISTS", "k", "x"); got != "-ERR Replica can't interact with the keyspace\r\n" {
		t.Fatalf("a monitor's read: %q", got)
	}
	// Its own commands show too, and its flags say monitor.
	mon.c.Write(golden.Encode(argv("CLIENT", "INFO")))
	mon.c.SetReadDeadline(time.Now().Add(5 * time.Second))
	info, err := golden.ReadFrame(mon.r)
	if err != nil || !strings.Contains(string(info), " flags=O ") {
		t.Fatalf("a monitor's CLIENT INFO: %q %v", info, err)
	}
	if got := infoField(t, cl, "memory", "mem_clients_slaves"); got == "0" {
		t.Fatal("mem_clients_slaves does not count the monitor")
	}
	if got := cl.run(t, "CLIENT", "KILL", "TYPE", "replica"); got != ":1\r\n" {
		t.Fatalf("CLIENT KILL TYPE replica: %q", got)
	}
}

// TestSlowlogEntries: entries newest first, with Redis's bounds on
// arguments (32, the last saying how many more; 128 bytes, then how many
// more) and its redactions, the client's address and name.
func TestSlowlogEntries(t *testing.T) {
	srv := startServer(t, nil)
	cl := dial(t, srv)
	cl.run(t, "CONFIG", "SET", "slowlog-log-slower-than", "0")
	cl.run(t, "SLOWLOG", "RESET")
	cl.run(t, "CLIENT", "SETNAME", "slowpoke")
	items := []string{"BF.MADD", "k"}
	for i := range 40 {
		items = append(items, fmt.Sprintf("i%d", i))
	}
	cl.run(t, items...)
	cl.run(t, "SET", "long", strings.Repeat("y", 200))
	cl.run(t, "AUTH", "user", "pass")
	cl.run(t, "HELLO", "2", "AUTH", "default", "pw", "SETNAME", "slowpoke")
	cl.run(t, "CONFIG", "SET", "requirepass", "secret")
	n := parseReply(t, cl.do(t, argv("SLOWLOG", "GET", "5")))
	if len(n.kids) != 5 {
		t.Fatalf("%d entries", len(n.kids))
	}
	argsOf := func(e rnode) []string {
		var out []string
		for _, k := range e.kids[3].kids {
			out = append(out, k.s)
		}
		return out
	}
	wantArgs := [][]string{
		{"CONFIG", "SET", "requirepass", "(redacted)"},
		{"HELLO", "2", "AUTH", "(redacted)", "(redacted)", "SETNAME", "slowpoke"},
		{"AUTH", "(redacted)", "(redacted)"},
		{"SET", "long", strings.Repeat("y", 128) + "... (72 more bytes)"},
		append(items[:31:31], "... (11 more arguments)"),
	}
	for i, e := range n.kids {
		if got := argsOf(e); strings.Join(got, " ") != strings.Join(wantArgs[i], " ") {
			t.Errorf("entry %d args %q, want %q", i, got, wantArgs[i])
		}
		if e.kids[4].s != cl.c.LocalAddr().String() || e.kids[5].s != "slowpoke" {
			t.Errorf("entry %d client %q %q", i, e.kids[4].s, e.kids[5].s)
		}
		if i > 0 && intReply(t, ":"+e.kids[0].s) >= intReply(t, ":"+n.kids[i-1].kids[0].s) {
			t.Errorf("entry ids not newest first")
		}
	}
	cl.run(t, "CONFIG", "SET", "slowlog-log-slower-than", "-1")
	before := intReply(t, cl.run(t, "SLOWLOG", "LEN"))
	cl.run(t, "PING")
	if after := intReply(t, cl.run(t, "SLOWLOG", "LEN")); after != before {
		t.Fatalf("slowlog-log-slower-than -1 still logs: %d -> %d", before, after)
	}
}

// TestSlowlogPipelined: fast commands sent in one pipeline, timed
// together, are logged with their own arguments each.
func TestSlowlogPipelined(t *testing.T) {
	srv := startServer(t, nil)
	cl := dial(t, srv)
	cl.run(t, "CONFIG", "SET", "slowlog-log-slower-than", "0")
	cl.run(t, "BF.ADD", "k", "x")
	cl.run(t, "SLOWLOG", "RESET")
	var pipe []byte
	for _, it := range []string{"a", "b", "c"} {
		pipe = append(pipe, golden.Encode(argv("BF.EXISTS", "k", it))...)
	}
	if _, err := cl.c.Write(pipe); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if _, err := golden.ReadFrame(cl.r); err != nil {
			t.Fatal(err)
		}
	}
	n := parseReply(t, cl.do(t, argv("SLOWLOG", "GET", "3")))
	var got []string
	for _, e := range n.kids {
		var args []string
		for _, k := range e.kids[3].kids {
			args = append(args, k.s)
		}
		got = append(got, strings.Join(args, " "))
	}
	if want := "BF.EXISTS k c|BF.EXISTS k b|BF.EXISTS k a"; strings.Join(got, "|") != want {
		t.Fatalf("entries %q, want %q", got, want)
	}
}

// TestLatencyMonitor: with a threshold, a slow command is a "command"
// sample that LATEST, HISTORY, GRAPH and DOCTOR report, and RESET clears.
func TestLatencyMonitor(t *testing.T) {
	srv := startWith(t, server.Options{EnableDebugCommand: "yes"}, memstore.New())
	cl := dial(t, srv)
	if got := cl.run(t, "LATENCY", "DOCTOR"); !strings.Contains(got, "Latency monitoring is disabled") {
		t.Fatalf("DOCTOR while disabled: %q", got)
	}
	cl.run(t, "CONFIG", "SET", "latency-monitor-threshold", "5")
	if got := cl.run(t, "DEBUG", "SLEEP", "0.02"); got != "+OK\r\n" {
		t.Fatal(got)
	}
	latest := parseReply(t, cl.do(t, argv("LATENCY", "LATEST")))
	if len(latest.kids) != 1 || latest.kids[0].kids[0].s != "command" {
		t.Fatalf("LATENCY LATEST %q", latest.bytes())
	}
	if ms := intReply(t, ":"+latest.kids[0].kids[2].s); ms < 20 {
		t.Fatalf("latest %d ms for a 20ms sleep", ms)
	}
	if h := parseReply(t, cl.do(t, argv("LATENCY", "HISTORY", "command"))); len(h.kids) != 1 {
		t.Fatalf("HISTORY %q", h.bytes())
	}
	if got := cl.run(t, "LATENCY", "GRAPH", "command"); !strings.Contains(got, "command - high ") {
		t.Fatalf("GRAPH %q", got)
	}
	if got := cl.run(t, "LATENCY", "DOCTOR"); !strings.Contains(got, "1. command: 1 latency spikes") {
		t.Fatalf("DOCTOR %q", got)
	}
	hist := parseReply(t, cl.do(t, argv("LATENCY", "HISTOGRAM", "debug")))
	if len(hist.kids) != 2 || hist.kids[0].s != "debug" {
		t.Fatalf("HISTOGRAM %q", hist.bytes())
	}
	if got := cl.run(t, "LATENCY", "RESET"); got != ":1\r\n" {
		t.Fatalf("RESET %q", got)
	}
	if got := cl.run(t, "LATENCY", "LATEST"); got != "*0\r\n" {
		t.Fatalf("LATEST after RESET %q", got)
	}
}

// TestInfoCounts replays a sequence on the real server whose INFO counts
// were read from Redis 8: commandstats' calls, failed and rejected calls,
// errorstats by code, total_error_replies, total_commands_processed and
// keyspace hits and misses.
func TestInfoCounts(t *testing.T) {
	srv := startServer(t, nil)
	cl := dial(t, srv)
	for _, c := range [][]string{
		{"FLUSHALL"}, {"CONFIG", "RESETSTAT"},
		{"CF.RESERVE", "cf", "2", "BUCKETSIZE", "1", "MAXITERATIONS", "1", "EXPANSION", "0"},
		{"CF.ADD", "cf", "a"}, {"CF.ADD", "cf", "b"}, {"CF.ADD", "cf", "c"}, {"CF.ADD", "cf", "d"},
		{"BF.RESERVE", "k", "0.1"}, {"BF.RESERVE", "k", "x", "10"}, {"NOSUCH"}, {"CONFIG", "NOSUCH"}, {"CONFIG"},
		{"GET", "cf"}, {"CLIENT", "KILL", "1.1.1.1:1"}, {"BF.INFO", "nosuch"}, {"CF.INFO", "nosuch"},
		{"MULTI"}, {"BF.ADD", "k"}, {"EXEC"}, {"MULTI"}, {"BF.INFO", "nosuch"}, {"EXEC"}, {"SELECT", "99"},
	} {
		cl.run(t, c...)
	}
	want := map[string]string{ // Redis 8.0's, usec left out
		"bf.add":           "calls=0,rejected_calls=1,failed_calls=0",
		"config":           "calls=0,rejected_calls=1,failed_calls=0",
		"config|resetstat": "calls=1,rejected_calls=0,failed_calls=0",
		"multi":            "calls=2,rejected_calls=0,failed_calls=0",
		"client|kill":      "calls=1,rejected_calls=0,failed_calls=1",
		"bf.reserve":       "calls=1,rejected_calls=1,failed_calls=1",
		"select":           "calls=1,rejected_calls=0,failed_calls=1",
		"bf.info":          "calls=2,rejected_calls=0,failed_calls=2",
		"cf.add":           "calls=4,rejected_calls=0,failed_calls=2",
		"cf.info":          "calls=1,rejected_calls=0,failed_calls=1",
		"exec":             "calls=2,rejected_calls=0,failed_calls=1",
		"cf.reserve":       "calls=1,rejected_calls=0,failed_calls=0",
		"get":              "calls=1,rejected_calls=0,failed_calls=1",
	}
	n, _, _ := parseNode(cl.do(t, argv("INFO", "commandstats")))
	got := map[string]string{}
	usec := regexp.MustCompile(`usec=\d+,usec_per_call=\d+\.\d\d,`)
	for _, l := range strings.Split(n.s, "\r\n")[1:] {
		if k, v, ok := strings.Cut(l, ":"); ok {
			got[strings.TrimPrefix(k, "cmdstat_")] = usec.ReplaceAllString(v, "")
		}
	}
	for k, w := range want {
		if got[k] != w {
			t.Errorf("cmdstat_%s: %q, Redis %q", k, got[k], w)
		}
	}
	if len(got) != len(want) {
		t.Errorf("commandstats %q, Redis has %d commands", got, len(want))
	}
	if got := string(cl.do(t, argv("INFO", "errorstats"))); got != "$122\r\n# Errorstats\r\nerrorstat_ERR:count=11\r\nerrorstat_EXECABORT:count=1\r\nerrorstat_Filter:count=2\r\nerrorstat_WRONGTYPE:count=1\r\n\r\n" {
		t.Errorf("INFO errorstats %q", got)
	}
	stats := infoFields(t, cl, "stats")
	for field, want := range map[string]string{"total_commands_processed": "19", "total_error_replies": "15",
		"keyspace_hits": "1", "keyspace_misses": "3"} {
		if got := stats[field]; got != want {
			t.Errorf("%s:%s, Redis %s", field, got, want)
		}
	}
}

// TestInfoServerAndStats: run_id is 40 hex characters and stays; the
// instantaneous rate sees a burst of commands; the byte counters grow.
func TestInfoServerAndStats(t *testing.T) {
	srv := startServer(t, nil)
	cl := dial(t, srv)
	id := infoField(t, cl, "server", "run_id")
	if !regexp.MustCompile(`^[0-9a-f]{40}$`).MatchString(id) || id != srv.RunID() {
		t.Fatalf("run_id %q", id)
	}
	if again := infoField(t, dial(t, srv), "server", "run_id"); again != id {
		t.Fatalf("run_id changed: %s then %s", id, again)
	}
	if port := infoField(t, cl, "server", "tcp_port"); port != strconv.Itoa(srv.Addr().(*net.TCPAddr).Port) {
		t.Fatalf("tcp_port %s, listening on %v", port, srv.Addr())
	}
	in := intReply(t, ":"+infoField(t, cl, "stats", "total_net_input_bytes"))
	waitFor(t, "instantaneous_ops_per_sec", func() bool {
		var pipe []byte
		for range 200 {
			pipe = append(pipe, golden.Encode(argv("PING"))...)
		}
		cl.c.Write(pipe)
		for range 200 {
			golden.ReadFrame(cl.r)
		}
		return infoField(t, cl, "stats", "instantaneous_ops_per_sec") != "0"
	})
	if after := intReply(t, ":"+infoField(t, cl, "stats", "total_net_input_bytes")); after <= in {
		t.Fatalf("total_net_input_bytes %d then %d", in, after)
	}
	cl.run(t, "CONFIG", "RESETSTAT")
	if got := infoField(t, cl, "stats", "total_commands_processed"); got != "1" {
		t.Fatalf("total_commands_processed after RESETSTAT: %s", got)
	}
	if got := infoField(t, cl, "memory", "maxmemory_policy"); got != "noeviction" {
		t.Fatal(got)
	}
}

// TestConfigSetRuntime: the settings CONFIG SET changes take effect, in
// Redis's check order; the others answer Redis's immutable error.
func TestConfigSetRuntime(t *testing.T) {
	srv := startServer(t, nil)
	cl := dial(t, srv)
	for _, c := range []struct{ args, want string }{
		{"CONFIG SET port 7000", "-ERR CONFIG SET failed (possibly related to argument 'port') - can't set immutable config\r\n"},
		{"CONFIG SET nosuch 1 port 7000", "-ERR Unknown option or number of arguments for CONFIG SET - 'nosuch'\r\n"},
		{"CONFIG SET port 7000 nosuch 1", "-ERR CONFIG SET failed (possibly related to argument 'port') - can't set immutable config\r\n"},
		{"CONFIG SET maxclients 0", "-ERR CONFIG SET failed (possibly related to argument 'maxclients') - argument must be between 1 and 1048576 inclusive\r\n"},
		{"CONFIG SET protected-mode maybe", "-ERR CONFIG SET failed (possibly related to argument 'protected-mode') - argument must be 'yes' or 'no'\r\n"},
		{"CONFIG SET slowlog-max-len 5 maxclients x", "-ERR CONFIG SET failed (possibly related to argument 'maxclients') - argument couldn't be parsed into an integer\r\n"},
		{"CONFIG GET slowlog-max-len", "*2\r\n$15\r\nslowlog-max-len\r\n$3\r\n128\r\n"},
		{"CONFIG SET maxmemory-policy allkeys-lru", "-ERR CONFIG SET failed (possibly related to argument 'maxmemory-policy') - bfserver never evicts filters (an evicted filter would answer false negatives): only noeviction is supported\r\n"},
		{"CONFIG SET protected-mode no", "+OK\r\n"},
		{"CONFIG GET protected-mode", "*2\r\n$14\r\nprotected-mode\r\n$2\r\nno\r\n"},
		// hz and activedefrag as Redis 8.0 answers them (captured from
		// the RedisBloom anchor; activedefrag yes from Debian's Redis 7,
		// built without a defragmenting jemalloc, as bfserver is).
		{"CONFIG SET hz 0", "+OK\r\n"},
		{"CONFIG GET hz", "*2\r\n$2\r\nhz\r\n$1\r\n1\r\n"},
		{"CONFIG SET hz 600", "+OK\r\n"},
		{"CONFIG GET hz", "*2\r\n$2\r\nhz\r\n$3\r\n500\r\n"},
		{"CONFIG SET hz -1", "-ERR CONFIG SET failed (possibly related to argument 'hz') - argument must be between 0 and 2147483647 inclusive\r\n"},
		{"CONFIG SET hz 2147483648", "-ERR CONFIG SET failed (possibly related to argument 'hz') - argument must be between 0 and 2147483647 inclusive\r\n"},
		{"CONFIG SET hz abc", "-ERR CONFIG SET failed (possibly related to argument 'hz') - argument couldn't be parsed into an integer\r\n"},
		{"CONFIG SET hz 100", "+OK\r\n"},
		{"CONFIG SET activedefrag yes", "-ERR CONFIG SET failed (possibly related to argument 'activedefrag') - Active defragmentation cannot be enabled: it requires a Redis server compiled with a modified Jemalloc like the one shipped by default with the Redis source distribution\r\n"},
		{"CONFIG SET activedefrag maybe", "-ERR CONFIG SET failed (possibly related to argument 'activedefrag') - argument must be 'yes' or 'no'\r\n"},
		{"CONFIG SET activedefrag no", "+OK\r\n"},
		{"CONFIG GET activedefrag", "*2\r\n$12\r\nactivedefrag\r\n$2\r\nno\r\n"},
		{"CONFIG SET maxclients 2", "+OK\r\n"},
	} {
		if got := cl.run(t, strings.Fields(c.args)...); got != c.want {
			t.Errorf("%s: %q, want %q", c.args, got, c.want)
		}
	}
	second := dial(t, srv)
	second.run(t, "PING")
	third, err := dialRaw(srv)
	if err != nil {
		t.Fatal(err)
	}
	defer third.Close()
	third.SetDeadline(time.Now().Add(5 * time.Second))
	line, _ := bufio.NewReader(third).ReadString('\n')
	if line != "-ERR max number of clients reached\r\n" {
		t.Fatalf("a third client with maxclients 2: %q", line)
	}
	if got := infoField(t, cl, "server", "hz"); got != "100" {
		t.Fatalf("INFO hz after CONFIG SET hz 100: %s", got)
	}
	if got := infoField(t, cl, "clients", "maxclients"); got != "2" {
		t.Fatalf("INFO maxclients %s", got)
	}
}

// TestConfigRewrite: the settings CONFIG SET changed replace their lines
// (later duplicates dropped) or are appended; comments and other lines stay.
func TestConfigRewrite(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "bfserver.conf")
	orig := "# the node's settings\nmaxmemory 100mb # cap\naddr 127.0.0.1:6379\n\n# filters\nbf-error-rate 0.01\nmaxmemory 200mb\n"
	if err := os.WriteFile(path, []byte(orig), 0o640); err != nil {
		t.Fatal(err)
	}
	srv := startWith(t, server.Options{ConfigFile: path}, memstore.New())
	cl := dial(t, srv)
	if got := cl.run(t, "CONFIG", "REWRITE"); got != "+OK\r\n" {
		t.Fatal(got)
	}
	if b, _ := os.ReadFile(path); string(b) != orig {
		t.Fatalf("REWRITE with nothing changed rewrote the file:\n%s", b)
	}
	cl.run(t, "CONFIG", "SET", "maxmemory", "10mb", "bf-error-rate", "0.001", "slowlog-max-len", "64", "read-consistency", "stale")
	if got := cl.run(t, "CONFIG", "REWRITE"); got != "+OK\r\n" {
		t.Fatal(got)
	}
	b, _ := os.ReadFile(path)
	want := "# the node's settings\nmaxmemory 10485760\naddr 127.0.0.1:6379\n\n# filters\nbf-error-rate 0.001\n" +
		"# Generated by CONFIG REWRITE\nslowlog-max-len 64\nstale-reads true\n"
	if string(b) != want {
		t.Fatalf("rewritten:\n%s\nwant:\n%s", b, want)
	}
	if st, _ := os.Stat(path); st.Mode().Perm() != 0o640 {
		t.Fatalf("mode %v", st.Mode())
	}
	cl.run(t, "CONFIG", "SET", "slowlog-max-len", "32")
	cl.run(t, "CONFIG", "REWRITE")
	if b, _ := os.ReadFile(path); !strings.HasSuffix(string(b), "# Generated by CONFIG REWRITE\nslowlog-max-len 32\nstale-reads true\n") {
		t.Fatalf("second rewrite:\n%s", b)
	}
	noFile := dial(t, startServer(t, nil))
	if got := noFile.run(t, "CONFIG", "REWRITE"); got != "-ERR The server is running without a config file\r\n" {
		t.Fatal(got)
	}
}

// TestSaveStatus: a SAVE alone leaves INFO's BGSAVE status ok and its
// time -1, as Redis's; a failed BGSAVE is err until a save succeeds.
func TestSaveStatus(t *testing.T) {
	fc := newFakeCluster()
	srv := startWith(t, server.Options{}, fc)
	cl := dial(t, srv)
	cl.run(t, "SAVE")
	if st, sec := infoField(t, cl, "persistence", "rdb_last_bgsave_status"), infoField(t, cl, "persistence", "rdb_last_bgsave_time_sec"); st != "ok" || sec != "-1" {
		t.Fatalf("after SAVE: status %s, time %s", st, sec)
	}
	fc.fail.Store(true)
	cl.run(t, "BGSAVE")
	waitFor(t, "the failed background save", func() bool {
		return infoField(t, cl, "persistence", "rdb_bgsave_in_progress") == "0" && infoField(t, cl, "persistence", "rdb_last_bgsave_status") == "err"
	})
	fc.fail.Store(false)
	cl.run(t, "SAVE")
	if st := infoField(t, cl, "persistence", "rdb_last_bgsave_status"); st != "ok" {
		t.Fatalf("after a failed BGSAVE and a SAVE: %s", st)
	}
}

// TestSaveAndShutdown: SAVE and BGSAVE snapshot the node, LASTSAVE and
// INFO persistence follow; SHUTDOWN SAVE whose save fails answers Redis's
// error and keeps serving; SHUTDOWN closes the client and asks the owner
// to stop. Without a log SAVE says why it cannot.
func TestSaveAndShutdown(t *testing.T) {
	fc := newFakeCluster()
	fc.last.Store(1000)
	srv := startWith(t, server.Options{}, fc)
	cl := dial(t, srv)
	if got := cl.run(t, "LASTSAVE"); got != ":1000\r\n" {
		t.Fatal(got)
	}
	if got := cl.run(t, "SAVE"); got != "+OK\r\n" || fc.snapshots.Load() != 1 {
		t.Fatalf("SAVE %q, %d snapshots", got, fc.snapshots.Load())
	}
	if got := intReply(t, cl.run(t, "LASTSAVE")); got < time.Now().Unix()-5 {
		t.Fatalf("LASTSAVE %d after SAVE", got)
	}
	if got := cl.run(t, "BGSAVE"); got != "+Background saving started\r\n" {
		t.Fatal(got)
	}
	waitFor(t, "the background save", func() bool { return infoField(t, cl, "persistence", "rdb_saves") == "2" })
	if got := infoField(t, cl, "persistence", "rdb_last_bgsave_status"); got != "ok" {
		t.Fatal(got)
	}
	fc.fail.Store(true)
	if got := cl.run(t, "SHUTDOWN", "SAVE"); got != "-ERR Errors trying to SHUTDOWN. Check logs.\r\n" {
		t.Fatalf("SHUTDOWN SAVE that cannot save: %q", got)
	}
	select {
	case <-srv.ShutdownRequested():
		t.Fatal("a failed SHUTDOWN SAVE stopped the server")
	default:
	}
	if got := cl.run(t, "PING"); got != "+PONG\r\n" {
		t.Fatal(got)
	}
	cl.c.Write(golden.Encode(argv("SHUTDOWN", "SAVE", "FORCE")))
	if b, err := golden.ReadFrame(cl.r); err == nil {
		t.Fatalf("SHUTDOWN answered %q", b)
	}
	select {
	case <-srv.ShutdownRequested():
	case <-time.After(5 * time.Second):
		t.Fatal("SHUTDOWN did not ask to stop")
	}

	mem := dial(t, startServer(t, nil))
	if got := mem.run(t, "SAVE"); !strings.HasPrefix(got, "-ERR this server keeps its filters in memory only") {
		t.Fatalf("SAVE in memory: %q", got)
	}
	if got := mem.run(t, "DEBUG", "SLEEP", "0"); !strings.HasPrefix(got, "-ERR DEBUG command not allowed.") {
		t.Fatalf("DEBUG without enable-debug-command: %q", got)
	}
	if got := mem.run(t, "MULTI"); got != "+OK\r\n" {
		t.Fatal(got)
	}
	if got := mem.run(t, "SHUTDOWN"); got != "-ERR Command not allowed inside a transaction\r\n" {
		t.Fatalf("SHUTDOWN in MULTI: %q", got)
	}
}

// TestClientListFields: another client's line shows its state (name, db,
// MULTI, last command, protocol, library); an idle one counts idle time.
func TestClientListFields(t *testing.T) {
	srv := startServer(t, nil)
	admin, other := dial(t, srv), dial(t, srv)
	other.run(t, "HELLO", "3", "SETNAME", "worker")
	other.run(t, "CLIENT", "SETINFO", "LIB-NAME", "go-redis")
	other.run(t, "SELECT", "5")
	other.run(t, "MULTI")
	other.run(t, "PING")
	lines, err := clientLines(admin.do(t, argv("CLIENT", "LIST")))
	if err != nil || len(lines) != 2 {
		t.Fatalf("%d lines: %v", len(lines), err)
	}
	// The other client's line, whichever the server numbered first.
	f := map[string]string{}
	for _, l := range lines {
		m := map[string]string{}
		for _, kv := range l {
			m[kv[0]] = kv[1]
		}
		if m["addr"] == other.c.LocalAddr().String() {
			f = m
		}
	}
	for k, want := range map[string]string{"name": "worker", "db": "5", "flags": "x", "multi": "1", "cmd": "ping",
		"resp": "3", "lib-name": "go-redis", "user": "default", "addr": other.c.LocalAddr().String(), "laddr": srv.Addr().String()} {
		if f[k] != want {
			t.Errorf("%s=%s, want %s (%v)", k, f[k], want, lines)
		}
	}
	if fd, _ := strconv.Atoi(f["fd"]); fd <= 2 {
		t.Errorf("fd=%s", f["fd"])
	}
}

// TestOOMIsRejected: a write refused over maxmemory counts as rejected,
// not as a call, and MONITOR does not show it, as in Redis.
func TestOOMIsRejected(t *testing.T) {
	srv := startWith(t, server.Options{MaxMemory: 1}, memstore.New())
	cl, mon := dial(t, srv), dial(t, srv)
	mon.run(t, "MONITOR")
	if got := cl.run(t, "BF.RESERVE", "k", "0.01", "1000"); !strings.HasPrefix(got, "-OOM ") {
		t.Fatalf("BF.RESERVE over maxmemory: %q", got)
	}
	cl.run(t, "PING", "after")
	n, _, _ := parseNode(cl.do(t, argv("INFO", "commandstats")))
	if !regexp.MustCompile(`cmdstat_bf\.reserve:calls=0,usec=0,usec_per_call=0\.00,rejected_calls=1,failed_calls=0`).MatchString(n.s) {
		t.Fatalf("commandstats:\n%s", n.s)
	}
	mon.c.SetReadDeadline(time.Now().Add(5 * time.Second))
	line, err := golden.ReadFrame(mon.r)
	if err != nil || !strings.HasSuffix(string(line), `"PING" "after"`+"\r\n") {
		t.Fatalf("the monitor's first line %q %v, want the PING", line, err)
	}
}
