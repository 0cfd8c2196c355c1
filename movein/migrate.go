package movein

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime/debug"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// TempSuffix is appended to a key's name for the temporary key that migrate
// loads a filter into before it RENAMEs it over the key itself. Source keys
// that end in it (or in load's LoadSuffix or ShipSuffix) are never copied;
// target keys that end in it and match --match are left-overs of an
// interrupted run and are deleted.
const TempSuffix = ":bfmigrate-tmp"

// job is one source key to copy.
type job struct {
	srcDB, dstDB int
	key          string
	kind         kind
	size         int64 // INFO Size when listed
}

func (j job) name() string { return fmt.Sprintf("db%d %s", j.srcDB, showKey(j.key)) }

// showKey prints a key as it is when that is unambiguous, quoted otherwise.
func showKey(k string) string {
	for _, r := range k {
		if r <= ' ' || r == '"' || r == 0x7f || r == '\uFFFD' {
			return strconv.Quote(k)
		}
	}
	if k == "" {
		return `""`
	}
	return k
}

type migrator struct {
	from, to   *endpoint
	match      string
	replace    bool
	retries    int
	scanCount  int64
	rep        *reporter
	totalKeys  int
	doneKeys   int
	base       int64 // bytes of the keys done
	inProgress int64 // bytes of the current key streamed so far
}

