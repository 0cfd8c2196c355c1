package integration

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// TestOnlineBackup: BFBACKUP writes a consistent copy of a running node
// under load; bfserver restore makes a new node's data directory from it;
// the new node holds exactly the state at the backup (digests equal, none
// of the writes after it), serves writes, and a second node joins it and
// gets everything.
func TestOnlineBackup(t *testing.T) {
	backups := t.TempDir()
	src := start(t, "--backup-dir", backups)
	c := src.client(2)
	for _, k := range []string{"b1", "b2"} {
		if err := c.Do(ctx(t), "BF.RESERVE", k, "0.001", "200000").Err(); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Do(ctx(t), "CF.RESERVE", "c1", "10000").Err(); err != nil {
		t.Fatal(err)
	}
	// The sketches travel in the backup too.
	if err := c.Do(ctx(t), "CMS.INITBYDIM", "s1", "1000", "5").Err(); err != nil {
		t.Fatal(err)
	}
	if err := c.Do(ctx(t), "TDIGEST.CREATE", "t1", "COMPRESSION", "50").Err(); err != nil {
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
		p.Do(ctx(t), "CMS.INCRBY", "s1", fmt.Sprint("x", i%300), i%5)
		p.Do(ctx(t), "TDIGEST.ADD", "t1", i%1000, i%7)
		if _, err := p.Exec(ctx(t)); err != nil {
			t.Fatal(err)
		}
	}
	close(stop)
	<-done
	want := map[string]string{}
	for _, k := range []string{"b1", "b2", "c1", "s1", "t1"} {
		want[k] = c.Do(ctx(t), "BFX.DIGEST", k).Val().(string)
	}
	file := filepath.Join(backups, "node.bfbackup")
	// A backup writes the image and the file, each synced: on a loaded
	// machine more than go-redis's default 3 s read timeout, as SAVE can.
	slow := redis.NewClient(&redis.Options{Addr: src.addr, ReadTimeout: 60 * time.Second, MaxRetries: -1})
	defer slow.Close()
	if err := slow.Do(ctx(t), "BFBACKUP", "node.bfbackup").Err(); err != nil {
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
		if got := rc.Do(ctx(t), "BFX.DIGEST", k).Val(); got != d {
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
		if a, b := rc.Do(ctx(t), "BFX.DIGEST", k).Val(), jc.Do(ctx(t), "BFX.DIGEST", k).Val(); a != b {
			t.Fatalf("%s differs between the restored node and its joiner", k)
		}
	}
	if info := replInfo(restored); !strings.Contains(info["raft_members"], restored.addr) || info["raft_num_members"] != "2" {
		t.Fatalf("the restored cluster's members: %v", info["raft_members"])
	}
}

// TestBackupConfinedToDir: BFBACKUP writes only inside --backup-dir (set
// here by the config file): an absolute path inside it works and
// restores; a path outside it, "..", a link out of it and the node's own
// data directory are refused with the reason, and write nothing; a node
// given no backup directory refuses BFBACKUP, naming --backup-dir.
func TestBackupConfinedToDir(t *testing.T) {
	backups, outside := t.TempDir(), t.TempDir()
	conf := filepath.Join(t.TempDir(), "bf.conf")
	if err := os.WriteFile(conf, []byte("backup-dir "+backups+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	n := start(t, "--config", conf)
	if err := os.Symlink(outside, filepath.Join(backups, "out")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(n.dataDir, filepath.Join(backups, "data")); err != nil {
		t.Fatal(err)
	}
	c := n.client(2)
	if err := c.Do(ctx(t), "BF.ADD", "f", "x").Err(); err != nil {
		t.Fatal(err)
	}
	digest := c.Do(ctx(t), "BFX.DIGEST", "f").Val()
	dataBefore := dirListing(t, n.dataDir)
	for _, path := range []string{
		filepath.Join(outside, "b"), "../b", filepath.Join(backups, "..", filepath.Base(outside), "b"), "out/b",
		filepath.Join(n.dataDir, "raft.db"), "data/raft.db", n.dataDir,
	} {
		err := c.Do(ctx(t), "BFBACKUP", path).Err()
		if err == nil || !strings.Contains(err.Error(), "ERR backup failed: the path must name a file inside the backup directory (--backup-dir)") {
			t.Errorf("BFBACKUP %s: %v", path, err)
		}
	}
	if ents, _ := os.ReadDir(outside); len(ents) != 0 {
		t.Fatalf("%d files written outside the backup directory", len(ents))
	}
	if after := dirListing(t, n.dataDir); after != dataBefore {
		t.Fatalf("the data directory changed:\n%s\nthen\n%s", dataBefore, after)
	}
	file := filepath.Join(backups, "ok.bfbackup")
	if err := c.Do(ctx(t), "BFBACKUP", file).Err(); err != nil {
		t.Fatal(err)
	}
	restored := &node{t: t, addr: freeAddr(t), raftAddr: freeAddr(t), dataDir: t.TempDir(), args: []string{"--cluster-secret", testSecret}}
	if out, err := exec.Command(binary, "restore", "--from", file, "--data-dir", restored.dataDir, "--addr", restored.addr, "--raft-addr", restored.raftAddr).CombinedOutput(); err != nil {
		t.Fatalf("restore: %v %s", err, out)
	}
	restored.launch()
	rc := restored.client(2)
	var got any
	var err error
	waitFor(t, 10*time.Second, "the restored node answers", func() bool {
		got, err = rc.Do(ctx(t), "BFX.DIGEST", "f").Result()
		return err == nil || !strings.Contains(err.Error(), "CLUSTERDOWN") && !strings.Contains(err.Error(), "TRYAGAIN")
	})
	if got != digest {
		t.Fatalf("restored digest %v (%v), want %v", got, err, digest)
	}

	plain := start(t)
	err = plain.client(2).Do(ctx(t), "BFBACKUP", filepath.Join(backups, "plain.bfbackup")).Err()
	if err == nil || err.Error() != "ERR backup failed: no backup directory is configured: start the node with --backup-dir (backup-dir in a config file) to allow BFBACKUP" {
		t.Fatalf("BFBACKUP with no backup directory: %v", err)
	}
	if _, err := os.Stat(filepath.Join(backups, "plain.bfbackup")); err == nil {
		t.Fatal("a node with no backup directory wrote a backup")
	}
}

// dirListing names every file under dir, for comparing before and after.
func dirListing(t *testing.T, dir string) string {
	var b strings.Builder
	filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && !strings.Contains(p, ".tmp") {
			fmt.Fprintln(&b, p)
		}
		return nil
	})
	return b.String()
}
