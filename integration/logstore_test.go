package integration

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// withStore is n's flags with --raft-log-store set to store (none: the
// default).
func withStore(n *node, store string) {
	if i := slices.Index(n.args, "--raft-log-store"); i >= 0 {
		n.args = slices.Delete(slices.Clone(n.args), i, i+2)
	}
	if store != "" {
		n.args = append(n.args, "--raft-log-store", store)
	}
}

// storeOf is the log store a node reports, and checks that its data
// directory holds that store alone.
func storeOf(t *testing.T, n *node) string {
	t.Helper()
	s := infoOf(n, "writestages")["raft_log_store"]
	bolt, wal := exists(filepath.Join(n.dataDir, "raft.db")), exists(filepath.Join(n.dataDir, "wal"))
	if (s == "wal") != (wal && !bolt) || (s == "bolt") != (bolt && !wal) {
		t.Fatalf("%s reports raft_log_store %q; raft.db there: %v, wal: %v", n.addr, s, bolt, wal)
	}
	return s
}

// TestLogStoreUpgrade: a data directory the previous log store wrote
// (raft-boltdb's raft.db, as every build before raft-wal), its node killed
// with kill -9 in the middle of a load, starts with the default store
// (raft-wal): its log is moved, every acknowledged add is there, and new
// writes work, through another kill -9 on the new store. Then three nodes
// on raft.db, upgraded one at a time by kill -9 and a start on the default
// while writes go on to every node, one left on raft.db: the stores are
// each node's own, and in the end every node holds every acknowledged add
// and identical filters.
func TestLogStoreUpgrade(t *testing.T) {
	t.Run("single node", func(t *testing.T) {
		n := start(t, "--raft-log-store", "bolt", "--flush-interval", "1h")
		c := n.client(2)
		reserveLoadKeys(t, c)
		a := &acked{items: map[string][]string{}}
		for round, store := range []string{"bolt", ""} {
			if got := storeOf(t, n); got != map[string]string{"bolt": "bolt", "": "wal"}[store] {
				t.Fatalf("round %d: the node runs on %q", round, got)
			}
			stop := make(chan struct{})
			done := make(chan struct{})
			go func() {
				load(c, a, fmt.Sprintf("r%d:", round), 60000, stop)
				close(done)
			}()
			before := a.n.Load()
			waitFor(t, 60*time.Second, "the load to progress", func() bool { return a.n.Load() > before+15000 })
			n.kill()
			close(stop)
			<-done
			t.Logf("round %d: killed on %q after %d acknowledged adds", round, store, a.n.Load())
			withStore(n, "")
			n.launch()
			c = n.client(2)
			if m := missing(t, c, a.snapshot()); len(m) > 0 {
				t.Fatalf("round %d: %d acknowledged items lost, e.g. %v", round, len(m), m[:min(5, len(m))])
			}
		}
		load(c, a, "after:", 3000, make(chan struct{}))
		if m := missing(t, c, a.snapshot()); len(m) > 0 || storeOf(t, n) != "wal" {
			t.Fatalf("after the upgrade: %d lost, store %s", len(m), storeOf(t, n))
		}
		// INFO writestages counted the writes, is given only when named,
		// and CONFIG RESETSTAT starts it afresh.
		if st := infoOf(n, "writestages")["stage_total"]; !strings.HasPrefix(st, "count=") || strings.HasPrefix(st, "count=0,") {
			t.Fatalf("stage_total %q after 3000 writes", st)
		}
		if all := c.Info(ctx(t), "all").Val(); strings.Contains(all, "Writestages") || strings.Contains(all, "stage_total") {
			t.Fatal("INFO all lists bfserver's own writestages")
		}
		if err := c.Do(ctx(t), "CONFIG", "RESETSTAT").Err(); err != nil {
			t.Fatal(err)
		}
		if st := infoOf(n, "writestages")["stage_total"]; !strings.HasPrefix(st, "count=0,") {
			t.Fatalf("stage_total %q after CONFIG RESETSTAT", st)
		}
	})
	t.Run("cluster", func(t *testing.T) {
		nodes := startCluster(t, []string{"127.0.0.1", "127.0.0.1", "127.0.0.1"}, "--raft-log-store", "bolt")
		reserveLoadKeys(t, leaderOf(t, nodes).client(2))
		_, a, end := traffic(t, nodes)
		// A follower first, then the leader; the third stays on raft.db.
		leader := leaderOf(t, nodes)
		follower := without(nodes, leader)[0]
		for _, n := range []*node{follower, leader} {
			before := a.n.Load()
			waitFor(t, 30*time.Second, "writes to progress", func() bool { return a.n.Load() > before+300 })
			n.kill()
			withStore(n, "")
			n.launch()
			waitFor(t, 30*time.Second, "the upgraded node to apply", func() bool { return replInfo(n)["raft_ready"] == "true" })
		}
		before := a.n.Load()
		waitFor(t, 30*time.Second, "writes after the upgrades", func() bool { return a.n.Load() > before+300 })
		end()
		converged(t, nodes, a)
		var stores []string
		for _, n := range nodes {
			stores = append(stores, storeOf(t, n))
		}
		slices.Sort(stores)
		if fmt.Sprint(stores) != "[bolt wal wal]" {
			t.Fatalf("stores after the upgrade: %v", stores)
		}
	})
}
