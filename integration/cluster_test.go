package integration

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// startCluster runs nodes on the given loopback IPs: the first bootstraps,
// the others join through it.
func startCluster(t *testing.T, ips []string, args ...string) []*node {
	return startClusterTLS(t, ips, nil, args...)
}

// testSecret is the cluster secret of the clusters tests start.
const testSecret = "integration-tests-cluster-secret"

// clusterAuthFlags are the flags that say how a cluster's nodes
// authenticate each other; a cluster started without one shares
// testSecret.
var clusterAuthFlags = []string{"--cluster-secret", "--cluster-secret-file", "--cluster-insecure", "--tls-cluster"}

func startClusterTLS(t *testing.T, ips []string, p *pki, args ...string) []*node {
	t.Helper()
	return startClusterWith(t, ips, p, nil, args...)
}

// startClusterWith is startClusterTLS with setup called on each node
// before it first starts (to choose its binary or environment).
func startClusterWith(t *testing.T, ips []string, p *pki, setup func(i int, n *node), args ...string) []*node {
	t.Helper()
	if !slices.ContainsFunc(args, func(a string) bool { return slices.Contains(clusterAuthFlags, a) }) {
		args = append([]string{"--cluster-secret", testSecret}, args...)
	}
	var nodes []*node
	for i, ip := range ips {
		n := &node{t: t, addr: freeAddrOn(t, ip), raftAddr: freeAddrOn(t, ip), dataDir: t.TempDir(), tls: p}
		n.args = append([]string{"--node-id", fmt.Sprintf("n%d", i+1)}, args...)
		if i > 0 {
			n.args = append(n.args, "--join", nodes[0].addr)
		}
		if setup != nil {
			setup(i, n)
		}
		n.launch()
		nodes = append(nodes, n)
	}
	waitFor(t, 30*time.Second, "all members joined", func() bool {
		for _, n := range nodes {
			if replInfo(n)["raft_num_members"] != fmt.Sprint(len(nodes)) {
				return false
			}
		}
		return true
	})
	return nodes
}

// replInfo parses INFO replication; empty when the node does not answer.
func replInfo(n *node) map[string]string { return infoOf(n, "replication") }

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(50 * time.Millisecond) // polling the condition
	}
}

func leaderOf(t testing.TB, nodes []*node) *node {
	t.Helper()
	var leader *node
	waitFor(t, 30*time.Second, "a leader", func() bool {
		for _, n := range nodes {
			if replInfo(n)["raft_role"] == "leader" {
				leader = n
				return true
			}
		}
		return false
	})
	return leader
}

// without returns nodes but one, in order.
func without(nodes []*node, one *node) []*node {
	var out []*node
	for _, n := range nodes {
		if n != one {
			out = append(out, n)
		}
	}
	return out
}

// history checks linearizable reads: a read sent after an add was
// acknowledged must never answer 0.
type history struct {
	mu    sync.Mutex
	acked []ackedItem
	bad   atomic.Int64
	reads atomic.Int64
}

type ackedItem struct{ key, item string }

func (h *history) ack(key, item string) {
	h.mu.Lock()
	h.acked = append(h.acked, ackedItem{key, item})
	h.mu.Unlock()
}

func (h *history) sample(r *rand.Rand, n int) []ackedItem {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.acked) == 0 {
		return nil
	}
	out := make([]ackedItem, n)
	for i := range out {
		out[i] = h.acked[r.IntN(len(h.acked))]
	}
	return out
}

// writer adds unique items through one node until stop.
func writer(n *node, prefix string, h *history, a *acked, stop <-chan struct{}, wg *sync.WaitGroup) {
	defer wg.Done()
	c := redis.NewClient(&redis.Options{Addr: n.addr, Protocol: 2, MaxRetries: -1, DialTimeout: time.Second})
	defer c.Close()
	for i := 0; ; i++ {
		select {
		case <-stop:
			return
		default:
		}
		cx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		pipe := c.Pipeline()
		var cmds []*redis.Cmd
		var sent []ackedItem
		for j := 0; j < 10; j++ {
			k := loadKeys[(i*10+j)%3]
			item := fmt.Sprintf("%s:%d:%d", prefix, i, j)
			sent = append(sent, ackedItem{k.key, item})
			cmds = append(cmds, pipe.Do(cx, k.op, k.key, item))
		}
		pipe.Exec(cx)
		cancel()
		for j, cmd := range cmds {
			if cmd.Err() == nil {
				h.ack(sent[j].key, sent[j].item)
				a.add(sent[j].key, sent[j].item)
			}
		}
		if cmds[0].Err() != nil {
			time.Sleep(20 * time.Millisecond) // back off while the node is down
		}
	}
}

