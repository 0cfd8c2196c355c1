package movein

import (
	"bufio"
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/bfserver/bfserver/command"
	"github.com/bfserver/bfserver/scalable"
	"github.com/jackc/pgx/v5"
	"github.com/redis/go-redis/v9"
)

// LoadSuffix is appended to --key for the temporary key load builds into:
// the key that writers add to (BF.INSERT … NOCREATE) while a rebuild runs.
const LoadSuffix = ":bfload-tmp"

// ShipSuffix names the key a filter built in process (--method build) from
// a live source (--postgres) is loaded into before it becomes LoadSuffix's.
const ShipSuffix = ":bfload-ship"

type loadOptions struct {
	to, key          string
	errorRate        float64
	capacity         int64
	expansion        int64
	nonScaling       bool
	cuckoo           bool
	bucketSize       int64
	maxIterations    int64
	file             string
	postgres, query  string
	batch, pipeline  int
	method           string
	conns            int
	timeout          time.Duration
	caFile           string
	force            bool
	log              *logOptions
	expansionPresent bool
}

// Load runs `bfserver load`: it reads items (one per line from stdin or
// --file, or the first column of a PostgreSQL query), takes KEY:bfload-lock
// (refusing while another load of KEY holds it or left its temporary
// keys), reserves a filter in KEY:bfload-tmp with the run's mark (see
// claim), fills it (--method build: adds them to a copy of that filter in
// this process and sends the result as LOADCHUNKs; --method madd: sends
// them in pipelined BF.INSERT or CF.INSERT … NOCREATE batches), and
// RENAMEs the result over KEY if it still carries the mark. Readers of KEY
// see the old filter until the new one holds every item. It returns the
// exit code: 0 done, 1 failed or refused (KEY untouched), 2 usage error.
func Load(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	o := &loadOptions{}
	fs := flag.NewFlagSet("bfserver load", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.to, "to", "", "target server URL: redis://[user:pass@]host:port[/db] or rediss://…")
	fs.StringVar(&o.key, "key", "", "the filter to (re)build")
	fs.Float64Var(&o.errorRate, "error-rate", 0, "Bloom: false-positive rate, as BF.RESERVE takes it (e.g. 0.001)")
	fs.Int64Var(&o.capacity, "capacity", 0, "items the filter is sized for (BF.RESERVE / CF.RESERVE capacity)")
	fs.Int64Var(&o.expansion, "expansion", 0, "growth factor when the filter fills (default: the server's)")
	fs.BoolVar(&o.nonScaling, "nonscaling", false, "never grow: items beyond a full filter fail the load (Cuckoo: EXPANSION 0)")
	fs.BoolVar(&o.cuckoo, "cuckoo", false, "build a Cuckoo filter (CF.RESERVE, CF.INSERT) instead of a Bloom filter")
	fs.Int64Var(&o.bucketSize, "bucket-size", 0, "Cuckoo: items per bucket (default: the server's)")
	fs.Int64Var(&o.maxIterations, "max-iterations", 0, "Cuckoo: kick-out attempts before growing (default: the server's)")
	fs.StringVar(&o.file, "file", "", "read items from this file, one per line (default: stdin)")
	fs.StringVar(&o.postgres, "postgres", "", "read items from PostgreSQL: a DSN (postgres://user:pass@host:port/db or key=value)")
	fs.StringVar(&o.query, "query", "", "with --postgres: the query; its first column's text is the item")
	fs.StringVar(&o.method, "method", "build", "build: add the items to a filter in this process and send the finished filter (LOADCHUNK); madd: send the items (pipelined BF.INSERT / CF.INSERT … NOCREATE)")
	fs.IntVar(&o.batch, "batch", 5000, "items per BF.INSERT / CF.INSERT")
	fs.IntVar(&o.pipeline, "pipeline", 8, "batches sent per round trip on each connection")
	fs.IntVar(&o.conns, "conns", 2, "connections sending batches at once")
	fs.DurationVar(&o.timeout, "timeout", 2*time.Minute, "wait at most this long for any one reply")
	fs.StringVar(&o.caFile, "cacert", "", "CA certificate (PEM) to verify a rediss:// server with")
	fs.BoolVar(&o.force, "force", false, "first delete KEY"+LockSuffix+", KEY"+LoadSuffix+" and KEY"+ShipSuffix+", which an interrupted load left (a load of KEY still running then fails without publishing)")
	o.log = addLogFlags(fs)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: bfserver load --to URL --key KEY --error-rate P --capacity N [--expansion E | --nonscaling] [--cuckoo [--bucket-size B]] [--file F | --postgres DSN --query SQL] [--force]")
		fmt.Fprint(stderr, `
Builds the filter in KEY`+LoadSuffix+` and RENAMEs it over KEY once it holds every item.
It refuses to start while KEY`+LockSuffix+`, KEY`+LoadSuffix+` or KEY`+ShipSuffix+` exists
(another load runs, or one was killed): --force deletes them and proceeds. If
KEY`+LoadSuffix+` is deleted or replaced while it runs, the load fails (exit 1) and
KEY keeps its old filter. docs/MIGRATING.md has the details.`+"\n\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return 2
	}
	fs.Visit(func(f *flag.Flag) {
		if f.Name == "expansion" {
			o.expansionPresent = true
		}
	})
	if msg := o.validate(fs.NArg()); msg != "" {
		fmt.Fprintln(stderr, "bfserver load:", msg)
		fs.Usage()
		return 2
	}
	unit := "items"
	var total int64 = -1
	var src io.Reader = stdin
	if o.file != "" {
		f, err := os.Open(o.file)
		if err != nil {
			fmt.Fprintln(stderr, "bfserver load:", err)
			return 2
		}
		defer f.Close()
		if fi, err := f.Stat(); err == nil && fi.Mode().IsRegular() {
			unit, total = "bytes", fi.Size()
		}
		src = f
	}
	rep, err := newReporter(stderr, *o.log, unit)
	if err != nil {
		fmt.Fprintln(stderr, "bfserver load:", err)
		return 2
	}
	ep, err := dial(o.to, o.caFile, o.timeout)
	if err != nil {
		fmt.Fprintln(stderr, "bfserver load: --to:", err)
		return 2
	}
	defer ep.close()
	var conn *pgx.Conn
	if o.postgres != "" {
		conn, err = pgx.Connect(ctx, o.postgres)
		if err != nil {
			fmt.Fprintln(stderr, "bfserver load: --postgres:", err)
			return 2
		}
		defer conn.Close(context.Background())
	}
	ep.opt.PoolSize = max(ep.opt.PoolSize, o.conns) // a connection per sender
	l := &loader{o: o, c: ep.db(ep.opt.DB), rep: rep, unit: unit}
	rep.setTotal(total)
	start := time.Now()
	var read source
	if conn != nil {
		read = func(emit func([]byte) error) error { return readQuery(ctx, conn, o.query, emit) }
	} else {
		read = func(emit func([]byte) error) error { return readLines(src, &l.bytesRead, emit) }
	}
	in, note, err := l.run(ctx, read, conn != nil)
	el := time.Since(start)
	if err != nil {
		rep.finish("failed", "items", l.items.Load(), "err", err.Error())
		fmt.Fprintf(stderr, "bfserver load: %s: %v (the key is unchanged)\n", showKey(o.key), err)
		return 1
	}
	n := l.items.Load()
	rep.finish("done", "key", o.key, "items", n)
	fmt.Fprintf(stdout, "load %s %s: %d items in %s (%.0f items/s), %s; %s\n",
		ep.url, showKey(o.key), n, el.Round(time.Millisecond), float64(n)/el.Seconds(), note, in)
	return 0
}

