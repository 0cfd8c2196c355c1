package main

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// clusterSecret is the -nodes 3 cluster's shared secret (a join needs
// one; the nodes listen on loopback only).
const clusterSecret = "bench-stall-loopback-cluster-secret"

// cluster is -nodes 3: n1 bootstraps, n2 and n3 join through it, every
// node with the one-node case's durability flags.
type cluster struct {
	nodes    []*server
	leader   *server
	follower *server // the follower probed and given half the steady load
}

// startCluster starts the three nodes on loopback, RESP on -port+3,
// +5, +7 and Raft on the port after each, and waits until every node
// counts three members and one of them leads.
func startCluster() *cluster {
	cl := &cluster{}
	for i := range 3 {
		port := *basePort + 3 + 2*i
		extra := []string{"--node-id", fmt.Sprintf("n%d", i+1), "--cluster-secret", clusterSecret}
		if i > 0 {
			extra = append(extra, "--join", fmt.Sprintf("127.0.0.1:%d", cl.nodes[0].port))
		}
		cl.nodes = append(cl.nodes, startBF(fmt.Sprintf("n%d", i+1), port, port+1, extra...))
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		members, leaders := 0, 0
		for _, n := range cl.nodes {
			info := n.infoMap("replication")
			if info["raft_num_members"] == "3" {
				members++
			}
			if info["raft_role"] == "leader" {
				leaders++
				cl.leader = n
			}
		}
		if members == 3 && leaders == 1 {
			break
		}
		if time.Now().After(deadline) {
			check(fmt.Errorf("the cluster did not form: %d nodes count 3 members, %d lead", members, leaders))
		}
		time.Sleep(50 * time.Millisecond)
	}
	for _, n := range cl.nodes {
		if n != cl.leader {
			cl.follower = n
			break
		}
	}
	return cl
}

func (cl *cluster) stop() {
	for i := len(cl.nodes) - 1; i >= 0; i-- {
		cl.nodes[i].stop()
	}
}

// infoMap reads INFO's sections into a map, empty when the node does not
// answer.
func (s *server) infoMap(sections ...string) map[string]string {
	c := s.client(1)
	defer c.Close()
	return infoFields(c, sections...)
}

func infoFields(c *redis.Client, sections ...string) map[string]string {
	m := map[string]string{}
	txt, err := c.Info(context.Background(), sections...).Result()
	if err != nil {
		return m
	}
	for _, line := range strings.Split(txt, "\r\n") {
		if k, v, ok := strings.Cut(line, ":"); ok {
			m[k] = v
		}
	}
	return m
}

// nodeWatch is what the steady phase's timeline follows on one node:
// its image tables, its snapshots (LASTSAVE, and SAVE/BGSAVE's count) and
// which leader, in which term, it sees.
type nodeWatch struct {
	s               *server
	c               *redis.Client
	tables0, tables int
	written0        int64
	save, saves     string
	leader, term    string
	snapshots       int
	saves0          string
	lastInfo        map[string]string
}

func newWatch(s *server) *nodeWatch {
	w := &nodeWatch{s: s, c: s.client(1)}
	m := infoFields(w.c, "persistence", "replication")
	w.tables0, _ = strconv.Atoi(m["image_tables_ingested"])
	w.tables = w.tables0
	w.written0, _ = strconv.ParseInt(m["image_table_bytes_written"], 10, 64)
	w.save, w.saves, w.saves0 = m["rdb_last_save_time"], m["rdb_saves"], m["rdb_saves"]
	w.leader, w.term = m["raft_leader_id"], m["raft_term"]
	w.lastInfo = m
	return w
}

// poll reads the node's INFO and returns what changed since the last
// poll, as timeline events at el.
func (w *nodeWatch) poll(el time.Duration) []string {
	m := infoFields(w.c, "persistence", "replication")
	if len(m) == 0 {
		return []string{fmt.Sprintf("%s did not answer INFO at +%.1f s", w.s.name, el.Seconds())}
	}
	w.lastInfo = m
	var ev []string
	at := fmt.Sprintf("at +%.1f s", el.Seconds())
	if n, _ := strconv.Atoi(m["image_tables_ingested"]); n != w.tables {
		w.tables = n
		ev = append(ev, fmt.Sprintf("%s table %d %s", w.s.name, n-w.tables0, at))
	}
	if m["rdb_last_save_time"] != w.save || m["rdb_saves"] != w.saves {
		w.save, w.saves = m["rdb_last_save_time"], m["rdb_saves"]
		w.snapshots++
		ev = append(ev, fmt.Sprintf("%s snapshot done %s", w.s.name, at))
	}
	if m["raft_leader_id"] != w.leader || m["raft_term"] != w.term {
		w.leader, w.term = m["raft_leader_id"], m["raft_term"]
		ev = append(ev, fmt.Sprintf("%s sees leader %q in term %s %s", w.s.name, w.leader, w.term, at))
	}
	return ev
}