// reader checks acknowledged items through one node until stop.
func reader(t *testing.T, n *node, h *history, seed uint64, stop <-chan struct{}, wg *sync.WaitGroup) {
	defer wg.Done()
	c := redis.NewClient(&redis.Options{Addr: n.addr, Protocol: 2, MaxRetries: -1, DialTimeout: time.Second})
	defer c.Close()
	r := rand.New(rand.NewPCG(seed, seed))
	for {
		select {
		case <-stop:
			return
		default:
		}
		items := h.sample(r, 20) // all acknowledged before this read is sent
		if items == nil {
			time.Sleep(10 * time.Millisecond) // nothing acknowledged yet
			continue
		}
		cx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		for _, it := range items {
			op := "BF.EXISTS"
			if it.key == "cuckoo" {
				op = "CF.EXISTS"
			}
			v, err := c.Do(cx, op, it.key, it.item).Int64()
			if err != nil {
				break // CLUSTERDOWN/TRYAGAIN/closed: allowed, never a stale 0
			}
			h.reads.Add(1)
			if v != 1 {
				h.bad.Add(1)
				t.Errorf("read of acknowledged %s/%s on %s answered %d", it.key, it.item, n.addr, v)
			}
		}
		cancel()
	}
}

// converged waits until every node holds identical filters, then checks
// every acknowledged item on every node.
func converged(t *testing.T, nodes []*node, a *acked) {
	t.Helper()
	var want map[string]string
	waitFor(t, 60*time.Second, "identical digests on every node", func() bool {
		var first string
		for i, n := range nodes {
			d := fmt.Sprint(digestsOf(t, n.client(2)))
			if i == 0 {
				first = d
			} else if d != first {
				return false
			}
		}
		return true
	})
	want = digestsOf(t, nodes[0].client(2))
	items := a.snapshot()
	for _, n := range nodes {
		if m := missing(t, n.client(2), items); len(m) > 0 {
			t.Fatalf("node %s lost %d acknowledged items, e.g. %v", n.addr, len(m), m[:min(5, len(m))])
		}
	}
	t.Logf("converged: %v", want)
}

// TestClusterLeaderKills: continuous writes to all three nodes while the
// leader is killed with kill -9 and restarted, three times. No read sent
// after an acknowledged add answers 0; in the end every acknowledged item
// answers 1 on every node and every filter is byte-identical everywhere.
func TestClusterLeaderKills(t *testing.T) {
	nodes := startCluster(t, []string{"127.0.0.1", "127.0.0.1", "127.0.0.1"})
	reserveLoadKeys(t, leaderOf(t, nodes).client(2))
	_, a, end := traffic(t, nodes)
	for round := 0; round < 3; round++ {
		before := a.n.Load()
		waitFor(t, 30*time.Second, "writes to progress", func() bool { return a.n.Load() > before+300 })
		leader := leaderOf(t, nodes)
		leader.kill()
		newLeader := leaderOf(t, without(nodes, leader))
		t.Logf("round %d: killed leader %s, new leader %s", round, leader.addr, newLeader.addr)
		leader.launch()
	}
	before := a.n.Load()
	waitFor(t, 30*time.Second, "writes after the last restart", func() bool { return a.n.Load() > before+300 })
	end()
	converged(t, nodes, a)
}

// traffic starts a writer and a linearizable reader on every node; end
// stops them and fails the test if a read answered 0 for an add
// acknowledged before it.
func traffic(t *testing.T, nodes []*node) (h *history, a *acked, end func()) {
	h, a = &history{}, &acked{items: map[string][]string{}}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for i, n := range nodes {
		wg.Add(2)
		go writer(n, fmt.Sprintf("w%d", i), h, a, stop, &wg)
		go reader(t, n, h, uint64(i+1), stop, &wg)
	}
	return h, a, func() {
		t.Helper()
		close(stop)
		wg.Wait()
		t.Logf("%d acknowledged adds, %d linearizable reads checked", a.n.Load(), h.reads.Load())
		if h.bad.Load() > 0 {
			t.Fatalf("%d reads answered 0 for acknowledged items", h.bad.Load())
		}
	}
}