// Migrate runs `bfserver migrate`: see docs/MIGRATING.md. It returns the
// process exit code: 0 when every key was copied and verified (or already
// identical), 1 when some key failed (each is named on stderr), 2 on a usage
// or connection error.
func Migrate(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("bfserver migrate", flag.ContinueOnError)
	fs.SetOutput(stderr)
	from := fs.String("from", "", "source server URL: redis://[user:pass@]host:port[/db] or rediss://…")
	to := fs.String("to", "", "target server URL (same form)")
	match := fs.String("match", "*", "copy only keys matching this glob pattern (SCAN MATCH)")
	dbFlag := fs.Int("db", -1, "copy only this database (default: the URL's database, or every database that holds keys)")
	replace := fs.Bool("replace", false, "overwrite target keys that exist and differ (default: refuse, and name them)")
	dryRun := fs.Bool("dry-run", false, "list the keys that would be copied, and copy nothing")
	retries := fs.Int("retries", 3, "copy a key again at most this many times when it changed during its copy")
	timeout := fs.Duration("timeout", 2*time.Minute, "wait at most this long for any one reply")
	scanCount := fs.Int64("scan-count", 1000, "COUNT hint for SCAN")
	caFile := fs.String("cacert", "", "CA certificate (PEM) to verify rediss:// servers with (default: the system's)")
	lo := addLogFlags(fs)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: bfserver migrate --from URL --to URL [--match PATTERN] [--db N] [--replace] [--dry-run]")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *from == "" || *to == "" || fs.NArg() > 0 {
		fs.Usage()
		return 2
	}
	rep, err := newReporter(stderr, *lo, "bytes")
	if err != nil {
		fmt.Fprintln(stderr, "bfserver migrate:", err)
		return 2
	}
	if os.Getenv("GOMEMLIMIT") == "" {
		// A few 16 MiB chunks are alive at a time (the one being copied, or
		// one from each side while verifying, each also in go-redis's
		// reader): ask the GC to keep the heap near that rather than let it
		// double.
		debug.SetMemoryLimit(64 << 20)
	}
	src, err := dial(*from, *caFile, *timeout)
	if err != nil {
		fmt.Fprintln(stderr, "bfserver migrate: --from:", err)
		return 2
	}
	defer src.close()
	dst, err := dial(*to, *caFile, *timeout)
	if err != nil {
		fmt.Fprintln(stderr, "bfserver migrate: --to:", err)
		return 2
	}
	defer dst.close()
	m := &migrator{from: src, to: dst, match: *match, replace: *replace, retries: *retries,
		scanCount: *scanCount, rep: rep}

	pairs, err := m.dbPairs(ctx, *dbFlag)
	if err != nil {
		fmt.Fprintln(stderr, "bfserver migrate:", err)
		return 2
	}
	if err := dst.db(pairsDst(pairs)).Ping(ctx).Err(); err != nil {
		fmt.Fprintf(stderr, "bfserver migrate: --to %s: %v\n", dst.url, err)
		return 2
	}
	jobs, err := m.list(ctx, pairs)
	if err != nil {
		fmt.Fprintln(stderr, "bfserver migrate: listing the source's keys:", err)
		return 2
	}
	var total int64
	for _, j := range jobs {
		total += j.size
	}
	if *dryRun {
		if err := m.dryRun(ctx, stdout, jobs, total); err != nil {
			fmt.Fprintln(stderr, "bfserver migrate:", err)
			return 2
		}
		return 0
	}
	if err := m.cleanTemps(ctx, pairs); err != nil {
		fmt.Fprintln(stderr, "bfserver migrate: removing left-over temporary keys:", err)
		return 2
	}

	rep.event(slog.LevelInfo, "start", "from", src.url, "to", dst.url, "keys", len(jobs), "bytes", total)
	rep.setTotal(total)
	m.totalKeys = len(jobs)
	start := time.Now()
	counts := map[string]int{}
	var failed []string
	var copied int64
	for _, j := range jobs {
		t0 := time.Now()
		m.inProgress = 0
		outcome, st, err := m.copyKey(ctx, j)
		m.doneKeys++
		m.base += j.size
		m.inProgress = 0
		attrs := []any{"db", j.srcDB, "key", j.key, "type", j.kind.String(), "bytes", st.bytes,
			"chunks", st.chunks, "attempts", st.attempts, "ms", time.Since(t0).Milliseconds(),
			"stream_ms", st.stream.Milliseconds(), "verify_ms", st.verify.Milliseconds()}
		if j.dstDB != j.srcDB {
			attrs = append(attrs, "target_db", j.dstDB)
		}
		if err != nil {
			failed = append(failed, fmt.Sprintf("%s: %v", j.name(), err))
			rep.event(slog.LevelError, "failed", append(attrs, "err", err.Error())...)
			counts["failed"]++
		} else {
			rep.event(slog.LevelInfo, outcome, attrs...)
			counts[outcome]++
			if outcome == "copied" {
				copied += st.bytes
			}
		}
		m.progress()
		if ctx.Err() != nil {
			break
		}
	}
	el := time.Since(start)
	rep.finish("done", "keys", len(jobs), "copied", counts["copied"], "identical", counts["identical"],
		"gone", counts["gone"], "failed", counts["failed"], "bytes_copied", copied)
	fmt.Fprintf(stdout, "migrate %s -> %s: %d keys: %d copied, %d already identical, %d gone from the source, %d failed; %s copied in %s (%.1f keys/s, %.1f MB/s)\n",
		src.url, dst.url, len(jobs), counts["copied"], counts["identical"], counts["gone"], counts["failed"],
		mb(copied), el.Round(time.Millisecond), float64(len(jobs))/el.Seconds(), float64(copied)/1e6/el.Seconds())
	if ctx.Err() != nil {
		fmt.Fprintln(stderr, "bfserver migrate: interrupted:", ctx.Err())
		return 1
	}
	if len(failed) > 0 {
		fmt.Fprintf(stderr, "bfserver migrate: %d keys failed:\n", len(failed))
		for _, f := range failed {
			fmt.Fprintln(stderr, "  "+f)
		}
		return 1
	}
	return 0
}

func mb(n int64) string { return fmt.Sprintf("%.1f MB", float64(n)/1e6) }

func addLogFlags(fs *flag.FlagSet) *logOptions {
	o := &logOptions{}
	fs.StringVar(&o.format, "log-format", "text", "log lines: text or json")
	fs.StringVar(&o.progress, "progress", "auto", "auto (a bar when stderr is a terminal, log lines otherwise), bar or log")
	fs.DurationVar(&o.every, "log-every", 5*time.Second, "interval between progress log lines")
	fs.BoolVar(&o.verbose, "verbose", false, "log every chunk or batch too")
	return o
}

