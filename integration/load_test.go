package integration

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// swapWatcher polls a filter while it is rebuilt: every item the old filter
// held must answer 1 throughout, and once the key shows the new filter's
// capacity, every sampled new item must answer 1 too (the new filter is
// never visible half-built).
type swapWatcher struct {
	stop        atomic.Bool
	during      atomic.Bool // set while the rebuild runs
	wg          sync.WaitGroup
	mu          sync.Mutex
	violations  []string
	polls       map[int64]int // polls per capacity seen
	pollsDuring int
}

func watchSwap(t *testing.T, c *redis.Client, prefix, key string, newCap int64, old, added []string) *swapWatcher {
	w := &swapWatcher{polls: map[int64]int{}}
	args := []any{prefix + ".MEXISTS", key}
	for _, s := range old {
		args = append(args, s)
	}
	for _, s := range added {
		args = append(args, s)
	}
	w.wg.Go(func() {
		bg := context.Background()
		for !w.stop.Load() {
			capa, err := infoCapacity(bg, c, key)
			if err != nil {
				w.fail("INFO: %v", err)
				return
			}
			v, err := c.Do(bg, args...).Int64Slice()
			if err != nil {
				w.fail("MEXISTS: %v", err)
				return
			}
			w.mu.Lock()
			w.polls[capa]++
			if w.during.Load() {
				w.pollsDuring++
			}
			w.mu.Unlock()
			for i, s := range old {
				if v[i] != 1 {
					w.fail("old item %q answered 0 (capacity %d)", s, capa)
				}
			}
			if capa == newCap {
				for i, s := range added {
					if v[len(old)+i] != 1 {
						w.fail("the new filter is visible without %q", s)
					}
				}
			}
		}
	})
	return w
}

func (w *swapWatcher) fail(f string, a ...any) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.violations) < 20 {
		w.violations = append(w.violations, fmt.Sprintf(f, a...))
	}
}

// end stops the reader and checks what it saw.
func (w *swapWatcher) end(t *testing.T, oldCap, newCap int64) {
	t.Helper()
	w.stop.Store(true)
	w.wg.Wait()
	for _, v := range w.violations {
		t.Error(v)
	}
	if w.polls[oldCap] == 0 || w.pollsDuring < 5 {
		t.Errorf("the reader polled the old filter %d times, %d during the rebuild: it did not watch the rebuild", w.polls[oldCap], w.pollsDuring)
	}
	if len(w.polls) > 2 || (len(w.polls) == 2 && w.polls[newCap] == 0) {
		t.Errorf("capacities seen: %v (want only %d then %d)", w.polls, oldCap, newCap)
	}
}

// infoCapacity is BF.INFO key CAPACITY, or for a Cuckoo filter its CF.INFO
// Size (CF.INFO has no single-field form).
func infoCapacity(cx context.Context, c *redis.Client, key string) (int64, error) {
	v, err := c.Do(cx, "BF.INFO", key, "CAPACITY").Result()
	if err != nil {
		return 0, err
	}
	switch v := v.(type) {
	case int64:
		return v, nil
	case []any:
		if n, ok := v[0].(int64); ok {
			return n, nil
		}
	}
	return 0, fmt.Errorf("BF.INFO CAPACITY: %v", v)
}

func loadArgs(n *node, extra ...string) []string {
	return append([]string{"load", "--to", n.baseURL(), "--progress", "log", "--log-format", "json"}, extra...)
}

func lines(format string, from, to int) string {
	var b strings.Builder
	for i := from; i < to; i++ {
		fmt.Fprintf(&b, format+"\n", i)
	}
	return b.String()
}

func sample(format string, from, to, step int) []string {
	var out []string
	for i := from; i < to; i += step {
		out = append(out, fmt.Sprintf(format, i))
	}
	return append(out, fmt.Sprintf(format, to-1))
}

