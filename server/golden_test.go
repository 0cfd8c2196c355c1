package server_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bfserver/bfserver/acl"
	"github.com/bfserver/bfserver/command"
	"github.com/bfserver/bfserver/internal/golden"
	"github.com/bfserver/bfserver/keyspace"
	"github.com/bfserver/bfserver/memstore"
	"github.com/bfserver/bfserver/server"
)

// clock is a test clock: replays advance it instead of sleeping.
type clock struct{ ms atomic.Int64 }

func (c *clock) now() time.Time  { return time.UnixMilli(c.ms.Load()) }
func (c *clock) advance(d int64) { c.ms.Add(d) }
func newClock() *clock           { c := &clock{}; c.ms.Store(1_800_000_000_000); return c }
func startServer(t testing.TB, clk *clock) *server.Server {
	t.Helper()
	return startServerIn(t, clk, ioLoop)
}

// How a test server serves its connections: from event loops with a
// backend that never waits (every command runs on the loop), from event
// loops with one that may (writes and reads are parked to a goroutine, as
// with a replicated log), from event loops with one whose writes wait on
// this node alone (a connection's last write waits for the loop's turn,
// as with a single node's log), or a goroutine per connection.
type ioMode string

const (
	ioLoop      ioMode = "loop"
	ioParked    ioMode = "parked"
	ioTurn      ioMode = "turn"
	ioGoroutine ioMode = "goroutine"
)

var ioModes = []ioMode{ioLoop, ioParked, ioTurn, ioGoroutine}

// waiting is a memstore that does not say its writes and reads never
// wait, so an event loop parks them, as it does a replicated log's.
type waiting struct{ st *memstore.Store }

func (w waiting) Write(ctx context.Context, cmds []*command.Cmd) ([]keyspace.Result, error) {
	return w.st.Write(ctx, cmds)
}
func (w waiting) Barrier(ctx context.Context, stale bool) (time.Time, error) {
	return w.st.Barrier(ctx, stale)
}
func (w waiting) State() *keyspace.Keyspace { return w.st.State() }
func (w waiting) Users() (uint64, map[string][]string, <-chan struct{}) {
	return w.st.Users()
}
func (w waiting) UsersVersion() uint64 { return w.st.UsersVersion() }

// localWaiting is waiting, but says its writes wait on this node alone:
// an event loop waits for a connection's last write itself, at the end
// of its turn, together with the others of that turn.
type localWaiting struct{ waiting }

func (localWaiting) WritesLocally() bool { return true }

func startServerIn(t testing.TB, clk *clock, mode ioMode) *server.Server {
	t.Helper()
	opts := server.Options{Addr: "127.0.0.1:0", NoEventLoop: mode == ioGoroutine}
	if clk != nil {
		opts.Now = clk.now
	}
	var b server.Backend = memstore.New()
	switch mode {
	case ioParked:
		b = waiting{memstore.New()}
	case ioTurn:
		b = localWaiting{waiting{memstore.New()}}
	}
	srv := newServer(t, opts, b)
	if err := srv.Listen(); err != nil {
		t.Fatal(err)
	}
	go srv.Serve()
	t.Cleanup(func() { srv.Close() })
	return srv
}

// newServer is server.New for a test: bad options fail it.
func newServer(t testing.TB, opts server.Options, b server.Backend) *server.Server {
	t.Helper()
	srv, err := server.New(opts, b)
	if err != nil {
		t.Fatal(err)
	}
	return srv
}

type client struct {
	c net.Conn
	r *bufio.Reader
}