// TestFollowerWipeRejoins: a follower whose data directory is wiped
// rejoins, catches up from a snapshot (the log it missed is truncated) and
// converges.
func TestFollowerWipeRejoins(t *testing.T) {
	nodes := startCluster(t, []string{"127.0.0.1", "127.0.0.1", "127.0.0.1"},
		"--snapshot-threshold", "100", "--trailing-logs", "20", "--flush-interval", "200ms")
	leader := leaderOf(t, nodes)
	reserveLoadKeys(t, leader.client(2))
	a := &acked{items: map[string][]string{}}
	load(leader.client(2), a, "before:", 3000, make(chan struct{}))
	follower := without(nodes, leader)[0]
	follower.kill()
	if err := exec.Command("rm", "-rf", follower.dataDir).Run(); err != nil {
		t.Fatal(err)
	}
	load(leader.client(2), a, "during:", 6000, make(chan struct{}))
	follower.args = append(follower.args, "--join", leader.addr)
	follower.launch()
	load(leader.client(2), a, "after:", 1000, make(chan struct{}))
	converged(t, nodes, a)
	if snaps, _ := os.ReadDir(follower.dataDir + "/snapshots"); len(snaps) == 0 {
		t.Fatal("the wiped follower caught up without a snapshot; the test did not exercise one")
	}
}

// partition drops all traffic between isolated and the other addresses
// with nftables, until the returned function heals it.
func partition(t *testing.T, isolated string, others []string) func() {
	t.Helper()
	nft := needTool(t, "nft", "nftables")
	table := fmt.Sprintf("bfserver_test_%d", time.Now().UnixNano()%1e9)
	set := strings.Join(others, ", ")
	script := fmt.Sprintf(`table inet %s {
	chain out {
		type filter hook output priority 0; policy accept;
		ip saddr %s ip daddr { %s } drop
		ip saddr { %s } ip daddr %s drop
	}
}
`, table, isolated, set, set, isolated)
	cmd := exec.Command(nft, "-f", "-")
	cmd.Stdin = strings.NewReader(script)
	if out, err := cmd.CombinedOutput(); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("nftables rules cannot be installed (%v): %s", err, out)
		}
		t.Skipf("nftables rules cannot be installed here (needs root) (%v): %s", err, out)
	}
	healed := false
	heal := func() {
		if !healed {
			healed = true
			exec.Command(nft, "delete", "table", "inet", table).Run()
		}
	}
	t.Cleanup(heal)
	return heal
}

func hostOf(addr string) string {
	h, _, _ := net.SplitHostPort(addr)
	return h
}

// TestPartitionedLeader: with the leader cut off from its peers (nftables
// on 127.0.0.11–13), it acknowledges no write and, once its lease is over,
// answers no read, while the majority elects a new leader and goes on;
// readers on every node, running throughout, never read 0 for an
// acknowledged add; after the partition heals, every node converges.
func TestPartitionedLeader(t *testing.T) {
	ips := []string{"127.0.0.11", "127.0.0.12", "127.0.0.13"}
	nodes := startCluster(t, ips)
	leader := leaderOf(t, nodes)
	lc := leader.client(2)
	reserveLoadKeys(t, lc)
	a := &acked{items: map[string][]string{}}
	load(lc, a, "before:", 300, make(chan struct{}))

	others := without(nodes, leader)
	var otherIPs []string
	for _, n := range others {
		otherIPs = append(otherIPs, hostOf(n.addr))
	}
	// Writes through the other nodes and reads on every node run across
	// the partition: the isolated leader may serve reads while its lease
	// lasts, and none of them may answer 0 for an add acknowledged before
	// the read was sent.
	h := &history{}
	stopWrites, stopReads := make(chan struct{}), make(chan struct{})
	var writers, readers sync.WaitGroup
	for i, n := range others {
		writers.Add(1)
		go writer(n, fmt.Sprintf("w%d", i), h, a, stopWrites, &writers)
	}
	for i, n := range nodes {
		readers.Add(1)
		go reader(t, n, h, uint64(i+1), stopReads, &readers)
	}
	var onceW, onceR sync.Once
	endWrites := func() { onceW.Do(func() { close(stopWrites); writers.Wait() }) }
	endReads := func() { onceR.Do(func() { close(stopReads); readers.Wait() }) }
	defer func() { endWrites(); endReads() }()
	waitFor(t, 30*time.Second, "writes acknowledged before the partition", func() bool { return h.reads.Load() > 100 })
	heal := partition(t, hostOf(leader.addr), otherIPs)

	// The majority elects a new leader and accepts writes.
	newLeader := leaderOf(t, others)
	nc := newLeader.client(2)
	if err := untilServed(t, nc, "BF.ADD", "scaling", "after-partition").Err(); err != nil {
		t.Fatalf("majority refused a write: %v", err)
	}
	a.add("scaling", "after-partition")

	// The isolated node acknowledges nothing, and never answers a stale 0
	// for the item the majority just added.
	for i := 0; i < 5; i++ {
		cx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		err := lc.Do(cx, "BF.ADD", "scaling", fmt.Sprintf("isolated:%d", i)).Err()
		cancel()
		if err == nil {
			t.Fatalf("isolated node acknowledged write %d", i)
		}
		cx, cancel = context.WithTimeout(context.Background(), 15*time.Second)
		v, err := lc.Do(cx, "BF.EXISTS", "scaling", "after-partition").Int64()
		cancel()
		if err == nil {
			t.Fatalf("isolated node answered a read (%d) it cannot know is current", v)
		}
		if !strings.HasPrefix(err.Error(), "CLUSTERDOWN") && !strings.HasPrefix(err.Error(), "TRYAGAIN") {
			t.Fatalf("isolated node's refusal is not Redis-style: %v", err)
		}
	}
	load(nc, a, "majority:", 300, make(chan struct{}))
	heal()
	// Readers go on while the isolated node catches up; then the digests
	// are compared with no writes in flight.
	endWrites()
	converged(t, nodes, a)
	endReads()
	if h.bad.Load() != 0 {
		t.Fatalf("%d reads answered 0 for an acknowledged add", h.bad.Load())
	}
	t.Logf("%d reads of acknowledged items across the partition", h.reads.Load())
}

