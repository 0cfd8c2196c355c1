package integration

import (
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// sketchDo runs a command that must succeed.
func sketchDo(t *testing.T, c *redis.Client, args ...any) any {
	t.Helper()
	v, err := c.Do(ctx(t), args...).Result()
	if err != nil {
		t.Fatalf("%v: %v", args, err)
	}
	return v
}

// TestSketches: Count-Min Sketch on one durable node through go-redis,
// RESP2 and RESP3: counts and errors as RedisBloom, DUMP/RESTORE, RENAME,
// EXPIRE, COPY refused, and after SAVE and kill -9 every sketch as it
// was, digest for digest.
func TestSketches(t *testing.T) {
	n := start(t, "--flush-interval", "200ms")
	c := n.client(2)
	do := func(args ...any) any { t.Helper(); return sketchDo(t, c, args...) }

	do("CMS.INITBYPROB", "hits", "0.001", "0.01")
	if v := fmt.Sprint(do("CMS.INFO", "hits")); v != "[width 2000 depth 7 count 0]" {
		t.Fatalf("CMS.INFO: %s", v)
	}
	truth := map[string]int64{}
	for i := 0; i < 200; i++ {
		args := []any{"CMS.INCRBY", "hits"}
		for j := 0; j < 50; j++ {
			item := "u" + strconv.Itoa((i*31+j*7)%997)
			args = append(args, item, 1+j%3)
			truth[item] += int64(1 + j%3)
		}
		do(args...)
	}
	for item, want := range truth {
		got, err := c.Do(ctx(t), "CMS.QUERY", "hits", item).Int64Slice()
		if err != nil || got[0] < want {
			t.Fatalf("%s: counted %v (%v), at least %d added", item, got, err, want)
		}
	}
	if err := c.Do(ctx(t), "CMS.INITBYDIM", "hits", "10", "2").Err(); err == nil || err.Error() != "CMS: key already exists" {
		t.Fatalf("INITBYDIM over a sketch: %v", err)
	}
	if err := c.Do(ctx(t), "CMS.INCRBY", "nokey", "a", "x").Err(); err == nil || err.Error() != "CMS: key does not exist" {
		t.Fatalf("INCRBY of a missing key: %v", err)
	}
	if v := do("TYPE", "hits"); v != "CMSk-TYPE" {
		t.Errorf("TYPE: %v", v)
	}
	if v := do("MEMORY", "USAGE", "hits"); v != int64(56000+32+32) {
		t.Errorf("MEMORY USAGE: %v", v)
	}
	info, err := n.client(3).Do(ctx(t), "CMS.INFO", "hits").Result()
	if m, ok := info.(map[any]any); err != nil || !ok || m["width"] != int64(2000) || m["depth"] != int64(7) {
		t.Fatalf("CMS.INFO in RESP3: %#v (%v)", info, err)
	}

	digest := do("BFX.DIGEST", "hits")
	payload := do("DUMP", "hits").(string)
	do("RESTORE", "restored", "0", payload)
	if err := c.Do(ctx(t), "COPY", "hits", "copied").Err(); err == nil || err.Error() != "ERR not supported for this module key" {
		t.Fatalf("COPY: %v", err)
	}
	do("CMS.INITBYDIM", "other", "2000", "7")
	do("CMS.MERGE", "other", "2", "hits", "restored", "WEIGHTS", "1", "1")
	do("RENAME", "restored", "renamed")
	if d := do("BFX.DIGEST", "renamed"); d != digest {
		t.Errorf("restored and renamed: digest %v, want %v", d, digest)
	}
	do("EXPIRE", "renamed", "1000")
	do("CMS.INCRBY", "renamed", "only-here", "5")
	if v := fmt.Sprint(do("CMS.QUERY", "hits", "only-here")); v == "[5]" {
		t.Error("an increment of the restored copy showed in the original")
	}

	// Top-K: a skewed stream's heavy hitters, expelled items answered.
	do("TOPK.RESERVE", "top", "10", "200", "5", "0.9")
	expelled := 0
	for i := 0; i < 300; i++ {
		args := []any{"TOPK.ADD", "top"}
		for j := 0; j < 20; j++ {
			args = append(args, "v"+strconv.Itoa((i*j)%(1+j*7)))
		}
		for _, x := range do(args...).([]any) {
			if x != nil {
				expelled++
			}
		}
	}
	list := do("TOPK.LIST", "top", "WITHCOUNT").([]any)
	if len(list) != 20 || list[0] != "v0" {
		t.Fatalf("TOPK.LIST: %v", list)
	}
	if expelled == 0 {
		t.Error("no add expelled an item")
	}
	if v := do("TYPE", "top"); v != "TopK-TYPE" {
		t.Errorf("TYPE: %v", v)
	}
	if v := do("MEMORY", "USAGE", "top"); v != int64(2088+200*5*8+10*24+32) {
		t.Errorf("MEMORY USAGE: %v", v)
	}
	info, err = n.client(3).Do(ctx(t), "TOPK.INFO", "top").Result()
	if m, ok := info.(map[any]any); err != nil || !ok || m["decay"] != 0.9 || m["k"] != int64(10) {
		t.Fatalf("TOPK.INFO in RESP3: %#v (%v)", info, err)
	}
	if q := fmt.Sprint(n.client(3).Do(ctx(t), "TOPK.QUERY", "top", "v0", "nothere").Val()); q != "[true false]" {
		t.Errorf("TOPK.QUERY in RESP3: %s", q)
	}
	do("RESTORE", "top-restored", "0", do("DUMP", "top").(string))
	if a, b := fmt.Sprint(do("TOPK.LIST", "top", "WITHCOUNT")), fmt.Sprint(do("TOPK.LIST", "top-restored", "WITHCOUNT")); a != b {
		t.Errorf("restored Top-K lists %s, want %s", b, a)
	}

	keys := []string{"hits", "renamed", "other", "top", "top-restored"}
	want := map[string]any{}
	for _, k := range keys {
		want[k] = do("BFX.DIGEST", k)
	}
	do("SAVE")
	do("CMS.INCRBY", "hits", "after-save", "3") // only in the log
	want["hits"] = do("BFX.DIGEST", "hits")
	do("TOPK.ADD", "top", "after-save", "v1", "v2")
	want["top"] = do("BFX.DIGEST", "top")
	n.kill()
	n.launch()
	c = n.client(2)
	for _, k := range keys {
		if d := do("BFX.DIGEST", k); d != want[k] {
			t.Errorf("after kill -9: %s digest %v, want %v", k, d, want[k])
		}
	}
	if v := fmt.Sprint(do("CMS.QUERY", "hits", "after-save")); v != "[3]" {
		t.Errorf("the increment after SAVE: %s", v)
	}
	if ttl, _ := c.TTL(ctx(t), "renamed").Result(); ttl <= 0 {
		t.Errorf("TTL after restart: %v", ttl)
	}
}

// TestSketchesCluster: CMS increments and merges, Top-K adds (whose
// decay coin every replica draws from the sketch's own generator) and
// t-digest adds, merges and queries (those that compress the buffer go
// through the log, DUMP too) through all three nodes, the leader killed
// with kill -9 in the middle and restarted; afterwards every node answers
// the same counts, each at least what was acknowledged, the same Top-K
// lists, the same quantiles and t-digest INFO, and every replica holds
// byte-identical sketches.
func TestSketchesCluster(t *testing.T) {
	nodes := startCluster(t, []string{"127.0.0.1", "127.0.0.1", "127.0.0.1"})
	lc := leaderOf(t, nodes).client(2)
	for _, args := range [][]any{
		{"CMS.INITBYDIM", "cms", "500", "5"},
		{"CMS.INITBYPROB", "merged", "0.01", "0.001"},
		{"TOPK.RESERVE", "top", "20", "50", "4", "0.9"},
		{"TDIGEST.CREATE", "td", "COMPRESSION", "30"},
	} {
		if err := lc.Do(ctx(t), args...).Err(); err != nil {
			t.Fatal(err)
		}
	}
	var mu sync.Mutex
	acked := map[string]int64{} // CMS item -> acknowledged increments
	var n, tdAcked atomic.Int64 // tdAcked: values acknowledged to "td"
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
				c := nd.client(2)
				item := "i" + strconv.Itoa((i*7+j)%300)
				var err error
				tdAdd := false
				switch {
				case j%20 == 19:
					err = c.Do(ctx(t), "CMS.MERGE", "merged", "1", "merged", "WEIGHTS", "1").Err()
				case j%10 == 4:
					err = c.Do(ctx(t), "TDIGEST.ADD", "td", j%97, float64(i)+float64(j%13)/8, -j%5).Err()
					tdAdd = true
				case j%10 == 7:
					// Reads that compress a buffer go through the log.
					switch j % 4 {
					case 0:
						err = c.Do(ctx(t), "TDIGEST.QUANTILE", "td", "0.5", "0.99").Err()
					case 1:
						err = c.Do(ctx(t), "TDIGEST.RANK", "td", "3", "50").Err()
					case 2:
						err = c.Do(ctx(t), "DUMP", "td").Err()
					default:
						err = c.Do(ctx(t), "TDIGEST.MERGE", "tdm", "1", "td", "COMPRESSION", "20").Err()
					}
				case j%3 == 1:
					err = c.Do(ctx(t), "TOPK.ADD", "top", item, "i"+strconv.Itoa(j%7), "n"+strconv.Itoa(i)).Err()
				case j%3 == 2:
					err = c.Do(ctx(t), "TOPK.INCRBY", "top", item, 1+j%5).Err()
				default:
					err = c.Do(ctx(t), "CMS.INCRBY", "cms", item, 1+j%4).Err()
				}
				c.Close()
				if err != nil {
					continue // the node is down or lost leadership: not acknowledged
				}
				if tdAdd {
					tdAcked.Add(3)
				} else if j%20 != 19 && j%10 != 7 && j%3 == 0 {
					mu.Lock()
					acked[item] += int64(1 + j%4)
					mu.Unlock()
				}
				n.Add(1)
			}
		}()
	}
	killLeaderMidStream(t, nodes, &n)
	close(stop)
	wg.Wait()
	t.Logf("%d acknowledged sketch writes, %d values acknowledged to the t-digest", n.Load(), tdAcked.Load())
	sameDigests(t, nodes, "cms", "merged", "top", "td", "tdm")
	items := []any{"CMS.QUERY", "cms"}
	for i := 0; i < 300; i++ {
		items = append(items, "i"+strconv.Itoa(i))
	}
	var answers []string
	for _, nd := range nodes {
		c := nd.client(2)
		got, err := c.Do(ctx(t), items...).Int64Slice()
		if err != nil {
			t.Fatal(err)
		}
		for i, x := range got {
			if x < acked["i"+strconv.Itoa(i)] {
				t.Fatalf("node %s: i%d counted %d, %d acknowledged", nd.addr, i, x, acked["i"+strconv.Itoa(i)])
			}
		}
		tdInfo := c.Do(ctx(t), "TDIGEST.INFO", "td").Val()
		if obs := tdInfo.([]any)[13].(int64); obs < tdAcked.Load() {
			t.Fatalf("node %s: t-digest holds %d values, %d acknowledged", nd.addr, obs, tdAcked.Load())
		}
		answers = append(answers, fmt.Sprint(got, c.Do(ctx(t), "CMS.INFO", "cms").Val(), c.Do(ctx(t), "TOPK.LIST", "top", "WITHCOUNT").Val(),
			tdInfo, c.Do(ctx(t), "TDIGEST.INFO", "tdm").Val(), c.Do(ctx(t), "TDIGEST.MIN", "td").Val(), c.Do(ctx(t), "TDIGEST.MAX", "td").Val()))
		c.Close()
	}
	for _, a := range answers[1:] {
		if a != answers[0] {
			t.Fatalf("replicas answer differently:\n%s\n%s", answers[0], a)
		}
	}
	// The quantiles: the first node's QUANTILE compresses through the log
	// (the digests' buffers hold the last adds), and then every node
	// answers it from the same state, and with the same digest.
	var quants, digests []string
	for _, nd := range nodes {
		c := nd.client(2)
		quants = append(quants, fmt.Sprint(c.Do(ctx(t), "TDIGEST.QUANTILE", "td", "0", "0.1", "0.5", "0.9", "1").Val(),
			c.Do(ctx(t), "TDIGEST.CDF", "tdm", "5", "40").Val(), c.Do(ctx(t), "TDIGEST.INFO", "td").Val()))
		c.Close()
	}
	waitFor(t, 30*time.Second, "identical t-digests after the queries", func() bool {
		digests = digests[:0]
		for _, nd := range nodes {
			c := nd.client(2)
			digests = append(digests, fmt.Sprint(c.Do(ctx(t), "BFX.DIGEST", "td").Val(), c.Do(ctx(t), "BFX.DIGEST", "tdm").Val()))
			c.Close()
		}
		return digests[0] == digests[1] && digests[1] == digests[2]
	})
	for _, q := range quants[1:] {
		if q != quants[0] {
			t.Fatalf("replicas answer quantiles differently:\n%s\n%s", quants[0], q)
		}
	}
	// Inside EXEC on a follower, the reads travel to the leader with the
	// transaction and come back as results: the same answers.
	var follower *node
	for _, nd := range nodes {
		if nd != leaderOf(t, nodes) {
			follower = nd
			break
		}
	}
	fc := follower.client(2)
	defer fc.Close()
	cmds, err := fc.TxPipelined(ctx(t), func(p redis.Pipeliner) error {
		p.Do(ctx(t), "CMS.INFO", "cms")
		p.Do(ctx(t), "TOPK.LIST", "top", "WITHCOUNT")
		p.Do(ctx(t), "TOPK.INFO", "top")
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	direct := []any{fc.Do(ctx(t), "CMS.INFO", "cms").Val(), fc.Do(ctx(t), "TOPK.LIST", "top", "WITHCOUNT").Val(), fc.Do(ctx(t), "TOPK.INFO", "top").Val()}
	for i, c := range cmds {
		if got := fmt.Sprint(c.(*redis.Cmd).Val()); got != fmt.Sprint(direct[i]) {
			t.Errorf("in EXEC on a follower: %s, directly %v", got, direct[i])
		}
	}
	// A transaction of reads only, on a follower, whose QUANTILE
	// compresses: it goes through the log whole, and INFO in it shows the
	// compression; every replica then holds the same digest.
	sketchDo(t, fc, "TDIGEST.ADD", "td", "1", "2", "3")
	var info *redis.Cmd
	if _, err := fc.TxPipelined(ctx(t), func(p redis.Pipeliner) error {
		p.Do(ctx(t), "TDIGEST.QUANTILE", "td", "0.5")
		info = p.Do(ctx(t), "TDIGEST.INFO", "td")
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if v := info.Val().([]any); v[7] != int64(0) {
		t.Fatalf("INFO after a QUANTILE in EXEC on a follower: %v", v)
	}
	waitFor(t, 30*time.Second, "identical t-digests after the transaction", func() bool {
		digests = digests[:0]
		for _, nd := range nodes {
			c := nd.client(2)
			digests = append(digests, fmt.Sprint(c.Do(ctx(t), "BFX.DIGEST", "td").Val()))
			c.Close()
		}
		return digests[0] == digests[1] && digests[1] == digests[2]
	})
}

// TestMigrateSketches: `bfserver migrate` carries Count-Min Sketches,
// Top-Ks and t-digests (as DUMP/RESTORE, verified by the value each
// payload holds) with their TTL, from one bfserver to another; a second
// run finds them identical.
func TestMigrateSketches(t *testing.T) {
	a, b := start(t), start(t)
	ca := a.dbClient(0)
	sketchDo(t, ca, "CMS.INITBYDIM", "cms:a", "100", "4")
	sketchDo(t, ca, "CMS.INCRBY", "cms:a", "x", "5", "y", "7")
	sketchDo(t, ca, "CMS.INITBYPROB", "cms:ttl", "0.01", "0.01")
	sketchDo(t, ca, "CMS.INCRBY", "cms:ttl", "z", "9")
	sketchDo(t, ca, "EXPIRE", "cms:ttl", "5000")
	sketchDo(t, a.dbClient(3), "CMS.INITBYDIM", "cms:db3", "7", "2")
	sketchDo(t, ca, "TOPK.RESERVE", "topk:a", "5", "50", "3", "0.9")
	sketchDo(t, ca, "TOPK.ADD", "topk:a", "x", "y", "x", "z", "w", "v", "u", "x")
	// t-digests: one with a buffer (the source's DUMP compresses it), one
	// holding a single value (left unmerged: RedisBloom's encoding keeps
	// it as a node of weight 0, on either side), one with a TTL.
	sketchDo(t, ca, "TDIGEST.CREATE", "td:a", "COMPRESSION", "40")
	for i := 0; i < 20; i++ {
		sketchDo(t, ca, "TDIGEST.ADD", "td:a", i, i*i, -i)
	}
	sketchDo(t, ca, "TDIGEST.CREATE", "td:one")
	sketchDo(t, ca, "TDIGEST.ADD", "td:one", "42")
	sketchDo(t, a.dbClient(3), "TDIGEST.CREATE", "td:ttl")
	sketchDo(t, a.dbClient(3), "TDIGEST.ADD", "td:ttl", "1", "2")
	sketchDo(t, a.dbClient(3), "EXPIRE", "td:ttl", "5000")
	keys := map[int][]string{0: {"cms:a", "cms:ttl", "topk:a", "td:a", "td:one"}, 3: {"cms:db3", "td:ttl"}}
	r := runTool(t, nil, migrateArgs(a, b)...)
	if r.code != 0 {
		t.Fatalf("migrate exited %d:\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	if ttl := b.dbClient(0).TTL(ctx(t), "cms:ttl").Val(); ttl <= 0 {
		t.Errorf("TTL not carried: %v", ttl)
	}
	if ttl := b.dbClient(3).TTL(ctx(t), "td:ttl").Val(); ttl <= 0 {
		t.Errorf("t-digest TTL not carried: %v", ttl)
	}
	out := r.outcomes()
	for db, ks := range keys {
		for _, k := range ks {
			if out[k] != "copied" {
				t.Errorf("%q: outcome %q, want copied", k, out[k])
			}
			if strings.HasPrefix(k, "topk:") {
				// DUMP carries no generator: compare what RedisBloom's
				// fields hold.
				l := func(n *node) string { return fmt.Sprint(n.dbClient(db).Do(ctx(t), "TOPK.LIST", k, "WITHCOUNT").Val()) }
				if l(a) != l(b) {
					t.Errorf("db%d %q: lists differ after migrate: %s and %s", db, k, l(a), l(b))
				}
			} else if k == "td:one" {
				// RedisBloom's encoding writes merged nodes only: the one
				// unmerged value travels as a node of mean 0 and weight 0
				// (as RESTORE into RedisBloom gives it); INFO, MIN and MAX
				// are carried.
				l := func(n *node) string {
					c := n.dbClient(db)
					return fmt.Sprint(c.Do(ctx(t), "TDIGEST.INFO", k).Val(), c.Do(ctx(t), "TDIGEST.MIN", k).Val(), c.Do(ctx(t), "TDIGEST.MAX", k).Val())
				}
				if l(a) != l(b) {
					t.Errorf("db%d %q: INFO, MIN, MAX differ after migrate: %s and %s", db, k, l(a), l(b))
				}
			} else if digestOf(t, a.dbClient(db), k) != digestOf(t, b.dbClient(db), k) {
				t.Errorf("db%d %q: digests differ after migrate", db, k)
			}
		}
	}
	if q := fmt.Sprint(b.dbClient(0).Do(ctx(t), "TDIGEST.QUANTILE", "td:a", "0.1", "0.5", "0.9").Val()); q != fmt.Sprint(ca.Do(ctx(t), "TDIGEST.QUANTILE", "td:a", "0.1", "0.5", "0.9").Val()) {
		t.Errorf("migrated t-digest's quantiles %s", q)
	}
	noTempKeys(t, b, 0, 3)
	r = runTool(t, nil, migrateArgs(a, b)...)
	if r.code != 0 {
		t.Fatalf("second migrate exited %d:\n%s", r.code, r.stderr)
	}
	for k, o := range r.outcomes() {
		if o != "identical" {
			t.Errorf("second run: %q %s, want identical", k, o)
		}
	}
}

// killLeaderMidStream lets the writers counting in n acknowledge 300
// writes, kills the leader with kill -9, waits for 300 more under a new
// leader, restarts the old one and waits for 300 more.
func killLeaderMidStream(t *testing.T, nodes []*node, n *atomic.Int64) {
	t.Helper()
	waitFor(t, 30*time.Second, "writes before the kill", func() bool { return n.Load() > 300 })
	leader := leaderOf(t, nodes)
	leader.kill()
	newLeader := leaderOf(t, without(nodes, leader))
	t.Logf("killed leader %s mid-stream; new leader %s", leader.addr, newLeader.addr)
	before := n.Load()
	waitFor(t, 30*time.Second, "writes after the kill", func() bool { return n.Load() > before+300 })
	leader.launch()
	before = n.Load()
	waitFor(t, 30*time.Second, "writes after the restart", func() bool { return n.Load() > before+300 })
}

// sameDigests waits until every node's BFX.DIGEST of each key is the same
// (and the first key exists).
func sameDigests(t *testing.T, nodes []*node, keys ...string) {
	t.Helper()
	waitFor(t, 60*time.Second, "identical digests on every node", func() bool {
		var first []any
		for i, nd := range nodes {
			c := nd.client(2)
			var ds []any
			for _, k := range keys {
				ds = append(ds, c.Do(ctx(t), "BFX.DIGEST", k).Val())
			}
			c.Close()
			if i == 0 {
				first = ds
			} else if fmt.Sprint(ds) != fmt.Sprint(first) {
				return false
			}
		}
		return first[0] != nil
	})
}
