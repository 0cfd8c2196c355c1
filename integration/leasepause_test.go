package integration

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// TestLeaseReadPausedLeader stops a leader (SIGSTOP) between its lease
// check and its reply to a BF.EXISTS, lets the others elect a new leader
// and acknowledge the add of the item asked about, cuts the old leader
// off from them (nftables on 127.0.0.11–13, so that it cannot learn of
// the add) and lets it go on: the read must not answer "definitely not"
// for the add the new leader acknowledged while the old one was stopped.
// A failpoints build stops the read there (replication/failpoint_on.go:
// lease-read).
func TestLeaseReadPausedLeader(t *testing.T) {
	bin := failpointBinary(t)
	ips := []string{"127.0.0.11", "127.0.0.12", "127.0.0.13"}
	dirs := make([]string, 3)
	nodes := startClusterWith(t, ips, nil, func(i int, n *node) {
		dirs[i] = t.TempDir()
		n.bin, n.env = bin, []string{"BFSERVER_FAILPOINT_DIR=" + dirs[i]}
	}, "--read-lease=true", "--follower-read-lease=false")
	leader := leaderOf(t, nodes)
	dir := dirs[indexOf(nodes, leader)]
	lc := leader.client(2)
	if err := lc.Do(ctx(t), "BF.ADD", "guard", "present").Err(); err != nil {
		t.Fatal(err)
	}
	// Reads run under the lease once a round has started it.
	rounds := func() int {
		v, err := strconv.Atoi(replInfo(leader)["leader_rounds"])
		if err != nil {
			t.Fatalf("INFO replication leader_rounds: %v", err)
		}
		return v
	}
	waitFor(t, 10*time.Second, "a read under the lease", func() bool {
		before := rounds()
		if err := lc.Do(ctx(t), "BF.EXISTS", "guard", "present").Err(); err != nil {
			t.Fatal(err)
		}
		return rounds() == before
	})

	if err := os.WriteFile(filepath.Join(dir, "lease-read.arm"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	type reply struct {
		v   int64
		err error
	}
	got := make(chan reply, 1)
	go func() {
		v, err := lc.Do(ctx(t), "BF.EXISTS", "guard", "late").Int64()
		got <- reply{v, err}
	}()
	waitFor(t, 10*time.Second, "the read at the failpoint", func() bool {
		_, err := os.Stat(filepath.Join(dir, "lease-read.hit"))
		return err == nil
	})
	pid := leader.cmd.Process.Pid
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	resumed := false
	defer func() {
		if !resumed {
			syscall.Kill(pid, syscall.SIGCONT)
		}
	}()
	// The others elect a leader of their own and acknowledge the add.
	others := without(nodes, leader)
	next := leaderOf(t, others)
	if v, err := next.client(2).Do(ctx(t), "BF.ADD", "guard", "late").Int64(); err != nil || v != 1 {
		t.Fatalf("BF.ADD guard late on the new leader: %d, %v", v, err)
	}
	var rest []string
	for _, n := range others {
		rest = append(rest, hostOf(n.raftAddr))
	}
	partition(t, hostOf(leader.raftAddr), rest)
	syscall.Kill(pid, syscall.SIGCONT)
	resumed = true
	if err := os.WriteFile(filepath.Join(dir, "lease-read.release"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-got:
		// An error (the old leader could not confirm a read in time) is
		// allowed; "definitely not" is not.
		if r.err == nil && r.v != 1 {
			t.Fatalf("BF.EXISTS guard late on the paused leader answered %d after the new leader acknowledged the add", r.v)
		}
		t.Logf("paused leader's read: %d, %v", r.v, r.err)
	case <-time.After(30 * time.Second):
		t.Fatal("the paused leader's read did not answer")
	}
}

func indexOf(nodes []*node, one *node) int {
	for i, n := range nodes {
		if n == one {
			return i
		}
	}
	panic(fmt.Sprintf("node %s not in the cluster", one.addr))
}
