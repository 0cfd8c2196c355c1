package integration

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// example is the running examples/cachepenetration process.
type example struct {
	base string
	http *http.Client
}

func startExample(t *testing.T, bf *node, pg *postgres) *example {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "cachepenetration")
	build := exec.Command("go", "build", "-o", bin, "../examples/cachepenetration")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building the example: %v\n%s", err, out)
	}
	addr := freeAddr(t)
	cmd := exec.Command(bin, "--addr", addr, "--redis", bf.baseURL(), "--postgres", pg.dsn,
		"--relay-key", "search:products", "--relay-interval", "50ms")
	keepRunning(t, cmd)
	e := &example{base: "http://" + addr, http: &http.Client{Timeout: 10 * time.Second,
		Transport: &http.Transport{MaxIdleConnsPerHost: 32}}}
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := e.http.Get(e.base + "/healthz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return e
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the example did not come up: %v", err)
		}
		time.Sleep(20 * time.Millisecond) // polling for the listener
	}
}

func (e *example) get(id int64) (int, error) {
	resp, err := e.http.Get(fmt.Sprintf("%s/products/%d", e.base, id))
	if err != nil {
		return 0, err
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode, nil
}

func (e *example) create(id int64) (int, error) {
	body, _ := json.Marshal(map[string]any{"id": id, "name": fmt.Sprintf("new product %d", id), "price_cents": 999})
	resp, err := e.http.Post(e.base+"/products", "application/json", bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode, nil
}

func (e *example) stats(t *testing.T) map[string]int64 {
	t.Helper()
	resp, err := e.http.Get(e.base + "/stats")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var m map[string]int64
	if err := json.NewDecoder(resp.Body).Decode(&m); err != nil {
		t.Fatal(err)
	}
	return m
}

// lookups counts the read path's query in pg_stat_statements.
func lookups(t *testing.T, db *pgx.Conn) int64 {
	t.Helper()
	var n int64
	err := db.QueryRow(ctx(t), "SELECT coalesce(sum(calls), 0)::bigint FROM pg_stat_statements WHERE query = $1",
		"SELECT name, price_cents FROM products WHERE id = $1").Scan(&n)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestCachePenetration runs the worked example against bfserver and a real
// PostgreSQL: 10,000 probes for ids that do not exist reach PostgreSQL only
// for the filter's false positives (counted by pg_stat_statements and by the
// example), and not at all the second time (null caching); a product
// created through the write path is never answered 404, even one whose id
// was a cached false positive, nor one created while bfserver load rebuilds
// the filter; the outbox relay feeds the other service's filter.
func TestCachePenetration(t *testing.T) {
	pg := startPostgres(t)
	bf := start(t)
	ex := startExample(t, bf, pg) // creates the schema
	db := pg.conn(t)
	pg.exec(t, db, "INSERT INTO products (id, name, price_cents) SELECT g, 'product ' || g, g FROM generate_series(1, 20000) g")
	rebuild := func(capacity string) {
		t.Helper()
		r := runTool(t, nil, loadArgs(bf, "--key", "products", "--error-rate", "0.01", "--capacity", capacity,
			"--postgres", pg.dsn, "--query", "SELECT id FROM products")...)
		if r.code != 0 {
			t.Fatalf("load exited %d:\n%s", r.code, r.stderr)
		}
		t.Logf("%s", strings.TrimSpace(r.stdout))
	}
	rebuild("20000")
	c := bf.dbClient(0)

	// The filter's false positives among the probes, asked directly.
	const probes = 10000
	var fps []int64
	for lo := int64(1_000_000); lo < 1_000_000+probes; lo += 1000 {
		args := []any{"BF.MEXISTS", "products"}
		for id := lo; id < lo+1000; id++ {
			args = append(args, id)
		}
		for i, v := range must(t, c, args...).([]any) {
			if v.(int64) == 1 {
				fps = append(fps, lo+int64(i))
			}
		}
	}
	t.Logf("%d false positives among %d probes", len(fps), probes)
	if len(fps) == 0 || len(fps) > 300 {
		t.Fatalf("%d false positives at 1%% over %d probes: the filter is not what the test expects", len(fps), probes)
	}

	probe := func() {
		t.Helper()
		var wg sync.WaitGroup
		var next atomic.Int64
		var bad atomic.Int64
		for range 8 {
			wg.Go(func() {
				for {
					i := next.Add(1) - 1
					if i >= probes {
						return
					}
					code, err := ex.get(1_000_000 + i)
					if err != nil || code != 404 {
						if bad.Add(1) < 5 {
							t.Errorf("GET %d: %d %v", 1_000_000+i, code, err)
						}
					}
				}
			})
		}
		wg.Wait()
	}
	if _, err := db.Exec(ctx(t), "SELECT pg_stat_statements_reset()"); err != nil {
		t.Fatal(err)
	}
	st0 := ex.stats(t)
	probe()
	st1 := ex.stats(t)
	if q := lookups(t, db); q != int64(len(fps)) {
		t.Errorf("pg_stat_statements: %d lookups reached PostgreSQL, want %d (the false positives)", q, len(fps))
	}
	if d := st1["db_queries"] - st0["db_queries"]; d != int64(len(fps)) {
		t.Errorf("the example asked the database %d times, want %d", d, len(fps))
	}
	if d := st1["filter_negatives"] - st0["filter_negatives"]; d != probes-int64(len(fps)) {
		t.Errorf("%d probes answered by the filter, want %d", d, probes-len(fps))
	}
	// Again: the false positives are cached as absent now.
	probe()
	if q := lookups(t, db); q != int64(len(fps)) {
		t.Errorf("second pass: %d lookups in all, want still %d (null caching)", q, len(fps))
	}
	if d := ex.stats(t)["null_hits"] - st1["null_hits"]; d != int64(len(fps)) {
		t.Errorf("second pass: %d null-cache hits, want %d", d, len(fps))
	}

	// A false positive that is cached as absent, then created: found.
	fp := fps[0]
	if code, err := ex.create(fp); err != nil || code != 201 {
		t.Fatalf("create %d: %d %v", fp, code, err)
	}
	if code, err := ex.get(fp); err != nil || code != 200 {
		t.Fatalf("GET %d after its create: %d %v (the cached absence hid it)", fp, code, err)
	}

	// Creates, each read back at once and by a poller until the end.
	var createdIDs []int64
	var mu sync.Mutex
	stop := make(chan struct{})
	var pollers sync.WaitGroup
	var polls atomic.Int64
	for range 2 {
		pollers.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				mu.Lock()
				ids := append([]int64(nil), createdIDs...)
				mu.Unlock()
				if len(ids) == 0 {
					continue
				}
				id := ids[polls.Add(1)%int64(len(ids))]
				if code, err := ex.get(id); err != nil || code != 200 {
					t.Errorf("poller: GET %d after its create: %d %v", id, code, err)
					return
				}
			}
		})
	}
	var writers sync.WaitGroup
	var nextID atomic.Int64
	nextID.Store(2_000_000)
	const creates = 400
	for range 4 {
		writers.Go(func() {
			for range creates / 4 {
				id := nextID.Add(1)
				if code, err := ex.create(id); err != nil || code != 201 {
					t.Errorf("create %d: %d %v", id, code, err)
					return
				}
				mu.Lock()
				createdIDs = append(createdIDs, id)
				mu.Unlock()
				if code, err := ex.get(id); err != nil || code != 200 {
					t.Errorf("GET %d right after its create: %d %v", id, code, err)
				}
			}
		})
	}
	// The rebuild from PostgreSQL, while products are being created and
	// read: a create the rebuild's query did not see must survive its
	// RENAME.
	deadline := time.Now().Add(30 * time.Second)
	for {
		mu.Lock()
		n := len(createdIDs)
		mu.Unlock()
		if n >= 50 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("only %d creates in 30 s", n)
		}
		time.Sleep(5 * time.Millisecond) // polling for the writers' progress
	}
	for range 3 {
		rebuild("40000")
	}
	writers.Wait()
	close(stop)
	pollers.Wait()
	if polls.Load() < 10 {
		t.Errorf("the pollers read only %d times", polls.Load())
	}
	for _, id := range append([]int64{fp}, createdIDs...) {
		if code, err := ex.get(id); err != nil || code != 200 {
			t.Errorf("GET %d after the rebuilds: %d %v", id, code, err)
		}
	}

	// The relay has fed the other service's filter.
	deadline = time.Now().Add(30 * time.Second)
	for {
		var unsent int64
		if err := db.QueryRow(ctx(t), "SELECT count(*) FROM outbox WHERE sent_at IS NULL").Scan(&unsent); err != nil {
			t.Fatal(err)
		}
		if unsent == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d outbox rows still unsent after 30 s", unsent)
		}
		time.Sleep(50 * time.Millisecond) // polling for the relay
	}
	args := []any{"BF.MEXISTS", "search:products", fp}
	for _, id := range createdIDs {
		args = append(args, id)
	}
	for i, v := range must(t, c, args...).([]any) {
		if v.(int64) != 1 {
			t.Errorf("search:products lacks %v", args[i+2])
		}
	}
	noTempKeys(t, bf, 0)
	if len(createdIDs) != creates {
		t.Errorf("%d products created, want %d", len(createdIDs), creates)
	}
}
