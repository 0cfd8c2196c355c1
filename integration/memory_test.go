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
// image: at least the filters' bytes, in a table near their size.
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
	// The flush's own table: its chunks once, plus the table's index. (The
	// lifetime image_write_amplification also counts Pebble's compactions,
	// which run when they run: 2.00 once one had rewritten this table.)
	values := infoUint(t, after, "image_value_bytes") - carried
	written := infoUint(t, after, "image_table_bytes_written") - infoUint(t, before, "image_table_bytes_written")
	if amp := float64(written) / float64(values); amp < 1 || amp > 1.5 {
		t.Fatalf("SAVE wrote a table of %d bytes for %d bytes of chunks (%.2f×); a flush writes its chunks once, plus the table's index", written, values, amp)
	}
	if amp, err := strconv.ParseFloat(after["image_write_amplification"], 64); err != nil || amp < 1 {
		t.Fatalf("image_write_amplification %q (%v)", after["image_write_amplification"], err)
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
			d, err := n.client(2).Do(ctx(t), "BFX.DIGEST", "big").Text()
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

// TestLargeLoadChunk: a Bloom and a Cuckoo filter of about 3.6 MB each
// copied with SCANDUMP/LOADCHUNK through a follower, each data chunk in a
// pipeline between two other writes. A chunk that large goes to the log
// as 1 MiB pieces (command.Pieces); the replies come in order, every node
// ends with the source's digest and answers 1 for every item, and a chunk
// that runs past its filter's end is refused and changes nothing.
func TestLargeLoadChunk(t *testing.T) {
	nodes := startCluster(t, []string{"127.0.0.1", "127.0.0.1", "127.0.0.1"})
	leader := leaderOf(t, nodes)
	fc := without(nodes, leader)[0].client(2)
	type kind struct{ prefix, reserve, add string }
	for _, k := range []kind{
		{"BF", "BF.RESERVE src 0.01 3000000 NONSCALING", "BF.MADD"},
		{"CF", "CF.RESERVE src 3000000 BUCKETSIZE 2 EXPANSION 1", "CF.INSERT"},
	} {
		t.Run(k.prefix, func(t *testing.T) {
			c := ctx(t)
			var reserve []any
			for _, w := range strings.Fields(k.reserve) {
				reserve = append(reserve, w)
			}
			if err := fc.Do(c, reserve...).Err(); err != nil {
				t.Fatal(err)
			}
			items := make([]any, 0, 20000)
			for i := range 20000 {
				items = append(items, fmt.Sprintf("item:%d", i))
			}
			args := []any{k.add, "src"}
			if k.prefix == "CF" {
				args = append(args, "ITEMS")
			}
			if err := fc.Do(c, append(args, items...)...).Err(); err != nil {
				t.Fatal(err)
			}
			var chunks [][2]any
			big, largest := 0, 0
			for it := int64(0); ; {
				res, err := fc.Do(c, k.prefix+".SCANDUMP", "src", it).Slice()
				if err != nil {
					t.Fatal(err)
				}
				if it = res[0].(int64); it == 0 {
					break
				}
				data := res[1].(string)
				if len(data) > big {
					big, largest = len(data), len(chunks)
				}
				chunks = append(chunks, [2]any{it, data})
			}
			if big <= 2<<20 {
				t.Fatalf("the largest chunk is %d bytes; the test needs one over 2 MiB", big)
			}
			for i, ch := range chunks {
				p := fc.Pipeline()
				before := p.Do(c, "SET", "marker", fmt.Sprint("before ", i))
				load := p.Do(c, k.prefix+".LOADCHUNK", "dst", ch[0], ch[1])
				after := p.Do(c, "SET", "marker", fmt.Sprint("after ", i))
				if _, err := p.Exec(c); err != nil {
					t.Fatalf("chunk %d: %v", i, err)
				}
				for _, r := range []*redis.Cmd{before, load, after} {
					if s, err := r.Text(); err != nil || s != "OK" {
						t.Fatalf("chunk %d: %v answered %q, %v", i, r.Args(), s, err)
					}
				}
				if s := fc.Get(c, "marker").Val(); s != fmt.Sprint("after ", i) {
					t.Fatalf("chunk %d: marker %q: the pipeline's writes were reordered", i, s)
				}
			}
			want := fc.Do(c, "BFX.DIGEST", "src").Val()
			// Past the end: the largest chunk moved by a mebibyte, which
			// its first piece alone would not be.
			ch := chunks[largest]
			err := fc.Do(c, k.prefix+".LOADCHUNK", "dst", ch[0].(int64)+1<<20, ch[1]).Err()
			if err == nil {
				t.Fatal("a chunk past the filter's end was accepted")
			}
			t.Logf("past the end: %v", err)
			for _, n := range nodes {
				nc := n.client(2)
				waitFor(t, 30*time.Second, "the source's digest on "+n.addr, func() bool {
					return nc.Do(c, "BFX.DIGEST", "dst").Val() == want
				})
				res, err := nc.Do(c, append([]any{k.prefix + ".MEXISTS", "dst"}, items...)...).Slice()
				if err != nil {
					t.Fatal(err)
				}
				for j, v := range res {
					if v != int64(1) {
						t.Fatalf("node %s: %v answers %v", n.addr, items[j], v)
					}
				}
			}
			if err := fc.Del(c, "src", "dst").Err(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestRestartFromBase: after a bulk load a node writes the base (a flat
// copy of its large arrays) once its log is quiet, and a node killed with
// SIGKILL starts from it: the large arrays come from the base, and every
// acknowledged item is there, also those added after the base and the
// flushes after it (their filter loads from Pebble), with digests as
// before the kill.
func TestRestartFromBase(t *testing.T) {
	n := start(t, "--flush-interval", "1s")
	c := n.client(2)
	cx := ctx(t)
	// "big" (about 90 MB) filled through the log by LOADCHUNKs, as a
	// migration does; "cf" and "late" get items.
	must := func(args ...any) {
		t.Helper()
		if err := c.Do(cx, args...).Err(); err != nil {
			t.Fatalf("%v: %v", args, err)
		}
	}
	must("BF.RESERVE", "big", "0.001", "50000000", "NONSCALING")
	for it := int64(1); ; {
		res, err := c.Do(cx, "BF.SCANDUMP", "big", it).Slice()
		if err != nil {
			t.Fatal(err)
		}
		if it = res[0].(int64); it == 0 {
			break
		}
		data := []byte(res[1].(string))
		for i := range data {
			data[i] = byte(i*131 + int(it))
		}
		must("BF.LOADCHUNK", "big", it, data)
	}
	must("CF.RESERVE", "cf", "2000000", "BUCKETSIZE", "2")
	must("BF.RESERVE", "late", "0.001", "1000000")
	items := func(prefix string, n int) []any {
		out := make([]any, n)
		for i := range out {
			out[i] = fmt.Sprintf("%s:%d", prefix, i)
		}
		return out
	}
	must(append([]any{"CF.INSERT", "cf", "ITEMS"}, items("c", 5000)...)...)
	must(append([]any{"BF.MADD", "late"}, items("a", 5000)...)...)
	waitFor(t, 90*time.Second, "the base", func() bool {
		v, err := strconv.ParseUint(infoOf(n, "persistence")["image_base_bytes"], 10, 64)
		return err == nil && v > 0
	})
	base := infoUint(t, infoOf(n, "persistence"), "image_base_bytes")
	if base < 85<<20 {
		t.Fatalf("a base of %d bytes for a 90 MB filter and two of 2-4 MB", base)
	}
	// After the base: items in "late", flushed, then more, not yet.
	tables := infoUint(t, infoOf(n, "persistence"), "image_tables_ingested")
	must(append([]any{"BF.MADD", "late"}, items("b", 5000)...)...)
	waitFor(t, 30*time.Second, "a flush", func() bool {
		return infoUint(t, infoOf(n, "persistence"), "image_tables_ingested") > tables
	})
	must(append([]any{"BF.MADD", "late"}, items("d", 5000)...)...)
	digests := map[string]string{}
	for _, key := range []string{"big", "cf", "late"} {
		digests[key] = c.Do(cx, "BFX.DIGEST", key).Val().(string)
	}
	n.kill()
	n.launch()
	c = n.client(2)
	after := infoOf(n, "persistence")
	if got := infoUint(t, after, "image_base_loaded_bytes"); got < 85<<20 || got >= base {
		t.Fatalf("the start read %d bytes from a base of %d: want the large arrays but the one written since", got, base)
	}
	for key, want := range digests {
		if got := c.Do(cx, "BFX.DIGEST", key).Val(); got != want {
			t.Fatalf("%s: digest %v after the restart, %v before", key, got, want)
		}
	}
	for _, p := range []string{"a", "b", "d"} {
		res, err := c.Do(cx, append([]any{"BF.MEXISTS", "late"}, items(p, 5000)...)...).Slice()
		if err != nil {
			t.Fatal(err)
		}
		for i, r := range res {
			if r != int64(1) {
				t.Fatalf("late: %s:%d, acknowledged, answers %v after the restart", p, i, r)
			}
		}
	}
	res, err := c.Do(cx, append([]any{"CF.MEXISTS", "cf"}, items("c", 5000)...)...).Slice()
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range res {
		if r != int64(1) {
			t.Fatalf("cf: c:%d, acknowledged, answers %v after the restart", i, r)
		}
	}
}
