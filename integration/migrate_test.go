package integration

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// filterKey is one filter the migrate tests create.
type filterKey struct {
	db     int
	key    string
	prefix string // BF or CF
	ttl    bool
}

// populate fills a node with filters of every shape migrate must carry:
// scaled Bloom chains, a two-chunk Bloom filter, grown and emptied Cuckoo
// filters (an empty one's dump cannot be read and is rebuilt from CF.INFO), TTLs,
// an awkward key name, a second database; and plain strings that must stay
// behind.
func populate(t *testing.T, n *node) []filterKey {
	t.Helper()
	c0, c3 := n.dbClient(0), n.dbClient(3)
	items := func(c *redis.Client, cmd, key, prefix string, count int) {
		for i := 0; i < count; i += 500 {
			args := []any{cmd, key}
			for j := i; j < min(i+500, count); j++ {
				args = append(args, fmt.Sprintf("%s-%d", prefix, j))
			}
			if cmd == "CF.INSERT" {
				args = append(args[:2:2], append([]any{"ITEMS"}, args[2:]...)...)
			}
			must(t, c, args...)
		}
	}
	must(t, c0, "BF.RESERVE", "bf:small", "0.01", "1000")
	items(c0, "BF.MADD", "bf:small", "s", 500)
	must(t, c0, "BF.RESERVE", "bf:scaled", "0.01", "100", "EXPANSION", "2")
	items(c0, "BF.MADD", "bf:scaled", "sc", 3000)
	must(t, c0, "BF.RESERVE", "bf:fixed", "0.001", "5000", "NONSCALING")
	items(c0, "BF.MADD", "bf:fixed", "f", 4000)
	// 20M items at 1%: a 24 MB bit array, two SCANDUMP chunks.
	must(t, c0, "BF.RESERVE", "bf:big", "0.01", "20000000")
	items(c0, "BF.MADD", "bf:big", "b", 5000)
	must(t, c0, "BF.RESERVE", "bf:empty", "0.01", "100")
	must(t, c0, "BF.ADD", "bf:odd key\t\x00é", "x")
	must(t, c0, "BF.RESERVE", "bf:ttl", "0.01", "1000")
	items(c0, "BF.MADD", "bf:ttl", "t", 100)
	must(t, c0, "PEXPIRE", "bf:ttl", "3600000")

	must(t, c0, "CF.RESERVE", "cf:grown", "100", "BUCKETSIZE", "2", "EXPANSION", "2")
	items(c0, "CF.INSERT", "cf:grown", "g", 1000)
	must(t, c0, "CF.RESERVE", "cf:deleted", "1000")
	items(c0, "CF.INSERT", "cf:deleted", "d", 800)
	for i := 0; i < 800; i += 3 {
		must(t, c0, "CF.DEL", "cf:deleted", fmt.Sprintf("d-%d", i))
	}
	// Grown, then emptied (deletes compact it, keeping a delete count):
	// CF.SCANDUMP answers [0, nil] for it, so migrate rebuilds its header
	// from CF.INFO.
	must(t, c0, "CF.RESERVE", "cf:emptied", "64", "EXPANSION", "1")
	items(c0, "CF.INSERT", "cf:emptied", "e", 300)
	for i := 0; i < 300; i++ {
		must(t, c0, "CF.DEL", "cf:emptied", fmt.Sprintf("e-%d", i))
	}
	must(t, c0, "CF.RESERVE", "cf:fresh", "5000", "BUCKETSIZE", "4", "MAXITERATIONS", "50")
	must(t, c0, "CF.RESERVE", "cf:ttl", "1000")
	items(c0, "CF.INSERT", "cf:ttl", "ct", 200)
	must(t, c0, "PEXPIREAT", "cf:ttl", time.Now().Add(2*time.Hour).UnixMilli())
	must(t, c0, "SET", "s:plain", "stays behind")

	must(t, c3, "BF.ADD", "bf:db3", "in db 3")
	must(t, c3, "CF.ADD", "cf:db3", "in db 3")
	must(t, c3, "SET", "s:db3", "stays behind")

	var out []filterKey
	for _, k := range []string{"bf:small", "bf:scaled", "bf:fixed", "bf:big", "bf:empty", "bf:odd key\t\x00é", "bf:ttl"} {
		out = append(out, filterKey{0, k, "BF", k == "bf:ttl"})
	}
	for _, k := range []string{"cf:grown", "cf:deleted", "cf:emptied", "cf:fresh", "cf:ttl"} {
		out = append(out, filterKey{0, k, "CF", k == "cf:ttl"})
	}
	out = append(out, filterKey{3, "bf:db3", "BF", false}, filterKey{3, "cf:db3", "CF", false})
	return out
}