// TestLoadStdin rebuilds a Bloom filter from stdin, by each method, while
// a reader polls it (never a 0 for an item the old filter held, never a
// half-built new filter); a failing load leaves the key as it was; a
// Cuckoo filter loads from a file with CRLF lines and blank lines, by each
// method, to the same bytes.
func TestLoadStdin(t *testing.T) {
	n := start(t)
	c := n.dbClient(0)
	r := runTool(t, strings.NewReader(lines("old-%d", 0, 10000)),
		loadArgs(n, "--key", "k", "--error-rate", "0.01", "--capacity", "20000")...)
	if r.code != 0 {
		t.Fatalf("first load exited %d:\n%s", r.code, r.stderr)
	}
	if got := must(t, c, "BF.CARD", "k").(int64); got < 9900 || got > 10000 {
		t.Fatalf("BF.CARD after the first load: %d", got)
	}

	w := watchSwap(t, c, "BF", "k", 400000, sample("old-%d", 0, 10000, 97), sample("new-%d", 0, 300000, 2999))
	input := lines("old-%d", 0, 10000) + lines("new-%d", 0, 300000)
	w.during.Store(true)
	r = runTool(t, strings.NewReader(input),
		loadArgs(n, "--key", "k", "--error-rate", "0.001", "--capacity", "400000", "--batch", "200", "--pipeline", "4")...)
	w.during.Store(false)
	if r.code != 0 {
		t.Fatalf("rebuild exited %d:\n%s", r.code, r.stderr)
	}
	w.end(t, 20000, 400000)
	if got := must(t, c, "BF.CARD", "k").(int64); got < 309000 || got > 310000 {
		t.Errorf("BF.CARD after the rebuild: %d, want about 310000", got)
	}
	if !strings.Contains(r.stdout, "310000 items") || !strings.Contains(r.stdout, "built here and sent as BF.LOADCHUNK") {
		t.Errorf("stdout: %s", r.stdout)
	}
	noTempKeys(t, n, 0)

	// --method madd sends the items instead (pipelined BF.INSERT …
	// NOCREATE); the same watch holds.
	w = watchSwap(t, c, "BF", "k", 500000, sample("old-%d", 0, 10000, 97), sample("new-%d", 0, 300000, 2999))
	w.during.Store(true)
	r = runTool(t, strings.NewReader(input),
		loadArgs(n, "--key", "k", "--error-rate", "0.001", "--capacity", "500000", "--method", "madd", "--batch", "200", "--pipeline", "4")...)
	w.during.Store(false)
	if r.code != 0 || !strings.Contains(r.stdout, "sent as BF.INSERT … NOCREATE;") {
		t.Fatalf("madd rebuild exited %d:\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	w.end(t, 400000, 500000)
	if got := must(t, c, "BF.CARD", "k").(int64); got < 309000 || got > 310000 {
		t.Errorf("BF.CARD after the madd rebuild: %d, want about 310000", got)
	}

	// A load that fails (a non-scaling filter too small) leaves k alone,
	// by either method.
	before := digestOf(t, c, "k")
	for _, m := range []string{"build", "madd"} {
		r = runTool(t, strings.NewReader(lines("x-%d", 0, 5000)),
			loadArgs(n, "--key", "k", "--error-rate", "0.01", "--capacity", "1000", "--nonscaling", "--method", m)...)
		if r.code != 1 || !strings.Contains(r.stderr, "non scaling filter is full") || !strings.Contains(r.stderr, "the key is unchanged") {
			t.Errorf("overfull load (%s): exit %d, stderr:\n%s", m, r.code, r.stderr)
		}
		if digestOf(t, c, "k") != before {
			t.Errorf("a failed load (%s) changed the key", m)
		}
		noTempKeys(t, n, 0)
	}

	// A key of another type is refused.
	must(t, c, "SET", "str", "v")
	r = runTool(t, strings.NewReader("a\n"), loadArgs(n, "--key", "str", "--error-rate", "0.01", "--capacity", "10")...)
	if r.code != 1 || !strings.Contains(r.stderr, "holds a string") || c.Get(ctx(t), "str").Val() != "v" {
		t.Errorf("load over a string: exit %d, stderr:\n%s", r.code, r.stderr)
	}

	// Cuckoo, from a file: CRLF line ends are dropped, blank lines skipped.
	file := filepath.Join(t.TempDir(), "items.txt")
	text := strings.ReplaceAll(lines("c-%d", 0, 50000), "\n", "\r\n") + "\r\n\n"
	if err := os.WriteFile(file, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	r = runTool(t, nil, loadArgs(n, "--key", "cf", "--cuckoo", "--capacity", "60000", "--bucket-size", "4", "--file", file)...)
	if r.code != 0 {
		t.Fatalf("cuckoo load exited %d:\n%s", r.code, r.stderr)
	}
	in := fmt.Sprint(must(t, c, "CF.INFO", "cf"))
	if !strings.Contains(in, "Number of items inserted 50000") || !strings.Contains(in, "Bucket size 4") {
		t.Errorf("CF.INFO: %s", in)
	}
	args := []any{"CF.MEXISTS", "cf"}
	for _, s := range sample("c-%d", 0, 50000, 499) {
		args = append(args, s)
	}
	for i, v := range must(t, c, args...).([]any) {
		if v.(int64) != 1 {
			t.Errorf("CF.MEXISTS %s: 0", args[i+2])
		}
	}
	if must(t, c, "CF.EXISTS", "cf", "c-1\r").(int64) != 0 {
		t.Error("the CR was kept in the items")
	}
	// The filter built here is the one the server builds from the same
	// items sent in order (one connection).
	r = runTool(t, nil, loadArgs(n, "--key", "cf2", "--cuckoo", "--capacity", "60000", "--bucket-size", "4", "--file", file,
		"--method", "madd", "--conns", "1")...)
	if r.code != 0 {
		t.Fatalf("cuckoo madd load exited %d:\n%s", r.code, r.stderr)
	}
	if string(dumpOf(t, c, "CF", "cf")) != string(dumpOf(t, c, "CF", "cf2")) {
		t.Error("the Cuckoo filter built in process differs from the server's own build")
	}
}

// TestLoadPostgres rebuilds a filter from a PostgreSQL query (rows
// streamed, NULLs skipped) while a reader polls it; a query that fails
// leaves the key as it was.
func TestLoadPostgres(t *testing.T) {
	pg := startPostgres(t)
	db := pg.conn(t)
	pg.exec(t, db, "CREATE TABLE items (id bigint)")
	pg.exec(t, db, "INSERT INTO items SELECT g FROM generate_series(1, 200000) g")
	pg.exec(t, db, "INSERT INTO items VALUES (NULL)")
	n := start(t)
	c := n.dbClient(0)
	r := runTool(t, nil, loadArgs(n, "--key", "ids", "--error-rate", "0.01", "--capacity", "100000",
		"--postgres", pg.dsn, "--query", "SELECT id FROM items WHERE id <= 100000")...)
	if r.code != 0 {
		t.Fatalf("first load exited %d:\n%s", r.code, r.stderr)
	}

	w := watchSwap(t, c, "BF", "ids", 250000, sample("%d", 1, 100001, 997), sample("%d", 100001, 200001, 997))
	w.during.Store(true)
	r = runTool(t, nil, loadArgs(n, "--key", "ids", "--error-rate", "0.001", "--capacity", "250000",
		"--batch", "200", "--pipeline", "4", "--postgres", pg.dsn, "--query", "SELECT id FROM items")...)
	w.during.Store(false)
	if r.code != 0 {
		t.Fatalf("rebuild exited %d:\n%s", r.code, r.stderr)
	}
	w.end(t, 100000, 250000)
	if !strings.Contains(r.stdout, " 200000 items") {
		t.Errorf("stdout (want 200000 items, the NULL skipped): %s", r.stdout)
	}
	if got := must(t, c, "BF.CARD", "ids").(int64); got < 199500 || got > 200000 {
		t.Errorf("BF.CARD: %d", got)
	}

	before := digestOf(t, c, "ids")
	r = runTool(t, nil, loadArgs(n, "--key", "ids", "--error-rate", "0.01", "--capacity", "10",
		"--postgres", pg.dsn, "--query", "SELECT nope FROM items")...)
	if r.code != 1 || !strings.Contains(r.stderr, "nope") {
		t.Errorf("bad query: exit %d, stderr:\n%s", r.code, r.stderr)
	}
	if digestOf(t, c, "ids") != before {
		t.Error("a failed load changed the key")
	}
	noTempKeys(t, n, 0)
}

// pipedLoad starts a load whose stdin is a pipe the test writes items to;
// closing the returned end ends the input.
func pipedLoad(t *testing.T, args ...string) (*liveTool, *os.File) {
	t.Helper()
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	lt := startToolIn(t, pr, args...)
	pr.Close()
	t.Cleanup(func() { pw.Close() })
	return lt, pw
}

func isMsg(msg string) func(map[string]any) bool {
	return func(l map[string]any) bool { return l["msg"] == msg }
}

// allIn fails the test unless the filter answers 1 for every item.
func allIn(t *testing.T, c *redis.Client, prefix, key string, items []string) {
	t.Helper()
	args := []any{prefix + ".MEXISTS", key}
	for _, s := range items {
		args = append(args, s)
	}
	var zeros []string
	for i, v := range must(t, c, args...).([]any) {
		if v.(int64) != 1 {
			zeros = append(zeros, items[i])
		}
	}
	if len(zeros) > 0 {
		t.Errorf("%s: %d of %d items answer 0: %v", key, len(zeros), len(items), zeros[:min(len(zeros), 5)])
	}
}

// itemsIn is a filter's item count (BF.CARD, or CF.INFO's), 0 while it
// does not exist.
func itemsIn(t *testing.T, c *redis.Client, prefix, key string) int64 {
	t.Helper()
	if prefix == "BF" {
		return must(t, c, "BF.CARD", key).(int64)
	}
	v, err := c.Do(ctx(t), "CF.INFO", key).Slice()
	if err != nil {
		return 0
	}
	for i := 0; i+1 < len(v); i += 2 {
		if v[i] == "Number of items inserted" {
			return v[i+1].(int64)
		}
	}
	return 0
}

// waitItemsIn waits (at most a minute) until the filter holds an item.
func waitItemsIn(t *testing.T, c *redis.Client, prefix, key string) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for itemsIn(t, c, prefix, key) == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("no item reached %s in a minute", key)
		}
		time.Sleep(5 * time.Millisecond) // polling for the first batches
	}
}

