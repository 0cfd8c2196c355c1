// Command cachepenetration is a worked example of the cache-penetration
// guard: a product API that asks a Bloom filter in bfserver before its cache
// and its database, so requests for ids that do not exist (a bot walking the
// id space) are answered 404 from the filter and never reach PostgreSQL.
//
// Read path, GET /products/{id}:
//
//	BF.EXISTS products id = 0  ->  404 (cache and database untouched)
//	in-process cache hit       ->  the product, or 404 for a cached absence
//	SELECT ... WHERE id = $1   ->  the product (cached), or 404 (a false
//	                               positive of the filter: cached as absent
//	                               for 30-60 s, so it costs one query)
//
// Write path, POST /products: INSERT the product and an outbox row in one
// transaction, commit, BF.ADD products id (and to the key a running rebuild
// builds), then answer 201; so a product whose create was answered is never
// answered 404. A relay loop turns outbox
// rows into BF.ADD on other services' filters (--relay-key), and on ours
// again, which repairs a create whose own BF.ADD failed after the commit.
//
// Rebuild (nightly, or after changing the filter's size):
//
//	bfserver load --to redis://bfserver:6379 --key products \
//	  --error-rate 0.001 --capacity 10000000 \
//	  --postgres "$DSN" --query 'SELECT id FROM products'
//
// builds the new filter in a temporary key and RENAMEs it over the live one.
// GET /stats reports how many lookups reached the database. See README.md.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"
)

type product struct {
	ID         int64  `json:"id"`
	Name       string `json:"name"`
	PriceCents int64  `json:"price_cents"`
}

const schema = `
CREATE TABLE IF NOT EXISTS products (
	id          bigint PRIMARY KEY,
	name        text NOT NULL,
	price_cents bigint NOT NULL DEFAULT 0,
	created_at  timestamptz NOT NULL DEFAULT now()
);
CREATE TABLE IF NOT EXISTS outbox (
	id         bigserial PRIMARY KEY,
	topic      text NOT NULL,
	product_id bigint NOT NULL,
	created_at timestamptz NOT NULL DEFAULT now(),
	sent_at    timestamptz
);
CREATE INDEX IF NOT EXISTS outbox_unsent ON outbox (id) WHERE sent_at IS NULL;
`

// lookupSQL is the read path's only query (tests count it in
// pg_stat_statements).
const lookupSQL = "SELECT name, price_cents FROM products WHERE id = $1"

type stats struct {
	Requests    atomic.Int64
	Negatives   atomic.Int64 // answered 404 by the filter
	CacheHits   atomic.Int64
	NullHits    atomic.Int64 // answered 404 by a cached absence
	DBQueries   atomic.Int64
	FalsePos    atomic.Int64 // the filter said maybe, the database no
	FilterErr   atomic.Int64
	Created     atomic.Int64
	RelayedRows atomic.Int64
}

type server struct {
	rdb            *redis.Client
	relay          *redis.Client
	db             *pgxpool.Pool
	filter         string
	relayKeys      []string
	cache          *cache
	cacheTTL       time.Duration
	nullLo, nullHi time.Duration
	st             stats
	log            *slog.Logger
}

func main() {
	addr := flag.String("addr", "127.0.0.1:8080", "HTTP listen address")
	redisURL := flag.String("redis", "redis://127.0.0.1:6379", "bfserver URL (the filter)")
	relayURL := flag.String("relay-redis", "", "URL of the server holding the other services' filters (default: --redis)")
	dsn := flag.String("postgres", "postgres://postgres@127.0.0.1:5432/postgres", "PostgreSQL DSN")
	filter := flag.String("filter", "products", "the Bloom filter key of product ids")
	relayKeys := flag.String("relay-key", "search:products", "comma-separated filter keys the outbox relay feeds (other services'); the relay re-adds to --filter too")
	cacheTTL := flag.Duration("cache-ttl", 5*time.Minute, "how long a product stays cached")
	nullLo := flag.Duration("null-ttl-min", 30*time.Second, "a cached absence lives at least this long")
	nullHi := flag.Duration("null-ttl-max", 60*time.Second, "and less than this long")
	cacheSize := flag.Int("cache-size", 100000, "most entries in the in-process cache")
	relayEvery := flag.Duration("relay-interval", 200*time.Millisecond, "how often the relay looks for outbox rows")
	flag.Parse()

	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	s, err := open(ctx, *redisURL, *relayURL, *dsn, log)
	if err != nil {
		log.Error("start", "err", err)
		os.Exit(1)
	}
	s.filter = *filter
	s.relayKeys = splitList(*relayKeys)
	s.cache = newCache(*cacheSize)
	s.cacheTTL, s.nullLo, s.nullHi = *cacheTTL, *nullLo, *nullHi
	go s.relayLoop(ctx, *relayEvery)

	srv := &http.Server{Addr: *addr, Handler: s.routes()}
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		srv.Shutdown(sctx)
	}()
	log.Info("listening", "addr", *addr, "filter", *filter)
	if err := srv.ListenAndServe(); err != nil && !errors.Is(err, http.ErrServerClosed) {
		log.Error("serve", "err", err)
		os.Exit(1)
	}
}