func (o *loadOptions) validate(nargs int) string {
	switch {
	case nargs > 0:
		return "unexpected arguments"
	case o.to == "" || o.key == "":
		return "--to and --key are required"
	case o.capacity <= 0:
		return "--capacity must be a positive number of items"
	case !o.cuckoo && !(o.errorRate > 0 && o.errorRate < 1):
		return "--error-rate must be between 0 and 1 (exclusive)"
	case o.cuckoo && o.errorRate != 0:
		return "--error-rate applies to Bloom filters only (a Cuckoo filter's rate follows from --bucket-size)"
	case !o.cuckoo && (o.bucketSize != 0 || o.maxIterations != 0):
		return "--bucket-size and --max-iterations apply to Cuckoo filters only (--cuckoo)"
	case o.nonScaling && o.expansionPresent:
		return "--expansion and --nonscaling exclude each other"
	case o.file != "" && o.postgres != "":
		return "--file and --postgres exclude each other"
	case (o.postgres == "") != (o.query == ""):
		return "--postgres and --query go together"
	case o.method != "build" && o.method != "madd":
		return "--method must be build or madd"
	case o.batch < 1 || o.pipeline < 1 || o.conns < 1:
		return "--batch, --pipeline and --conns must be at least 1"
	}
	return ""
}