func (m *migrator) progress() {
	m.rep.update(m.base+m.inProgress, fmt.Sprintf("keys %d/%d", m.doneKeys, m.totalKeys),
		"keys", m.doneKeys, "keys_total", m.totalKeys)
}

// dbPairs decides which source database goes to which target database.
func (m *migrator) dbPairs(ctx context.Context, db int) ([][2]int, error) {
	switch {
	case db >= 0:
		return [][2]int{{db, db}}, nil
	case m.from.hasDB:
		d := m.from.opt.DB
		if m.to.hasDB {
			return [][2]int{{d, m.to.opt.DB}}, nil
		}
		return [][2]int{{d, d}}, nil
	case m.to.hasDB:
		return nil, fmt.Errorf("--to names database %d: name the source's too (--from URL/N or --db N)", m.to.opt.DB)
	}
	dbs, err := m.from.keyspaceDBs(ctx)
	if err != nil {
		return nil, fmt.Errorf("--from %s: %w", m.from.url, err)
	}
	pairs := make([][2]int, len(dbs))
	for i, d := range dbs {
		pairs[i] = [2]int{d, d}
	}
	return pairs, nil
}

func pairsDst(p [][2]int) int {
	if len(p) == 0 {
		return 0
	}
	return p[0][1]
}

// scanAll collects the keys of one type matching pattern (SCAN may return
// a key more than once; the set removes repeats).
func scanAll(ctx context.Context, c *redis.Client, pattern, typ string, count int64) ([]string, error) {
	seen := map[string]bool{}
	var cursor uint64
	for {
		keys, next, err := c.ScanType(ctx, cursor, pattern, count, typ).Result()
		if err != nil {
			return nil, err
		}
		for _, k := range keys {
			seen[k] = true
		}
		if next == 0 {
			break
		}
		cursor = next
	}
	out := make([]string, 0, len(seen))
	for k := range seen {
		out = append(out, k)
	}
	sort.Strings(out)
	return out, nil
}

// list finds every filter key to copy and its size, in db then key order.
func (m *migrator) list(ctx context.Context, pairs [][2]int) ([]job, error) {
	var jobs []job
	for _, p := range pairs {
		c := m.from.db(p[0])
		for _, k := range kinds {
			keys, err := scanAll(ctx, c, m.match, k.typeName(), m.scanCount)
			if err != nil {
				return nil, err
			}
			var batch []job
			for _, key := range keys {
				if strings.HasSuffix(key, TempSuffix) || strings.HasSuffix(key, LoadSuffix) || strings.HasSuffix(key, ShipSuffix) {
					continue // another run's work in progress, not a filter of the application's
				}
				batch = append(batch, job{srcDB: p[0], dstDB: p[1], key: key, kind: k})
			}
			// Sizes, 500 INFOs per round trip; a key gone since SCAN is dropped.
			for i := 0; i < len(batch); i += 500 {
				part := batch[i:min(i+500, len(batch))]
				pipe := c.Pipeline()
				cmds := make([]*redis.Cmd, len(part))
				for n, j := range part {
					cmds[n] = pipe.Do(ctx, k.cmd("INFO"), j.key)
				}
				pipe.Exec(ctx)
				for n := range part {
					v, err := cmds[n].Result()
					if err != nil {
						if isNotFound(err) {
							continue
						}
						return nil, fmt.Errorf("%s %s: %w", k.cmd("INFO"), showKey(part[n].key), err)
					}
					in, err := parseInfo(v)
					if err != nil {
						return nil, err
					}
					part[n].size = in.size()
					jobs = append(jobs, part[n])
				}
			}
		}
	}
	sort.SliceStable(jobs, func(a, b int) bool {
		if jobs[a].srcDB != jobs[b].srcDB {
			return jobs[a].srcDB < jobs[b].srcDB
		}
		return jobs[a].key < jobs[b].key
	})
	return jobs, nil
}