func splitList(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

func open(ctx context.Context, redisURL, relayURL, dsn string, log *slog.Logger) (*server, error) {
	opt, err := redis.ParseURL(redisURL)
	if err != nil {
		return nil, err
	}
	s := &server{rdb: redis.NewClient(opt), log: log}
	s.relay = s.rdb
	if relayURL != "" {
		ropt, err := redis.ParseURL(relayURL)
		if err != nil {
			return nil, err
		}
		s.relay = redis.NewClient(ropt)
	}
	if err := s.rdb.Ping(ctx).Err(); err != nil {
		return nil, fmt.Errorf("bfserver: %w", err)
	}
	s.db, err = pgxpool.New(ctx, dsn)
	if err != nil {
		return nil, err
	}
	if _, err := s.db.Exec(ctx, schema); err != nil {
		return nil, fmt.Errorf("schema: %w", err)
	}
	return s, nil
}

func (s *server) routes() *http.ServeMux {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /products/{id}", s.handleGet)
	mux.HandleFunc("POST /products", s.handleCreate)
	mux.HandleFunc("GET /stats", s.handleStats)
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("ok\n")) })
	return mux
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	json.NewEncoder(w).Encode(v)
}

func notFound(w http.ResponseWriter) {
	writeJSON(w, http.StatusNotFound, map[string]string{"error": "no such product"})
}

// handleGet is the read path.
func (s *server) handleGet(w http.ResponseWriter, r *http.Request) {
	s.st.Requests.Add(1)
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err != nil {
		notFound(w) // no product has such an id
		return
	}
	ctx := r.Context()
	// The guard. The item is the id's canonical decimal text, as
	// `bfserver load --postgres --query 'SELECT id FROM products'` writes it.
	maybe, err := s.rdb.Do(ctx, "BF.EXISTS", s.filter, id).Bool()
	switch {
	case err != nil:
		// Fail open: without the filter, the cache and database still
		// answer correctly, only without the protection.
		s.st.FilterErr.Add(1)
		s.log.Warn("BF.EXISTS failed; asking the database", "err", err)
	case !maybe:
		s.st.Negatives.Add(1)
		notFound(w)
		return
	}
	if e, ok := s.cache.get(id); ok {
		if e.p == nil {
			s.st.NullHits.Add(1)
			notFound(w)
			return
		}
		s.st.CacheHits.Add(1)
		writeJSON(w, http.StatusOK, e.p)
		return
	}
	gen := s.cache.generation()
	s.st.DBQueries.Add(1)
	p := &product{ID: id}
	err = s.db.QueryRow(ctx, lookupSQL, id).Scan(&p.Name, &p.PriceCents)
	if errors.Is(err, pgx.ErrNoRows) {
		s.st.FalsePos.Add(1)
		s.cache.put(id, nil, nullTTL(s.nullLo, s.nullHi), gen)
		notFound(w)
		return
	}
	if err != nil {
		http.Error(w, "database error", http.StatusServiceUnavailable)
		return
	}
	s.cache.put(id, p, s.cacheTTL, gen)
	writeJSON(w, http.StatusOK, p)
}

// handleCreate is the write path.
func (s *server) handleCreate(w http.ResponseWriter, r *http.Request) {
	var p product
	if err := json.NewDecoder(r.Body).Decode(&p); err != nil || p.Name == "" {
		http.Error(w, "want {\"id\": N, \"name\": \"...\", \"price_cents\": N}", http.StatusBadRequest)
		return
	}
	ctx := r.Context()
	err := pgx.BeginFunc(ctx, s.db, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "INSERT INTO products (id, name, price_cents) VALUES ($1, $2, $3)", p.ID, p.Name, p.PriceCents); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, "INSERT INTO outbox (topic, product_id) VALUES ('product.created', $1)", p.ID)
		return err
	})
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "23505" {
		http.Error(w, "product exists", http.StatusConflict)
		return
	}
	if err != nil {
		http.Error(w, "database error", http.StatusServiceUnavailable)
		return
	}
	// Committed. Make it visible through the filter before answering, so
	// that a client that was told "created" is never told "no such product".
	var addErr error
	for attempt := 0; attempt < 3; attempt++ {
		if addErr = s.addToFilter(ctx, p.ID); addErr == nil {
			break
		}
		time.Sleep(time.Duration(50<<attempt) * time.Millisecond) // back off before retrying
	}
	s.cache.created(p.ID)
	if addErr != nil {
		// The row and its outbox entry are committed; the relay will add
		// the id to the filter. Until then reads may answer 404, so do not
		// claim success.
		s.log.Error("BF.ADD after commit failed; the relay will retry", "id", p.ID, "err", addErr)
		http.Error(w, "created, not yet visible; retry the read later", http.StatusAccepted)
		return
	}
	s.st.Created.Add(1)
	writeJSON(w, http.StatusCreated, p)
}

