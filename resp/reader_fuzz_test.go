package resp

import (
	"bytes"
	"strings"
	"testing"
)

// FuzzParseCommandSplit feeds the same bytes whole and in pieces of
// every size (as reads deliver them), resuming commands split between
// pieces: both give the same commands, the same consumed bytes and the
// same error.
func FuzzParseCommandSplit(f *testing.F) {
	for _, s := range []string{
		"*2\r\n$4\r\nPING\r\n$1\r\nx\r\n", "*3\r\n$6\r\nBF.ADD\r\n$1\r\nk\r\n$0\r\n\r\n*1\r\n$4\r\nPING\r\n",
		"*2\r\n$1\r\na\r\n$5\r\nabc", "*2\r\n$1\r\na\r\n+x", "PING\r\n*1\r\n$1\r\nx\r\n",
	} {
		f.Add([]byte(s), uint8(1), true)
	}
	lim := Limits{MaxBulk: 1 << 10, MaxArgs: 64, MaxInline: 256, MaxQueryBuffer: 1 << 12}
	type parsed struct {
		args [][]byte
		n    int
		err  string
	}
	all := func(data []byte, auth bool) []parsed {
		var out []parsed
		for pos := 0; pos < len(data); {
			a, n, err := ParseCommand(data[pos:], &lim, auth, nil, nil)
			if err != nil {
				return append(out, parsed{err: err.Error()})
			}
			out = append(out, parsed{args: a, n: n})
			pos += n
		}
		return out
	}
	f.Fuzz(func(t *testing.T, data []byte, step uint8, auth bool) {
		want := all(data, auth)
		var got []parsed
		var p Partial
		pos, have := 0, 0
		for have < len(data) {
			have = min(len(data), have+int(step)+1)
			for pos < have {
				a, n, err := ParseCommand(data[pos:have], &lim, auth, nil, &p)
				if err == ErrIncomplete {
					break
				}
				if err != nil {
					got = append(got, parsed{err: err.Error()})
					have = len(data)
					pos = have
					break
				}
				got = append(got, parsed{args: a, n: n})
				pos += n
			}
		}
		if have == len(data) && pos < len(data) {
			// The tail is incomplete whole, too.
			got = append(got, parsed{err: ErrIncomplete.Error()})
		}
		if len(got) != len(want) {
			t.Fatalf("%d results in pieces of %d, %d whole", len(got), int(step)+1, len(want))
		}
		for i := range want {
			w, g := want[i], got[i]
			if w.err != "" && g.err != "" && (tooBig(w.err) || tooBig(g.err)) {
				// A header line longer than the limit is refused as too
				// big as soon as that many bytes arrived without its end,
				// as Redis does: which error depends on the reads.
				continue
			}
			if w.err != g.err || w.n != g.n || len(w.args) != len(g.args) {
				t.Fatalf("result %d: whole %q/%d/%d args, in pieces %q/%d/%d args", i, w.err, w.n, len(w.args), g.err, g.n, len(g.args))
			}
			for j := range w.args {
				if !bytes.Equal(w.args[j], g.args[j]) {
					t.Fatalf("result %d arg %d: whole %q, in pieces %q", i, j, w.args[j], g.args[j])
				}
			}
		}
	})
}

func tooBig(msg string) bool { return strings.Contains(msg, "too big") }

// FuzzParseCommand feeds arbitrary bytes to the request reader: it must
// never panic, never claim more bytes than it was given, and never return
// arguments that do not lie inside the input.
func FuzzParseCommand(f *testing.F) {
	for _, s := range []string{
		"*2\r\n$4\r\nPING\r\n$1\r\nx\r\n", "PING\r\n", "*-1\r\n", "*0\r\n", "*1\r\n$-5\r\n",
		"*99999999999999999999\r\n", "*1\r\n$9999999999\r\n", "\"a b\" 'c'\r\n", "\"\\x41\"\r\n",
		"*3\r\n$6\r\nBF.ADD\r\n$1\r\nk\r\n$0\r\n\r\n", "$5\r\n", "*1\r\n$3\r\nabcXY",
	} {
		f.Add([]byte(s), true)
	}
	lim := Limits{MaxBulk: 1 << 10, MaxArgs: 64, MaxInline: 256, MaxQueryBuffer: 1 << 12}
	f.Fuzz(func(t *testing.T, data []byte, auth bool) {
		var args [][]byte
		pos := 0
		for pos < len(data) {
			a, n, err := ParseCommand(data[pos:], &lim, auth, args, nil)
			if err != nil {
				return
			}
			if n <= 0 || n > len(data)-pos {
				t.Fatalf("consumed %d of %d", n, len(data)-pos)
			}
			if int64(len(a)) > lim.MaxArgs {
				t.Fatalf("%d args over the limit", len(a))
			}
			for _, x := range a {
				if int64(len(x)) > lim.MaxBulk && data[pos] == '*' {
					t.Fatalf("argument of %d bytes over the limit", len(x))
				}
			}
			pos += n
			args = a
		}
	})
}

// BenchmarkSplitCommand parses a 4.5 MiB BF.MADD (300,000 items) that
// arrives in 64 KiB reads, resuming where the previous read stopped
// (resume) and from the command's start at every read, as before
// (restart).
func BenchmarkSplitCommand(b *testing.B) {
	var cmd []byte
	cmd = append(cmd, "*300002\r\n$7\r\nBF.MADD\r\n$1\r\nk\r\n"...)
	for i := 0; i < 300000; i++ {
		cmd = append(cmd, "$8\r\nitem"...)
		cmd = append(cmd, byte('0'+i/1000%10), byte('0'+i/100%10), byte('0'+i/10%10), byte('0'+i%10))
		cmd = append(cmd, "\r\n"...)
	}
	lim := Limits{}
	lim.ensureDefaults()
	for _, mode := range []string{"resume", "restart"} {
		b.Run(mode, func(b *testing.B) {
			b.SetBytes(int64(len(cmd)))
			var p *Partial
			if mode == "resume" {
				p = &Partial{}
			}
			for b.Loop() {
				for have := 64 << 10; ; have += 64 << 10 {
					a, _, err := ParseCommand(cmd[:min(have, len(cmd))], &lim, true, nil, p)
					if err == ErrIncomplete {
						continue
					}
					if err != nil || len(a) != 300002 {
						b.Fatalf("%d args, %v", len(a), err)
					}
					break
				}
			}
		})
	}
}

// BenchmarkParseExists parses one BF.EXISTS, the read path's common
// command (with a kept partial, as the session passes one).
func BenchmarkParseExists(b *testing.B) {
	cmd := []byte("*3\r\n$9\r\nBF.EXISTS\r\n$3\r\nkey\r\n$10\r\nitem123456\r\n")
	lim := Limits{}
	lim.ensureDefaults()
	var args [][]byte
	var p Partial
	for b.Loop() {
		args, _, _ = ParseCommand(cmd, &lim, true, args, &p)
	}
}