type loader struct {
	o         *loadOptions
	c         *redis.Client
	rep       *reporter
	unit      string
	cl        *claim       // the lock, once taken
	items     atomic.Int64 // items sent and acknowledged
	added     atomic.Int64 // items the server's filter counts for this run: acknowledged as new, or loaded
	bytesRead atomic.Int64 // input bytes consumed (lines)
}

func (l *loader) kind() kind {
	if l.o.cuckoo {
		return cuckoo
	}
	return bloom
}

func (l *loader) reserveArgs(tmp string) []any {
	o := l.o
	if o.cuckoo {
		a := []any{"CF.RESERVE", tmp, o.capacity}
		if o.bucketSize != 0 {
			a = append(a, "BUCKETSIZE", o.bucketSize)
		}
		if o.maxIterations != 0 {
			a = append(a, "MAXITERATIONS", o.maxIterations)
		}
		if o.nonScaling {
			a = append(a, "EXPANSION", 0)
		} else if o.expansionPresent {
			a = append(a, "EXPANSION", o.expansion)
		}
		return a
	}
	a := []any{"BF.RESERVE", tmp, o.errorRate, o.capacity}
	if o.expansionPresent {
		a = append(a, "EXPANSION", o.expansion)
	}
	if o.nonScaling {
		a = append(a, "NONSCALING")
	}
	return a
}

// source streams the items; the slice passed to emit is valid only
// during the call.
type source func(emit func(item []byte) error) error

