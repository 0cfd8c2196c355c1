package resp_test

import (
	"bufio"
	"bytes"
	"fmt"
	"net"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bfserver/bfserver/internal/golden"
	"github.com/bfserver/bfserver/memstore"
	"github.com/bfserver/bfserver/resp"
)

// clock is a test clock: replays advance it instead of sleeping.
type clock struct{ ms atomic.Int64 }

func (c *clock) now() time.Time  { return time.UnixMilli(c.ms.Load()) }
func (c *clock) advance(d int64) { c.ms.Add(d) }
func newClock() *clock           { c := &clock{}; c.ms.Store(1_800_000_000_000); return c }
func startServer(t testing.TB, clk *clock) *resp.Server {
	t.Helper()
	opts := resp.Options{Addr: "127.0.0.1:0"}
	if clk != nil {
		opts.Now = clk.now
	}
	srv := resp.New(opts, memstore.New())
	if err := srv.Listen(); err != nil {
		t.Fatal(err)
	}
	go srv.Serve()
	t.Cleanup(func() { srv.Close() })
	return srv
}

type client struct {
	c net.Conn
	r *bufio.Reader
}

func dial(t testing.TB, srv *resp.Server) *client {
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
		if r.SleepMS > 0 {
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
	for _, f := range files {
		t.Run(f, func(t *testing.T) {
			recs, err := golden.Load(f)
			if err != nil {
				t.Fatal(err)
			}
			clk := newClock()
			srv := startServer(t, clk)
			replay(t, clk, dial(t, srv), recs)
		})
	}
}
