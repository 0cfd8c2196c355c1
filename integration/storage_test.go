package integration

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// mountTmpfs mounts a tmpfs of size bytes at dir until the test ends.
// Mounting needs root: without it the test skips, and fails under CI.
func mountTmpfs(t *testing.T, dir string, size int64) {
	t.Helper()
	if os.Geteuid() != 0 {
		if os.Getenv("CI") == "true" {
			t.Fatal("mounting a tmpfs needs root")
		}
		t.Skip("mounting a tmpfs needs root")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", fmt.Sprintf("size=%d", size), "tmpfs", dir).CombinedOutput(); err != nil {
		t.Fatalf("mount tmpfs: %v %s", err, out)
	}
	t.Cleanup(func() { exec.Command("umount", "-l", dir).Run() })
}

// fill leaves about free bytes available on dir's filesystem, with a file
// it returns the path of.
func fill(t *testing.T, dir string, free int64) string {
	t.Helper()
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		t.Fatal(err)
	}
	avail := int64(st.Bavail) * st.Bsize
	path := filepath.Join(dir, "filler")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 1<<20)
	for n := int64(0); n < avail-free; n += int64(len(buf)) {
		if _, err := f.Write(buf[:min(int64(len(buf)), avail-free-n)]); err != nil {
			t.Fatal(err)
		}
	}
	return path
}

// TestFullDisk: with the image, or the whole data directory, on a real
// filesystem that fills up, a node stays up: once it cannot write safely
// it refuses writes with MISCONF, answers reads, reports not ready, and
// writes again by itself once there is room. After kill -9 and a restart
// every acknowledged item is there.
func TestFullDisk(t *testing.T) {
	t.Run("image", func(t *testing.T) { fullDisk(t, "image") })
	t.Run("data dir", func(t *testing.T) { fullDisk(t, "") })
}

func fullDisk(t *testing.T, sub string) {
	dataDir := t.TempDir()
	full := filepath.Join(dataDir, sub)
	mountTmpfs(t, full, 256<<20)
	httpAddr := freeAddr(t)
	n := &node{t: t, addr: freeAddr(t), raftAddr: freeAddr(t), dataDir: dataDir,
		args: []string{"--flush-interval", "100ms", "--http-addr", httpAddr}}
	n.launch()
	c := n.client(2)
	var acked []string
	seq := 0
	write := func() error {
		seq++
		key, item := fmt.Sprint("f", seq%50), fmt.Sprint("item", seq)
		err := c.Do(ctx(t), "BF.ADD", key, item).Err()
		if err == nil {
			acked = append(acked, key+" "+item)
		}
		return err
	}
	for i := 0; i < 500; i++ {
		if err := write(); err != nil {
			t.Fatal(err)
		}
	}
	filler := fill(t, full, 16<<20)
	var refused error
	waitFor(t, 30*time.Second, "writes refused on the full disk", func() bool {
		err := write()
		if err != nil && strings.HasPrefix(err.Error(), "MISCONF ") {
			refused = err
			return true
		}
		if err != nil {
			t.Fatalf("a write on the full disk answered %v", err)
		}
		return false
	})
	t.Logf("refused with: %v", refused)
	if !strings.Contains(refused.Error(), "No space left on device") {
		t.Errorf("the refusal does not say why: %v", refused)
	}
	for _, ki := range acked[len(acked)-20:] {
		key, item, _ := strings.Cut(ki, " ")
		if v, err := c.Do(ctx(t), "BF.EXISTS", key, item).Int(); err != nil || v != 1 {
			t.Fatalf("read of %s on the full disk: %v %v", ki, v, err)
		}
	}
	if code, body := scrape(t, httpAddr, "/readyz"); code != 503 || !strings.Contains(body, "disk") {
		t.Fatalf("/readyz on the full disk: %d %s", code, body)
	}
	if err := n.cmd.Process.Signal(syscall.Signal(0)); err != nil {
		t.Fatal("the node died on the full disk")
	}
	os.Remove(filler)
	waitFor(t, 30*time.Second, "writes accepted once there is room", func() bool {
		err := write()
		if err != nil && !strings.HasPrefix(err.Error(), "MISCONF ") {
			t.Fatalf("a write after the disk cleared answered %v", err)
		}
		return err == nil
	})
	for i := 0; i < 200; i++ {
		if err := write(); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, 10*time.Second, "ready again", func() bool {
		code, _ := scrape(t, httpAddr, "/readyz")
		return code == 200
	})
	n.kill()
	n.launch()
	c = n.client(2)
	checkAcked(t, c, acked)
}