func (m *migrator) dryRun(ctx context.Context, w io.Writer, jobs []job, total int64) error {
	fmt.Fprintln(w, "db\tkey\ttype\tbytes\tttl_ms\taction")
	exist := 0
	now := time.Now().UnixMilli()
	for _, j := range jobs {
		ttl := int64(-1)
		exp, err := m.from.expiry(ctx, j.srcDB, j.key)
		if errors.Is(err, errGone) {
			continue
		}
		if err != nil {
			return err
		}
		if exp != 0 {
			ttl = max(exp-now, 0)
		}
		n, err := m.to.db(j.dstDB).Exists(ctx, j.key).Result()
		if err != nil {
			return fmt.Errorf("--to %s: %w", m.to.url, err)
		}
		action := "copy"
		if n > 0 {
			exist++
			action = "exists (skipped if identical, else refused without --replace)"
			if m.replace {
				action = "replace (skipped if identical)"
			}
		}
		db := strconv.Itoa(j.srcDB)
		if j.dstDB != j.srcDB {
			db += "->" + strconv.Itoa(j.dstDB)
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%d\t%d\t%s\n", db, showKey(j.key), j.kind, j.size, ttl, action)
	}
	fmt.Fprintf(w, "dry run: %d keys (%s) from %s to %s; %d exist on the target; nothing copied\n",
		len(jobs), mb(total), m.from.url, m.to.url, exist)
	return nil
}

// cleanTemps deletes the temporary keys an interrupted run left on the
// target (only filters, only those whose key matches --match).
func (m *migrator) cleanTemps(ctx context.Context, pairs [][2]int) error {
	for _, p := range pairs {
		c := m.to.db(p[1])
		for _, k := range kinds {
			keys, err := scanAll(ctx, c, m.match+TempSuffix, k.typeName(), m.scanCount)
			if err != nil {
				return err
			}
			for _, key := range keys {
				if err := c.Del(ctx, key).Err(); err != nil {
					return err
				}
				m.rep.event(slog.LevelInfo, "removed left-over temporary key", "db", p[1], "key", key)
			}
		}
	}
	return nil
}

type keyStats struct {
	bytes    int64
	chunks   int
	attempts int
	stream   time.Duration // SCANDUMP into LOADCHUNK
	verify   time.Duration // both digests again
}

// copyKey copies one key and verifies it. Outcomes: "copied", "identical"
// (the target already held the same filter), "gone" (the source key
// disappeared or expired before it could be copied).
func (m *migrator) copyKey(ctx context.Context, j job) (string, keyStats, error) {
	src, dst := m.from.db(j.srcDB), m.to.db(j.dstDB)
	tmp := j.key + TempSuffix
	var st keyStats
	for {
		st.attempts++
		m.inProgress = 0
		typ, err := dst.Type(ctx, j.key).Result()
		if err != nil {
			return "", st, fmt.Errorf("target: TYPE: %w", err)
		}
		exists := typ != "none"
		if exists {
			if typ == j.kind.typeName() {
				same, err := m.identical(ctx, j)
				if errors.Is(err, errGone) {
					return "gone", st, nil
				}
				if err != nil {
					return "", st, err
				}
				if same {
					return "identical", st, m.syncTTL(ctx, j)
				}
			}
			if !m.replace {
				if typ != j.kind.typeName() {
					return "", st, fmt.Errorf("the target key exists with type %s (use --replace to overwrite it)", typ)
				}
				return "", st, errors.New("the target key exists and differs (use --replace to overwrite it)")
			}
		}
		// Dropping the temporary copy must work after an interrupt too,
		// when ctx is cancelled: it may hold gigabytes on the target.
		drop := func() { dst.Del(context.Background(), tmp) }
		if err := dst.Del(ctx, tmp).Err(); err != nil {
			return "", st, fmt.Errorf("target: DEL %s: %w", showKey(tmp), err)
		}
		t0 := time.Now()
		before, err := m.stream(ctx, src, dst, j, tmp, &st)
		ts := time.Since(t0)
		st.stream += ts
		if errors.Is(err, errGone) {
			drop()
			return "gone", st, nil
		}
		if err != nil {
			drop()
			return "", st, err
		}
		// Verify: the target's copy against what was streamed, and the
		// source again to catch a change made while it was being copied.
		var after, loaded digest
		var errAfter, errCopy error
		var wg sync.WaitGroup
		wg.Go(func() { after, errAfter = dumpDigest(ctx, src, j.kind, j.key) })
		wg.Go(func() { loaded, errCopy = dumpDigest(ctx, dst, j.kind, tmp) })
		wg.Wait()
		st.verify += time.Since(t0) - ts
		if errors.Is(errAfter, errGone) {
			drop()
			return "gone", st, nil
		}
		if errAfter != nil {
			drop()
			return "", st, fmt.Errorf("source: verifying: %w", errAfter)
		}
		if errCopy != nil {
			drop()
			return "", st, fmt.Errorf("target: verifying: %w", errCopy)
		}
		if after.sum != before.sum || !after.info.equal(before.info) {
			drop()
			if st.attempts > m.retries {
				return "", st, fmt.Errorf("the source key changed during each of %d copies", st.attempts)
			}
			m.rep.event(slog.LevelWarn, "changed during copy; copying again", "db", j.srcDB, "key", j.key, "attempt", st.attempts)
			continue
		}
		if loaded.sum != before.sum {
			drop()
			return "", st, fmt.Errorf("verification failed: the target's dump (sha256 %s) differs from the source's (%s)", loaded.sum, before.sum)
		}
		if !loaded.info.equal(before.info) {
			drop()
			return "", st, fmt.Errorf("verification failed: target INFO %s, source INFO %s", loaded.info, before.info)
		}
		exp, err := m.from.expiry(ctx, j.srcDB, j.key)
		if errors.Is(err, errGone) {
			drop()
			return "gone", st, nil
		}
		if err != nil {
			drop()
			return "", st, fmt.Errorf("source: TTL: %w", err)
		}
		if exp != 0 {
			if exp <= time.Now().UnixMilli() {
				drop()
				return "gone", st, nil
			}
			if err := dst.PExpireAt(ctx, tmp, time.UnixMilli(exp)).Err(); err != nil {
				drop()
				return "", st, fmt.Errorf("target: PEXPIREAT: %w", err)
			}
		}
		// The swap: RENAME carries the temporary key's TTL along, so the
		// key appears complete, verified and with its expiry in one step.
		if m.replace {
			err = dst.Rename(ctx, tmp, j.key).Err()
		} else {
			var ok bool
			ok, err = dst.RenameNX(ctx, tmp, j.key).Result()
			if err == nil && !ok {
				drop()
				return "", st, errors.New("the target key was created during the copy (use --replace to overwrite it)")
			}
		}
		if err != nil {
			drop()
			return "", st, fmt.Errorf("target: RENAME: %w", err)
		}
		return "copied", st, nil
	}
}

// identical reports whether the target already holds the same filter as
// the source: equal INFO first (cheap), then equal dump digests.
func (m *migrator) identical(ctx context.Context, j job) (bool, error) {
	src, dst := m.from.db(j.srcDB), m.to.db(j.dstDB)
	si, err := getInfo(ctx, src, j.kind, j.key)
	if err != nil {
		return false, err
	}
	ti, err := getInfo(ctx, dst, j.kind, j.key)
	if err != nil {
		if errors.Is(err, errGone) {
			return false, nil
		}
		return false, fmt.Errorf("target: %w", err)
	}
	if !si.equal(ti) {
		return false, nil
	}
	var sd, td digest
	var se, te error
	var wg sync.WaitGroup
	wg.Go(func() { sd, se = dumpDigest(ctx, src, j.kind, j.key) })
	wg.Go(func() { td, te = dumpDigest(ctx, dst, j.kind, j.key) })
	wg.Wait()
	if se != nil {
		return false, se
	}
	if errors.Is(te, errGone) {
		return false, nil
	}
	if te != nil {
		return false, fmt.Errorf("target: %w", te)
	}
	return sd.sum == td.sum && sd.info.equal(td.info), nil
}

// syncTTL gives an identical target key the source's expiry (a run that was
// interrupted may have left it without, or the source's may have changed).
func (m *migrator) syncTTL(ctx context.Context, j job) error {
	exp, err := m.from.expiry(ctx, j.srcDB, j.key)
	if errors.Is(err, errGone) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("source: TTL: %w", err)
	}
	texp, err := m.to.expiry(ctx, j.dstDB, j.key)
	if err != nil {
		return fmt.Errorf("target: TTL: %w", err)
	}
	dst := m.to.db(j.dstDB)
	switch {
	case exp == 0 && texp != 0:
		return dst.Persist(ctx, j.key).Err()
	case exp != 0:
		// Expiries read through PTTL are only known to within a round trip.
		tol := int64(0)
		if m.from.noPExpireTime.Load() || m.to.noPExpireTime.Load() {
			tol = 1000
		}
		if texp == 0 || abs(texp-exp) > tol {
			return dst.PExpireAt(ctx, j.key, time.UnixMilli(exp)).Err()
		}
	}
	return nil
}

