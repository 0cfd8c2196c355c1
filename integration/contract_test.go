package integration

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/bfserver/bfserver/command"
	"github.com/bfserver/bfserver/persistence"
	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	wal "github.com/hashicorp/raft-wal"
	"github.com/hashicorp/raft-wal/metadb"
	"github.com/redis/go-redis/v9"
)

// runToExit starts the binary and waits (bounded) for it to exit; it
// returns the exit status and what it printed on stderr.
func runToExit(t *testing.T, env []string, args ...string) (int, string) {
	t.Helper()
	cmd := exec.Command(binary, args...)
	cmd.Env = append(os.Environ(), env...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		syscall.Kill(cmd.Process.Pid, syscall.SIGKILL)
		<-done
		t.Fatalf("bfserver %v did not exit; stderr:\n%s", args, stderr.String())
	}
	return cmd.ProcessState.ExitCode(), stderr.String()
}

// TestBadSettingsRefused: a value outside its range stops start-up with
// status 1 and a message naming the setting and where the value came from
// (flag, environment variable, config file and line); the same ranges hold
// for CONFIG SET. A bad cf-bucket-size once started and then crashed
// every replica at the first auto-creating CF.ADD.
func TestBadSettingsRefused(t *testing.T) {
	dir := t.TempDir()
	base := []string{"--addr", freeAddr(t), "--data-dir", filepath.Join(dir, "d")}
	conf := filepath.Join(dir, "bf.conf")
	os.WriteFile(conf, []byte("# settings\nmaxclients 100\ncf-bucket-size 0\n"), 0o600)
	for _, c := range []struct {
		env  []string
		args []string
		want []string
	}{
		{nil, []string{"--cf-bucket-size", "0"}, []string{"command line", "cf-bucket-size", "[1, 255]"}},
		{nil, []string{"--bf-error-rate", "1.5"}, []string{"command line", "bf-error-rate"}},
		{nil, []string{"--maxmemory", "lots"}, []string{"command line", "maxmemory", "lots"}},
		{nil, []string{"--fsync", "sometimes"}, []string{"command line", "fsync", "always, everysec, no"}},
		{nil, []string{"--flush-interval", "-1s"}, []string{"command line", "flush-interval", "positive"}},
		{nil, []string{"--max-filter-bytes", "2048gb"}, []string{"max-filter-bytes", "from flag --max-filter-bytes"}},
		{[]string{"BFSERVER_CF_MAX_ITERATIONS=0"}, nil, []string{"environment variable BFSERVER_CF_MAX_ITERATIONS", "cf-max-iterations"}},
		{nil, []string{"--config", conf}, []string{conf + ":3", "cf-bucket-size"}},
		{nil, []string{"--no-such-flag"}, []string{"command line", "no-such-flag"}},
	} {
		code, stderr := runToExit(t, c.env, append(append([]string{}, base...), c.args...)...)
		if code != 1 {
			t.Errorf("%v %v: exit status %d, want 1; stderr:\n%s", c.env, c.args, code, stderr)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(stderr, w) {
				t.Errorf("%v %v: stderr lacks %q:\n%s", c.env, c.args, w, stderr)
			}
		}
	}
	// At run time the same ranges hold, and nothing changes.
	n := start(t)
	cl := n.client(2)
	err := cl.Do(ctx(t), "CONFIG", "SET", "cf-bucket-size", "0").Err()
	if err == nil || !strings.Contains(err.Error(), "cf-bucket-size") {
		t.Fatalf("CONFIG SET cf-bucket-size 0: %v", err)
	}
	if v := cl.ConfigGet(ctx(t), "cf-bucket-size").Val()["cf-bucket-size"]; v != "2" {
		t.Fatalf("cf-bucket-size is %q after a refused CONFIG SET", v)
	}
	if err := cl.Do(ctx(t), "CF.ADD", "c", "x").Err(); err != nil {
		t.Fatal(err)
	}
}

// TestMaxMemorySetting: --maxmemory (with Redis's units) is what CONFIG GET
// and INFO report, and CONFIG SET changes it.
func TestMaxMemorySetting(t *testing.T) {
	n := start(t, "--maxmemory", "40mb")
	c := n.client(2)
	if v := c.ConfigGet(ctx(t), "maxmemory").Val()["maxmemory"]; v != "41943040" {
		t.Fatalf("CONFIG GET maxmemory = %q", v)
	}
	if info := c.Info(ctx(t), "memory").Val(); !strings.Contains(info, "maxmemory:41943040\r\n") {
		t.Fatalf("INFO memory:\n%s", info)
	}
	if err := c.ConfigSet(ctx(t), "maxmemory", "100mb").Err(); err != nil {
		t.Fatal(err)
	}
	if v := c.ConfigGet(ctx(t), "maxmemory").Val()["maxmemory"]; v != "104857600" {
		t.Fatalf("CONFIG GET maxmemory after SET = %q", v)
	}
	if err := c.ConfigSet(ctx(t), "maxmemory", "-1").Err(); err == nil || !strings.Contains(err.Error(), "memory value") {
		t.Fatalf("CONFIG SET maxmemory -1: %v", err)
	}
}