// TestLoadBusy: while a load of a key runs (its items still coming from a
// pipe), a second load of the key is refused, names the lock and who holds
// it, and changes nothing; with --force it proceeds, and the first one then
// fails without publishing, by either method. Two loads started at the
// same moment: exactly one proceeds.
func TestLoadBusy(t *testing.T) {
	n := start(t)
	c := n.dbClient(0)
	bloom := func(extra ...string) []string {
		return loadArgs(n, append([]string{"--key", "k", "--error-rate", "0.01", "--capacity", "20000", "--batch", "10"}, extra...)...)
	}
	if r := runTool(t, strings.NewReader(lines("old-%d", 0, 1000)), bloom()...); r.code != 0 {
		t.Fatalf("first load exited %d:\n%s", r.code, r.stderr)
	}
	for _, m := range []string{"build", "madd"} {
		before := digestOf(t, c, "k")
		a, aIn := pipedLoad(t, bloom("--method", m)...)
		io.WriteString(aIn, lines("a-%d", 0, 100))
		a.waitLine(t, "the first load's reservation", isMsg("reserved"))
		lock := must(t, c, "GET", "k:bfload-lock").(string)
		if !strings.HasPrefix(lock, fmt.Sprintf("pid %d on ", a.cmd.Process.Pid)) {
			t.Errorf("the lock holds %q", lock)
		}
		r := runTool(t, strings.NewReader(lines("b-%d", 0, 100)), bloom("--method", m)...)
		if r.code != 1 || !strings.Contains(r.stderr, "k:bfload-lock (held by "+lock+"), k:bfload-tmp: another load of k is running") ||
			!strings.Contains(r.stderr, "pass --force to delete them first") {
			t.Errorf("%s: a second load while one runs: exit %d, stderr:\n%s", m, r.code, r.stderr)
		}
		if digestOf(t, c, "k") != before || c.Get(ctx(t), "k:bfload-lock").Val() != lock {
			t.Errorf("%s: the refused load changed the key or the lock", m)
		}

		r = runTool(t, strings.NewReader(lines("c-%d", 0, 1000)), bloom("--method", m, "--force")...)
		if r.code != 0 {
			t.Fatalf("%s: --force exited %d:\n%s", m, r.code, r.stderr)
		}
		forced := digestOf(t, c, "k")
		allIn(t, c, "BF", "k", sample("c-%d", 0, 1000, 7))
		io.WriteString(aIn, lines("a-%d", 100, 200))
		aIn.Close()
		if code := a.wait(t); code != 1 || !strings.Contains(a.stderr(), "(the key is unchanged)") {
			t.Errorf("%s: the load whose lock was taken over exited %d:\n%s", m, code, a.stderr())
		}
		if digestOf(t, c, "k") != forced {
			t.Errorf("%s: the load whose lock was taken over changed the key", m)
		}
		noTempKeys(t, n, 0)
	}

	// Two at once, both reading from pipes: one is refused at once.
	var lt [2]*liveTool
	var in [2]*os.File
	for i := range lt {
		lt[i], in[i] = pipedLoad(t, bloom("--method", "madd")...)
	}
	var refused int
	select {
	case <-lt[0].done:
	case <-lt[1].done:
		refused = 1
	case <-time.After(time.Minute):
		t.Fatal("two loads of one key run at once")
	}
	if code := lt[refused].wait(t); code != 1 || !strings.Contains(lt[refused].stderr(), "another load of k is running") {
		t.Errorf("the refused one of two at once: exit %d:\n%s", code, lt[refused].stderr())
	}
	other := 1 - refused
	io.WriteString(in[other], lines("d-%d", 0, 1000))
	in[other].Close()
	if code := lt[other].wait(t); code != 0 {
		t.Errorf("the load that proceeded exited %d:\n%s", code, lt[other].stderr())
	}
	allIn(t, c, "BF", "k", sample("d-%d", 0, 1000, 7))
	noTempKeys(t, n, 0)
}

