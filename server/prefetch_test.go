package server_test

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/bfserver/bfserver/internal/golden"
)

// TestPipelinedLookups: lookups in a pipeline, where each one starts
// loading the next one's bits (session.prefetchNext), answer as they
// would alone: after an add earlier in the same pipeline, in Bloom and
// Cuckoo filters above the cache size, on a key of another type, a
// missing key, with a wrong arity, in lower case, inline, past the
// look-ahead's 512 bytes, queued in MULTI, and with the last command
// split across two writes. A lookup the look-ahead parsed whole is run
// from that parse: each case after a lookup checks it.
func TestPipelinedLookups(t *testing.T) {
	for _, mode := range ioModes {
		t.Run(string(mode), func(t *testing.T) {
			srv := startServerIn(t, nil, mode)
			cl := dial(t, srv)
			for _, c := range [][]string{
				{"BF.RESERVE", "big", "0.01", "10000000", "NONSCALING"}, // 12 MB
				{"CF.RESERVE", "cf", "10000000"},                        // 16 MB
				{"SET", "s", "v"},
			} {
				cl.do(t, argv(c...))
			}
			var in bytes.Buffer
			var want []string
			long := strings.Repeat("l", 600)
			for _, c := range []struct {
				cmd   []string
				reply string
				raw   string // sent as it is (an inline command) instead of cmd
			}{
				{[]string{"BF.EXISTS", "big", "a"}, ":0\r\n", ""},
				{[]string{"BF.ADD", "big", "a"}, ":1\r\n", ""},
				{[]string{"BF.EXISTS", "big", "a"}, ":1\r\n", ""},
				{[]string{"bf.exists", "big", "a"}, ":1\r\n", ""},
				{[]string{"BF.MEXISTS", "big", "b", "a"}, "*2\r\n:0\r\n:1\r\n", ""},
				{[]string{"CF.EXISTS", "cf", "a"}, ":0\r\n", ""},
				{[]string{"CF.ADD", "cf", "a"}, ":1\r\n", ""},
				{[]string{"CF.EXISTS", "cf", "a"}, ":1\r\n", ""},
				{[]string{"CF.MEXISTS", "cf", "a", "b"}, "*2\r\n:1\r\n:0\r\n", ""},
				{[]string{"BF.EXISTS", "s", "a"}, ":0\r\n", ""}, // RedisBloom's answer on another type
				{[]string{"CF.EXISTS", "s", "a"}, ":0\r\n", ""},
				{[]string{"BF.EXISTS", "missing", "a"}, ":0\r\n", ""},
				{[]string{"BF.EXISTS", "big"}, "-ERR wrong number of arguments for 'bf.exists' command\r\n", ""},
				{nil, ":1\r\n", "BF.EXISTS big a\r\n"},
				{nil, ":0\r\n", "bf.exists big zz\r\n"},
				{[]string{"BF.ADD", "big", long}, ":1\r\n", ""},
				{[]string{"BF.EXISTS", "big", "a"}, ":1\r\n", ""},
				{[]string{"BF.EXISTS", "big", long}, ":1\r\n", ""},
				{[]string{"BF.EXISTS", "big", long + "m"}, ":0\r\n", ""},
				{[]string{"MULTI"}, "+OK\r\n", ""},
				{[]string{"BF.EXISTS", "big", "a"}, "+QUEUED\r\n", ""},
				{[]string{"BF.EXISTS", "big", "zz"}, "+QUEUED\r\n", ""},
				{[]string{"EXEC"}, "*2\r\n:1\r\n:0\r\n", ""},
				{[]string{"BF.EXISTS", "big", "a"}, ":1\r\n", ""},
				{[]string{"BF.EXISTS", "big", "a"}, ":1\r\n", ""}, // split below
			} {
				if c.raw != "" {
					in.WriteString(c.raw)
				} else {
					in.Write(golden.Encode(argv(c.cmd...)))
				}
				want = append(want, c.reply)
			}
			b := in.Bytes()
			cl.c.SetDeadline(time.Now().Add(10 * time.Second))
			if _, err := cl.c.Write(b[:len(b)-3]); err != nil {
				t.Fatal(err)
			}
			for i, w := range want {
				if i == len(want)-1 {
					if _, err := cl.c.Write(b[len(b)-3:]); err != nil {
						t.Fatal(err)
					}
				}
				got, err := golden.ReadFrame(cl.r)
				if err != nil {
					t.Fatalf("reply %d: %v", i, err)
				}
				if string(got) != w {
					t.Fatalf("reply %d: %q, want %q", i, got, w)
				}
			}
		})
	}
}