// TestMultiTakesThePreparePath: inside MULTI a command meets every check it
// meets outside: the memory limit for what it would create, ACL rules on
// subcommands (refused at queue time, so EXEC answers EXECABORT), and the
// log's contract.
func TestMultiTakesThePreparePath(t *testing.T) {
	n := start(t, "--maxmemory", "40mb", "--user", "ops on >pw +@all -config|set")
	c := n.client(2)
	// Three 24 MB filters under a 40 MB limit: the first fits.
	res, err := c.TxPipelined(ctx(t), func(p redis.Pipeliner) error {
		for _, k := range []string{"a", "b", "c"} {
			p.Do(ctx(t), "BF.RESERVE", k, "0.01", "20000000", "NONSCALING")
		}
		return nil
	})
	if err == nil || len(res) != 3 || res[0].Err() != nil {
		t.Fatalf("MULTI of three RESERVEs: %v %v", res, err)
	}
	for _, r := range res[1:] {
		if r.Err() == nil || !strings.HasPrefix(r.Err().Error(), "OOM ") {
			t.Fatalf("a RESERVE past maxmemory inside MULTI answered %v", r.Err())
		}
	}
	if n := c.Exists(ctx(t), "a", "b", "c").Val(); n != 1 {
		t.Fatalf("%d of the three filters exist", n)
	}
	ops := redis.NewClient(&redis.Options{Addr: n.addr, Username: "ops", Password: "pw", Protocol: 2, MaxRetries: -1})
	defer ops.Close()
	conn := ops.Conn()
	defer conn.Close()
	if err := conn.Do(ctx(t), "MULTI").Err(); err != nil {
		t.Fatal(err)
	}
	if err := conn.Do(ctx(t), "CONFIG", "GET", "maxmemory").Err(); err != nil {
		t.Fatalf("CONFIG GET queued: %v", err)
	}
	want := "NOPERM User ops has no permissions to run the 'config|set' command"
	if err := conn.Do(ctx(t), "CONFIG", "SET", "maxmemory", "1gb").Err(); err == nil || err.Error() != want {
		t.Fatalf("CONFIG SET queued: %v, want %s", err, want)
	}
	if err := conn.Do(ctx(t), "EXEC").Err(); err == nil || !strings.HasPrefix(err.Error(), "EXECABORT") {
		t.Fatalf("EXEC after a refused command: %v", err)
	}
	if v := c.ConfigGet(ctx(t), "maxmemory").Val()["maxmemory"]; v != "41943040" {
		t.Fatalf("maxmemory changed to %s", v)
	}
}

// TestMultiOnFollower: a transaction mixing writes and reads works on a
// follower, with Redis's replies, applied at one point of the log.
func TestMultiOnFollower(t *testing.T) {
	nodes := startCluster(t, []string{"127.0.0.1", "127.0.0.1", "127.0.0.1"})
	leader := leaderOf(t, nodes)
	for _, f := range without(nodes, leader) {
		c := f.client(2)
		key := "tx:" + f.addr
		var add, exists, typ, card *redis.Cmd
		_, err := c.TxPipelined(ctx(t), func(p redis.Pipeliner) error {
			add = p.Do(ctx(t), "BF.ADD", key, "a")
			exists = p.Do(ctx(t), "BF.EXISTS", key, "a")
			typ = p.Do(ctx(t), "TYPE", key)
			card = p.Do(ctx(t), "BF.CARD", key)
			return nil
		})
		if err != nil {
			t.Fatalf("MULTI on follower %s: %v", f.addr, err)
		}
		if add.Val() != int64(1) || exists.Val() != int64(1) || typ.Val() != "MBbloom--" || card.Val() != int64(1) {
			t.Fatalf("follower %s: BF.ADD %v, BF.EXISTS %v, TYPE %v, BF.CARD %v", f.addr, add.Val(), exists.Val(), typ.Val(), card.Val())
		}
		// Reads only, too.
		cmds, err := c.TxPipelined(ctx(t), func(p redis.Pipeliner) error {
			p.Do(ctx(t), "BF.EXISTS", key, "a")
			p.Do(ctx(t), "EXISTS", key)
			return nil
		})
		if err != nil || cmds[0].(*redis.Cmd).Val() != int64(1) || cmds[1].(*redis.Cmd).Val() != int64(1) {
			t.Fatalf("read-only MULTI on follower: %v %v", cmds, err)
		}
	}
}

