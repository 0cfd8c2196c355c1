package movein

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/bfserver/bfserver/memstore"
	"github.com/bfserver/bfserver/server"
)

// serve starts an in-process bfserver (memstore) and returns its URL and
// a client of it.
func serve(t *testing.T) (string, *redis.Client) {
	t.Helper()
	srv, err := server.New(server.Options{Addr: "127.0.0.1:0"}, memstore.New())
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Listen(); err != nil {
		t.Fatal(err)
	}
	go srv.Serve()
	t.Cleanup(func() { srv.Close() })
	c := redis.NewClient(&redis.Options{Addr: srv.Addr().String(), Protocol: 2, MaxRetries: -1})
	t.Cleanup(func() { c.Close() })
	return "redis://" + srv.Addr().String(), c
}

// Runs that take the same lock at the same moment: exactly one gets it,
// each time; the others are refused, the lock named.
func TestTakeOneWinner(t *testing.T) {
	_, c := serve(t)
	cx := context.Background()
	temps := []string{"k" + LoadSuffix, "k" + ShipSuffix}
	for round := range 20 {
		start := make(chan struct{})
		claims := make([]*claim, 8)
		errs := make([]error, 8)
		var wg sync.WaitGroup
		for i := range claims {
			wg.Go(func() {
				<-start
				claims[i], errs[i] = take(cx, c, "k", temps)
			})
		}
		close(start)
		wg.Wait()
		var won *claim
		for i, cl := range claims {
			var busy *busyError
			switch {
			case cl != nil && won == nil:
				won = cl
			case cl != nil:
				t.Fatalf("round %d: two runs took the lock", round)
			case !errors.As(errs[i], &busy) || !strings.Contains(errs[i].Error(), "k"+LockSuffix+" (held by pid "):
				t.Fatalf("round %d: %v", round, errs[i])
			}
		}
		if won == nil {
			t.Fatalf("round %d: no run took the lock: %v", round, errs)
		}
		if err := won.release(cx); err != nil {
			t.Fatal(err)
		}
	}
	if n := c.Exists(cx, "k"+LockSuffix).Val(); n != 0 {
		t.Fatal("the lock is left")
	}
}