// TestLoadTempKeyDeleted: KEY:bfload-tmp deleted while a load runs (some
// of the items in it, by madd) makes the load fail, saying so: KEY keeps
// the old filter with all its items, and no filter of the rest of the
// items is published. Bloom and Cuckoo, by each method.
func TestLoadTempKeyDeleted(t *testing.T) {
	n := start(t)
	c := n.dbClient(0)
	for _, cf := range []bool{false, true} {
		for _, m := range []string{"build", "madd"} {
			key, prefix, sizing := "bf-"+m, "BF", []string{"--error-rate", "0.01", "--capacity", "20000"}
			if cf {
				key, prefix, sizing = "cf-"+m, "CF", []string{"--cuckoo", "--capacity", "20000"}
			}
			args := loadArgs(n, append(sizing, "--key", key, "--batch", "10", "--conns", "1")...)
			if r := runTool(t, strings.NewReader(lines("old-%d", 0, 2000)), args...); r.code != 0 {
				t.Fatalf("%s: first load exited %d:\n%s", key, r.code, r.stderr)
			}
			before := digestOf(t, c, key)
			tmp := key + ":bfload-tmp"
			a, aIn := pipedLoad(t, append(args, "--method", m)...)
			io.WriteString(aIn, lines("old-%d", 0, 1000))
			a.waitLine(t, "the reservation", isMsg("reserved"))
			if m == "madd" {
				waitItemsIn(t, c, prefix, tmp)
			}
			if got := must(t, c, "DEL", tmp).(int64); got != 1 {
				t.Fatalf("%s: DEL %s: %d", key, tmp, got)
			}
			io.WriteString(aIn, lines("old-%d", 1000, 2000))
			aIn.Close()
			if code := a.wait(t); code != 1 || !strings.Contains(a.stderr(), key+": "+tmp+" was deleted while the load ran") ||
				!strings.Contains(a.stderr(), "(the key is unchanged)") {
				t.Errorf("%s: exit %d:\n%s", key, code, a.stderr())
			}
			if digestOf(t, c, key) != before {
				t.Errorf("%s: the key changed", key)
			}
			allIn(t, c, prefix, key, sample("old-%d", 0, 2000, 1))
			noTempKeys(t, n, 0)
		}
	}
}