// termLeader is a leader a node saw, and in which term.
type termLeader struct {
	term int
	id   string
}

// runCluster is run for -nodes 3: the scenario is loaded through the
// leader; in the steady phase the write load is split between the leader
// and a follower (which forwards its writes), and two depth-1 probes time
// BF.ADD, one through each.
func runCluster(cl *cluster, sc string) result {
	ctx := context.Background()
	c := cl.leader.client(1)
	defer c.Close()
	var roles []string
	for _, n := range cl.nodes {
		role := "follower"
		switch n {
		case cl.leader:
			role = "leader: loaded, probed, half the steady load, BGSAVE"
		case cl.follower:
			role = "follower: probed, half the steady load"
		}
		roles = append(roles, n.name+" "+role)
	}
	fmt.Printf("== %s, bfserver, 3 nodes (%s)\n", sc, strings.Join(roles, "; "))
	before := map[*server]map[string]string{}
	for _, n := range cl.nodes {
		before[n] = n.infoMap("replication")
	}
	pl := startProbe(cl.leader, "probe:leader")
	pf := startProbe(cl.follower, "probe:follower")
	probes := []*probe{pl, pf}
	began := time.Now()
	mk := loadScenario(cl.leader, c, sc, began)
	loaded := time.Since(began)
	loadEnd := []int{pl.count(), pf.count()}
	targets := []*server{cl.leader, cl.follower}
	settle(cl.nodes)
	burstFrom := []int{pl.count(), pf.count()}
	rate := steadyRate(targets, mk)
	steadyFrom := []int{pl.count(), pf.count()}
	var watches []*nodeWatch
	for _, n := range cl.nodes {
		nc := n.client(1)
		nc.Do(ctx, "CONFIG", "RESETSTAT") // INFO writestages covers the steady phase
		nc.Close()
		watches = append(watches, newWatch(n))
	}
	stop := make(chan struct{})
	wg, sent := steadyLoad(targets, rate, mk, stop)
	steadyStart := time.Now()
	var events []string
	var leaders []termLeader
	for _, w := range watches {
		if w.leader != "" {
			t, _ := strconv.Atoi(w.term)
			leaders = append(leaders, termLeader{t, w.leader})
		}
	}
	saved := false
	lw := watches[0]
	for _, w := range watches {
		if w.s == cl.leader {
			lw = w
		}
	}
	for {
		time.Sleep(100 * time.Millisecond)
		el := time.Since(steadyStart)
		flushed := true
		for _, w := range watches {
			events = append(events, w.poll(el)...)
			if w.leader != "" {
				t, _ := strconv.Atoi(w.term)
				leaders = append(leaders, termLeader{t, w.leader})
			}
			flushed = flushed && w.tables-w.tables0 >= *flushes+1
		}
		if !saved && el > *flushEvery+*flushEvery/2 {
			saved = true
			events = append(events, fmt.Sprintf("BGSAVE on %s at +%.1f s", cl.leader.name, el.Seconds()))
			if err := c.Do(ctx, "BGSAVE").Err(); err != nil {
				fmt.Printf("   BGSAVE: %v\n", err)
			}
		}
		// The leader's BGSAVE has ended once its count of saves moved
		// (or it failed).
		snapped := lw.saves != lw.saves0 || lw.lastInfo["rdb_last_bgsave_status"] == "err"
		if saved && snapped && flushed && el > time.Duration(*flushes)**flushEvery {
			break
		}
		if el > 10*time.Minute {
			fmt.Println("   gave up waiting for flushes")
			break
		}
	}
	close(stop)
	wg.Wait()
	for _, p := range probes {
		p.finish()
	}
	steady := time.Since(steadyStart)
	fmt.Printf("   load %.1f s, steady %.1f s at %d adds/s (half through %s, half through %s)\n",
		loaded.Seconds(), steady.Seconds(), rate, cl.leader.name, cl.follower.name)
	fmt.Printf("   steady load: %s\n", sent.report(steady))
	for i, p := range probes {
		via := "leader " + cl.leader.name
		if i == 1 {
			via = "follower " + cl.follower.name
		}
		p.mu.Lock()
		steadyFrom[i] = p.begunBy(steadyFrom[i], steadyStart)
		fmt.Printf("   probe through the %s: %d writes, longest %.1f ms (at +%.1f s); errors %v\n",
			via, len(p.lat), ms(p.worst), p.worstT.Sub(began).Seconds(), p.errs)
		fmt.Printf("     in the load phase: %s\n", stats(p.lat[:loadEnd[i]]))
		if burstFrom[i] > loadEnd[i] {
			fmt.Printf("     while the load's flushes settled: %s\n", stats(p.lat[loadEnd[i]:burstFrom[i]]))
		}
		if steadyFrom[i] > burstFrom[i] {
			fmt.Printf("     during the throughput burst: %s\n", stats(p.lat[burstFrom[i]:steadyFrom[i]]))
		}
		fmt.Printf("     in the steady phase: %s\n", stats(p.lat[steadyFrom[i]:]))
		fmt.Printf("     longest in the steady phase: %s\n", p.longest(steadyFrom[i], steadyStart))
		p.mu.Unlock()
	}
	if len(events) > 0 {
		fmt.Printf("   timeline (each node flushes and snapshots on its own): %s\n", strings.Join(events, ", "))
	}
	// A change of leader is a term whose leader differs from the one of
	// the term before it seen, whichever node saw them.
	byTerm := map[int]string{}
	for _, t := range leaders {
		byTerm[t.term] = t.id
	}
	var seen []string
	changes, prev := 0, ""
	for _, t := range slices.Sorted(maps.Keys(byTerm)) {
		if prev != "" && byTerm[t] != prev {
			changes++
		}
		prev = byTerm[t]
		seen = append(seen, fmt.Sprintf("term %d %s", t, prev))
	}
	// Before the load and at the end: a change in the load phase or the
	// burst shows as another leader or term.
	var terms []string
	same := true
	for _, n := range cl.nodes {
		after := n.infoMap("replication")
		b0 := before[cl.nodes[0]]
		same = same && before[n]["raft_leader_id"] == b0["raft_leader_id"] && before[n]["raft_term"] == b0["raft_term"] &&
			after["raft_leader_id"] == b0["raft_leader_id"] && after["raft_term"] == b0["raft_term"]
		terms = append(terms, fmt.Sprintf("%s saw leader %s in term %s, then %s in term %s", n.name,
			before[n]["raft_leader_id"], before[n]["raft_term"], after["raft_leader_id"], after["raft_term"]))
	}
	if same {
		b0 := before[cl.nodes[0]]
		terms = []string{fmt.Sprintf("every node saw leader %s in term %s before the load and at the end", b0["raft_leader_id"], b0["raft_term"])}
	}
	fmt.Printf("   leader changes seen in the steady phase: %d (leaders seen: %s); %s\n", changes, strings.Join(seen, ", "), strings.Join(terms, "; "))
	for _, w := range watches {
		m := infoFields(w.c, "persistence")
		n := w.tables - w.tables0
		written, _ := strconv.ParseInt(m["image_table_bytes_written"], 10, 64)
		per := 0.0
		if n > 0 {
			per = float64(written-w.written0) / float64(n) / (1 << 20)
		}
		fmt.Printf("   %s: %d image tables in the steady phase, %.1f MiB written per table; %d snapshots; copy-on-write (the last cut): %s lines in %s chunks copied, peak %s bytes; %s budget waits, %s spilled; %s\n",
			w.s.name, n, per, w.snapshots, m["image_cut_copied_lines"], m["image_cut_copied_chunks"], m["image_cut_copied_peak_bytes"], m["image_cut_budget_waits"], m["image_cut_spilled_chunks"], w.s.memLine(w.c, sc))
		// Only a node that led times writes (forwarded ones too).
		if m := infoFields(w.c, "writestages"); !strings.HasPrefix(m["stage_total"], "count=0,") {
			printStages(w.c, w.s.name+" ")
		} else {
			fmt.Printf("   %s writestages: none (a write's stages are timed on the leader, forwarded ones too)\n", w.s.name)
		}
		w.c.Close()
	}
	return result{steady: steady}
}