// addToFilter adds ids to the live filter and, first, to the filter a
// running `bfserver load` is building (KEY:bfload-tmp; NOCREATE, so nothing
// is created when no rebuild runs). In that order no create is lost by the
// rebuild's RENAME: the key exists, complete, before the rebuild's last
// query starts (load --method build runs the query a second time for this),
// so a create that query did not see committed later and finds the key,
// unless the RENAME came first, and then its BF.ADD goes to the new filter.
// One pipeline: the server applies the two in order.
func (s *server) addToFilter(ctx context.Context, ids ...int64) error {
	items := make([]any, len(ids))
	for i, id := range ids {
		items[i] = id
	}
	pipe := s.rdb.Pipeline()
	tmp := pipe.Do(ctx, append([]any{"BF.INSERT", s.filter + ":bfload-tmp", "NOCREATE", "ITEMS"}, items...)...)
	addCmd := []any{"BF.MADD", s.filter}
	if len(ids) == 1 {
		addCmd[0] = "BF.ADD" // the write path's one id
	}
	add := pipe.Do(ctx, append(addCmd, items...)...)
	pipe.Exec(ctx)
	if err := tmp.Err(); err != nil && !strings.Contains(err.Error(), "not found") {
		return fmt.Errorf("BF.INSERT %s:bfload-tmp: %w", s.filter, err)
	}
	if err := tmp.Err(); err == nil {
		if err := itemErr(tmp); err != nil {
			return fmt.Errorf("BF.INSERT %s:bfload-tmp: %w", s.filter, err)
		}
	}
	if err := add.Err(); err != nil {
		return fmt.Errorf("%s %s: %w", addCmd[0], s.filter, err)
	}
	return itemErr(add)
}

// itemErr is the first per-item error in a BF.MADD / BF.INSERT reply
// (e.g. a full NONSCALING filter).
func itemErr(c *redis.Cmd) error {
	a, _ := c.Val().([]any)
	for _, v := range a {
		if err, ok := v.(error); ok {
			return err
		}
	}
	return nil
}

func (s *server) handleStats(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, map[string]int64{
		"requests": s.st.Requests.Load(), "filter_negatives": s.st.Negatives.Load(),
		"cache_hits": s.st.CacheHits.Load(), "null_hits": s.st.NullHits.Load(),
		"db_queries": s.st.DBQueries.Load(), "false_positives": s.st.FalsePos.Load(),
		"filter_errors": s.st.FilterErr.Load(), "created": s.st.Created.Load(),
		"relayed": s.st.RelayedRows.Load(),
	})
}

// relayLoop delivers outbox rows: BF.ADD of each new product id to every
// relay key, then marks the rows sent, in one transaction that holds the
// rows (FOR UPDATE SKIP LOCKED), so several pods can relay at once and a
// row is marked only after its adds were acknowledged. Delivery is at
// least once, which BF.ADD tolerates.
func (s *server) relayLoop(ctx context.Context, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		for {
			n, err := s.relayOnce(ctx)
			if err != nil {
				if ctx.Err() == nil {
					s.log.Warn("relay", "err", err)
				}
				break
			}
			if n == 0 {
				break
			}
		}
	}
}

func (s *server) relayOnce(ctx context.Context) (int, error) {
	n := 0
	err := pgx.BeginFunc(ctx, s.db, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, "SELECT id, product_id FROM outbox WHERE sent_at IS NULL ORDER BY id LIMIT 500 FOR UPDATE SKIP LOCKED")
		if err != nil {
			return err
		}
		defer rows.Close()
		var ids, products []int64
		for rows.Next() {
			var id, pid int64
			if err := rows.Scan(&id, &pid); err != nil {
				return err
			}
			ids, products = append(ids, id), append(products, pid)
		}
		if err := rows.Err(); err != nil {
			return err
		}
		if len(ids) == 0 {
			return nil
		}
		args := []any{"BF.MADD", ""}
		for _, p := range products {
			args = append(args, p)
		}
		for _, key := range s.relayKeys { // other services' filters
			args[1] = key
			c := s.relay.Do(ctx, args...)
			if err := c.Err(); err != nil {
				return fmt.Errorf("BF.MADD %s: %w", key, err)
			}
			if err := itemErr(c); err != nil {
				return fmt.Errorf("BF.MADD %s: %w", key, err)
			}
		}
		// Ours, again: repairs a create whose BF.ADD failed after its commit.
		if err := s.addToFilter(ctx, products...); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, "UPDATE outbox SET sent_at = now() WHERE id = ANY($1)", ids); err != nil {
			return err
		}
		n = len(ids)
		return nil
	})
	if err == nil {
		s.st.RelayedRows.Add(int64(n))
	}
	return n, err
}
