package resp

import (
	"testing"
)

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
			a, n, err := parseCommand(data[pos:], &lim, auth, args)
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
