package integration

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// infoOf parses one INFO section of a node; empty when it does not answer.
func infoOf(n *node, section string) map[string]string {
	opts := &redis.Options{Addr: n.addr, Protocol: 2, MaxRetries: -1, DialTimeout: time.Second, ReadTimeout: 2 * time.Second}
	if n.tls != nil {
		opts.TLSConfig = n.tls.client(n.addr).Options().TLSConfig
	}
	c := redis.NewClient(opts)
	defer c.Close()
	cx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	s, err := c.Info(cx, section).Result()
	out := map[string]string{}
	if err != nil {
		return out
	}
	for _, line := range strings.Split(s, "\r\n") {
		if k, v, ok := strings.Cut(line, ":"); ok {
			out[k] = v
		}
	}
	return out
}

func infoUint(t *testing.T, m map[string]string, field string) uint64 {
	t.Helper()
	v, err := strconv.ParseUint(m[field], 10, 64)
	if err != nil {
		t.Fatalf("INFO %s: %q: %v", field, m[field], err)
	}
	return v
}

// TestMemoryBreakdown: INFO memory's own fields account for the filters
// exactly (mem_filters is the sum of BF.INFO/CF.INFO Size), the peak never
// trails used_memory, and INFO persistence counts what SAVE wrote to the
// image: at least the filters' bytes, with a write amplification near 1.
func TestMemoryBreakdown(t *testing.T) {
	n := start(t)
	c := n.client(2)
	cx := ctx(t)
	for _, args := range [][]any{
		{"BF.RESERVE", "b", "0.001", "500000"},
		{"CF.RESERVE", "c", "100000"},
		{"BF.ADD", "small", "x"},
	} {
		if err := c.Do(cx, args...).Err(); err != nil {
			t.Fatal(args, err)
		}
	}
	var want uint64
	for _, k := range []string{"b", "small"} {
		v, err := c.Do(cx, "BF.INFO", k, "SIZE").Slice()
		if err != nil {
			t.Fatal(err)
		}
		want += uint64(v[0].(int64))
	}
	cf, err := c.Do(cx, "CF.INFO", "c").Slice()
	if err != nil {
		t.Fatal(err)
	}
	want += uint64(cf[1].(int64))
	mem := infoOf(n, "memory")
	if got := infoUint(t, mem, "mem_filters"); got != want {
		t.Fatalf("mem_filters %d, the filters' sizes add to %d", got, want)
	}
	if infoUint(t, mem, "used_memory_peak") < infoUint(t, mem, "used_memory") {
		t.Fatalf("used_memory_peak %s below used_memory %s", mem["used_memory_peak"], mem["used_memory"])
	}
	for _, f := range []string{"mem_buffers", "mem_image", "mem_raft"} {
		infoUint(t, mem, f)
	}
	// A filter's chunks that hold no bit yet are not written; items added
	// to b dirty its chunks, which the image then carries once each.
	before := infoOf(n, "persistence")
	tables, carried := infoUint(t, before, "image_tables_ingested"), infoUint(t, before, "image_value_bytes")
	args := []any{"BF.MADD", "b"}
	for i := 0; i < 2000; i++ {
		args = append(args, "item"+strconv.Itoa(i))
	}
	if err := c.Do(cx, args...).Err(); err != nil {
		t.Fatal(err)
	}
	if err := c.Do(cx, "SAVE").Err(); err != nil {
		t.Fatal(err)
	}
	after := infoOf(n, "persistence")
	if got := infoUint(t, after, "image_tables_ingested"); got <= tables {
		t.Fatalf("SAVE ingested no table: %d before, %d after", tables, got)
	}
	if v := infoUint(t, after, "image_value_bytes") - carried; v < 64<<10 || v > want+4096 {
		t.Fatalf("the image carried %d bytes for the changed chunks of a %d-byte keyspace", v, want)
	}
	amp, err := strconv.ParseFloat(after["image_write_amplification"], 64)
	if err != nil || amp < 1 || amp > 1.5 {
		t.Fatalf("image_write_amplification %q (%v); a flush writes its chunks once, plus the table's index", after["image_write_amplification"], err)
	}
}