// sameFilters checks every filter of keys on b against a: the same dump
// bytes, the same INFO, BFX.DIGEST equal for keys without a TTL (the digest
// covers the expiry), and TTLs within the PTTL round trip.
func sameFilters(t *testing.T, a, b *node, keys []filterKey) {
	t.Helper()
	for _, k := range keys {
		ca, cb := a.dbClient(k.db), b.dbClient(k.db)
		if typ := cb.Type(ctx(t), k.key).Val(); typ != map[string]string{"BF": "MBbloom--", "CF": "MBbloomCF"}[k.prefix] {
			t.Errorf("db%d %q: target TYPE %q", k.db, k.key, typ)
			continue
		}
		if da, db := dumpOf(t, ca, k.prefix, k.key), dumpOf(t, cb, k.prefix, k.key); string(da) != string(db) {
			t.Errorf("db%d %q: dumps differ (%d and %d bytes)", k.db, k.key, len(da), len(db))
		}
		ia, ib := fmt.Sprint(must(t, ca, k.prefix+".INFO", k.key)), fmt.Sprint(must(t, cb, k.prefix+".INFO", k.key))
		if ia != ib {
			t.Errorf("db%d %q: INFO %s, target %s", k.db, k.key, ia, ib)
		}
		pa, pb := ca.PTTL(ctx(t), k.key).Val(), cb.PTTL(ctx(t), k.key).Val()
		if k.ttl {
			if pa <= 0 || pb <= 0 || (pa-pb).Abs() > 2*time.Second {
				t.Errorf("db%d %q: PTTL %v, target %v", k.db, k.key, pa, pb)
			}
			continue
		}
		if pb != -1*time.Nanosecond && pb != -1*time.Millisecond {
			t.Errorf("db%d %q: target PTTL %v, want none", k.db, k.key, pb)
		}
		if da, db := digestOf(t, ca, k.key), digestOf(t, cb, k.key); da != db {
			t.Errorf("db%d %q: BFX.DIGEST %s, target %s", k.db, k.key, da, db)
		}
	}
}

func noTempKeys(t *testing.T, n *node, dbs ...int) {
	t.Helper()
	for _, db := range dbs {
		for _, k := range keysOf(t, n.dbClient(db)) {
			if strings.HasSuffix(k, ":bfmigrate-tmp") || strings.HasSuffix(k, ":bfload-tmp") || strings.HasSuffix(k, ":bfload-ship") ||
				strings.HasSuffix(k, ":bfload-lock") {
				t.Errorf("db%d: temporary key %q left behind", db, k)
			}
		}
	}
}

func migrateArgs(from, to *node, extra ...string) []string {
	return append([]string{"migrate", "--from", from.baseURL(), "--to", to.baseURL(),
		"--progress", "log", "--log-format", "json"}, extra...)
}

