package integration

import (
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// windowItems is BFX.WMADD/WMEXISTS arguments: the command, the key, and
// items prefix+from .. prefix+(to-1).
func windowItems(cmd, key, prefix string, from, to int) []any {
	args := []any{cmd, key}
	for i := from; i < to; i++ {
		args = append(args, prefix+strconv.Itoa(i))
	}
	return args
}

// allPresent checks that BFX.WMEXISTS answers 1 for every item given.
func allPresent(t *testing.T, c *redis.Client, key, prefix string, from, to int) {
	t.Helper()
	got, err := c.Do(ctx(t), windowItems("BFX.WMEXISTS", key, prefix, from, to)...).Int64Slice()
	if err != nil {
		t.Fatal(err)
	}
	for i, x := range got {
		if x != 1 {
			t.Fatalf("%s: %s%d, inside the window, answered 0", key, prefix, from+i)
		}
	}
}

// TestWindows: sliding-window filters on one durable node through
// go-redis, RESP2 and RESP3: a count window keeps exactly its last N
// inserts as a stream goes through it, a time window forgets by the
// proposer's clock, DUMP/RESTORE, COPY, RENAME and EXPIRE treat it as any
// key, and after SAVE and kill -9 the node answers the same, digest for
// digest.
func TestWindows(t *testing.T) {
	n := start(t, "--flush-interval", "200ms")
	c := n.client(2)
	do := func(args ...any) any {
		t.Helper()
		v, err := c.Do(ctx(t), args...).Result()
		if err != nil {
			t.Fatalf("%v: %v", args, err)
		}
		return v
	}
	do("BFX.WRESERVE", "events", "0.01", "COUNT", "5000")
	if err := c.Do(ctx(t), "BFX.WRESERVE", "events", "0.01", "COUNT", "5000").Err(); err == nil || err.Error() != "ERR item exists" {
		t.Fatalf("WRESERVE over a window: %v", err)
	}
	const total, batch = 30000, 500
	for i := 0; i < total; i += batch {
		do(windowItems("BFX.WMADD", "events", "e", i, i+batch)...)
		if i+batch >= 5000 && (i/batch)%10 == 9 {
			allPresent(t, c, "events", "e", i+batch-5000, i+batch)
		}
	}
	old, err := c.Do(ctx(t), windowItems("BFX.WMEXISTS", "events", "e", 0, 5000)...).Int64Slice()
	if err != nil {
		t.Fatal(err)
	}
	stale := 0
	for _, x := range old {
		stale += int(x)
	}
	// Items 5x the window old have aged out of every slice: only false
	// positives remain (at most the 1% asked for, with room for chance).
	if stale > 100 {
		t.Errorf("%d of 5000 items aged far past the window still present", stale)
	}

	// A time window ages by the clock each command carries: an item is
	// present at once, and forgotten once the window and its margin pass.
	do("BFX.WRESERVE", "recent", "0.01", "PX", "300", "CAPACITY", "1000")
	do("BFX.WADD", "recent", "x")
	if v := do("BFX.WEXISTS", "recent", "x"); v != int64(1) {
		t.Fatalf("WEXISTS right after WADD: %v", v)
	}
	waitFor(t, 10*time.Second, "a 300 ms window to forget its item", func() bool {
		return c.Do(ctx(t), "BFX.WEXISTS", "recent", "x").Val() == int64(0)
	})

	// BFX.WINSERT creates with a window, NOCREATE refuses a missing key.
	if v := do("BFX.WINSERT", "created", "ERROR", "0.001", "EX", "3600", "CAPACITY", "10000", "ITEMS", "a", "b"); fmt.Sprint(v) != "[1 1]" {
		t.Fatalf("WINSERT: %v", v)
	}
	if err := c.Do(ctx(t), "BFX.WINSERT", "missing", "NOCREATE", "COUNT", "10", "ITEMS", "a").Err(); err == nil || err.Error() != "ERR not found" {
		t.Fatalf("WINSERT NOCREATE on a missing key: %v", err)
	}
	if v := do("TYPE", "events"); v != "BFXwindow" {
		t.Errorf("TYPE: %v", v)
	}
	do("SET", "plain", "v")
	if keys, _, err := c.Scan(ctx(t), 0, "", 1000).Result(); err != nil || len(keys) != 4 {
		t.Fatalf("SCAN: %v %v", keys, err)
	}
	if keys, _, err := c.ScanType(ctx(t), 0, "", 1000, "BFXwindow").Result(); err != nil || fmt.Sprint(sortedStrings(keys)) != "[created events recent]" {
		t.Errorf("SCAN TYPE BFXwindow: %v %v", keys, err)
	}
	do("DEL", "plain")
	if v, _ := c.Do(ctx(t), "MEMORY", "USAGE", "events").Int64(); v <= 0 {
		t.Errorf("MEMORY USAGE: %d", v)
	}
	// RESP3: WINFO is a map with typed values.
	info, err := n.client(3).Do(ctx(t), "BFX.WINFO", "events").Result()
	if err != nil {
		t.Fatal(err)
	}
	m, ok := info.(map[any]any)
	if !ok || m["Window"] != int64(5000) || m["Inserts"] != int64(total) || m["Window type"] != "count" {
		t.Fatalf("WINFO in RESP3: %#v", info)
	}
	if fp, ok := m["Estimated false positive rate"].(float64); !ok || fp > 0.01 {
		t.Errorf("estimated false-positive rate %v over the 1%% asked for", m["Estimated false positive rate"])
	}

	// A key like any other: DUMP/RESTORE, COPY, RENAME, EXPIRE.
	digest := do("BFX.DIGEST", "events")
	payload := do("DUMP", "events").(string)
	do("RESTORE", "restored", "0", payload)
	do("COPY", "events", "copied")
	do("RENAME", "copied", "renamed")
	for _, k := range []string{"restored", "renamed"} {
		if d := do("BFX.DIGEST", k); d != digest {
			t.Errorf("%s: digest %v, want %v", k, d, digest)
		}
	}
	do("EXPIRE", "renamed", "1000")
	do("BFX.WADD", "renamed", "only-here")
	if do("BFX.WEXISTS", "events", "only-here") == int64(1) && do("BFX.WEXISTS", "restored", "only-here") == int64(1) {
		t.Error("an add to a copy showed in the original and the restored key: not independent")
	}

	// Every window as it was, after SAVE (the image) and kill -9.
	keys := []string{"events", "restored", "renamed", "created"}
	want := map[string]any{}
	for _, k := range keys {
		want[k] = do("BFX.DIGEST", k)
	}
	do("SAVE")
	do("BFX.WMADD", "events", "after-save") // only in the log
	want["events"] = do("BFX.DIGEST", "events")
	n.kill()
	n.launch()
	c = n.client(2)
	for _, k := range keys {
		if d := do("BFX.DIGEST", k); d != want[k] {
			t.Errorf("after kill -9: %s digest %v, want %v", k, d, want[k])
		}
	}
	allPresent(t, c, "events", "e", total-5000+1, total)
	if v := do("BFX.WEXISTS", "events", "after-save"); v != int64(1) {
		t.Error("the add after SAVE was lost in kill -9")
	}
	if ttl, _ := c.TTL(ctx(t), "renamed").Result(); ttl <= 0 {
		t.Errorf("TTL after restart: %v", ttl)
	}
}

// TestWindowsCluster: a stream of window adds through all three nodes (a
// count window and a time window wider than the stream, and a count
// window of 300 that the stream passes through several times), the
// leader killed with kill -9 in the middle of it and restarted; every
// acknowledged add to the wide windows is present on every node, every
// replica holds byte-identical windows, and answers the same for every
// item added and 20,000 never added (false positives included), and the
// same BFX.WINFO.
func TestWindowsCluster(t *testing.T) {
	nodes := startCluster(t, []string{"127.0.0.1", "127.0.0.1", "127.0.0.1"})
	lc := leaderOf(t, nodes).client(2)
	for _, args := range [][]any{
		{"BFX.WRESERVE", "count", "0.01", "COUNT", "200000"},
		{"BFX.WRESERVE", "time", "0.001", "EX", "3600", "CAPACITY", "200000"},
		{"BFX.WRESERVE", "short", "0.05", "COUNT", "50"},
	} {
		if err := lc.Do(ctx(t), args...).Err(); err != nil {
			t.Fatal(err)
		}
	}
	var mu sync.Mutex
	acked := map[string][]string{} // key -> items acknowledged
	var n atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for i, nd := range nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := 0; ; j++ {
				select {
				case <-stop:
					return
				default:
				}
				key := []string{"count", "time", "short"}[j%3]
				item := fmt.Sprintf("n%d-%d", i, j)
				c := nd.client(2)
				err := c.Do(ctx(t), "BFX.WADD", key, item).Err()
				c.Close()
				if err != nil {
					continue // the node is down or lost leadership: not acknowledged
				}
				mu.Lock()
				acked[key] = append(acked[key], item)
				mu.Unlock()
				n.Add(1)
			}
		}()
	}
	killLeaderMidStream(t, nodes, &n)
	close(stop)
	wg.Wait()
	t.Logf("%d acknowledged window adds", n.Load())
	sameDigests(t, nodes, "count", "time", "short")
	// The same answers everywhere, false positives included: 20,000
	// strangers each; and the same WINFO but for its clock-read fields (a
	// read carries its node's clock).
	answers := map[string]string{}
	for _, nd := range nodes {
		c := nd.client(2)
		for _, key := range []string{"count", "time", "short"} {
			got, err := c.Do(ctx(t), windowItems("BFX.WMEXISTS", key, "stranger-", 0, 20000)...).Int64Slice()
			if err != nil {
				t.Fatal(err)
			}
			args := []any{"BFX.WMEXISTS", key}
			for _, it := range acked[key] {
				args = append(args, it)
			}
			added, err := c.Do(ctx(t), args...).Int64Slice()
			if err != nil {
				t.Fatal(err)
			}
			fp := 0
			for _, x := range got {
				fp += int(x)
			}
			info, err := c.Do(ctx(t), "BFX.WINFO", key).Slice()
			if err != nil {
				t.Fatal(err)
			}
			a := fmt.Sprint(got, added, info[:24]) // WINFO through Generation ms: the fields no clock moves
			if answers[key] == "" {
				answers[key] = a
				t.Logf("%s: %d false positives of 20000 strangers; %v", key, fp, info)
			} else if answers[key] != a {
				t.Errorf("node %s answers %s differently", nd.addr, key)
			}
		}
		c.Close()
	}
	delete(acked, "short") // it forgot most of them
	for _, nd := range nodes {
		c := nd.client(2)
		for key, items := range acked {
			for from := 0; from < len(items); from += 1000 {
				args := []any{"BFX.WMEXISTS", key}
				for _, it := range items[from:min(from+1000, len(items))] {
					args = append(args, it)
				}
				got, err := c.Do(ctx(t), args...).Int64Slice()
				if err != nil {
					t.Fatal(err)
				}
				for i, x := range got {
					if x != 1 {
						t.Fatalf("node %s: acknowledged %s in %s answered 0", nd.addr, items[from+i], key)
					}
				}
			}
		}
	}
}
