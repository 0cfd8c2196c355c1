package replication

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/bfserver/bfserver/command"
)

func freeAddr(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// TestNoReadBeforeReadiness: a node that Raft already reports as leader
// serves no linearizable read until an entry of its own term committed.
// The generations start apart so the very first term is covered too.
func TestNoReadBeforeReadiness(t *testing.T) {
	n, err := Open(Options{RaftAddr: freeAddr(t), RESPAddr: "127.0.0.1:1", DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	if n.readyGen.Load() == n.leaderGen.Load() {
		t.Fatal("a fresh node counts as ready")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// Once ready, writes and reads work, and the read sees the write.
	res, err := n.Write(ctx, []*command.Cmd{{Op: command.BFAdd, Key: []byte("k"), Items: [][]byte{[]byte("x")}, ErrorRate: 0.01, Capacity: 100, Expansion: 2, MaxBytes: 1 << 20}})
	if err != nil || res[0].Ints[0] != 1 {
		t.Fatalf("write: %v %+v", err, res)
	}
	if err := n.Barrier(ctx, false); err != nil {
		t.Fatal(err)
	}
	if r := n.State().Read(&command.Cmd{Op: command.BFExists, Key: []byte("k"), Items: [][]byte{[]byte("x")}}); r.Ints[0] != 1 {
		t.Fatal("read after write missed it")
	}
}