// TestMigrateRoundTrip copies every filter of every database from one
// bfserver into another, and back into the first after its filters were
// deleted: dumps, INFO, BFX.DIGEST and TTLs equal; strings left alone on
// both sides; no temporary keys; a second run copies nothing.
func TestMigrateRoundTrip(t *testing.T) {
	a, b := start(t), start(t)
	keys := populate(t, a)
	must(t, b.dbClient(0), "SET", "s:target", "was here")
	orig := map[string]string{}
	for _, k := range keys {
		if !k.ttl {
			orig[k.key] = digestOf(t, a.dbClient(k.db), k.key)
		}
	}

	r := runTool(t, nil, migrateArgs(a, b)...)
	if r.code != 0 {
		t.Fatalf("migrate exited %d:\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	out := r.outcomes()
	for _, k := range keys {
		if out[k.key] != "copied" {
			t.Errorf("%q: outcome %q, want copied", k.key, out[k.key])
		}
	}
	if len(out) != len(keys) {
		t.Errorf("%d keys in the log, want %d: %v", len(out), len(keys), out)
	}
	sameFilters(t, a, b, keys)
	if v := b.dbClient(0).Get(ctx(t), "s:target").Val(); v != "was here" {
		t.Errorf("target's own string: %q", v)
	}
	for db, s := range map[int]string{0: "s:plain", 3: "s:db3"} {
		if n := b.dbClient(db).Exists(ctx(t), s).Val(); n != 0 {
			t.Errorf("db%d: string %s was copied", db, s)
		}
	}
	if n, want := b.dbClient(0).DBSize(ctx(t)).Val(), int64(13); n != want {
		t.Errorf("target db0 holds %d keys, want %d (12 filters and its own string)", n, want)
	}
	noTempKeys(t, b, 0, 3)

	// Safe to re-run: everything is already there.
	r = runTool(t, nil, migrateArgs(a, b)...)
	if r.code != 0 {
		t.Fatalf("second migrate exited %d:\n%s", r.code, r.stderr)
	}
	for k, o := range r.outcomes() {
		if o != "identical" {
			t.Errorf("second run: %q %s, want identical", k, o)
		}
	}
	if !strings.Contains(r.stdout, " 0 copied") {
		t.Errorf("second run copied something: %s", r.stdout)
	}

	// And back: delete a's filters, migrate b into a.
	for _, k := range keys {
		must(t, a.dbClient(k.db), "DEL", k.key)
	}
	r = runTool(t, nil, migrateArgs(b, a)...)
	if r.code != 0 {
		t.Fatalf("migrate back exited %d:\n%s", r.code, r.stderr)
	}
	sameFilters(t, b, a, keys)
	for _, k := range keys {
		if !k.ttl && digestOf(t, a.dbClient(k.db), k.key) != orig[k.key] {
			t.Errorf("%q: after the round trip the digest differs from the original", k.key)
		}
	}
	if v := a.dbClient(0).Get(ctx(t), "s:plain").Val(); v != "stays behind" {
		t.Errorf("source string after the round trip: %q", v)
	}
	if n := a.dbClient(0).Exists(ctx(t), "s:target").Val(); n != 0 {
		t.Error("the target's string was copied back")
	}
	noTempKeys(t, a, 0, 3)
}

// TestMigrateReplace: a target key that exists and differs is refused and
// named, and left as it was, while the other keys are copied; with
// --replace it is overwritten.
func TestMigrateReplace(t *testing.T) {
	a, b := start(t), start(t)
	ca, cb := a.dbClient(0), b.dbClient(0)
	must(t, ca, "BF.ADD", "k1", "source item")
	must(t, ca, "BF.ADD", "k2", "only in source")
	must(t, ca, "CF.ADD", "k3", "a cuckoo in the source")
	must(t, cb, "BF.ADD", "k1", "target item")
	must(t, cb, "SET", "k3", "a string in the target")
	before := digestOf(t, cb, "k1")

	r := runTool(t, nil, migrateArgs(a, b)...)
	if r.code != 1 {
		t.Fatalf("migrate exited %d, want 1:\n%s", r.code, r.stderr)
	}
	for _, k := range []string{"db0 k1: the target key exists and differs", "db0 k3: the target key exists with type string"} {
		if !strings.Contains(r.stderr, k) {
			t.Errorf("stderr does not name %q:\n%s", k, r.stderr)
		}
	}
	if digestOf(t, cb, "k1") != before {
		t.Error("k1 was changed without --replace")
	}
	if cb.Get(ctx(t), "k3").Val() != "a string in the target" {
		t.Error("k3 was changed without --replace")
	}
	if digestOf(t, cb, "k2") != digestOf(t, ca, "k2") {
		t.Error("k2 was not copied")
	}
	noTempKeys(t, b, 0)

	r = runTool(t, nil, migrateArgs(a, b, "--replace")...)
	if r.code != 0 {
		t.Fatalf("migrate --replace exited %d:\n%s", r.code, r.stderr)
	}
	for _, k := range []string{"k1", "k2", "k3"} {
		if digestOf(t, cb, k) != digestOf(t, ca, k) {
			t.Errorf("%s differs after --replace", k)
		}
	}
	if o := r.outcomes(); o["k1"] != "copied" || o["k2"] != "identical" || o["k3"] != "copied" {
		t.Errorf("outcomes %v", o)
	}
}

// TestMigrateDryRun lists what would move (filters only, per database,
// with --match and --db honoured) and changes nothing; --match and --db
// limit a real run the same way.
func TestMigrateDryRun(t *testing.T) {
	a, b := start(t), start(t)
	populate(t, a)
	must(t, b.dbClient(0), "BF.ADD", "bf:small", "already here")

	r := runTool(t, nil, migrateArgs(a, b, "--dry-run")...)
	if r.code != 0 {
		t.Fatalf("dry run exited %d:\n%s", r.code, r.stderr)
	}
	var listed []string
	for _, l := range strings.Split(r.stdout, "\n")[1:] {
		f := strings.Split(l, "\t")
		if len(f) == 6 {
			listed = append(listed, f[0]+" "+f[1]+" "+f[2])
			if f[1] == "bf:small" && !strings.HasPrefix(f[5], "exists") {
				t.Errorf("bf:small is on the target, action %q", f[5])
			}
			if f[1] == "bf:ttl" && (f[4] == "-1" || f[4] == "0") {
				t.Errorf("bf:ttl listed without its TTL: %q", l)
			}
		}
	}
	want := []string{"0 bf:big bloom", "0 bf:empty bloom", "0 bf:fixed bloom", `0 "bf:odd key\t\x00é" bloom`,
		"0 bf:scaled bloom", "0 bf:small bloom", "0 bf:ttl bloom", "0 cf:deleted cuckoo", "0 cf:emptied cuckoo",
		"0 cf:fresh cuckoo", "0 cf:grown cuckoo", "0 cf:ttl cuckoo", "3 bf:db3 bloom", "3 cf:db3 cuckoo"}
	if !slices.Equal(listed, want) {
		t.Errorf("dry run listed\n%s\nwant\n%s", strings.Join(listed, "\n"), strings.Join(want, "\n"))
	}
	if n := b.dbClient(0).DBSize(ctx(t)).Val() + b.dbClient(3).DBSize(ctx(t)).Val(); n != 1 {
		t.Errorf("the dry run changed the target: %d keys", n)
	}

	r = runTool(t, nil, migrateArgs(a, b, "--dry-run", "--match", "cf:*", "--db", "3")...)
	if r.code != 0 || !strings.Contains(r.stdout, "3\tcf:db3\tcuckoo") || strings.Count(r.stdout, "\n") != 3 {
		t.Errorf("dry run --match cf:* --db 3 (exit %d):\n%s", r.code, r.stdout)
	}

	r = runTool(t, nil, migrateArgs(a, b, "--match", "cf:*", "--db", "0")...)
	if r.code != 0 {
		t.Fatalf("migrate --match exited %d:\n%s", r.code, r.stderr)
	}
	got := keysOf(t, b.dbClient(0))
	slices.Sort(got)
	if want := []string{"bf:small", "cf:deleted", "cf:emptied", "cf:fresh", "cf:grown", "cf:ttl"}; !slices.Equal(got, want) {
		t.Errorf("after --match cf:* --db 0 the target holds %q, want %q", got, want)
	}
	if n := b.dbClient(3).DBSize(ctx(t)).Val(); n != 0 {
		t.Errorf("--db 0 copied %d keys of db 3", n)
	}
}

// TestMigrateResume kills the migrate process with SIGKILL twice, once in
// the middle of a 48 MB filter's chunks and once after some small keys are
// done, and runs it a third time: that run completes, skips what is
// already there, removes the half-loaded temporary key, and every key
// verifies.
func TestMigrateResume(t *testing.T) {
	a, b := start(t), start(t)
	ca := a.dbClient(0)
	must(t, ca, "BF.RESERVE", "a:big", "0.01", "40000000") // 48 MB: three chunks
	must(t, ca, "BF.MADD", "a:big", "x", "y", "z")
	var keys []filterKey
	keys = append(keys, filterKey{0, "a:big", "BF", false})
	for i := 0; i < 30; i++ {
		k := fmt.Sprintf("k:%02d", i)
		if i%2 == 0 {
			must(t, ca, "BF.ADD", k, k)
			keys = append(keys, filterKey{0, k, "BF", false})
		} else {
			must(t, ca, "CF.ADD", k, k)
			keys = append(keys, filterKey{0, k, "CF", false})
		}
	}
	args := migrateArgs(a, b, "--verbose")

	// Run 1: killed after a:big's first data chunk is loaded.
	p := startTool(t, args...)
	p.waitLine(t, "a:big's first data chunk", func(l map[string]any) bool {
		it, _ := l["iter"].(float64)
		return l["msg"] == "chunk" && l["key"] == "a:big" && it > 1
	})
	p.kill()
	cb := b.dbClient(0)
	if cb.Exists(ctx(t), "a:big").Val() != 0 {
		t.Fatal("a:big exists on the target although its copy was interrupted")
	}
	if cb.Exists(ctx(t), "a:big:bfmigrate-tmp").Val() != 1 {
		t.Fatal("the interrupted copy left no temporary key (was it interrupted?)")
	}

	// Run 2: killed after five small keys are copied.
	p = startTool(t, args...)
	copied := 0
	p.waitLine(t, "five keys copied", func(l map[string]any) bool {
		if l["msg"] == "copied" && l["key"] != "a:big" {
			copied++
		}
		return copied == 5
	})
	p.kill()

	// Run 3: to the end.
	r := runTool(t, nil, args...)
	if r.code != 0 {
		t.Fatalf("resumed migrate exited %d:\n%s", r.code, r.stderr)
	}
	out := r.outcomes()
	identical := 0
	for _, o := range out {
		if o == "identical" {
			identical++
		}
	}
	if out["a:big"] != "identical" || identical < 6 {
		t.Errorf("the third run redid finished keys: %v", out)
	}
	if len(out) != len(keys) {
		t.Errorf("the third run handled %d keys, want %d", len(out), len(keys))
	}
	sameFilters(t, a, b, keys)
	noTempKeys(t, b, 0)
}

// TestMigrateChangedDuringCopy writes to a large source filter while it is
// copied: with writes throughout, migrate gives up after its retries and
// names the key; when the writes stop after the first change was detected,
// the retry copies a consistent filter.
func TestMigrateChangedDuringCopy(t *testing.T) {
	a, b := start(t), start(t)
	ca := a.dbClient(0)
	must(t, ca, "BF.RESERVE", "hot", "0.01", "20000000") // 24 MB: the copy takes a while
	must(t, ca, "BF.ADD", "calm", "x")

	var stop atomic.Bool
	var wg sync.WaitGroup
	var n atomic.Int64
	write := func() {
		stop.Store(false)
		wg.Go(func() {
			w := a.dbClient(0)
			for i := 0; !stop.Load(); i++ {
				if err := w.Do(context.Background(), "BF.ADD", "hot", fmt.Sprintf("w-%d-%d", n.Load(), i)).Err(); err != nil {
					t.Errorf("writer: %v", err)
					return
				}
			}
		})
	}

	write()
	r := runTool(t, nil, migrateArgs(a, b, "--retries", "1")...)
	stop.Store(true)
	wg.Wait()
	if r.code != 1 || !strings.Contains(r.stderr, "db0 hot: the source key changed during each of 2 copies") {
		t.Fatalf("with writes throughout: exit %d, stderr:\n%s", r.code, r.stderr)
	}
	if o := r.outcomes(); o["calm"] != "copied" {
		t.Errorf("calm: %q", o["calm"])
	}
	if b.dbClient(0).Exists(ctx(t), "hot").Val() != 0 {
		t.Error("a changing key was installed on the target")
	}
	noTempKeys(t, b, 0)

	n.Add(1)
	write()
	p := startTool(t, migrateArgs(a, b, "--retries", "5")...)
	p.waitLine(t, "a change detected", func(l map[string]any) bool {
		return l["key"] == "hot" && strings.HasPrefix(fmt.Sprint(l["msg"]), "changed during copy")
	})
	stop.Store(true)
	wg.Wait()
	if code := p.wait(t); code != 0 {
		t.Fatalf("migrate exited %d:\n%s", code, p.stderr())
	}
	if digestOf(t, b.dbClient(0), "hot") != digestOf(t, ca, "hot") {
		t.Error("hot differs from the source after the writes stopped")
	}
	noTempKeys(t, b, 0)
}
