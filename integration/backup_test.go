package integration

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestOnlineBackup: BFBACKUP writes a consistent copy of a running node
// under load; bfserver restore makes a new node's data directory from it;
// the new node holds exactly the state at the backup (digests equal, none
// of the writes after it), serves writes, and a second node joins it and
// gets everything.
func TestOnlineBackup(t *testing.T) {
	src := start(t)
	c := src.client(2)
	for _, k := range []string{"b1", "b2"} {
		if err := c.Do(ctx(t), "BF.RESERVE", k, "0.001", "200000").Err(); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Do(ctx(t), "CF.RESERVE", "c1", "10000").Err(); err != nil {
		t.Fatal(err)
	}
	// Writers keep going during the backup: the copy is of one point.
	stop := make(chan struct{})
	done := make(chan int)
	go func() {
		i := 0
		for {
			select {
			case <-stop:
				done <- i
				return
			default:
			}
			c.Do(ctx(t), "BF.ADD", "b1", fmt.Sprint("during", i))
			i++
		}
	}()
	for i := 0; i < 2000; i++ {
		p := c.Pipeline()
		p.Do(ctx(t), "BF.ADD", "b2", fmt.Sprint("x", i))
		p.Do(ctx(t), "CF.ADD", "c1", fmt.Sprint("x", i%300))
		if _, err := p.Exec(ctx(t)); err != nil {
			t.Fatal(err)
		}
	}
	close(stop)
	<-done
	want := map[string]string{}
	for _, k := range []string{"b1", "b2", "c1"} {
		want[k] = c.Do(ctx(t), "BF.DIGEST", k).Val().(string)
	}
	file := filepath.Join(t.TempDir(), "node.bfbackup")
	if err := c.Do(ctx(t), "BFBACKUP", file).Err(); err != nil {
		t.Fatal(err)
	}
	// After the backup: not in it.
	if err := c.Do(ctx(t), "BF.ADD", "b2", "after-backup").Err(); err != nil {
		t.Fatal(err)
	}

	restored := &node{t: t, addr: freeAddr(t), raftAddr: freeAddr(t), dataDir: t.TempDir(), args: []string{"--cluster-secret", testSecret}}
	restoreArgs := []string{"restore", "--from", file, "--data-dir", restored.dataDir, "--addr", restored.addr, "--raft-addr", restored.raftAddr}
	out, err := exec.Command(binary, restoreArgs...).CombinedOutput()
	if err != nil {
		t.Fatalf("restore: %v %s", err, out)
	}
	if out, err := exec.Command(binary, restoreArgs...).CombinedOutput(); err == nil {
		t.Fatalf("a second restore into the same directory succeeded: %s", out)
	}
	restored.launch()
	rc := restored.client(2)
	for k, d := range want {
		if got := rc.Do(ctx(t), "BF.DIGEST", k).Val(); got != d {
			t.Fatalf("%s: restored digest %v, the source's at the backup %s", k, got, d)
		}
	}
	if v, _ := rc.Do(ctx(t), "BF.EXISTS", "b2", "after-backup").Int(); v != 0 {
		t.Fatal("the restored node holds a write made after the backup")
	}
	if err := rc.Do(ctx(t), "BF.ADD", "b2", "on-restored").Err(); err != nil {
		t.Fatalf("write to the restored node: %v", err)
	}
	// A node joins the restored one's new cluster and gets everything.
	joiner := &node{t: t, addr: freeAddr(t), raftAddr: freeAddr(t), dataDir: t.TempDir(), args: []string{"--join", restored.addr, "--cluster-secret", testSecret}}
	joiner.launch()
	waitFor(t, 30*time.Second, "the joiner caught up", func() bool {
		jc := joiner.client(2)
		v, err := jc.Do(ctx(t), "BF.EXISTS", "b2", "on-restored").Int()
		return err == nil && v == 1
	})
	jc := joiner.client(2)
	for k := range want {
		if a, b := rc.Do(ctx(t), "BF.DIGEST", k).Val(), jc.Do(ctx(t), "BF.DIGEST", k).Val(); a != b {
			t.Fatalf("%s differs between the restored node and its joiner", k)
		}
	}
	if info := replInfo(restored); !strings.Contains(info["raft_members"], restored.addr) || info["raft_num_members"] != "2" {
		t.Fatalf("the restored cluster's members: %v", info["raft_members"])
	}
}