func abs(x int64) int64 {
	if x < 0 {
		return -x
	}
	return x
}

// stream copies the source key's dump into tmp on the target, one chunk at
// a time (SCANDUMP, then LOADCHUNK of what it returned, then the next
// SCANDUMP), and returns the digest of what it streamed.
func (m *migrator) stream(ctx context.Context, src, dst *redis.Client, j job, tmp string, st *keyStats) (digest, error) {
	in, err := getInfo(ctx, src, j.kind, j.key)
	if err != nil {
		if errors.Is(err, errGone) {
			return digest{}, err
		}
		return digest{}, fmt.Errorf("source: %w", err)
	}
	if j.kind.whole() {
		p, sum, err := dumpWhole(ctx, src, j.kind, j.key)
		if err != nil {
			if errors.Is(err, errGone) {
				return digest{}, err
			}
			return digest{}, fmt.Errorf("source: %w", err)
		}
		if err := dst.RestoreReplace(ctx, tmp, 0, p).Err(); err != nil {
			return digest{}, fmt.Errorf("target: RESTORE %s: %w", showKey(tmp), err)
		}
		st.bytes, st.chunks = int64(len(p)), 1
		m.inProgress = j.size
		m.progress()
		return digest{sum: sum, info: in}, nil
	}
	h := sha256.New()
	var n int64
	var loadErr error
	err = scanDump(ctx, src, j.kind, j.key, in, func(iter int64, data string) error {
		h.Write(bytesOf(data))
		if err := dst.Do(ctx, j.kind.cmd("LOADCHUNK"), tmp, iter, data).Err(); err != nil {
			loadErr = fmt.Errorf("target: %s %s %d: %w", j.kind.cmd("LOADCHUNK"), showKey(tmp), iter, err)
			return loadErr
		}
		n += int64(len(data))
		st.chunks++
		m.rep.event(slog.LevelDebug, "chunk", "db", j.srcDB, "key", j.key, "iter", iter, "bytes", len(data))
		m.inProgress = min(n, j.size)
		m.progress()
		return nil
	})
	st.bytes = n
	if err != nil {
		if err == loadErr || errors.Is(err, errGone) {
			return digest{}, err
		}
		return digest{}, fmt.Errorf("source: %w", err)
	}
	return digest{sum: hex.EncodeToString(h.Sum(nil)), info: in}, nil
}
