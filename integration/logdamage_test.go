package integration

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// flipIn changes the byte 8 past every copy of each marker in the node's
// Raft log, whichever store holds it (raft.db, or raft-wal's segments and
// the entries it keeps aside): the test's own items, so nothing else is
// touched. It returns how many it changed.
func flipIn(t *testing.T, dataDir string, markers ...string) int {
	t.Helper()
	paths, _ := filepath.Glob(filepath.Join(dataDir, "raft.db"))
	segs, _ := filepath.Glob(filepath.Join(dataDir, "wal", "*.wal"))
	aside, _ := filepath.Glob(filepath.Join(dataDir, "wal", "aside", "*"))
	n := 0
	for _, path := range append(append(paths, segs...), aside...) {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		changed := false
		for _, m := range markers {
			for off := 0; ; {
				i := bytes.Index(b[off:], []byte(m))
				if i < 0 {
					break
				}
				b[off+i+8] ^= 0x01
				off += i + len(m)
				n++
				changed = true
			}
		}
		if !changed {
			continue
		}
		if err := os.WriteFile(path, b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return n
}

// exitsWith runs n's process to its end, as launch would start it, and
// returns its status and output.
func exitsWith(t *testing.T, n *node) (error, string) {
	t.Helper()
	c, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	args := append([]string{"--addr", n.addr, "--raft-addr", n.raftAddr, "--data-dir", n.dataDir}, n.args...)
	out, err := exec.CommandContext(c, binary, args...).CombinedOutput()
	if c.Err() != nil {
		t.Fatalf("bfserver kept running on a damaged log; its output:\n%s", out)
	}
	return err, string(out)
}

// TestDamagedLogStopsTheNode: a byte flipped in an entry of the stored
// Raft log (kill -9 before the image took the entries, so replay needs
// them) stops the node at start with the entry's index and the way to
// recover, instead of replaying another command or starting without the
// entry; on a follower of three the same stops that follower alone, the
// others keep serving every add, and the follower recovers as its error
// says, by an empty data directory and a join. With each log store:
// raft-wal would take a damaged last batch for a write torn by a crash
// and drop it, and the start refuses that as it refuses any damaged entry.
func TestDamagedLogStopsTheNode(t *testing.T) {
	for _, store := range []string{"wal", "bolt"} {
		t.Run(store, func(t *testing.T) { damagedLogStops(t, "--raft-log-store", store) })
	}
}

func damagedLogStops(t *testing.T, storeArgs ...string) {
	const bf, cf = "UNIQUEZZZ-target", "UNIQUECFF-target"
	t.Run("single node", func(t *testing.T) {
		n := start(t, append([]string{"--flush-interval", "1h"}, storeArgs...)...)
		c := n.client(2)
		if err := c.Do(ctx(t), "BF.ADD", "rl:key", bf).Err(); err != nil {
			t.Fatal(err)
		}
		if err := c.Do(ctx(t), "CF.ADD", "rl:cf", cf).Err(); err != nil {
			t.Fatal(err)
		}
		n.kill()
		if flipIn(t, n.dataDir, bf, cf) < 2 {
			t.Fatal("the items are not in the log")
		}
		err, out := exitsWith(t, n)
		if err == nil || !strings.Contains(out, "raft log entry") || !strings.Contains(out, "damaged") || !strings.Contains(out, "restore") {
			t.Fatalf("start on a damaged log: %v; output:\n%s", err, out)
		}
	})
	t.Run("follower", func(t *testing.T) {
		nodes := startCluster(t, []string{"127.0.0.1", "127.0.0.1", "127.0.0.1"}, append([]string{"--flush-interval", "1h"}, storeArgs...)...)
		leader := leaderOf(t, nodes)
		lc := leader.client(2)
		if err := lc.Do(ctx(t), "BF.ADD", "rl:key", bf).Err(); err != nil {
			t.Fatal(err)
		}
		if err := lc.Do(ctx(t), "CF.ADD", "rl:cf", cf).Err(); err != nil {
			t.Fatal(err)
		}
		f := without(nodes, leader)[0]
		waitFor(t, 10*time.Second, "the follower to apply both", func() bool {
			v, err := f.client(2).Do(ctx(t), "CF.EXISTS", "rl:cf", cf).Int()
			return err == nil && v == 1
		})
		f.kill()
		if flipIn(t, f.dataDir, bf, cf) < 2 {
			t.Fatal("the items are not in the follower's log")
		}
		err, out := exitsWith(t, f)
		if err == nil || !strings.Contains(out, "raft log entry") || !strings.Contains(out, "--join") {
			t.Fatalf("follower start on a damaged log: %v; output:\n%s", err, out)
		}
		for _, n := range without(nodes, f) {
			c := n.client(2)
			if v, err := c.Do(ctx(t), "BF.EXISTS", "rl:key", bf).Int(); err != nil || v != 1 {
				t.Fatalf("%s: BF.EXISTS %v %v", n.addr, v, err)
			}
		}
		// Recover as the error says.
		if err := os.RemoveAll(f.dataDir); err != nil {
			t.Fatal(err)
		}
		f.args = append(f.args, "--join", leader.addr)
		f.launch()
		waitFor(t, 30*time.Second, "the recovered follower to hold both", func() bool {
			c := f.client(2)
			a, err1 := c.Do(ctx(t), "BF.EXISTS", "rl:key", bf).Int()
			b, err2 := c.Do(ctx(t), "CF.EXISTS", "rl:cf", cf).Int()
			return err1 == nil && err2 == nil && a == 1 && b == 1
		})
		for _, key := range []string{"rl:key", "rl:cf"} {
			want := lc.Do(ctx(t), "BFX.DIGEST", key).Val()
			if got := f.client(2).Do(ctx(t), "BFX.DIGEST", key).Val(); got != want {
				t.Fatalf("%s: the recovered follower's digest %v, the leader's %v", key, got, want)
			}
		}
	})
}