// TestLongCommandAnswered: a command that runs far longer than the write
// timeout (RedisBloom's own test: 140,000 copies of one item into a Cuckoo
// filter of one-slot buckets) gets its full reply on a healthy node, not
// an unknown outcome, and the node serves the next command.
func TestLongCommandAnswered(t *testing.T) {
	n := start(t, "--write-timeout", "1s")
	c := redis.NewClient(&redis.Options{Addr: n.addr, Protocol: 2, MaxRetries: -1, ReadTimeout: 5 * time.Minute})
	defer c.Close()
	cx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if err := c.Do(cx, "CF.RESERVE", "cf", "2", "BUCKETSIZE", "1", "EXPANSION", "1").Err(); err != nil {
		t.Fatal(err)
	}
	const copies = 140000
	args := []any{"CF.INSERT", "cf", "ITEMS"}
	for i := 0; i < copies; i++ {
		args = append(args, "x")
	}
	began := time.Now()
	res, err := c.Do(cx, args...).Slice()
	if err != nil {
		t.Fatalf("CF.INSERT of %d copies after %v: %v", copies, time.Since(began), err)
	}
	t.Logf("CF.INSERT of %d copies answered in %v", copies, time.Since(began))
	if len(res) != copies {
		t.Fatalf("%d replies for %d items", len(res), copies)
	}
	if err := c.FlushAll(cx).Err(); err != nil {
		t.Fatalf("FLUSHALL after the long command: %v", err)
	}
}

// appendEntries adds entries to a stopped node's Raft log, after its last
// one and in its last term, as a leader of that term would have, in
// whichever store the node keeps it.
func appendEntries(t *testing.T, dataDir string, entries ...[]byte) uint64 {
	t.Helper()
	var store raft.LogStore
	if dir := filepath.Join(dataDir, "wal"); exists(dir) {
		meta := &metadb.BoltMetaDB{}
		w, err := wal.Open(dir, wal.WithMetaStore(meta))
		if err != nil {
			t.Fatal(err)
		}
		defer meta.Close() // raft-wal's Close leaves it open
		defer w.Close()
		store = w
	} else {
		b, err := raftboltdb.NewBoltStore(filepath.Join(dataDir, "raft.db"))
		if err != nil {
			t.Fatal(err)
		}
		defer b.Close()
		store = b
	}
	last, err := store.LastIndex()
	if err != nil {
		t.Fatal(err)
	}
	var prev raft.Log
	if err := store.GetLog(last, &prev); err != nil {
		t.Fatal(err)
	}
	for i, data := range entries {
		l := &raft.Log{Index: last + 1 + uint64(i), Term: prev.Term, Type: raft.LogCommand, Data: data, AppendedAt: time.Now()}
		if err := store.StoreLog(l); err != nil {
			t.Fatal(err)
		}
	}
	return last + 1
}

func bfAddEntry(key, item string) []byte {
	return command.EncodeBatch([]*command.Cmd{{Op: command.BFAdd, Key: []byte(key), Items: [][]byte{[]byte(item)},
		ErrorRate: 0.01, Capacity: 100, Expansion: 2, MaxBytes: 1 << 20, Now: time.Now().UnixMilli()}})
}