// TestReadLease checks what a leader's lease saves and what it keeps: with
// leases on (the default), sequential linearizable reads on the leader and
// on a follower run almost no heartbeat rounds (the lease is renewed
// through the log instead) and still read every acknowledged add; with
// --read-lease=false every read runs one.
func TestReadLease(t *testing.T) {
	const reads = 200
	rounds := func(n *node) int {
		v, err := strconv.Atoi(replInfo(n)["leader_rounds"])
		if err != nil {
			t.Fatalf("INFO replication leader_rounds: %v", err)
		}
		return v
	}
	for _, cfg := range []struct{ lease, follower bool }{{true, true}, {true, false}, {false, true}} {
		lease, flease := cfg.lease, cfg.lease && cfg.follower
		t.Run(fmt.Sprintf("lease=%v,follower=%v", cfg.lease, cfg.follower), func(t *testing.T) {
			nodes := startCluster(t, []string{"127.0.0.1", "127.0.0.1", "127.0.0.1"},
				fmt.Sprintf("--read-lease=%v", cfg.lease), fmt.Sprintf("--follower-read-lease=%v", cfg.follower))
			leader := leaderOf(t, nodes)
			if got := replInfo(leader)["read_lease"]; got != fmt.Sprint(lease) {
				t.Fatalf("INFO read_lease %q, want %v", got, lease)
			}
			follower := without(nodes, leader)[1]
			lc, fc := leader.client(2), follower.client(2)
			items := map[*redis.Client][]string{}
			for _, c := range []*redis.Client{lc, fc} {
				for i := 0; i < reads; i++ {
					item := fmt.Sprintf("item-%p-%d", c, i)
					if err := c.Do(ctx(t), "BF.ADD", "f", item).Err(); err != nil {
						t.Fatal(err)
					}
					items[c] = append(items[c], item)
				}
			}
			if lease {
				// The first reads confirm leadership with a round and
				// start the lease; wait until a read runs without one.
				waitFor(t, 10*time.Second, "a lease", func() bool {
					before := rounds(leader)
					if err := lc.Do(ctx(t), "BF.EXISTS", "f", "x").Err(); err != nil {
						t.Fatal(err)
					}
					return rounds(leader) == before
				})
			}
			// Each node reads what the other acknowledged, one read at a time.
			before, began := rounds(leader), time.Now()
			for _, rd := range [][2]*redis.Client{{fc, lc}, {lc, fc}} {
				for _, item := range items[rd[1]] {
					v, err := rd[0].Do(ctx(t), "BF.EXISTS", "f", item).Int()
					if err != nil || v != 1 {
						t.Fatalf("read after acknowledged add %q: %d, %v", item, v, err)
					}
				}
			}
			spent := rounds(leader) - before
			// A lease lasts 250 ms and is renewed once half is gone, so its
			// rounds follow the clock, not the reads.
			limit := 2 + int(time.Since(began)/(50*time.Millisecond))
			t.Logf("%d linearizable reads ran %d heartbeat rounds in %v", 2*reads, spent, time.Since(began))
			if lease && spent > limit {
				t.Fatalf("with a lease, %d reads ran %d heartbeat rounds (at most %d expected)", 2*reads, spent, limit)
			}
			if !lease && spent < 2*reads {
				t.Fatalf("without a lease, %d reads ran only %d heartbeat rounds", 2*reads, spent)
			}
			renewals := replInfo(leader)["lease_renewals"]
			if lease == (renewals == "0") {
				t.Fatalf("lease %v, yet INFO lease_renewals:%s", lease, renewals)
			}

			// A follower reading under its own lease asks the leader
			// nothing per read, and still reads every write the leader
			// acknowledged just before.
			rpcs := func() int {
				v, err := strconv.Atoi(replInfo(follower)["read_index_requests"])
				if err != nil {
					t.Fatalf("INFO replication read_index_requests: %v", err)
				}
				return v
			}
			if flease {
				waitFor(t, 10*time.Second, "a follower lease", func() bool {
					if err := fc.Do(ctx(t), "BF.EXISTS", "f", "x").Err(); err != nil {
						t.Fatal(err)
					}
					return replInfo(follower)["follower_lease"] == "true" && replInfo(leader)["lease_holders"] == "1"
				})
			}
			before = rpcs()
			for i := 0; i < reads; i++ {
				item := fmt.Sprintf("fresh-%d", i)
				if err := lc.Do(ctx(t), "BF.ADD", "f", item).Err(); err != nil {
					t.Fatal(err)
				}
				v, err := fc.Do(ctx(t), "BF.EXISTS", "f", item).Int()
				if err != nil || v != 1 {
					t.Fatalf("follower read after the leader acknowledged %q: %d, %v", item, v, err)
				}
			}
			asked := rpcs() - before
			t.Logf("%d follower reads, each after a write on the leader, sent %d read-index requests", reads, asked)
			// A lease can lapse between renewals when the machine is
			// loaded (the follower renews only once caught up), and each
			// lapse costs a request: a few, never one per read.
			if flease && asked > reads/20 {
				t.Fatalf("with a follower lease, %d reads sent %d read-index requests", reads, asked)
			}
			if !flease && asked < reads {
				t.Fatalf("without leases, %d follower reads sent only %d read-index requests", reads, asked)
			}
		})
	}
}