// TestLoadTempKeyReplaced: another client replaces KEY:bfload-tmp while a
// load runs (MULTI; DEL KEY:bfload-tmp; BF.RESERVE KEY:bfload-tmp …;
// EXEC, after some of the items reached it): the load never exits 0 with
// a filter missing an input item. It fails, saying the key was replaced,
// KEY keeps its old filter, and the replacement is left to whoever made
// it. Bloom and Cuckoo, by each method.
func TestLoadTempKeyReplaced(t *testing.T) {
	n := start(t)
	c := n.dbClient(0)
	for _, cf := range []bool{false, true} {
		for _, m := range []string{"build", "madd"} {
			key, prefix, sizing := "bf-"+m, "BF", []string{"--error-rate", "0.01", "--capacity", "20000"}
			reserve := []any{"BF.RESERVE", key + ":bfload-tmp", 0.01, 20000}
			if cf {
				key, prefix, sizing = "cf-"+m, "CF", []string{"--cuckoo", "--capacity", "20000"}
				reserve = []any{"CF.RESERVE", key + ":bfload-tmp", 20000}
			}
			args := loadArgs(n, append(sizing, "--key", key, "--batch", "10", "--conns", "1")...)
			if r := runTool(t, strings.NewReader(lines("old-%d", 0, 100)), args...); r.code != 0 {
				t.Fatalf("%s: first load exited %d:\n%s", key, r.code, r.stderr)
			}
			before := digestOf(t, c, key)
			tmp := key + ":bfload-tmp"
			a, aIn := pipedLoad(t, append(args, "--method", m)...)
			io.WriteString(aIn, lines("new-%d", 0, 1000))
			a.waitLine(t, "the reservation", isMsg("reserved"))
			if m == "madd" {
				waitItemsIn(t, c, prefix, tmp)
			}
			replaced, err := c.TxPipelined(ctx(t), func(p redis.Pipeliner) error {
				p.Del(ctx(t), tmp)
				p.Do(ctx(t), reserve...)
				return nil
			})
			if err != nil || replaced[0].(*redis.IntCmd).Val() != 1 {
				t.Fatalf("%s: replacing %s: %v", key, tmp, err)
			}
			io.WriteString(aIn, lines("new-%d", 1000, 2000))
			aIn.Close()
			code := a.wait(t)
			if code == 0 { // then it must hold every item
				allIn(t, c, prefix, key, sample("new-%d", 0, 2000, 1))
				must(t, c, "DEL", tmp)
				continue
			}
			if !strings.Contains(a.stderr(), key+": "+tmp+" was replaced while the load ran") ||
				!strings.Contains(a.stderr(), "(the key is unchanged)") {
				t.Errorf("%s: exit %d:\n%s", key, code, a.stderr())
			}
			if digestOf(t, c, key) != before {
				t.Errorf("%s: the key changed", key)
			}
			if k := keysOf(t, c); !slices.Contains(k, tmp) || slices.Contains(k, key+":bfload-lock") {
				t.Errorf("%s: keys after the load: %v (want the replacement, and no lock)", key, k)
			}
			must(t, c, "DEL", tmp)
			noTempKeys(t, n, 0)
		}
	}
}

