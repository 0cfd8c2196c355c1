package integration

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// casIncr increments the string counter key with a go-redis WATCH loop
// (WATCH, GET, MULTI, SET, EXEC), retrying on TxFailedErr; it returns how
// many times it retried.
func casIncr(cx context.Context, c *redis.Client, key string) (int, error) {
	for retries := 0; ; retries++ {
		err := c.Watch(cx, func(tx *redis.Tx) error {
			v, err := tx.Get(cx, key).Int()
			if err != nil && err != redis.Nil {
				return err
			}
			_, err = tx.TxPipelined(cx, func(p redis.Pipeliner) error {
				p.Set(cx, key, strconv.Itoa(v+1), 0)
				return nil
			})
			return err
		}, key)
		if !errors.Is(err, redis.TxFailedErr) {
			return retries, err
		}
	}
}

// casCard adds one item to the filters bf and cf with a go-redis WATCH
// loop: the item is named after bf's BF.CARD, read under WATCH, so two
// transactions that both saw the same count would add the same item and
// the count would fall behind the commits. It returns its retries.
func casCard(cx context.Context, c *redis.Client, bf, cf string) (int, error) {
	for retries := 0; ; retries++ {
		err := c.Watch(cx, func(tx *redis.Tx) error {
			n, err := tx.Do(cx, "BF.CARD", bf).Int64()
			if err != nil {
				return err
			}
			item := "item-" + strconv.FormatInt(n, 10)
			cmds, err := tx.TxPipelined(cx, func(p redis.Pipeliner) error {
				p.Do(cx, "BF.ADD", bf, item)
				p.Do(cx, "CF.ADD", cf, item)
				return nil
			})
			if err == nil {
				// 1 in RESP2, true in RESP3
				if v, err := cmds[0].(*redis.Cmd).Bool(); err != nil || !v {
					return fmt.Errorf("BF.ADD %s in a committed transaction answered %v (%v)", item, v, err)
				}
			}
			return err
		}, bf)
		if !errors.Is(err, redis.TxFailedErr) {
			return retries, err
		}
	}
}

const redisPyCAS = `
import sys, redis
r = redis.Redis(host=sys.argv[1], port=int(sys.argv[2]))
n = int(sys.argv[3])
calls = [0]
def incr(pipe):
    calls[0] += 1
    v = int(pipe.get("ctr") or 0)
    pipe.multi()
    pipe.set("ctr", v + 1)
def card(pipe):
    calls[0] += 1
    c = pipe.execute_command("BF.CARD", "card")
    pipe.multi()
    pipe.execute_command("BF.ADD", "card", "item-%d" % c)
    pipe.execute_command("CF.ADD", "cards", "item-%d" % c)
for _ in range(n):
    r.transaction(incr, "ctr")
    res = r.transaction(card, "card")
    assert res[0] == 1, res
print("ok", calls[0] - 2 * n)
`