// TestLeaseHolderKilled: a follower holding a read lease is killed with
// kill -9. Writes on the leader keep being acknowledged (held back at most
// until the lease ends), the other follower reads each of them right after
// its acknowledgement, and the killed follower, restarted, reads them all.
func TestLeaseHolderKilled(t *testing.T) {
	nodes := startCluster(t, []string{"127.0.0.1", "127.0.0.1", "127.0.0.1"})
	leader := leaderOf(t, nodes)
	lc := leader.client(2)
	reserveLoadKeys(t, lc)
	followers := without(nodes, leader)
	holder, other := followers[0], followers[1]
	hc, oc := holder.client(2), other.client(2)
	waitFor(t, 10*time.Second, "a follower lease", func() bool {
		if err := hc.Do(ctx(t), "BF.EXISTS", "fixed", "x").Err(); err != nil {
			t.Fatal(err)
		}
		return replInfo(holder)["follower_lease"] == "true"
	})
	a := &acked{items: map[string][]string{}}
	write := func(item string) {
		if err := lc.Do(ctx(t), "BF.ADD", "fixed", item).Err(); err != nil {
			t.Errorf("BF.ADD %s on the leader: %v", item, err)
			return
		}
		a.add("fixed", item)
		v, err := oc.Do(ctx(t), "BF.EXISTS", "fixed", item).Int()
		if err != nil || v != 1 {
			t.Errorf("the other follower read %s, acknowledged just before: %d, %v", item, v, err)
		}
	}
	for i := 0; i < 50; i++ {
		write(fmt.Sprintf("before-%d", i))
	}
	holder.kill()
	began := time.Now()
	write("after-0")
	t.Logf("first write after the holder died took %v (held back until its lease ended)", time.Since(began))
	// Writers in parallel, so that writes meet the other follower's lease
	// renewals at every point.
	var wg sync.WaitGroup
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 1; i < 200; i++ {
				write(fmt.Sprintf("after-%d-%d", w, i))
			}
		}()
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	waitFor(t, 10*time.Second, "the leader to drop the dead holder", func() bool {
		return replInfo(leader)["lease_holders"] == "0"
	})
	holder.launch()
	waitFor(t, 30*time.Second, "the restarted follower to know the leader", func() bool {
		return replInfo(holder)["raft_leader_addr"] != ""
	})
	hc = holder.client(2)
	for _, item := range a.snapshot()["fixed"] {
		v, err := hc.Do(ctx(t), "BF.EXISTS", "fixed", item).Int()
		if err != nil || v != 1 {
			t.Fatalf("the restarted follower read %s: %d, %v", item, v, err)
		}
	}
	converged(t, nodes, a)
}