// A run whose lock was taken over writes nothing more and deletes nothing
// of the new holder's.
func TestClaimLost(t *testing.T) {
	_, c := serve(t)
	cx := context.Background()
	a, err := take(cx, c, "k", nil)
	if err != nil {
		t.Fatal(err)
	}
	c.Del(cx, "k"+LockSuffix) // what --force does
	b, err := take(cx, c, "k", nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.do(cx, nil, nil, func(p redis.Pipeliner) { p.Set(cx, "b-made", "1", 0); b.mark(cx, p, "b-made") }); err != nil {
		t.Fatal(err)
	}
	err = a.do(cx, nil, nil, func(p redis.Pipeliner) { p.Set(cx, "a-wrote", "1", 0) })
	if !errors.Is(err, errLost) {
		t.Fatalf("a wrote with a lost lock: %v", err)
	}
	if err := a.release(cx, "b-made"); !errors.Is(err, errLost) {
		t.Fatalf("release: %v", err)
	}
	if got := c.Exists(cx, "a-wrote", "b-made", "k"+LockSuffix).Val(); got != 2 {
		t.Fatalf("%d of b-made and b's lock left (a-wrote must not be there)", got)
	}
	if err := b.release(cx, "b-made"); err != nil {
		t.Fatal(err)
	}
	if got := c.DBSize(cx).Val(); got != 0 {
		t.Fatalf("%d keys left", got)
	}
}

// A run's clean-up deletes only the keys that carry its mark: a key of
// the same name that another client made (or replaced) stays, as does a
// key another run marked.
func TestReleaseOnlyMarked(t *testing.T) {
	_, c := serve(t)
	cx := context.Background()
	a, err := take(cx, c, "k", nil)
	if err != nil {
		t.Fatal(err)
	}
	other := &claim{markTTL: a.markTTL + 2*markSlack, since: time.Now()} // another run's mark
	err = a.do(cx, nil, nil, func(p redis.Pipeliner) {
		p.Set(cx, "mine", "1", 0)
		a.mark(cx, p, "mine")
		p.Set(cx, "unmarked", "1", 0)
		p.Set(cx, "theirs", "1", 0)
		other.mark(cx, p, "theirs")
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.release(cx, "mine", "unmarked", "theirs", "missing"); err != nil {
		t.Fatal(err)
	}
	if got := c.Keys(cx, "*").Val(); !slices.Equal(slices.Sorted(slices.Values(got)), []string{"theirs", "unmarked"}) {
		t.Errorf("keys left: %v (want theirs and unmarked)", got)
	}
}

// lineReader serves "prefix-i\n" for i in [0, n), one line a Read, and
// calls at(i) before line i when set (once).
type lineReader struct {
	prefix string
	i, n   int
	hook   int
	at     func()
}

func (r *lineReader) Read(p []byte) (int, error) {
	if r.i == r.n {
		return 0, io.EOF
	}
	if r.at != nil && r.i == r.hook {
		r.at()
		r.at = nil
	}
	r.i++
	return copy(p, fmt.Sprintf("%s-%d\n", r.prefix, r.i-1)), nil
}

func load(t *testing.T, url string, stdin io.Reader, args ...string) (int, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := Load(context.Background(), append([]string{"--to", url, "--progress", "log"}, args...), stdin, &out, &errb)
	return code, out.String() + errb.String()
}

// kindArgs are the sizing flags of a Bloom or Cuckoo load.
func kindArgs(cf bool) []string {
	if cf {
		return []string{"--cuckoo", "--capacity", "4000"}
	}
	return []string{"--error-rate", "0.01", "--capacity", "4000"}
}

// The temporary key deleted while a load runs (after some of the items
// are in it): the load fails, saying so, KEY keeps the old filter whole,
// and nothing is left. Sent as BF.MADD, the rest would have gone into a
// new default filter that the RENAME published.
func TestLoadTempKeyDeleted(t *testing.T) {
	url, c := serve(t)
	cx := context.Background()
	for _, cf := range []bool{false, true} {
		for _, method := range []string{"build", "madd"} {
			key := fmt.Sprintf("cf%v-%s", cf, method)
			prefix := "BF"
			if cf {
				prefix = "CF"
			}
			t.Run(key, func(t *testing.T) {
				if code, out := load(t, url, &lineReader{prefix: "old", n: 1000}, append(kindArgs(cf), "--key", key)...); code != 0 {
					t.Fatalf("first load: %d\n%s", code, out)
				}
				before := dumpOf(t, c, prefix, key)
				tmp := key + LoadSuffix
				del := func() {
					deadline := time.Now().Add(10 * time.Second)
					for cardOf(c, prefix, tmp) == 0 {
						if time.Now().After(deadline) {
							t.Error("no item reached the temporary key")
							break
						}
						time.Sleep(time.Millisecond) // polling for the first batches
					}
					if n := c.Del(cx, tmp).Val(); n != 1 {
						t.Errorf("DEL %s: %d", tmp, n)
					}
				}
				in := &lineReader{prefix: "old", n: 1000, hook: 500, at: del}
				if method == "build" {
					in.at = func() { c.Del(cx, tmp) } // reserved, not filled
				}
				code, out := load(t, url, in, append(kindArgs(cf), "--key", key, "--method", method, "--batch", "10", "--conns", "1")...)
				if code != 1 || !strings.Contains(out, tmp+" was deleted while the load ran") || !strings.Contains(out, "the key is unchanged") {
					t.Errorf("exit %d:\n%s", code, out)
				}
				if !bytes.Equal(dumpOf(t, c, prefix, key), before) {
					t.Error("the key changed")
				}
				if keys := c.Keys(cx, key+"*").Val(); !slices.Equal(keys, []string{key}) {
					t.Errorf("keys left: %v", keys)
				}
			})
		}
	}
}

// cardOf is the number of items a filter holds (0 when it is missing).
func cardOf(c *redis.Client, prefix, key string) int64 {
	if prefix == "BF" {
		n, _ := c.Do(context.Background(), "BF.CARD", key).Int64()
		return n
	}
	v, _ := c.Do(context.Background(), "CF.INFO", key).Slice()
	for i := 0; i+1 < len(v); i += 2 {
		if v[i] == "Number of items inserted" {
			return v[i+1].(int64)
		}
	}
	return 0
}

func dumpOf(t *testing.T, c *redis.Client, prefix, key string) []byte {
	t.Helper()
	var out []byte
	err := scanDump(context.Background(), c, map[string]kind{"BF": bloom, "CF": cuckoo}[prefix], key, nil,
		func(_ int64, data string) error {
			out = append(out, data...)
			return nil
		})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// A lock or a temporary key left by another run refuses the load, naming
// them, and changes nothing; --force deletes them and loads.
func TestLoadRefusesLeftovers(t *testing.T) {
	url, c := serve(t)
	cx := context.Background()
	if code, out := load(t, url, &lineReader{prefix: "old", n: 100}, append(kindArgs(false), "--key", "k")...); code != 0 {
		t.Fatalf("first load: %d\n%s", code, out)
	}
	before := dumpOf(t, c, "BF", "k")
	c.Set(cx, "k"+LockSuffix, "pid 1 on elsewhere", 0)
	code, out := load(t, url, &lineReader{prefix: "new", n: 100}, append(kindArgs(false), "--key", "k")...)
	if code != 1 || !strings.Contains(out, "k:bfload-lock (held by pid 1 on elsewhere): another load of k is running") ||
		!strings.Contains(out, "--force") {
		t.Errorf("exit %d:\n%s", code, out)
	}
	if c.Get(cx, "k"+LockSuffix).Val() != "pid 1 on elsewhere" || !bytes.Equal(dumpOf(t, c, "BF", "k"), before) {
		t.Error("a refused load changed the lock or the key")
	}
	c.Del(cx, "k"+LockSuffix)
	c.Do(cx, "BF.RESERVE", "k"+ShipSuffix, 0.01, 10)
	code, out = load(t, url, &lineReader{prefix: "new", n: 100}, append(kindArgs(false), "--key", "k", "--method", "madd")...)
	if code != 1 || !strings.Contains(out, "k:bfload-ship: another load of k is running") {
		t.Errorf("exit %d:\n%s", code, out)
	}
	if c.Exists(cx, "k"+LockSuffix).Val() != 0 || c.Exists(cx, "k"+ShipSuffix).Val() != 1 {
		t.Error("a refused load left its lock or deleted the left-over")
	}
	code, out = load(t, url, &lineReader{prefix: "new", n: 100}, append(kindArgs(false), "--key", "k", "--force")...)
	if code != 0 {
		t.Fatalf("--force: %d\n%s", code, out)
	}
	if keys := c.Keys(cx, "k*").Val(); !slices.Equal(keys, []string{"k"}) {
		t.Errorf("keys left: %v", keys)
	}
	if c.Do(cx, "BF.EXISTS", "k", "new-99").Val() != int64(1) {
		t.Error("--force did not load")
	}
}

// testLoader is a loader of key (Bloom, 0.01, 4000) by method, as Load
// would make it, without flags.
func testLoader(t *testing.T, c *redis.Client, key, method string) *loader {
	t.Helper()
	lo := &logOptions{format: "text", progress: "log", every: time.Hour}
	rep, err := newReporter(io.Discard, *lo, "items")
	if err != nil {
		t.Fatal(err)
	}
	o := &loadOptions{key: key, errorRate: 0.01, capacity: 4000, method: method, batch: 10, pipeline: 2, conns: 2, log: lo}
	return &loader{o: o, c: c, rep: rep, unit: "items"}
}

// items is a source of "prefix-i" for i in [0, n).
func items(prefix string, n int) func(emit func([]byte) error) error {
	return func(emit func([]byte) error) error {
		for i := range n {
			if err := emit(fmt.Appendf(nil, "%s-%d", prefix, i)); err != nil {
				return err
			}
		}
		return nil
	}
}

// A live build (--postgres) whose KEY:bfload-tmp is replaced after the
// built filter was renamed to it, before the second pass: the load fails
// instead of publishing the replacement, which holds only what the second
// pass sent, and leaves it.
func TestLoadLiveReplaced(t *testing.T) {
	_, c := serve(t)
	cx := context.Background()
	tmp := "k" + LoadSuffix
	passes := 0
	read := func(emit func([]byte) error) error {
		passes++
		if passes == 2 {
			_, err := c.TxPipelined(cx, func(p redis.Pipeliner) error {
				p.Del(cx, tmp)
				p.Do(cx, "BF.RESERVE", tmp, 0.01, 4000)
				return nil
			})
			if err != nil {
				t.Error(err)
			}
			if err := items("meanwhile", 10)(emit); err != nil {
				return err
			}
		}
		return items("row", 1000)(emit)
	}
	_, _, err := testLoader(t, c, "k", "build").run(cx, read, true)
	if err == nil || !strings.Contains(err.Error(), tmp+" was replaced while the load ran") {
		t.Fatalf("run: %v", err)
	}
	if keys := c.Keys(cx, "k*").Val(); !slices.Equal(keys, []string{tmp}) {
		t.Errorf("keys left: %v (want only the replacement)", keys)
	}
}

// Writers adding to KEY:bfload-tmp all along (as the write path of
// examples/cachepenetration does) do not keep the swap from happening:
// a WATCH they abort is tried again. By madd, and by a live build (the
// one that writers may add beside: a build from a file verifies the
// dump it loaded, which their adds would change).
func TestLoadSwapBesideWriters(t *testing.T) {
	_, c := serve(t)
	cx := context.Background()
	for _, m := range []string{"build", "madd"} {
		key := "k-" + m
		tmp := key + LoadSuffix
		stop := make(chan struct{})
		var writes int
		var wg sync.WaitGroup
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				c.Do(cx, "BF.INSERT", tmp, "NOCREATE", "ITEMS", fmt.Sprint("w-", i))
				writes++
			}
		})
		_, _, err := testLoader(t, c, key, m).run(cx, items("row", 3000), m == "build")
		close(stop)
		wg.Wait()
		if err != nil {
			t.Fatalf("%s: %v (%d writes)", m, err, writes)
		}
		args := []any{"BF.MEXISTS", key}
		for i := range 3000 {
			args = append(args, fmt.Sprint("row-", i))
		}
		for i, v := range c.Do(cx, args...).Val().([]any) {
			if v != int64(1) {
				t.Fatalf("%s: row-%d missing", m, i)
			}
		}
		if ttl := c.PTTL(cx, key).Val(); ttl != -1 {
			t.Errorf("%s: the published key's PTTL is %v", m, ttl)
		}
	}
}