// TestLargeSnapshotInstall: a follower wiped while the cluster holds a
// 54 MB filter comes back through a Raft snapshot (the log it would need is
// truncated), and afterwards every acknowledged item answers 1 on every
// node and the filter's digest is the same everywhere.
func TestLargeSnapshotInstall(t *testing.T) {
	nodes := startCluster(t, []string{"127.0.0.1", "127.0.0.1", "127.0.0.1"},
		"--trailing-logs", "10")
	leader := leaderOf(t, nodes)
	lc := leader.client(2)
	if err := lc.Do(ctx(t), "BF.RESERVE", "big", "0.001", "30000000", "NONSCALING").Err(); err != nil {
		t.Fatal(err)
	}
	var items []string
	add := func(prefix string, batches int) {
		t.Helper()
		for b := 0; b < batches; b++ {
			args := []any{"BF.MADD", "big"}
			for i := 0; i < 500; i++ {
				args = append(args, fmt.Sprintf("%s%d-%d", prefix, b, i))
			}
			res, err := lc.Do(ctx(t), args...).Slice()
			if err != nil {
				t.Fatalf("BF.MADD: %v", err)
			}
			if len(res) != 500 {
				t.Fatalf("BF.MADD answered %d replies for 500 items", len(res))
			}
			for _, a := range args[2:] {
				items = append(items, a.(string))
			}
		}
	}
	t0 := time.Now()
	add("before:", 40)
	t.Logf("before: %v", time.Since(t0))
	follower := without(nodes, leader)[0]
	follower.kill()
	if err := exec.Command("rm", "-rf", follower.dataDir).Run(); err != nil {
		t.Fatal(err)
	}
	add("during:", 120)
	t.Logf("during: %v", time.Since(t0))
	// SAVE snapshots the leader and truncates its log to the last ten
	// entries: the wiped follower can only catch up from the snapshot.
	if err := lc.Do(ctx(t), "SAVE").Err(); err != nil {
		t.Fatal(err)
	}
	follower.args = append(follower.args, "--join", leader.addr)
	follower.launch()
	t.Logf("relaunched: %v", time.Since(t0))
	add("after:", 20)
	t.Logf("after: %v", time.Since(t0))
	waitFor(t, 60*time.Second, "identical digests on every node", func() bool {
		var first string
		for i, n := range nodes {
			d, err := n.client(2).Do(ctx(t), "BF.DIGEST", "big").Text()
			if err != nil {
				return false
			}
			if i == 0 {
				first = d
			} else if d != first {
				return false
			}
		}
		return true
	})
	if snaps, _ := os.ReadDir(follower.dataDir + "/snapshots"); len(snaps) == 0 {
		t.Fatal("the wiped follower caught up without a snapshot; the test did not exercise one")
	}
	t.Logf("converged: %v", time.Since(t0))
	for _, n := range nodes {
		c := n.client(2)
		for i := 0; i < len(items); i += 1000 {
			chunk := items[i:min(i+1000, len(items))]
			args := []any{"BF.MEXISTS", "big"}
			for _, it := range chunk {
				args = append(args, it)
			}
			res, err := c.Do(ctx(t), args...).Slice()
			if err != nil {
				t.Fatal(err)
			}
			for j, v := range res {
				if v != int64(1) {
					t.Fatalf("node %s: acknowledged item %s answers %v", n.addr, chunk[j], v)
				}
			}
		}
	}
	// Peak memory, for the record (bench/memory measures it properly).
	if st, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", follower.cmd.Process.Pid)); err == nil {
		for _, l := range strings.Split(string(st), "\n") {
			if strings.HasPrefix(l, "VmHWM:") {
				t.Logf("the follower's peak resident set after installing a 54 MB filter: %s", strings.TrimSpace(strings.TrimPrefix(l, "VmHWM:")))
			}
		}
	}
}