// TestLoadTwoRuns: a second load of a key started while the first one is
// under way (items of the first already in KEY:bfload-tmp), both with the
// same items, and kept running while the first finishes (a run used to
// start by deleting KEY:bfload-tmp, and the first then published the
// second's filter without its first items). Whatever each one's exit, no
// run exits 0 unless KEY then holds every item, and a run that fails says
// why. Bloom and Cuckoo, by each method.
func TestLoadTwoRuns(t *testing.T) {
	n := start(t)
	c := n.dbClient(0)
	for _, cf := range []bool{false, true} {
		for _, m := range []string{"build", "madd"} {
			key, prefix, sizing := "bf-"+m, "BF", []string{"--error-rate", "0.01", "--capacity", "20000"}
			if cf {
				key, prefix, sizing = "cf-"+m, "CF", []string{"--cuckoo", "--capacity", "20000"}
			}
			args := loadArgs(n, append(sizing, "--key", key, "--batch", "10", "--conns", "1", "--method", m)...)
			tmp := key + ":bfload-tmp"
			a, aIn := pipedLoad(t, args...)
			io.WriteString(aIn, lines("item-%d", 0, 1000))
			a.waitLine(t, "the first run's reservation", isMsg("reserved"))
			if m == "madd" {
				waitItemsIn(t, c, prefix, tmp)
			}
			b, bIn := pipedLoad(t, args...)
			// The second run reserves (then it runs beside the first) or
			// is refused.
			for l := range b.lines {
				if l["msg"] == "reserved" {
					break
				}
			}
			io.WriteString(aIn, lines("item-%d", 1000, 2000))
			aIn.Close()
			aCode := a.wait(t)
			if aCode == 0 {
				allIn(t, c, prefix, key, sample("item-%d", 0, 2000, 1))
			}
			io.WriteString(bIn, lines("item-%d", 0, 2000))
			bIn.Close()
			bCode := b.wait(t)
			if bCode == 0 {
				allIn(t, c, prefix, key, sample("item-%d", 0, 2000, 1))
			}
			if aCode != 0 {
				t.Errorf("%s: the first run exited %d:\n%s", key, aCode, a.stderr())
			}
			if bCode != 0 && !strings.Contains(b.stderr(), "another load of "+key+" is running") {
				t.Errorf("%s: the second run exited %d:\n%s", key, bCode, b.stderr())
			}
			noTempKeys(t, n, 0)
		}
	}
}