// run takes the lock, builds the new filter in the temporary key and
// swaps it in; it returns the new filter's INFO and a note on how it was
// built. On failure it deletes the keys it made, if it still holds the
// lock, and no other.
func (l *loader) run(ctx context.Context, read source, live bool) (info, string, error) {
	k := l.kind()
	typ, err := l.c.Type(ctx, l.o.key).Result()
	if err != nil {
		return nil, "", fmt.Errorf("TYPE: %w", err)
	}
	if typ != "none" && typ != k.typeName() {
		return nil, "", fmt.Errorf("the key holds a %s, not a %s filter; delete it first", typ, k)
	}
	// The items go to tmp. A live build is shipped to another key first:
	// writers that add to tmp meanwhile (see build) must not add into a
	// filter whose chunks are still being overwritten.
	tmp := l.o.key + LoadSuffix
	temps := []string{tmp, l.o.key + ShipSuffix} // what an interrupted run may leave
	ship := tmp
	if l.o.method == "build" && live {
		ship = temps[1]
	}
	if l.o.force {
		n, err := l.c.Del(ctx, append(temps, l.o.key+LockSuffix)...).Result()
		if err != nil {
			return nil, "", fmt.Errorf("--force: DEL: %w", err)
		}
		l.rep.event(slog.LevelWarn, "forced", "key", l.o.key, "deleted", n)
	}
	if l.cl, err = take(ctx, l.c, l.o.key, temps); err != nil {
		return nil, "", err
	}
	var made []string // the keys this run may have made, deleted if it fails
	fail := func(err error) (info, string, error) {
		if rerr := l.cl.release(context.Background(), made...); rerr != nil {
			l.rep.event(slog.LevelWarn, "temporary keys left", "key", l.o.key, "err", rerr.Error())
		}
		return nil, "", err
	}
	// Reserved with this run's mark, only where no key is (take saw none;
	// WATCH keeps it so), so the mark is never set on another's key.
	err = l.cl.do(ctx, []string{ship}, func(p redis.Pipeliner) func() error {
		exists := p.Exists(ctx, ship)
		return func() error {
			if n, err := exists.Result(); err != nil || n != 0 {
				return cmp.Or(err, fmt.Errorf("%s was created by another client as the load started", showKey(ship)))
			}
			return nil
		}
	}, func(p redis.Pipeliner) {
		p.Do(ctx, l.reserveArgs(ship)...)
		l.cl.mark(ctx, p, ship)
	})
	if err != nil {
		return fail(err)
	}
	made = temps
	l.rep.event(slog.LevelInfo, "reserved", "key", ship, "type", k.String(), "capacity", l.o.capacity, "method", l.o.method)
	var note string
	if l.o.method == "madd" {
		err = l.pump(ctx, tmp, func(emit func(string) error) error {
			return read(func(item []byte) error { return emit(string(item)) })
		})
		note = "sent as " + k.cmd("INSERT") + " … NOCREATE"
	} else {
		note, err = l.build(ctx, ship, tmp, read, live)
	}
	if err != nil {
		return fail(err)
	}
	// The swap: one RENAME, so a reader sees the old filter or the whole
	// new one, never a partial one; only while this run holds the lock, so
	// never a filter another run is filling; and only while tmp is the
	// filter this run filled: its mark, and at least as many items as the
	// server acknowledged adding (writers may have added more), WATCHed up
	// to the RENAME. PERSIST drops the mark.
	var in info
	err = l.cl.do(ctx, []string{tmp}, func(p redis.Pipeliner) func() error {
		owned, infoCmd := l.cl.owned(ctx, p, tmp), p.Do(ctx, k.cmd("INFO"), tmp)
		return func() error {
			if err := owned(); err != nil {
				return err
			}
			var err error
			if in, err = infoOf(infoCmd); err != nil {
				return fmt.Errorf("%s: %w", k.cmd("INFO"), err)
			}
			if got, want := in.get("Number of items inserted")+in.get("Number of items deleted"), l.added.Load(); got < want {
				return fmt.Errorf("%w: it holds %d items, fewer than the %d this load added", errReplaced, got, want)
			}
			return nil
		}
	}, func(p redis.Pipeliner) {
		p.Rename(ctx, tmp, l.o.key)
		p.Persist(ctx, l.o.key)
	})
	if err != nil {
		return fail(vanished(tmp, err))
	}
	if err := l.cl.release(context.Background()); err != nil {
		l.rep.event(slog.LevelWarn, "lock left", "key", l.cl.lock, "err", err.Error())
	}
	return in, note, nil
}

// vanished explains err when it says key is not there (any more), or not
// the one this run made: someone deleted or replaced it while the load ran.
func vanished(key string, err error) error {
	switch {
	case errors.Is(err, errReplaced):
		return fmt.Errorf("%s was replaced while the load ran (%w); it is left as it is", showKey(key), err)
	case errors.Is(err, errGone) || isNotFound(err) || strings.Contains(err.Error(), "no such key"):
		return fmt.Errorf("%s was deleted while the load ran (%w)", showKey(key), err)
	}
	return err
}

// pump sends the items as pipelined BF.INSERT (CF.INSERT) … NOCREATE
// batches to key, from --conns connections with up to --pipeline batches
// each in flight, checking every item's reply. NOCREATE: should key vanish
// meanwhile, the next batch fails instead of filling a new default filter
// with the rest of the items.
func (l *loader) pump(ctx context.Context, key string, read func(emit func(string) error) error) error {
	prefix := []any{l.kind().cmd("INSERT"), key, "NOCREATE", "ITEMS"}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	batches := make(chan []any, l.o.conns*l.o.pipeline)
	var wg sync.WaitGroup
	for range l.o.conns {
		wg.Go(func() {
			if err := l.send(ctx, batches, len(prefix)); err != nil {
				cancel(err)
			}
		})
	}
	readErr := func() error {
		defer close(batches)
		b := append(make([]any, 0, len(prefix)+l.o.batch), prefix...)
		err := read(func(item string) error {
			b = append(b, item)
			if len(b)-len(prefix) == l.o.batch {
				select {
				case batches <- b:
				case <-ctx.Done():
					return context.Cause(ctx)
				}
				b = append(make([]any, 0, len(prefix)+l.o.batch), prefix...)
			}
			return nil
		})
		if err != nil {
			return err
		}
		if len(b) > len(prefix) {
			select {
			case batches <- b:
			case <-ctx.Done():
				return context.Cause(ctx)
			}
		}
		return nil
	}()
	wg.Wait()
	if err := context.Cause(ctx); err != nil {
		return err // a batch failed, or the run was interrupted
	}
	if readErr != nil {
		return fmt.Errorf("reading items: %w", readErr)
	}
	return nil
}

