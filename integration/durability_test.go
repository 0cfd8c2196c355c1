package integration

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// loadKeys are the three kinds of filter the durability tests fill.
var loadKeys = []struct{ key, op string }{
	{"scaling", "BF.ADD"}, {"fixed", "BF.ADD"}, {"cuckoo", "CF.ADD"},
}

func reserveLoadKeys(t *testing.T, c *redis.Client) {
	t.Helper()
	cx := ctx(t)
	for _, args := range [][]any{
		{"BF.RESERVE", "scaling", "0.01", "1000", "EXPANSION", "2"},
		{"BF.RESERVE", "fixed", "0.01", "200000", "NONSCALING"},
		{"CF.RESERVE", "cuckoo", "200000"},
	} {
		if err := c.Do(cx, args...).Err(); err != nil {
			t.Fatalf("%v: %v", args, err)
		}
	}
}

// acked is the set of items whose add was acknowledged, per filter.
type acked struct {
	mu    sync.Mutex
	items map[string][]string
	n     atomic.Int64
}

func (a *acked) add(key, item string) {
	a.mu.Lock()
	a.items[key] = append(a.items[key], item)
	a.mu.Unlock()
	a.n.Add(1)
}

func (a *acked) snapshot() map[string][]string {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := map[string][]string{}
	for k, v := range a.items {
		out[k] = append([]string(nil), v...)
	}
	return out
}

// load adds items from several pipelining goroutines until total items are
// sent or stop closes, recording each acknowledged add.
func load(c *redis.Client, a *acked, prefix string, total int, stop <-chan struct{}) {
	var wg sync.WaitGroup
	var next atomic.Int64
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				start := next.Add(50) - 50
				if start >= int64(total) {
					return
				}
				cx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				pipe := c.Pipeline()
				type sent struct{ key, item string }
				var batch []sent
				var cmds []*redis.Cmd
				for i := start; i < start+50 && i < int64(total); i++ {
					k := loadKeys[i%3]
					item := prefix + strconv.FormatInt(i, 10)
					batch = append(batch, sent{k.key, item})
					cmds = append(cmds, pipe.Do(cx, k.op, k.key, item))
				}
				pipe.Exec(cx)
				cancel()
				for i, cmd := range cmds {
					if cmd.Err() == nil {
						a.add(batch[i].key, batch[i].item)
					}
				}
			}
		}()
	}
	wg.Wait()
}

// missing returns acknowledged items the node answers 0 for.
func missing(t *testing.T, c *redis.Client, items map[string][]string) []string {
	t.Helper()
	var out []string
	for _, k := range loadKeys {
		op := "BF.MEXISTS"
		if k.op == "CF.ADD" {
			op = "CF.MEXISTS"
		}
		list := items[k.key]
		for i := 0; i < len(list); i += 1000 {
			chunk := list[i:min(i+1000, len(list))]
			args := []any{op, k.key}
			for _, it := range chunk {
				args = append(args, it)
			}
			res, err := untilServed(t, c, args...).Slice()
			if err != nil {
				t.Fatalf("%s: %v", op, err)
			}
			for j, v := range res {
				if v != int64(1) && v != true {
					out = append(out, k.key+"/"+chunk[j])
				}
			}
		}
	}
	return out
}

func digestsOf(t *testing.T, c *redis.Client) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, k := range loadKeys {
		d, err := untilServed(t, c, "BFX.DIGEST", k.key).Text()
		if err != nil {
			t.Fatalf("BFX.DIGEST %s: %v", k.key, err)
		}
		out[k.key] = d
	}
	return out
}

// untilServed sends a command until it is served or fails for a reason
// other than the cluster's state: right after a failover or a partition
// heals, a node may answer CLUSTERDOWN or TRYAGAIN until it knows the
// leader again (for up to 30 s).
func untilServed(t *testing.T, c *redis.Client, args ...any) *redis.Cmd {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		cmd := c.Do(ctx(t), args...)
		err := cmd.Err()
		if err == nil || time.Now().After(deadline) ||
			!(strings.HasPrefix(err.Error(), "CLUSTERDOWN") || strings.HasPrefix(err.Error(), "TRYAGAIN")) {
			return cmd
		}
		time.Sleep(50 * time.Millisecond) // polling for a known leader
	}
}

func copyFile(t *testing.T, src, dst string) {
	t.Helper()
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dst, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// copyLog copies a stopped node's Raft log, whichever store holds it, into
// another data directory.
func copyLog(t *testing.T, from, to string) {
	t.Helper()
	if exists(filepath.Join(from, "raft.db")) {
		copyFile(t, filepath.Join(from, "raft.db"), filepath.Join(to, "raft.db"))
	}
	err := filepath.WalkDir(filepath.Join(from, "wal"), func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(from, path)
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(to, rel), 0o755)
		}
		copyFile(t, path, filepath.Join(to, rel))
		return nil
	})
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
}