func dial(t testing.TB, srv *server.Server) *client {
	t.Helper()
	c, err := net.Dial("tcp", srv.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &client{c: c, r: bufio.NewReader(c)}
}

func (cl *client) do(t testing.TB, args [][]byte) []byte {
	t.Helper()
	cl.c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := cl.c.Write(golden.Encode(args)); err != nil {
		t.Fatal(err)
	}
	b, err := golden.ReadFrame(cl.r)
	if err != nil {
		t.Fatalf("%q: %v", args, err)
	}
	return b
}

func show(args [][]byte) string {
	var b bytes.Buffer
	for i, a := range args {
		if i > 0 {
			b.WriteByte(' ')
		}
		if len(a) > 40 {
			a = append(a[:40:40], "…"...)
		}
		b.WriteString(strconv.Quote(string(a)))
	}
	return b.String()
}

// replay sends every record on one connection and compares non-volatile
// replies byte for byte. It reports at most a few mismatches per file.
func replay(t *testing.T, clk *clock, cl *client, recs []golden.Record) {
	bad := 0
	for i, r := range recs {
		if !r.IsCommand() {
			continue
		}
		if r.SleepMS > 0 && clk != nil {
			clk.advance(r.SleepMS)
		}
		args := r.Argv()
		got := cl.do(t, args)
		if r.Volatile {
			continue
		}
		if want := r.Want(); !bytes.Equal(got, want) {
			bad++
			if bad <= 15 {
				t.Errorf("line %d [%s] %s\n got %q\nwant %q", i+1, r.Section, show(args), got, want)
			}
		}
	}
	if bad > 15 {
		t.Errorf("%d mismatches in all", bad)
	}
}

func TestGoldenTranscripts(t *testing.T) {
	files := []string{"transcript-resp2.jsonl", "transcript-resp3.jsonl"}
	for i := 0; i < 20; i++ {
		files = append(files, fmt.Sprintf("random-%03d.jsonl", i))
	}
	for _, mode := range ioModes {
		for _, f := range files {
			t.Run(string(mode)+"/"+f, func(t *testing.T) {
				recs, err := golden.Load(f)
				if err != nil {
					t.Fatal(err)
				}
				clk := newClock()
				srv := startServerIn(t, clk, mode)
				replay(t, clk, dial(t, srv), recs)
			})
		}
	}
}

// TestGoldenDumps replays every dump recipe over a socket: each recipe's
// replies, then SCANDUMP byte for byte, INFO, DEBUG, CARD and the probes
// (false positives included), then LOADCHUNKs the golden dump into a new
// key and checks it dumps and answers the same.
func TestGoldenDumps(t *testing.T) {
	recipes, err := golden.LoadRecipes()
	if err != nil {
		t.Fatal(err)
	}
	if len(recipes) < 50 {
		t.Fatalf("only %d recipes", len(recipes))
	}
	srv := startServer(t, nil)
	cl := dial(t, srv)
	for _, r := range recipes {
		t.Run(r.Name, func(t *testing.T) {
			cl.do(t, argv("FLUSHALL"))
			replay(t, nil, cl, r.Recipe)
			prefix := "BF."
			if r.Type == "cf" {
				prefix = "CF."
			}
			var chunks [][2][]byte // iterator, data
			for _, pair := range r.Scandump {
				it := strconv.FormatInt(int64(pair[0].(float64)), 10)
				var data []byte
				if pair[1] != nil {
					data, _ = hex.DecodeString(pair[1].(string))
				}
				chunks = append(chunks, [2][]byte{[]byte(it), data})
			}
			dumpOf := func(key string) [][2][]byte {
				var out [][2][]byte
				it := "0"
				for i := 0; i < len(chunks)+2; i++ {
					reply := cl.do(t, argv(prefix+"SCANDUMP", key, it))
					next, data := parseScanDump(t, reply)
					out = append(out, [2][]byte{[]byte(next), data})
					if next == "0" {
						break
					}
					it = next
				}
				return out
			}
			check := func(key string) {
				got := dumpOf(key)
				if len(got) != len(chunks) {
					t.Fatalf("%s: %d chunks, want %d", key, len(got), len(chunks))
				}
				for i := range got {
					if !bytes.Equal(got[i][0], chunks[i][0]) || !bytes.Equal(got[i][1], chunks[i][1]) {
						t.Fatalf("%s chunk %d: (%s, %x) want (%s, %x)", key, i, got[i][0], got[i][1], chunks[i][0], chunks[i][1])
					}
				}
				var info map[string]any
				json.Unmarshal(r.Info, &info)
				reply := string(cl.do(t, argv(prefix+"INFO", key)))
				for name, v := range info {
					want := "+" + name + "\r\n$-1\r\n"
					if v != nil {
						want = "+" + name + "\r\n:" + strconv.FormatInt(int64(v.(float64)), 10) + "\r\n"
					}
					if !strings.Contains(reply, want) {
						t.Errorf("%s INFO %q lacks %q", key, reply, want)
					}
				}
				var debug any
				json.Unmarshal(r.Debug, &debug)
				dreply := string(cl.do(t, argv(prefix+"DEBUG", key)))
				lines, ok := debug.([]any)
				if !ok {
					lines = []any{debug}
				}
				for _, l := range lines {
					if !strings.Contains(dreply, l.(string)+"\r\n") {
						t.Errorf("%s DEBUG %q lacks %q", key, dreply, l)
					}
				}
				if r.Card != nil {
					if got := string(cl.do(t, argv("BF.CARD", key))); got != ":"+strconv.FormatInt(*r.Card, 10)+"\r\n" {
						t.Errorf("%s BF.CARD = %q, want %d", key, got, *r.Card)
					}
				}
				for _, p := range r.Probes {
					args := p.Argv()
					args[1] = []byte(key)
					if got := cl.do(t, args); !bytes.Equal(got, p.Want()) {
						t.Errorf("%s probe %s: got %q want %q", key, args[0], got, p.Want())
					}
				}
			}
			check(r.Key)
			if chunks[0][0][0] == '0' {
				return // an empty cuckoo filter cannot be dumped
			}
			for _, c := range chunks {
				if string(c[0]) != "0" {
					if got := cl.do(t, [][]byte{[]byte(prefix + "LOADCHUNK"), []byte("copy"), c[0], c[1]}); string(got) != "+OK\r\n" {
						t.Fatalf("LOADCHUNK %s: %q", c[0], got)
					}
				}
			}
			check("copy")
		})
	}
}

// parseScanDump splits a SCANDUMP reply into its iterator and data.
func parseScanDump(t *testing.T, reply []byte) (string, []byte) {
	rd := bufio.NewReader(bytes.NewReader(reply))
	head, _ := rd.ReadString('\n')
	if head != "*2\r\n" {
		t.Fatalf("SCANDUMP reply %q", reply)
	}
	it, _ := rd.ReadString('\n')
	it = strings.TrimSuffix(strings.TrimPrefix(it, ":"), "\r\n")
	bulk, _ := rd.ReadString('\n')
	if bulk == "$-1\r\n" || bulk == "_\r\n" {
		return it, nil
	}
	n, _ := strconv.Atoi(strings.TrimSuffix(strings.TrimPrefix(bulk, "$"), "\r\n"))
	data := make([]byte, n)
	io.ReadFull(rd, data)
	return it, data
}

// TestActiveExpiry: a key whose expiry passed is removed from the keyspace
// (not just hidden from reads) without any command touching it.
func TestActiveExpiry(t *testing.T) {
	clk := newClock()
	store := memstore.New()
	srv := newServer(t, server.Options{Addr: "127.0.0.1:0", Now: clk.now, ExpireInterval: time.Millisecond}, store)
	if err := srv.Listen(); err != nil {
		t.Fatal(err)
	}
	go srv.Serve()
	t.Cleanup(func() { srv.Close() })
	cl := dial(t, srv)
	cl.do(t, [][]byte{[]byte("BF.ADD"), []byte("e"), []byte("x")})
	cl.do(t, [][]byte{[]byte("PEXPIRE"), []byte("e"), []byte("50")})
	present := func() bool {
		found := false
		store.State().Range(0, func(key string, _ *keyspace.Value) bool { found = true; return false })
		return found
	}
	if !present() {
		t.Fatal("key missing before it expired")
	}
	clk.advance(100)
	deadline := time.Now().Add(10 * time.Second)
	for present() {
		if time.Now().After(deadline) {
			t.Fatal("expired key was never removed")
		}
		time.Sleep(time.Millisecond) // polling the expiry loop's effect
	}
}

// TestPipelinedWrites: many writes arriving in one read are batched
// together, and each keeps its own arguments.
func TestPipelinedWrites(t *testing.T) {
	for _, mode := range ioModes {
		t.Run(string(mode), func(t *testing.T) { testPipelinedWrites(t, startServerIn(t, nil, mode)) })
	}
}

func testPipelinedWrites(t *testing.T, srv *server.Server) {
	cl := dial(t, srv)
	var buf bytes.Buffer
	const n = 500
	for i := 0; i < n; i++ {
		buf.Write(golden.Encode([][]byte{[]byte("BF.ADD"), []byte("p"), []byte("item:" + strconv.Itoa(i))}))
		buf.Write(golden.Encode([][]byte{[]byte("DEL"), []byte("gone:" + strconv.Itoa(i)), []byte("x")}))
	}
	if _, err := cl.c.Write(buf.Bytes()); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 2*n; i++ {
		if _, err := golden.ReadFrame(cl.r); err != nil {
			t.Fatal(err)
		}
	}
	if got := cl.do(t, [][]byte{[]byte("BF.CARD"), []byte("p")}); string(got) != ":500\r\n" {
		t.Fatalf("BF.CARD after %d pipelined adds = %q", n, got)
	}
}

// TestReadPathAllocations: answering BF.EXISTS / BF.MEXISTS allocates
// nothing per request once the session's buffers are warm.
func TestReadPathAllocations(t *testing.T) {
	srv := newServer(t, server.Options{Addr: "127.0.0.1:0", Stale: true}, memstore.New())
	allocs := server.ReadAllocs(srv, [][]byte{[]byte("BF.MEXISTS"), []byte("k"), []byte("a"), []byte("b")}, 1000)
	if allocs > 0 {
		t.Fatalf("%.2f allocations per BF.MEXISTS", allocs)
	}
}

// TestPipelineKeepsArenas: a session answering a pipeline of 1,000
// BF.ADD keeps its arenas for the next one (they regrew from nothing at
// every batch: most of what a node allocated creating a million filters
// that way), and lets go of those of a much longer pipeline.
func TestPipelineKeepsArenas(t *testing.T) {
	srv := newServer(t, server.Options{Addr: "127.0.0.1:0", Stale: true}, memstore.New())
	if !server.PipelineKeepsArenas(srv, 1000) {
		t.Error("a pipeline of 1,000 writes: the arenas were dropped")
	}
	if server.PipelineKeepsArenas(srv, 10000) {
		t.Error("a pipeline of 10,000 writes: the arenas were kept")
	}
}

// TestAccessRules covers every access error word: NOAUTH before AUTH,
// WRONGPASS for bad credentials, NOPERM for a command outside a user's
// categories, and what each user may do.
func TestAccessRules(t *testing.T) {
	reader, err := server.ParseUser("reader on >rpass ~* +@read +@connection")
	if err != nil {
		t.Fatal(err)
	}
	writer, _ := server.ParseUser("writer on >wpass allkeys +@bloom +@connection -bf.reserve")
	off, _ := server.ParseUser("gone off >x +@all")
	srv := newServer(t, server.Options{Addr: "127.0.0.1:0", RequirePass: "secret", Users: []*acl.User{reader, writer, off}}, memstore.New())
	if err := srv.Listen(); err != nil {
		t.Fatal(err)
	}
	go srv.Serve()
	t.Cleanup(func() { srv.Close() })
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"BF.ADD", "k", "x"}, "-NOAUTH Authentication required.\r\n"},
		{[]string{"AUTH", "wrong"}, "-WRONGPASS invalid username-password pair or user is disabled.\r\n"},
		{[]string{"AUTH", "gone", "x"}, "-WRONGPASS invalid username-password pair or user is disabled.\r\n"},
		{[]string{"HELLO", "3", "AUTH", "writer", "nope"}, "-WRONGPASS invalid username-password pair or user is disabled.\r\n"},
		{[]string{"AUTH", "secret"}, "+OK\r\n"},
		{[]string{"BF.ADD", "k", "x"}, ":1\r\n"},
		{[]string{"AUTH", "writer", "wpass"}, "+OK\r\n"},
		{[]string{"BF.ADD", "k", "y"}, ":1\r\n"},
		{[]string{"BF.RESERVE", "k2", "0.01", "10"}, "-NOPERM User writer has no permissions to run the 'bf.reserve' command\r\n"},
		{[]string{"CF.ADD", "c", "x"}, "-NOPERM User writer has no permissions to run the 'cf.add' command\r\n"},
		{[]string{"FLUSHALL"}, "-NOPERM User writer has no permissions to run the 'flushall' command\r\n"},
		{[]string{"AUTH", "reader", "rpass"}, "+OK\r\n"},
		{[]string{"BF.EXISTS", "k", "x"}, ":1\r\n"},
		{[]string{"CF.EXISTS", "c", "x"}, ":0\r\n"},
		{[]string{"BF.ADD", "k", "z"}, "-NOPERM User reader has no permissions to run the 'bf.add' command\r\n"},
		{[]string{"CONFIG", "SET", "bf-error-rate", "0.1"}, "-NOPERM User reader has no permissions to run the 'config|set' command\r\n"},
		{[]string{"PING"}, "+PONG\r\n"},
	}
	cl := dial(t, srv)
	for _, c := range cases {
		if got := string(cl.do(t, argv(c.args...))); got != c.want {
			t.Errorf("%v: got %q want %q", c.args, got, c.want)
		}
	}
}

// TestProtectedMode: with no password, a client from outside the local
// addresses gets Redis's DENIED reply; a local one is served.
func TestProtectedMode(t *testing.T) {
	srv := newServer(t, server.Options{Addr: "127.0.0.1:0", ProtectedMode: true,
		Local: func(a net.Addr) bool { return a.(*net.TCPAddr).IP.Equal(net.IPv4(127, 0, 0, 1)) }}, memstore.New())
	if err := srv.Listen(); err != nil {
		t.Fatal(err)
	}
	go srv.Serve()
	t.Cleanup(func() { srv.Close() })
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 2)}, Timeout: 5 * time.Second}
	c, err := d.Dial("tcp", srv.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	line, _ := bufio.NewReader(c).ReadString('\n')
	if !strings.HasPrefix(line, "-DENIED Redis is running in protected mode") {
		t.Fatalf("outside client got %q", line)
	}
	if got := string(dial(t, srv).do(t, [][]byte{[]byte("PING")})); got != "+PONG\r\n" {
		t.Fatalf("local client got %q", got)
	}
}