// localFilter is a filter built in this process with bfserver's engine,
// whose dump is byte for byte what RedisBloom would hold after the same
// reservation and adds.
type localFilter interface {
	add(item []byte) error
	test(item []byte) bool
	dump(fn func(iter int64, data []byte) error) error
}

type localBloom struct{ c *scalable.Chain }

func (b localBloom) add(item []byte) error {
	_, err := b.c.Add(item, math.MaxUint64)
	return err
}
func (b localBloom) test(item []byte) bool { return b.c.Test(item) }
func (b localBloom) dump(fn func(int64, []byte) error) error {
	if err := fn(1, b.c.Header()); err != nil {
		return err
	}
	for it := int64(1); ; {
		next, data := b.c.Chunk(it)
		if next == 0 {
			return nil
		}
		if err := fn(next, data); err != nil {
			return err
		}
		it = next
	}
}

type localCuckoo struct{ c *scalable.Cuckoo }

func (f localCuckoo) add(item []byte) error {
	switch f.c.Insert(item, false, math.MaxUint64) {
	case scalable.NoSpace:
		return errors.New("the filter is full (raise --capacity, or allow it to grow)")
	case scalable.NoMemory:
		return errors.New("the filter cannot grow any more")
	}
	return nil
}
func (f localCuckoo) test(item []byte) bool { return f.c.Exists(item) }
func (f localCuckoo) dump(fn func(int64, []byte) error) error {
	if err := fn(1, f.c.Header()); err != nil {
		return err
	}
	for it := int64(1); ; {
		next, data, ok := f.c.Chunk(it)
		if !ok {
			return nil
		}
		if err := fn(next, data); err != nil {
			return err
		}
		it = next
	}
}

