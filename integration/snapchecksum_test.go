package integration

import (
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"
)

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// TestSnapshotDamagedInTransit: a wiped follower of three rejoins behind
// the leader's compacted log, so it must install a snapshot; the leader's
// first stream to it has one byte changed on its way out (failpoint
// snapshot-send, after the leader's snapshot store checked its own CRC).
// The follower refuses it (INFO persistence image_snapshots_refused), the
// leader sends it again, and the follower installs the intact one: in the
// end every node's filters are byte-identical and every acknowledged add
// answers 1 everywhere, and no read on the follower ever answered 0 for
// an add acknowledged before it, throughout.
func TestSnapshotDamagedInTransit(t *testing.T) {
	bin := failpointBinary(t)
	fpDirs := map[*node]string{}
	nodes := startClusterWith(t, []string{"127.0.0.1", "127.0.0.1", "127.0.0.1"}, nil, func(_ int, n *node) {
		dir := t.TempDir()
		fpDirs[n] = dir
		n.bin = bin
		n.env = []string{"BFSERVER_FAILPOINT_DIR=" + dir}
	}, "--snapshot-threshold", "100", "--trailing-logs", "20", "--flush-interval", "200ms")
	leader := leaderOf(t, nodes)
	reserveLoadKeys(t, leader.client(2))
	a := &acked{items: map[string][]string{}}
	load(leader.client(2), a, "before:", 3000, make(chan struct{}))
	follower := without(nodes, leader)[0]
	follower.kill()
	if err := os.RemoveAll(follower.dataDir); err != nil {
		t.Fatal(err)
	}
	load(leader.client(2), a, "during:", 6000, make(chan struct{}))
	// Entries one add each, then a snapshot (SAVE) that truncates the
	// log to the last --trailing-logs: the wiped follower cannot catch up
	// from the log.
	lc := leader.client(2)
	for i := range 100 {
		item := "single:" + strconv.Itoa(i)
		if err := lc.Do(ctx(t), "BF.ADD", "scaling", item).Err(); err != nil {
			t.Fatal(err)
		}
		a.add("scaling", item)
	}
	if err := lc.Do(ctx(t), "SAVE").Err(); err != nil {
		t.Fatal(err)
	}

	// The leader's next snapshot stream loses a byte to the failpoint.
	arm := filepath.Join(fpDirs[leader], "snapshot-send.arm")
	hit := filepath.Join(fpDirs[leader], "snapshot-send.hit")
	if err := os.WriteFile(arm, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	// Writes go on through the leader, and reads of what they acknowledged
	// through the follower, from before it rejoins until it converged.
	h := &history{}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go writer(leader, "w", h, a, stop, &wg)
	follower.args = append(follower.args, "--join", leader.addr)
	follower.launch()
	wg.Add(1)
	go reader(t, follower, h, 7, stop, &wg)

	waitFor(t, 60*time.Second, "the leader to send a damaged snapshot", func() bool { return exists(hit) })
	if exists(arm) {
		t.Fatal("the failpoint is still armed after its hit")
	}
	persistence := func() (installed, refused uint64, ok bool) {
		info := infoOf(follower, "persistence")
		i, err1 := strconv.ParseUint(info["image_snapshots_installed"], 10, 64)
		r, err2 := strconv.ParseUint(info["image_snapshots_refused"], 10, 64)
		return i, r, err1 == nil && err2 == nil
	}
	waitFor(t, 60*time.Second, "the follower to refuse the damaged snapshot", func() bool {
		_, refused, ok := persistence()
		return ok && refused >= 1
	})
	waitFor(t, 60*time.Second, "the follower to install the snapshot sent again", func() bool {
		installed, _, ok := persistence()
		return ok && installed >= 1
	})
	before := a.n.Load()
	waitFor(t, 30*time.Second, "writes after the install", func() bool { return a.n.Load() > before+300 })
	close(stop)
	wg.Wait()
	if h.bad.Load() > 0 {
		t.Fatalf("%d reads on the follower answered 0 for acknowledged items", h.bad.Load())
	}
	if h.reads.Load() == 0 {
		t.Fatal("no read on the follower was checked")
	}
	converged(t, nodes, a)
	installed, refused, _ := persistence()
	t.Logf("follower: %d snapshots installed, %d refused; %d acknowledged adds, %d reads checked on it",
		installed, refused, a.n.Load(), h.reads.Load())
	if snaps, _ := os.ReadDir(filepath.Join(follower.dataDir, "snapshots")); len(snaps) == 0 {
		t.Fatal("the follower holds no snapshot; the test did not exercise one")
	}
}