// checkAcked fails the test for every acknowledged "key item" missing.
func checkAcked(t *testing.T, c *redis.Client, acked []string) {
	t.Helper()
	p := c.Pipeline()
	cmds := make([]*redis.Cmd, len(acked))
	for i, ki := range acked {
		key, item, _ := strings.Cut(ki, " ")
		cmds[i] = p.Do(ctx(t), "BF.EXISTS", key, item)
	}
	p.Exec(ctx(t))
	lost := 0
	for i, cmd := range cmds {
		if v, err := cmd.Int(); err != nil || v != 1 {
			if lost < 5 {
				t.Errorf("acknowledged %s lost: %v %v", acked[i], v, err)
			}
			lost++
		}
	}
	if lost > 0 {
		t.Fatalf("%d of %d acknowledged items lost", lost, len(acked))
	}
}

// TestDataDirInUse: a second bfserver started on a running node's data
// directory exits with an error that says the directory is in use, and
// the running node goes on, its data intact.
func TestDataDirInUse(t *testing.T) {
	n := start(t)
	c := n.client(2)
	defer c.Close()
	ctx := context.Background()
	if err := c.Do(ctx, "BF.ADD", "f", "kept").Err(); err != nil {
		t.Fatal(err)
	}
	ctx2, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx2, binary, "--addr", freeAddr(t), "--raft-addr", freeAddr(t), "--data-dir", n.dataDir).CombinedOutput()
	if err == nil || ctx2.Err() != nil {
		t.Fatalf("a second bfserver on the same data directory: %v (timed out: %v); output:\n%s", err, ctx2.Err() != nil, out)
	}
	if want := "in use by another process"; !strings.Contains(string(out), want) || !strings.Contains(string(out), n.dataDir) {
		t.Fatalf("its error does not say %q of %s:\n%s", want, n.dataDir, out)
	}
	if got, err := c.Do(ctx, "BF.EXISTS", "f", "kept").Int(); err != nil || got != 1 {
		t.Fatalf("the running node after the second start: BF.EXISTS = %d, %v", got, err)
	}
}

// TestSnapshotIsAReference: a node's own snapshot refers to its image
// instead of copying it (docs/STORAGE.md, Snapshots), so a node whose
// image is gone while its snapshot says its state reached past it must
// not start: it would answer "not found" for what it acknowledged. It
// refuses, naming the way out, and serves nothing.
func TestSnapshotIsAReference(t *testing.T) {
	n := start(t)
	c := n.client(2)
	defer c.Close()
	ctx := context.Background()
	for i := range 50 {
		if err := c.Do(ctx, "BF.ADD", "f"+strconv.Itoa(i), "kept").Err(); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Do(ctx, "SAVE").Err(); err != nil {
		t.Fatal(err)
	}
	snaps, err := filepath.Glob(filepath.Join(n.dataDir, "snapshots", "snapshots", "*", "state.bin"))
	if err != nil || len(snaps) == 0 {
		t.Fatalf("no stored snapshot after SAVE (%v)", err)
	}
	for _, s := range snaps {
		if b, err := os.ReadFile(s); err != nil || !strings.HasPrefix(string(b), "bfsnapR\n") || len(b) > 100 {
			t.Fatalf("%s holds %d bytes (%v), not a reference", s, len(b), err)
		}
	}
	n.kill()
	if err := os.RemoveAll(filepath.Join(n.dataDir, "image")); err != nil {
		t.Fatal(err)
	}
	ctx2, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	addr := freeAddr(t)
	out, err := exec.CommandContext(ctx2, binary, "--addr", addr, "--raft-addr", freeAddr(t), "--data-dir", n.dataDir).CombinedOutput()
	if err == nil || ctx2.Err() != nil {
		t.Fatalf("a node whose image is gone: %v (timed out: %v); output:\n%s", err, ctx2.Err() != nil, out)
	}
	if want := "the image is behind this node's snapshot"; !strings.Contains(string(out), want) {
		t.Fatalf("its error does not say %q:\n%s", want, out)
	}
}