// build adds the items to a filter in this process instead of sending them
// one by one: the server only receives the finished filter, a few
// LOADCHUNKs of its bit array, so the rate is this process's hashing rate
// rather than the server's write path (for a durable bfserver, every item
// would go through its log). The reservation is the server's own: the
// filter starts from the header of the key the server just reserved, so
// its defaults (expansion, bucket size) apply.
//
// The reserved key stays while the items are read: a load that finds it
// gone when the finished filter is ready fails (someone deleted it, so
// someone else is at work on this key). The finished filter then replaces
// it (DEL and the header's LOADCHUNK in one transaction, as LOADCHUNK
// loads a header only into a missing key), chunk by chunk, each only while
// this run holds the lock, so a run that lost it (--force) never
// overwrites the filter of the run that holds it now. It is verified (the
// server's dump digest against the one sent) and, when tmp is not final,
// renamed to final. With live set (the items come from a database written
// to during the load), a second pass then re-reads the items and sends
// those the first pass did not see, with BF.INSERT … NOCREATE, into final,
// now complete: together with writers that add to KEY:bfload-tmp
// (NOCREATE) before they add to KEY, no item committed before the swap is
// missing from the new filter (see examples/cachepenetration). No writer
// touches tmp while its chunks are loaded, so none of their adds can be
// overwritten by a chunk.
func (l *loader) build(ctx context.Context, tmp, final string, read source, live bool) (string, error) {
	k := l.kind()
	var f localFilter
	if k == bloom {
		v, err := l.c.Do(ctx, "BF.SCANDUMP", tmp, 0).Slice()
		if err != nil {
			return "", vanished(tmp, fmt.Errorf("BF.SCANDUMP: %w", err))
		}
		hdr, _ := v[1].(string)
		ch, err := scalable.ParseChainHeader([]byte(hdr), math.MaxUint64)
		if err != nil {
			return "", fmt.Errorf("the reserved filter's header: %w", err)
		}
		f = localBloom{ch}
	} else {
		// CF.SCANDUMP has nothing to say about an empty filter; its
		// header follows from CF.INFO.
		in, err := getInfo(ctx, l.c, k, tmp)
		if err != nil {
			return "", vanished(tmp, fmt.Errorf("CF.INFO: %w", err))
		}
		cf, err := scalable.ParseCuckooHeader(emptyCuckooHeader(in), math.MaxUint64)
		if err != nil {
			return "", fmt.Errorf("the reserved filter's header: %w", err)
		}
		f = localCuckoo{cf}
	}
	var n int64
	err := read(func(item []byte) error {
		if err := f.add(item); err != nil {
			return err
		}
		n++
		if n%65536 == 0 {
			if err := ctx.Err(); err != nil {
				return err
			}
			l.items.Store(n)
			l.progress(n)
		}
		return nil
	})
	l.items.Store(n)
	l.progress(n)
	if err != nil {
		return "", err
	}
	// Ship it, one chunk at a time, and check what the server holds.
	h := sha256.New()
	var shipped int64
	err = f.dump(func(iter int64, data []byte) error {
		h.Write(data)
		first := shipped == 0
		shipped += int64(len(data))
		// A data chunk goes in pieces, each in a transaction of its own:
		// a transaction is one log entry on bfserver, which a 16 MiB
		// chunk would make costly in memory (see command.Pieces). Each
		// goes only into the key this run reserved (its mark); the header
		// replaces it, marked again.
		err := inPieces(iter, data, first, func(iter int64, data []byte) error {
			return l.cl.do(ctx, []string{tmp}, func(p redis.Pipeliner) func() error { return l.cl.owned(ctx, p, tmp) },
				func(p redis.Pipeliner) {
					if first {
						p.Del(ctx, tmp)
					}
					p.Do(ctx, k.cmd("LOADCHUNK"), tmp, iter, data)
					if first {
						l.cl.mark(ctx, p, tmp)
					}
				})
		})
		if err != nil {
			return vanished(tmp, fmt.Errorf("%s %d: %w", k.cmd("LOADCHUNK"), iter, err))
		}
		l.rep.event(slog.LevelDebug, "chunk", "key", tmp, "iter", iter, "bytes", len(data))
		return nil
	})
	if err != nil {
		return "", err
	}
	got, err := dumpDigest(ctx, l.c, k, tmp)
	if err != nil {
		return "", vanished(tmp, fmt.Errorf("verifying: %w", err))
	}
	if sum := hex.EncodeToString(h.Sum(nil)); got.sum != sum {
		return "", fmt.Errorf("verifying: the server's dump (sha256 %s) differs from the one sent (%s)", got.sum, sum)
	}
	l.added.Store(got.info.get("Number of items inserted"))
	note := fmt.Sprintf("built here and sent as %s in %d bytes", k.cmd("LOADCHUNK"), shipped)
	if tmp != final { // the mark goes with it
		err := l.cl.do(ctx, []string{tmp}, func(p redis.Pipeliner) func() error { return l.cl.owned(ctx, p, tmp) },
			func(p redis.Pipeliner) { p.Rename(ctx, tmp, final) })
		if err != nil {
			return "", vanished(tmp, err)
		}
	}
	if !live {
		return note, nil
	}
	var missed atomic.Int64
	err = l.pump(ctx, final, func(emit func(string) error) error {
		return read(func(item []byte) error {
			if f.test(item) {
				return nil
			}
			missed.Add(1)
			return emit(string(item))
		})
	})
	if err != nil {
		return "", fmt.Errorf("second pass: %w", err)
	}
	l.rep.event(slog.LevelInfo, "second pass", "key", final, "added", missed.Load())
	return fmt.Sprintf("%s; a second pass added %d items written meanwhile", note, missed.Load()), nil
}

func (l *loader) progress(items int64) {
	cur := items
	if l.unit == "bytes" {
		cur = l.bytesRead.Load()
	}
	l.rep.update(cur, fmt.Sprintf("items %d", items), "items", items)
}

