package server

import (
	"bytes"
	"net"
	"testing"

	"github.com/bfserver/bfserver/memstore"
	"github.com/bfserver/bfserver/resp"
)

// FuzzCommandArgs runs arbitrary argument vectors through the command
// table of a live session (an in-memory backend, no socket I/O): every
// command name, arity and option parser must answer with a well-formed
// reply, never panic.
func FuzzCommandArgs(f *testing.F) {
	seeds := [][]string{
		{"BF.RESERVE", "k", "0.01", "100", "EXPANSION", "2"},
		{"BF.INSERT", "k", "CAPACITY", "10", "ERROR", "0.1", "NOCREATE", "ITEMS", "a"},
		{"CF.RESERVE", "c", "100", "BUCKETSIZE", "4", "MAXITERATIONS", "5", "EXPANSION", "2"},
		{"CF.INSERTNX", "c", "CAPACITY", "1000", "ITEMS", "x", "y"},
		{"BF.LOADCHUNK", "k", "1", "\x02\x00"},
		{"CF.LOADCHUNK", "c", "1", "012345678901234567890123456789012345678"},
		{"EXPIRE", "k", "100", "GT"},
		{"SCAN", "0", "MATCH", "*", "COUNT", "5", "TYPE", "MBbloom--"},
		{"HELLO", "3", "AUTH", "default", "x", "SETNAME", "n"},
		{"CONFIG", "SET", "bf-error-rate", "0.5"},
		{"MULTI"}, {"EXEC"}, {"CLIENT", "SETINFO", "LIB-NAME", "x"},
		{"RESTORE", "r", "0", "\x07\x81"},
		{"COMMAND", "GETKEYS", "BF.ADD", "k", "x"},
	}
	for _, s := range seeds {
		f.Add(bytes.Join(bytesOf(s), []byte{0}))
	}
	f.Fuzz(func(t *testing.T, joined []byte) {
		args := bytes.Split(joined, []byte{0})
		if len(args) == 0 || len(args) > 64 {
			return
		}
		srv, err := New(Options{Addr: "127.0.0.1:0"}, memstore.New())
		if err != nil {
			t.Fatal(err)
		}
		a, b := net.Pipe()
		defer a.Close()
		defer b.Close()
		s := newSession(srv, a)
		s.dispatch(args)
		s.flushPending()
		if !validReplies(s.w.Buf) {
			t.Fatalf("malformed reply %q to %q", s.w.Buf, args)
		}
	})
}

func bytesOf(s []string) [][]byte {
	out := make([][]byte, len(s))
	for i, x := range s {
		out[i] = []byte(x)
	}
	return out
}

// validReplies checks that b is a sequence of complete RESP frames.
func validReplies(b []byte) bool {
	for len(b) > 0 {
		n, ok := frameLen(b)
		if !ok {
			return false
		}
		b = b[n:]
	}
	return true
}

func frameLen(b []byte) (int, bool) {
	i := bytes.Index(b, []byte("\r\n"))
	if i < 1 {
		return 0, false
	}
	n, _ := resp.ParseInt(b[1:i])
	switch b[0] {
	case '+', '-', ':', '_', '#', ',':
		return i + 2, true
	case '$', '=':
		if n < 0 {
			return i + 2, true
		}
		end := i + 2 + int(n) + 2
		return end, end <= len(b) && b[end-2] == '\r' && b[end-1] == '\n'
	case '*', '~', '%':
		if n < 0 {
			return i + 2, true
		}
		if b[0] == '%' {
			n *= 2
		}
		pos := i + 2
		for k := int64(0); k < n; k++ {
			m, ok := frameLen(b[pos:])
			if !ok {
				return 0, false
			}
			pos += m
		}
		return pos, true
	}
	return 0, false
}
