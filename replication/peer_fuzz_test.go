package replication

import (
	"bufio"
	"bytes"
	"io"
	"runtime"
	"testing"

	"github.com/bfserver/bfserver/command"
)

// rw is a connection made of what a peer sends (r) and what is said back
// (w).
type rw struct {
	io.Reader
	w bytes.Buffer
}

func (c *rw) Write(p []byte) (int, error) { return c.w.Write(p) }

// FuzzPeerHandshake: whatever a stranger sends the acceptor, it is never
// let in without proving the secret (without a hello only in transition),
// and the acceptor never panics.
func FuzzPeerHandshake(f *testing.F) {
	secret := []byte("fuzz-cluster-secret-0123")
	f.Add([]byte{muxPeer, 0, 0, 0, 0, 0}, false)
	f.Add(append([]byte{'B', 'F', 'P', 1, muxRaft, 2, 'n', '1'}, make([]byte, nonceLen+macLen)...), false)
	f.Add(append([]byte{'B', 'F', 'P', 1, muxPeer, 255}, make([]byte, 300)...), true)
	f.Add([]byte{'B', 'F', 'P', 2}, true)
	f.Fuzz(func(t *testing.T, in []byte, transition bool) {
		a := &peerAuth{secret: secret, transition: transition}
		c := &rw{Reader: bytes.NewReader(in)}
		kind, _, err := a.accept(c)
		if err != nil {
			return
		}
		if in[0] == helloMagic[0] {
			t.Fatalf("a hello without the secret's proof was let in: % x", in)
		}
		if !transition || (kind != muxRaft && kind != muxPeer) {
			t.Fatalf("let in without a hello (transition %v), kind %d", transition, kind)
		}
	})
}

// FuzzPeerRequest: any frame stream a member sends is read within its
// type's cap (memory grows with the bytes that arrive) and decodes to a
// request or an error, never a panic; a forwarded batch is decoded and
// validated as Forward does, within the log codec's budget.
func FuzzPeerRequest(f *testing.F) {
	frame := func(typ byte, p []byte) []byte {
		return append([]byte{typ, 0, 0, byte(len(p) >> 8), byte(len(p))}, p...)
	}
	f.Add(frame(reqForward, command.EncodeBatch([]*command.Cmd{{Op: command.BFAdd, Key: []byte("k"), Items: [][]byte{[]byte("x")}}})))
	f.Add(frame(reqJoin, []byte{2, 'n', '2', 3, 'a', ':', '1', 0}))
	f.Add(frame(reqCommitted, []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01}))
	f.Add([]byte{reqLease, 0xff, 0xff, 0xff, 0xff})
	f.Add([]byte{reqForward, 0x40, 0, 0, 0, 2})
	f.Fuzz(func(t *testing.T, in []byte) {
		br := bufio.NewReader(bytes.NewReader(in))
		for {
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			typ, p, err := readFrame(br, frameCap)
			runtime.ReadMemStats(&after)
			if got := after.TotalAlloc - before.TotalAlloc; got > 2*uint64(len(in))+2<<20 {
				t.Fatalf("reading a frame from %d bytes allocated %d", len(in), got)
			}
			if err != nil {
				return
			}
			if len(p) > frameCap(typ) {
				t.Fatalf("a frame of type %d carried %d bytes, over its cap", typ, len(p))
			}
			q, err := decodeRequest(typ, p)
			if err != nil || q.typ != reqForward {
				continue
			}
			if cmds, err := command.DecodeBatch(q.batch); err == nil {
				for _, c := range cmds {
					command.Validate(c)
				}
			}
		}
	})
}