// TestSingleNodeKillNine: 100,000 adds across a scaling Bloom filter, a
// non-scaling one and a Cuckoo filter, kill -9 in the middle of the load,
// restart: every acknowledged item is present; the state equals a replay
// of the whole log from scratch (so replay skipped what the image held, and
// CF.ADD was not applied twice); a clean restart changes nothing.
func TestSingleNodeKillNine(t *testing.T) {
	// The log is kept whole (no snapshot) so it can be replayed from scratch.
	n := start(t, "--snapshot-threshold", "100000000", "--flush-interval", "200ms")
	c := n.client(2)
	reserveLoadKeys(t, c)
	a := &acked{items: map[string][]string{}}
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		load(c, a, "item:", 100000, stop)
		close(done)
	}()
	for a.n.Load() < 40000 {
		select {
		case <-done:
			t.Fatal("load finished before the kill")
		case <-time.After(time.Millisecond): // polling the load's progress
		}
	}
	n.kill()
	close(stop)
	<-done
	sent := a.n.Load()
	t.Logf("killed after %d acknowledged adds", sent)

	n.launch()
	c = n.client(2)
	items := a.snapshot()
	if m := missing(t, c, items); len(m) > 0 {
		t.Fatalf("%d acknowledged items lost after kill -9, e.g. %v", len(m), m[:min(5, len(m))])
	}
	// Finish the load on the restarted node.
	load(c, a, "more:", 30000, make(chan struct{}))
	want := digestsOf(t, c)

	// Replay the same log from scratch in a second node: no image at all.
	n.stop()
	replay := &node{t: t, addr: freeAddr(t), raftAddr: n.raftAddr, dataDir: t.TempDir(), args: n.args}
	copyLog(t, n.dataDir, replay.dataDir)
	replay.launch()
	if got := digestsOf(t, replay.client(2)); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("replay from scratch differs:\n got %v\nwant %v", got, want)
	}
	replay.stop()

	// A clean restart keeps everything, exactly.
	n.launch()
	c = n.client(2)
	if got := digestsOf(t, c); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("clean restart changed the state:\n got %v\nwant %v", got, want)
	}
	if m := missing(t, c, a.snapshot()); len(m) > 0 {
		t.Fatalf("%d acknowledged items lost after a clean restart", len(m))
	}
}

// TestRestartOnAnotherPort: a single node killed and started again on
// other RESP and Raft ports, with the same data directory, keeps its
// member id (the data directory's node-id file), elects itself and takes
// writes at once, its acknowledged adds present; its configuration then
// names the new Raft address, so the next start finds it. A --node-id
// other than the recorded one is refused at start, with the reason.
func TestRestartOnAnotherPort(t *testing.T) {
	n := start(t)
	c := n.client(2)
	if err := c.Do(ctx(t), "BF.ADD", "f", "before").Err(); err != nil {
		t.Fatal(err)
	}
	firstRaft := n.raftAddr
	n.kill()
	for round := range 2 {
		if round == 0 { // the second round restarts on the same new ports
			n.addr, n.raftAddr = freeAddr(t), freeAddr(t)
		}
		n.launch()
		c = n.client(2)
		cx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		item := fmt.Sprintf("after-%d", round)
		if err := c.Do(cx, "BF.ADD", "f", item).Err(); err != nil {
			cancel()
			t.Fatalf("round %d: a write after the restart on %s: %v", round, n.addr, err)
		}
		got, err := c.Do(cx, "BF.MEXISTS", "f", "before", item).Int64Slice()
		cancel()
		if err != nil || len(got) != 2 || got[0] != 1 || got[1] != 1 {
			t.Fatalf("round %d: BF.MEXISTS = %v, %v", round, got, err)
		}
		n.stop()
	}
	id, err := os.ReadFile(filepath.Join(n.dataDir, "node-id"))
	if err != nil || strings.TrimSpace(string(id)) != firstRaft {
		t.Fatalf("node-id file = %q, %v; want the first Raft address %s", id, err, firstRaft)
	}
	cx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	out, err := exec.CommandContext(cx, binary, "--addr", freeAddr(t), "--raft-addr", freeAddr(t), "--data-dir", n.dataDir, "--node-id", "someone-else").CombinedOutput()
	if err == nil || !strings.Contains(string(out), "the data directory belongs to another node id") {
		t.Fatalf("start with another --node-id: %v; output:\n%s", err, out)
	}
}