// TestWatchCluster: check-and-set loops of go-redis (Watch) and redis-py
// (transaction()) on different nodes of a three-node cluster, against the
// same keys, while a writer on the leader keeps touching one of them
// without changing it (BF.ADD of a present item). Every increment lands
// once: the counters end exact, no update lost. Then every node holds the
// same bytes for every key, aborted transactions included (BFX.DIGEST).
func TestWatchCluster(t *testing.T) {
	py := "/usr/bin/python3"
	if out, err := exec.Command(py, "-c", "import redis").CombinedOutput(); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("python3-redis not installed (apt-get install python3-redis): %s", out)
		}
		t.Skip("python3-redis not installed (apt-get install python3-redis)")
	}
	nodes := startCluster(t, []string{"127.0.0.11", "127.0.0.12", "127.0.0.13"})
	leader := leaderOf(t, nodes)
	followers := without(nodes, leader)
	cx := ctx(t)
	lc := leader.client(2)
	for _, cmd := range [][]any{
		{"BF.RESERVE", "card", "0.0001", "100000"}, {"BF.ADD", "card", "seed"},
		{"CF.RESERVE", "cards", "10000"}, {"SET", "ctr", "0"},
	} {
		if err := lc.Do(cx, cmd...).Err(); err != nil {
			t.Fatalf("%v: %v", cmd, err)
		}
	}

	// One abort made to happen across nodes: WATCH on a follower, a touch
	// on the leader, EXEC on the follower.
	fc := followers[0].client(3)
	err := fc.Watch(cx, func(tx *redis.Tx) error {
		if err := lc.Do(cx, "BF.ADD", "card", "seed").Err(); err != nil {
			return err
		}
		_, err := tx.TxPipelined(cx, func(p redis.Pipeliner) error {
			p.Do(cx, "BF.ADD", "card", "never")
			return nil
		})
		return err
	}, "card")
	if !errors.Is(err, redis.TxFailedErr) {
		t.Fatalf("EXEC after another node touched the watched key: %v, want the null reply", err)
	}

	const goIncrs, goWorkers, pyIncrs = 20, 2, 20
	stop := make(chan struct{})
	var wg, touchWG sync.WaitGroup
	var touches, retries atomic.Int64
	touchWG.Add(1)
	go func() { // the writer on another node: touches, changes nothing
		defer touchWG.Done()
		tick := time.NewTicker(10 * time.Millisecond) // a rate, not a wait for a condition
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			if err := lc.Do(cx, "BF.ADD", "card", "seed").Err(); err != nil {
				// A leader change on a loaded machine refuses a touch
				// (it changes nothing either way): the next one goes on.
				if msg := err.Error(); strings.HasPrefix(msg, "TRYAGAIN") || strings.HasPrefix(msg, "CLUSTERDOWN") {
					continue
				}
				t.Errorf("touching writer: %v", err)
				return
			}
			touches.Add(1)
		}
	}()
	for i, n := range followers {
		for w := 0; w < goWorkers; w++ {
			wg.Add(1)
			go func(c *redis.Client) {
				defer wg.Done()
				for j := 0; j < goIncrs; j++ {
					r1, err := casIncr(cx, c, "ctr")
					if err != nil {
						t.Errorf("go-redis increment: %v", err)
						return
					}
					r2, err := casCard(cx, c, "card", "cards")
					if err != nil {
						t.Errorf("go-redis BF.CARD increment: %v", err)
						return
					}
					retries.Add(int64(r1 + r2))
				}
			}(n.client(2 + (i+w)%2))
		}
	}
	var pyOut []byte
	var pyErr error
	wg.Add(1)
	go func() { // redis-py on the leader
		defer wg.Done()
		host, port, _ := net.SplitHostPort(leader.addr)
		pyOut, pyErr = exec.Command(py, "-c", redisPyCAS, host, port, strconv.Itoa(pyIncrs)).CombinedOutput()
	}()
	wg.Wait()
	close(stop)
	touchWG.Wait()
	if pyErr != nil || !strings.HasPrefix(string(pyOut), "ok ") {
		t.Fatalf("redis-py: %v\n%s", pyErr, pyOut)
	}
	pyRetries, _ := strconv.Atoi(strings.TrimSpace(strings.TrimPrefix(string(pyOut), "ok ")))

	total := len(followers)*goWorkers*goIncrs + pyIncrs
	for _, n := range nodes {
		c := n.client(2)
		if v, err := c.Get(cx, "ctr").Int(); err != nil || v != total {
			t.Errorf("node %s: ctr = %d (%v), want %d", n.addr, v, err, total)
		}
		if v, err := c.Do(cx, "BF.CARD", "card").Int(); err != nil || v != total+1 {
			t.Errorf("node %s: BF.CARD card = %d (%v), want %d", n.addr, v, err, total+1)
		}
		info, err := c.CFInfo(cx, "cards").Result()
		if err != nil || info.NumItemsInserted != int64(total) {
			t.Errorf("node %s: CF.INFO cards inserted %d (%v), want %d", n.addr, info.NumItemsInserted, err, total)
		}
	}
	digests := func(n *node) string {
		c := n.client(2)
		var out []string
		for _, k := range []string{"card", "cards", "ctr"} {
			d, err := c.Do(cx, "BFX.DIGEST", k).Text()
			if err != nil {
				t.Fatalf("BFX.DIGEST %s on %s: %v", k, n.addr, err)
			}
			out = append(out, k+"="+d)
		}
		return strings.Join(out, " ")
	}
	want := digests(nodes[0])
	for _, n := range nodes[1:] {
		if got := digests(n); got != want {
			t.Errorf("node %s digests %s, node %s %s", n.addr, got, nodes[0].addr, want)
		}
	}
	t.Logf("%d increments of each counter; %d go-redis and %d redis-py transactions retried; %d touches by the writer",
		total, retries.Load(), pyRetries, touches.Load())

	// A follower killed and restarted holds its peers' versions (from its
	// image and the log it replays): a transaction WATCHed there, with no
	// touch in between, commits on every node, and one touched from
	// another node aborts.
	r := followers[1]
	r.kill()
	r.launch()
	rc := r.client(2)
	var werr error
	waitFor(t, 30*time.Second, "the restarted follower serving WATCH", func() bool {
		werr = rc.Watch(cx, func(tx *redis.Tx) error {
			_, err := tx.TxPipelined(cx, func(p redis.Pipeliner) error {
				p.Do(cx, "BF.ADD", "card", "after-restart")
				p.Do(cx, "SET", "ctr", "after-restart")
				return nil
			})
			return err
		}, "card", "cards", "ctr")
		return werr == nil || errors.Is(werr, redis.TxFailedErr)
	})
	if werr != nil {
		t.Fatalf("untouched transaction on the restarted follower: %v", werr)
	}
	err = rc.Watch(cx, func(tx *redis.Tx) error {
		if err := lc.Do(cx, "CF.ADD", "cards", "touch").Err(); err != nil {
			return err
		}
		_, err := tx.TxPipelined(cx, func(p redis.Pipeliner) error {
			p.Do(cx, "BF.ADD", "card", "never")
			return nil
		})
		return err
	}, "cards")
	if !errors.Is(err, redis.TxFailedErr) {
		t.Fatalf("touched transaction on the restarted follower: %v, want the null reply", err)
	}
	want = digests(nodes[0])
	for _, n := range nodes[1:] {
		if got := digests(n); got != want {
			t.Errorf("after the restart, node %s digests %s, node %s %s", n.addr, got, nodes[0].addr, want)
		}
	}
}