// TestFutureEntryHaltsNode: a log entry of a command level this build does
// not know (or an op code it does not know) stops the node before it is
// applied, with a message naming the entry and what it needs, status 1;
// nothing after it is applied, and the image never moves past it.
func TestFutureEntryHaltsNode(t *testing.T) {
	v2 := bfAddEntry("x", "y")
	for _, c := range []struct {
		name  string
		entry []byte
		want  string
	}{
		{"level", append([]byte{3, command.Level + 1}, v2[1:]...), fmt.Sprintf("needs command level %d", command.Level+1)},
		{"op", []byte{2, 1, 63, 0}, "op code 63"},
	} {
		t.Run(c.name, func(t *testing.T) {
			n := start(t)
			cl := n.client(2)
			if err := cl.Do(ctx(t), "BF.ADD", "before", "a").Err(); err != nil {
				t.Fatal(err)
			}
			n.stop()
			idx := appendEntries(t, n.dataDir, c.entry, bfAddEntry("after", "b"))
			code, stderr := runToExit(t, nil, append([]string{"--addr", n.addr, "--raft-addr", n.raftAddr, "--data-dir", n.dataDir}, n.args...)...)
			for _, w := range []string{fmt.Sprintf("log entry %d", idx), c.want, "upgrade this node", "nothing from entry"} {
				if !strings.Contains(stderr, w) {
					t.Errorf("stderr lacks %q:\n%s", w, stderr)
				}
			}
			if code != 1 {
				t.Fatalf("exit status %d, want 1", code)
			}
			store, err := persistence.Open(persistence.Options{Dir: filepath.Join(n.dataDir, "image")})
			if err != nil {
				t.Fatal(err)
			}
			defer store.Close()
			ks, applied, err := store.Load()
			if err != nil {
				t.Fatal(err)
			}
			if applied >= idx {
				t.Fatalf("image at index %d, past the entry %d it could not apply", applied, idx)
			}
			if ks.Lookup(0, []byte("before"), 0) == nil || ks.Lookup(0, []byte("after"), 0) != nil {
				t.Fatalf("image holds before: %v, after: %v", ks.Lookup(0, []byte("before"), 0) != nil, ks.Lookup(0, []byte("after"), 0) != nil)
			}
		})
	}
}

// TestInvalidEntrySameEverywhere: an entry whose command breaks the log's
// contract (a Cuckoo filter with buckets of size 0, which once crashed
// every replica) is applied on three replicas as the same error and no
// change, the valid command after it in the same entry is applied, and
// the replicas stay byte-identical and serving.
func TestInvalidEntrySameEverywhere(t *testing.T) {
	// No read leases: their renewals would add entries while we look.
	nodes := startCluster(t, []string{"127.0.0.11", "127.0.0.12", "127.0.0.13"}, "--read-lease=false")
	leader := leaderOf(t, nodes)
	if err := leader.client(2).Do(ctx(t), "BF.ADD", "k", "first").Err(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "every node applied the write", func() bool {
		for _, n := range nodes {
			if n.client(2).Do(ctx(t), "BF.EXISTS", "k", "first").Val() != int64(1) {
				return false
			}
		}
		return true
	})
	waitFor(t, 10*time.Second, "the same log on every node", func() bool {
		last := replInfo(nodes[0])["last_log_index"]
		for _, n := range nodes {
			if i := replInfo(n); i["last_log_index"] != last || i["applied_index"] != last {
				return false
			}
		}
		return true
	})
	for _, n := range without(nodes, leader) {
		n.stop()
	}
	leader.stop()
	entry := command.EncodeBatch([]*command.Cmd{
		{Op: command.CFAdd, Key: []byte("c"), Items: [][]byte{[]byte("x")}, Capacity: 1024, BucketSize: 0, MaxIterations: 20, Expansion: 1, MaxExpansions: 32, MaxBytes: 1 << 20},
		{Op: command.BFAdd, Key: []byte("k"), Items: [][]byte{[]byte("second")}, ErrorRate: 0.01, Capacity: 100, Expansion: 2, MaxBytes: 1 << 20},
	})
	var idx uint64
	for i, n := range nodes {
		got := appendEntries(t, n.dataDir, entry)
		if i > 0 && got != idx {
			t.Fatalf("the logs end at different indexes: %d and %d", idx, got-1)
		}
		idx = got
	}
	for _, n := range nodes {
		n.launch()
	}
	var digests []string
	waitFor(t, 30*time.Second, "every node applied the entry", func() bool {
		digests = digests[:0]
		for _, n := range nodes {
			c := n.client(2)
			if c.Do(ctx(t), "BF.EXISTS", "k", "second").Val() != int64(1) {
				return false
			}
			digests = append(digests, c.Do(ctx(t), "BFX.DIGEST", "k").Val().(string))
		}
		return true
	})
	for _, n := range nodes {
		c := n.client(2)
		if typ := c.Type(ctx(t), "c").Val(); typ != "none" {
			t.Fatalf("%s: the invalid CF.ADD created a %s", n.addr, typ)
		}
		if err := c.Do(ctx(t), "BF.ADD", "k", "after:"+n.addr).Err(); err != nil {
			t.Fatalf("%s after the invalid entry: %v", n.addr, err)
		}
	}
	if digests[0] != digests[1] || digests[1] != digests[2] {
		t.Fatalf("replicas differ after the invalid entry: %v", digests)
	}
}
