package replication

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/bfserver/bfserver/command"
	"github.com/bfserver/bfserver/keyspace"
)

// TestSnapshotWhileWriting: snapshots write the image while writes go on
// (Persist, not Apply, writes it); after a restart from the image and the
// log, the filter is what it was, byte for byte. The filter spans many
// chunks, so most chunks a snapshot takes are not changed again after it:
// a snapshot that lost what it took would show.
func TestSnapshotWhileWriting(t *testing.T) {
	dir := t.TempDir()
	opts := Options{RaftAddr: freeAddr(t), RESPAddr: "127.0.0.1:1", DataDir: dir}
	n, err := Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	add := func(n *Node, items ...string) error {
		c := &command.Cmd{Op: command.BFAdd, Key: []byte("k"), Multi: true, ErrorRate: 0.01, Capacity: 10_000_000, Expansion: 2, MaxBytes: 1 << 26}
		for _, it := range items {
			c.Items = append(c.Items, []byte(it))
		}
		_, err := n.Write(ctx, []*command.Cmd{c})
		return err
	}
	if err := add(n, "first"); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	stop := make(chan struct{})
	var acked []string
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			batch := []string{"a" + strconv.Itoa(i), "b" + strconv.Itoa(i)}
			if err := add(n, batch...); err != nil {
				t.Error(err)
				return
			}
			acked = append(acked, batch...)
		}
	}()
	for i := 0; i < 3; i++ {
		if err := n.raft.Snapshot().Error(); err != nil {
			t.Fatal(err)
		}
	}
	close(stop)
	wg.Wait()
	want := keyspace.Digest(n.State().Lookup(0, []byte("k"), 0))
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	if len(acked) == 0 {
		t.Fatal("no write was acknowledged during the snapshots")
	}

	n, err = Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	if _, err := n.Barrier(ctx, false); err != nil {
		t.Fatal(err)
	}
	v := n.State().Lookup(0, []byte("k"), 0)
	if got := keyspace.Digest(v); got != want {
		t.Fatalf("after restart the filter's digest is %s, was %s", got, want)
	}
	for _, it := range acked {
		if !v.Bloom().Test([]byte(it)) {
			t.Fatalf("acknowledged item %s is gone after restart", it)
		}
	}
}