// send takes batches and sends up to --pipeline of them per round trip,
// checking every item's reply.
func (l *loader) send(ctx context.Context, batches <-chan []any, prefix int) error {
	pipe := l.c.Pipeline()
	cmds := make([]*redis.Cmd, 0, l.o.pipeline)
	for {
		b, ok := <-batches
		if !ok {
			return nil
		}
		cmds = append(cmds[:0], pipe.Do(ctx, b...))
		n := len(b) - prefix
	more:
		for len(cmds) < l.o.pipeline {
			select {
			case b, ok := <-batches:
				if !ok {
					break more
				}
				cmds = append(cmds, pipe.Do(ctx, b...))
				n += len(b) - prefix
			default:
				break more
			}
		}
		pipe.Exec(ctx)
		for _, c := range cmds {
			added, err := checkBatch(c)
			if err != nil {
				return err
			}
			l.added.Add(added)
		}
		done := l.items.Add(int64(n))
		l.rep.event(slog.LevelDebug, "batches", "commands", len(cmds), "items", n)
		l.progress(done)
	}
}

// checkBatch checks a batch's replies and counts the items the filter
// took as new (1: a Bloom item not there before; every Cuckoo item).
func checkBatch(c *redis.Cmd) (int64, error) {
	v, err := c.Result()
	if err != nil {
		return 0, vanished(fmt.Sprint(c.Args()[1]), fmt.Errorf("%s: %w", c.Args()[0], err))
	}
	a, ok := v.([]any)
	if !ok {
		return 0, fmt.Errorf("%s: unexpected reply %T", c.Args()[0], v)
	}
	var added int64
	for _, r := range a {
		switch r := r.(type) {
		case error:
			return 0, fmt.Errorf("%s: %w", c.Args()[0], r)
		case int64:
			if r < 0 {
				return 0, fmt.Errorf("%s: the filter is full (raise --capacity, or allow it to grow)", c.Args()[0])
			}
			added += r
		}
	}
	return added, nil
}

// readLines emits each line of r (a trailing \r is dropped; empty lines
// are skipped), counting the bytes consumed.
func readLines(r io.Reader, consumed *atomic.Int64, emit func([]byte) error) error {
	s := bufio.NewScanner(r)
	s.Buffer(make([]byte, 1<<20), 64<<20)
	for s.Scan() {
		line := s.Bytes()
		consumed.Add(int64(len(line)) + 1)
		if n := len(line); n > 0 && line[n-1] == '\r' {
			line = line[:n-1]
		}
		if len(line) == 0 {
			continue
		}
		if err := emit(line); err != nil {
			return err
		}
	}
	return s.Err()
}

// readQuery streams the query's rows (pgx reads them off the connection as
// they arrive; nothing holds the whole result) and emits the text form of
// each row's first column: the item is what the application writes, e.g.
// the id 42 is "42". NULLs are skipped.
func readQuery(ctx context.Context, conn *pgx.Conn, query string, emit func([]byte) error) error {
	rows, err := conn.Query(ctx, query, pgx.QueryResultFormats{pgx.TextFormatCode})
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		raw := rows.RawValues()
		if len(raw) == 0 || raw[0] == nil {
			continue
		}
		if err := emit(raw[0]); err != nil {
			return err
		}
	}
	return rows.Err()
}

// inPieces calls send with data (a dump chunk SCANDUMP gave with iterator
// iter) as the server would write it: in the pieces command.Pieces cuts,
// each with the iterator a LOADCHUNK of those bytes alone takes (the same
// for Bloom and Cuckoo chunks, which both start at iter − len − 1); a header
// (whole), or a chunk small enough, as it is.
func inPieces(iter int64, data []byte, whole bool, send func(int64, []byte) error) error {
	pieces := command.Pieces(&command.Cmd{Op: command.BFLoadChunk, Iter: iter, Data: data})
	if whole || pieces == nil {
		return send(iter, data)
	}
	for _, p := range pieces {
		if err := send(p.Iter, p.Data); err != nil {
			return err
		}
	}
	return nil
}
