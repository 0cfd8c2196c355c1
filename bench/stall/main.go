// Command stall measures how long a write waits on the image: a durable
// bfserver node flushing (and snapshotting) while writes go on, against
// RedisBloom with appendfsync always, in one run (issue #25).
//
// Each scenario starts the server, loads it, then keeps a steady write
// load while a probe client (one connection, one command at a time) times
// every BF.ADD reply, across at least -flushes flushes and one snapshot
// (BGSAVE); it prints the longest write, p99.9, p99, the errors (TRYAGAIN
// among them), the flushes seen and the peak RSS (for the large scenario,
// against the filter's bytes and docs/OPERATIONS.md's bound). With one
// node, the steady phase's timeline also shows each table written,
// Pebble's compactions and rebases, and a disk probe (diskProbe) gives
// the disk's own longest sync in the same window.
//
//	go run ./bench/stall                       # both scenarios, built ./cmd/bfserver and RedisBloom
//	go run ./bench/stall -scenario small       # 1,000,000 small filters (BF.ADD tenant:N x)
//	go run ./bench/stall -scenario large       # one fully dirty filter of 1 GiB of bits (1,178 MiB as RedisBloom sizes it)
//	go run ./bench/stall -rate half            # the steady phase at half the measured durable throughput
//	go run ./bench/stall -nodes 3 -rate half -redisbloom ''   # a 3-node cluster, probed through leader and follower
//	go run ./bench/stall -scenario window -redisbloom ''   # one large sliding window (bfserver only)
//	go run ./bench/stall -bfserver OLD -redisbloom ''   # another build only
//	go run ./bench/stall -scenario small -create-only -redisbloom ''   # the creation phase alone, then its flushes
//
// The scenarios:
//
//   - small: -filters filters created by pipelined BF.ADD tenant:N x (the
//     probe runs meanwhile), then -rate adds a second to random tenants.
//   - large: BF.RESERVE big 0.01 with the capacity of -large-bytes of bits,
//     BF.MADD of enough random items to change every 64 KiB chunk, then
//     -rate random adds a second to it: every flush writes all of it.
//   - window: BFX.WRESERVE win 0.01 COUNT -window-count, filled with that
//     many items (every slice in use), then -rate adds a second to it. A
//     flush writes what the adds changed (the k youngest slices, and those
//     shifts cleared); it also prints the image bytes written per flush
//     against the window's size. RedisBloom has no window: skip it
//     (-redisbloom ”).
//
// The rate: a number is adds a second; half first measures the durable
// write throughput on the loaded scenario (once every node has flushed
// what the load wrote: two more image tables; then a -burst of BF.ADD
// pipelined -burst-depth deep from -burst-conns connections,
// acknowledged adds a second) and runs the steady phase at half of it,
// since issue #25 asks for a write load at half the node's durable
// throughput. The steady load is paced per connection (four per target
// at least, one per 5,000 adds a second; one that falls behind catches
// up by at most a second), and the adds it got acknowledged are printed
// against the rate asked.
//
// -nodes 3 starts three bfserver processes on loopback (n1 bootstraps,
// n2 and n3 join through it with a shared --cluster-secret; RESP on
// -port+3, +5, +7, Raft on the port after each; the one-node case's
// durability flags), loads the scenario through the leader, and then
// splits the burst and the steady load between the leader and a
// follower (which forwards its writes) while two probes time BF.ADD, one
// through each. It prints each probe's figures, the timeline of every
// node's image tables and snapshots (each node flushes and snapshots on
// its own; BGSAVE goes to the leader, and the steady phase lasts until
// that snapshot is done), the leaders and terms each node saw, and each
// node's peak RSS, copy-on-write counters and (the leader's) INFO
// writestages. RedisBloom has no cluster peer: with -nodes 3 its row is
// the single-node reference (appendfsync always), as with -nodes 1.
package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
)

var (
	bfBin      = flag.String("bfserver", "", "bfserver binary (default: build ./cmd/bfserver)")
	redisBloom = flag.String("redisbloom", "/work/shared/anchors/start-redisbloom", "RedisBloom start script (empty: skip it)")
	scenario   = flag.String("scenario", "small,large", "scenarios to run: small, large")
	basePort   = flag.Int("port", 7480, "first of the ports used (RESP, Raft, RedisBloom)")
	filters    = flag.Int("filters", 1_000_000, "small: filters created")
	largeBytes = flag.Uint64("large-bytes", 1<<30, "large: the filter's bit array in bytes")
	winCount   = flag.Int("window-count", 20_000_000, "window: the count window's N (1%: about 2.45 bytes an item)")
	rateFlag   = flag.String("rate", "20000", "steady adds a second after the load, or half: half the durable throughput a burst measures on the loaded scenario")
	burstFor   = flag.Duration("burst", 5*time.Second, "with -rate half: how long the throughput burst lasts")
	burstConns = flag.Int("burst-conns", 8, "with -rate half: the burst's connections (with -nodes 3, half of them on the leader, half on a follower)")
	burstDepth = flag.Int("burst-depth", 100, "with -rate half: the commands each burst connection pipelines at a time")
	nodes      = flag.Int("nodes", 1, "bfserver nodes: 1, or 3 (a cluster on loopback, loaded through the leader, probed through the leader and a follower)")
	flushEvery = flag.Duration("flush-interval", 5*time.Second, "bfserver --flush-interval")
	flushes    = flag.Int("flushes", 3, "flushes to see in the steady phase (bfserver; RedisBloom runs as long)")
	bfArgs     = flag.String("bfargs", "", "extra bfserver flags, space-separated")
	debugAddr  = flag.String("debug-addr", "", "bfserver --debug-addr; with -profile, where the profiles are fetched")
	profile    = flag.String("profile", "", "with -debug-addr: write a CPU profile (PREFIX.cpu), an execution trace (PREFIX.trace) and the allocations (PREFIX.allocs) of the steady phase's first -profile-for")
	profileFor = flag.Duration("profile-for", 12*time.Second, "how long -profile records")
	worstN     = flag.Int("worst", 5, "the steady phase's longest writes to list, with when they began")
	phase      = flag.String("profile-phase", "steady", "with -profile: the phase profiled, steady or create (the load: -profile-for from its start)")
	createOnly = flag.Bool("create-only", false, "small: stop after the creation phase (no steady phase, no BGSAVE)")
)

// halfRate: -rate half; fixedRate: a numeric -rate.
var (
	halfRate  bool
	fixedRate int
)

func main() {
	flag.Parse()
	if *rateFlag == "half" {
		halfRate = true
	} else if n, err := strconv.Atoi(*rateFlag); err == nil && n > 0 {
		fixedRate = n
	} else {
		check(fmt.Errorf("-rate %q: a number of adds a second, or half", *rateFlag))
	}
	if *nodes != 1 && *nodes != 3 {
		check(fmt.Errorf("-nodes %d: 1 or 3", *nodes))
	}
	stopOnSignal()
	if *bfBin == "" {
		dir, err := os.MkdirTemp("", "bfstall")
		check(err)
		defer os.RemoveAll(dir)
		*bfBin = filepath.Join(dir, "bfserver")
		build := exec.Command("go", "build", "-o", *bfBin, "./cmd/bfserver")
		build.Stdout, build.Stderr = os.Stdout, os.Stderr
		check(build.Run())
	}
	for _, sc := range strings.Split(*scenario, ",") {
		var steady time.Duration
		note := ""
		if *nodes == 3 {
			note = " (the single-node reference: RedisBloom has no cluster peer; appendfsync always)"
		}
		if *bfBin != "none" && *nodes == 3 {
			cl := startCluster()
			r := runCluster(cl, sc)
			steady = r.steady
			cl.stop()
		} else if *bfBin != "none" {
			var extra []string
			if *debugAddr != "" {
				extra = []string{"--debug-addr", *debugAddr}
			}
			s := startBF("bfserver", *basePort, *basePort+1, extra...)
			r := run(s, sc, 0, "")
			steady = r.steady
			s.stop()
		}
		if *redisBloom != "" {
			s := startRedisBloom()
			run(s, sc, max(steady, 3**flushEvery+5*time.Second), note)
			s.stop()
		}
	}
}

type server struct {
	name string
	pid  int
	cmd  *exec.Cmd
	port int
	dir  string
	// exited is closed once a process this program started has ended.
	exited chan struct{}
}

// startBF starts a durable bfserver node named name (its log is
// $TMPDIR/bfstall-NAME.log) and waits until it takes a write.
func startBF(name string, port, raftPort int, extra ...string) *server {
	// A node left running (this program killed, or its output cut short)
	// would hold the ports, and the next run would measure it instead.
	for _, p := range []int{port, raftPort} {
		l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p))
		if err != nil {
			check(fmt.Errorf("%s: port %d is taken (a node left from an earlier run?): %v", name, p, err))
		}
		l.Close()
	}
	dir, err := os.MkdirTemp("", "bfstall-data")
	check(err)
	args := []string{"--addr", fmt.Sprintf("127.0.0.1:%d", port), "--raft-addr", fmt.Sprintf("127.0.0.1:%d", raftPort),
		"--data-dir", dir, "--fsync", "always", "--flush-interval", flushEvery.String(), "--max-filter-bytes", "4294967296"}
	args = append(args, extra...)
	args = append(args, strings.Fields(*bfArgs)...)
	s := &server{name: name, port: port, dir: dir, cmd: exec.Command(*bfBin, args...)}
	log, err := os.Create(filepath.Join(os.TempDir(), "bfstall-"+name+".log"))
	check(err)
	s.cmd.Stdout, s.cmd.Stderr = log, log
	// Stopped with this program, however it ends.
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
	check(s.cmd.Start())
	s.pid = s.cmd.Process.Pid
	s.exited = make(chan struct{})
	go func() {
		s.cmd.Wait()
		close(s.exited)
	}()
	startedMu.Lock()
	started[s] = true
	startedMu.Unlock()
	s.waitReady()
	return s
}

func startRedisBloom() *server {
	port := *basePort + 2
	out, err := exec.Command(*redisBloom, strconv.Itoa(port), "--appendonly", "yes", "--appendfsync", "always").Output()
	check(err)
	pid, err := strconv.Atoi(strings.TrimSpace(string(out)))
	check(err)
	s := &server{name: "redisbloom", port: port, pid: pid}
	s.waitReady()
	return s
}

func (s *server) client(pool int) *redis.Client {
	return redis.NewClient(&redis.Options{Addr: fmt.Sprintf("127.0.0.1:%d", s.port), Protocol: 2, PoolSize: pool,
		ReadTimeout: 2 * time.Minute, WriteTimeout: 2 * time.Minute, MaxRetries: -1})
}

func (s *server) waitReady() {
	c := s.client(1)
	defer c.Close()
	deadline := time.Now().Add(60 * time.Second)
	// Ready once it takes a write (a node answers PING before it leads).
	for c.Do(context.Background(), "BF.ADD", "warmup", "x").Err() != nil {
		if time.Now().After(deadline) {
			check(fmt.Errorf("%s did not start", s.name))
		}
		if s.exited != nil {
			select {
			case <-s.exited:
				check(fmt.Errorf("%s exited: %v (see its log in %s)", s.name, s.cmd.ProcessState, os.TempDir()))
			default:
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (s *server) stop() {
	if s.cmd != nil {
		s.cmd.Process.Signal(syscall.SIGTERM)
		<-s.exited
		os.RemoveAll(s.dir)
		startedMu.Lock()
		delete(started, s)
		startedMu.Unlock()
		return
	}
	syscall.Kill(s.pid, syscall.SIGTERM)
	for i := 0; i < 500 && syscall.Kill(s.pid, 0) == nil; i++ {
		time.Sleep(20 * time.Millisecond)
	}
}

// cpu is the server's CPU time so far (user and system, from
// /proc/pid/stat), in seconds: less noisy than wall time on a shared
// machine.
func (s *server) cpu() float64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", s.pid))
	if err != nil {
		return 0
	}
	// The fields after the command's closing parenthesis: utime and
	// stime are the 12th and 13th of them.
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	if len(f) < 13 {
		return 0
	}
	u, _ := strconv.ParseFloat(f[11], 64)
	st, _ := strconv.ParseFloat(f[12], 64)
	return (u + st) / 100 // clock ticks (USER_HZ)
}

// memKB reads a field (VmHWM) from /proc/pid/status in KiB.
func (s *server) memKB(field string) int64 {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", s.pid))
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), field+":"); ok {
			n, _ := strconv.ParseInt(strings.Fields(v)[0], 10, 64)
			return n
		}
	}
	return 0
}

// memLine is the peak RSS, and for the scenarios of one large array
// against S, the filter's bytes (MEMORY USAGE: the array
// RedisBloom's sizing gives, not -large-bytes) and docs/OPERATIONS.md's
// bound of 1.1 × S + 64 MiB.
func (s *server) memLine(c *redis.Client, sc string) string {
	peak := s.memKB("VmHWM") << 10
	line := fmt.Sprintf("peak RSS %d MiB", peak>>20)
	var size int64
	switch sc {
	case "large":
		size = memoryUsage(c, "big")
	case "window":
		size = memoryUsage(c, "win")
	}
	if size <= 0 {
		return line
	}
	bound := size + size/10 + 64<<20
	verdict := "within"
	if peak > bound {
		verdict = "over"
	}
	return fmt.Sprintf("%s = %.3f × S (S = %d MiB, the filter's bytes); %s the bound 1.1 × S + 64 MiB = %d MiB",
		line, float64(peak)/float64(size), size>>20, verdict, bound>>20)
}

// memoryUsage is MEMORY USAGE of key: a filter's array and a few bytes of
// header, on either server (0 when it fails).
func memoryUsage(c *redis.Client, key string) int64 {
	n, _ := c.Do(context.Background(), "MEMORY", "USAGE", key).Int64()
	return n
}

// span follows a counter of bytes written for the timeline: a span
// begins at the first poll that sees it grow and ends at the first that
// does not.
type span struct {
	what    string
	last    int64
	from    time.Duration
	growing bool
	base    int64
}

func newSpan(what string, n int64) *span { return &span{what: what, last: n} }

// see adds the span to events when a poll at el finds it ended.
func (p *span) see(events []string, n int64, el time.Duration) []string {
	switch {
	case n > p.last && !p.growing:
		p.growing, p.from, p.base = true, el, p.last
	case n == p.last && p.growing:
		p.growing = false
		events = append(events, fmt.Sprintf("%s +%.1f–%.1f s (%d MiB)", p.what, p.from.Seconds(), el.Seconds(), (n-p.base)>>20))
	}
	p.last = n
	return events
}

// info reads one INFO field, "" when absent.
func (s *server) info(c *redis.Client, field string) string {
	txt, err := c.Info(context.Background(), "persistence").Result()
	if err != nil {
		return ""
	}
	for _, line := range strings.Split(txt, "\r\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			return v
		}
	}
	return ""
}

// probe is the depth-1 client: it times every BF.ADD reply.
type probe struct {
	mu     sync.Mutex
	lat    []time.Duration
	at     []time.Time // when each write began
	errs   map[string]int
	worst  time.Duration
	worstT time.Time
	stop   atomic.Bool
	done   chan struct{}
}

func startProbe(s *server, key string) *probe {
	p := &probe{errs: map[string]int{}, done: make(chan struct{})}
	c := s.client(1)
	go func() {
		defer close(p.done)
		defer c.Close()
		ctx := context.Background()
		for i := 0; !p.stop.Load(); i++ {
			began := time.Now()
			err := c.Do(ctx, "BF.ADD", key, "p"+strconv.Itoa(i)).Err()
			d := time.Since(began)
			p.mu.Lock()
			p.lat = append(p.lat, d)
			p.at = append(p.at, began)
			if d > p.worst {
				p.worst, p.worstT = d, began
			}
			if err != nil {
				p.errs[errWord(err)]++
			}
			p.mu.Unlock()
		}
	}()
	return p
}

func (p *probe) finish() {
	p.stop.Store(true)
	<-p.done
}

func (p *probe) quantile(q float64) time.Duration { return quantile(p.lat, q) }

// begunBy is the index of the first write from the from'th on that began
// at t or later: a write in flight when a phase began belongs to the
// phase before. The caller holds p.mu.
func (p *probe) begunBy(from int, t time.Time) int {
	for from < len(p.at) && p.at[from].Before(t) {
		from++
	}
	return from
}

// count is how many writes the probe has timed so far.
func (p *probe) count() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.lat)
}

// longest lists the -worst longest writes from the from'th on, with when
// they began after since. The caller holds p.mu.
func (p *probe) longest(from int, since time.Time) string {
	idx := make([]int, len(p.lat)-from)
	for i := range idx {
		idx[i] = from + i
	}
	slices.SortFunc(idx, func(a, b int) int { return int(p.lat[b] - p.lat[a]) })
	var worst []string
	for _, i := range idx[:min(len(idx), *worstN)] {
		worst = append(worst, fmt.Sprintf("%.1f ms at +%.2f s", ms(p.lat[i]), p.at[i].Sub(since).Seconds()))
	}
	return strings.Join(worst, ", ")
}

// diskProbe times the disk's own sync beside the node, for the steady
// phase: a 200-byte append and fdatasync every 10 ms to a file of its
// own on the data directory's filesystem, the shape of a Raft log's sync
// at a light enough rate to cost the node nothing measurable. A durable
// write cannot take less than its log's sync, so the probe's longest is
// the floor under the node's longest in the same window.
type diskProbe struct {
	stop chan struct{}
	done chan struct{}
	lat  []time.Duration
	at   []time.Time
	err  error
}

func startDiskProbe() *diskProbe {
	d := &diskProbe{stop: make(chan struct{}), done: make(chan struct{})}
	f, err := os.CreateTemp("", "bfstall-diskprobe")
	if err != nil {
		d.err = err
		close(d.done)
		return d
	}
	go func() {
		defer close(d.done)
		defer os.Remove(f.Name())
		defer f.Close()
		rec := make([]byte, 200)
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-d.stop:
				return
			case <-tick.C:
			}
			t := time.Now()
			if _, err := f.Write(rec); err != nil {
				d.err = err
				return
			}
			if err := syscall.Fdatasync(int(f.Fd())); err != nil {
				d.err = err
				return
			}
			d.lat, d.at = append(d.lat, time.Since(t)), append(d.at, t)
		}
	}()
	return d
}

func (d *diskProbe) finish() {
	select {
	case <-d.done:
	default:
		close(d.stop)
		<-d.done
	}
}

// report is the probe's line: its syncs, the longest and when (against
// since), p99.9 and p50.
func (d *diskProbe) report(since time.Time) string {
	if d.err != nil {
		return fmt.Sprintf("disk probe failed: %v", d.err)
	}
	if len(d.lat) == 0 {
		return "disk probe: no syncs"
	}
	worst := 0
	for i, l := range d.lat {
		if l > d.lat[worst] {
			worst = i
		}
	}
	return fmt.Sprintf("disk probe (this tool's 200-byte append + fdatasync every 10 ms, same filesystem): %d syncs, longest %.1f ms at +%.2f s, p99.9 %.2f ms, p50 %.3f ms",
		len(d.lat), ms(d.lat[worst]), d.at[worst].Sub(since).Seconds(), ms(quantile(d.lat, 0.999)), ms(quantile(d.lat, 0.5)))
}

// stats is a phase's writes: how many, the longest, p99.9, p99 and p50.
func stats(lat []time.Duration) string {
	var longest time.Duration
	for _, d := range lat {
		longest = max(longest, d)
	}
	return fmt.Sprintf("%d writes, longest %.1f ms, p99.9 %.2f ms, p99 %.2f ms, p50 %.3f ms",
		len(lat), ms(longest), ms(quantile(lat, 0.999)), ms(quantile(lat, 0.99)), ms(quantile(lat, 0.5)))
}

func quantile(lat []time.Duration, q float64) time.Duration {
	s := slices.Clone(lat)
	slices.Sort(s)
	if len(s) == 0 {
		return 0
	}
	return s[min(len(s)-1, int(math.Ceil(q*float64(len(s))))-1)]
}

type result struct{ steady time.Duration }

// winBytes is the window scenario's MEMORY USAGE, for the bytes written
// per flush against it.
var winBytes int64

func run(s *server, sc string, steadyFor time.Duration, note string) result {
	ctx := context.Background()
	c := s.client(1)
	defer c.Close()
	fmt.Printf("== %s, %s%s\n", sc, s.name, note)
	p := startProbe(s, "probe")
	began := time.Now()
	if *phase == "create" {
		profileNow(s)
	}
	mk := loadScenario(s, c, sc, began)
	if sc == "small" && *createOnly {
		p.finish()
		cpu := s.cpu()
		profiling.Wait()
		printCreate(s, c, p)
		if s.cmd != nil {
			// The flushes that write what was created are part of its
			// cost: wait for two more tables (the second's cut was
			// taken after the load) and count the CPU again.
			t0, _ := strconv.Atoi(s.info(c, "image_tables_ingested"))
			for n := t0; n < t0+2 && time.Since(began) < 10*time.Minute; n, _ = strconv.Atoi(s.info(c, "image_tables_ingested")) {
				time.Sleep(100 * time.Millisecond)
			}
			fmt.Printf("   server CPU: %.2f s by the end of creation, %.2f s once flushed (+%.1f s)\n", cpu, s.cpu(), time.Since(began).Seconds())
		} else {
			fmt.Printf("   server CPU: %.2f s by the end of creation\n", cpu)
		}
		return result{}
	}
	loaded := time.Since(began)
	loadEnd := p.count()
	settle([]*server{s})
	burstFrom := p.count()
	rate := steadyRate([]*server{s}, mk)
	steadyFrom := p.count()
	if s.cmd != nil {
		c.Do(ctx, "CONFIG", "RESETSTAT") // INFO writestages covers the steady phase
	}
	stop := make(chan struct{})
	wg, sent := steadyLoad([]*server{s}, rate, mk, stop)
	steadyStart := time.Now()
	disk := startDiskProbe()
	if *phase == "steady" {
		profileNow(s)
	}
	// The timeline: when each image table was ingested and when BGSAVE
	// was asked, against the steady phase's start.
	var events []string
	lastTables := -1
	tables := func() int {
		n, _ := strconv.Atoi(s.info(c, "image_tables_ingested"))
		return n
	}
	t0 := tables()
	written := func() int64 {
		n, _ := strconv.ParseInt(s.info(c, "image_table_bytes_written"), 10, 64)
		return n
	}
	w0 := written()
	// Tables, Pebble's compactions and rebases, by when their counters of
	// bytes written grew (each counts when it ends).
	compacted := func() int64 {
		n, _ := strconv.ParseInt(s.info(c, "image_compaction_bytes_written"), 10, 64)
		return n
	}
	based := func() int64 {
		n, _ := strconv.ParseInt(s.info(c, "image_base_bytes_written"), 10, 64)
		return n
	}
	tableSpan, compactSpan, baseSpan := newSpan("table written", written()), newSpan("compaction", compacted()), newSpan("rebase", based())
	saved := false
	for {
		time.Sleep(100 * time.Millisecond)
		el := time.Since(steadyStart)
		if s.cmd != nil {
			if n := tables(); n != lastTables {
				if lastTables >= 0 {
					events = append(events, fmt.Sprintf("table %d at +%.1f s", n-t0, el.Seconds()))
				}
				lastTables = n
			}
			events = tableSpan.see(events, written(), el)
			events = compactSpan.see(events, compacted(), el)
			events = baseSpan.see(events, based(), el)
		}
		if !saved && el > *flushEvery+*flushEvery/2 {
			saved = true
			events = append(events, fmt.Sprintf("BGSAVE at +%.1f s", el.Seconds()))
			if err := c.Do(ctx, "BGSAVE").Err(); err != nil {
				fmt.Printf("   BGSAVE: %v\n", err)
			}
		}
		if steadyFor > 0 {
			if el >= steadyFor {
				break
			}
		} else if saved && tables()-t0 >= *flushes+1 && el > time.Duration(*flushes)**flushEvery {
			break
		}
		if el > 10*time.Minute {
			fmt.Println("   gave up waiting for flushes")
			break
		}
	}
	close(stop)
	wg.Wait()
	p.finish()
	disk.finish()
	profiling.Wait()
	steady := time.Since(steadyStart)
	p.mu.Lock()
	defer p.mu.Unlock()
	steadyFrom = p.begunBy(steadyFrom, steadyStart)
	fmt.Printf("   load %.1f s, steady %.1f s at %d adds/s; image tables ingested in the steady phase: %d\n", loaded.Seconds(), steady.Seconds(), rate, tables()-t0)
	if n := tables() - t0; n > 0 && s.cmd != nil {
		per := float64(written()-w0) / float64(n)
		fmt.Printf("   image bytes written per table: %.1f MiB", per/(1<<20))
		if winBytes > 0 {
			fmt.Printf(" (%.3f of the window's %d MiB)", per/float64(winBytes), winBytes>>20)
		}
		fmt.Printf("; copy-on-write (the last cut): %s lines in %s chunks copied, peak %s bytes; %s budget waits, %s spilled\n",
			s.info(c, "image_cut_copied_lines"), s.info(c, "image_cut_copied_chunks"), s.info(c, "image_cut_copied_peak_bytes"), s.info(c, "image_cut_budget_waits"), s.info(c, "image_cut_spilled_chunks"))
	}
	fmt.Printf("   probe: %d writes, longest %.1f ms (at +%.1f s), p99.9 %.2f ms, p99 %.2f ms, p50 %.3f ms; errors %v\n",
		len(p.lat), ms(p.worst), p.worstT.Sub(began).Seconds(), ms(p.quantile(0.999)), ms(p.quantile(0.99)), ms(p.quantile(0.5)), p.errs)
	fmt.Printf("   probe in the load phase: %s\n", stats(p.lat[:loadEnd]))
	if burstFrom > loadEnd {
		fmt.Printf("   probe while the load's flushes settled: %s\n", stats(p.lat[loadEnd:burstFrom]))
	}
	if steadyFrom > burstFrom {
		fmt.Printf("   probe during the throughput burst: %s\n", stats(p.lat[burstFrom:steadyFrom]))
	}
	fmt.Printf("   probe in the steady phase: %s\n", stats(p.lat[steadyFrom:]))
	fmt.Printf("   steady load: %s\n", sent.report(steady))
	if len(events) > 0 {
		fmt.Printf("   timeline: %s\n", strings.Join(events, ", "))
	}
	fmt.Printf("   longest in the steady phase: %s\n", p.longest(steadyFrom, steadyStart))
	fmt.Printf("   %s\n", disk.report(steadyStart))
	if s.cmd != nil {
		// Where a durable write's time went: the log's write and sync
		// (store) and the state machine (fsm_apply) above all.
		printStages(c, "")
	}
	fmt.Printf("   %s\n", s.memLine(c, sc))
	return result{steady: steady}
}

// profiling waits for the profiles profileNow asked for.
var profiling sync.WaitGroup

// profileNow starts a CPU profile, an execution trace and a profile of
// the allocations (a delta: what the server allocated meanwhile) of the
// next -profile-for (with -profile and -debug-addr, bfserver only).
func profileNow(s *server) {
	if *profile == "" || *debugAddr == "" || s.cmd == nil {
		return
	}
	for _, kind := range [][2]string{{"profile", "cpu"}, {"trace", "trace"}, {"allocs", "allocs"}} {
		profiling.Add(1)
		go func() {
			defer profiling.Done()
			fetch(fmt.Sprintf("http://%s/debug/pprof/%s?seconds=%d", *debugAddr, kind[0], int(profileFor.Seconds())), *profile+"."+kind[1])
		}()
	}
}

// printCreate reports the creation phase alone (-create-only): the
// probe's writes during it, the server's write stages and peak RSS.
func printCreate(s *server, c *redis.Client, p *probe) {
	p.mu.Lock()
	defer p.mu.Unlock()
	fmt.Printf("   probe during creation: %d writes, longest %.1f ms, p99.9 %.2f ms, p99 %.2f ms, p50 %.3f ms; errors %v\n",
		len(p.lat), ms(p.worst), ms(p.quantile(0.999)), ms(p.quantile(0.99)), ms(p.quantile(0.5)), p.errs)
	if s.cmd != nil {
		printStages(c, "")
		fmt.Printf("   image tables ingested: %s\n", s.info(c, "image_tables_ingested"))
	}
	fmt.Printf("   peak RSS %d MiB\n", s.memKB("VmHWM")/1024)
}

// printStages prints INFO writestages' stages that timed anything: where
// the longest write spent its time.
func printStages(c *redis.Client, prefix string) {
	txt, err := c.Info(context.Background(), "writestages").Result()
	if err != nil {
		return
	}
	for _, line := range strings.Split(txt, "\r\n") {
		if strings.HasPrefix(line, "stage_") && !strings.Contains(line, ":count=0,") {
			fmt.Printf("   %s%s\n", prefix, line)
		}
	}
}

// fetch writes what url serves into file (a profile of the server).
func fetch(url, file string) {
	resp, err := http.Get(url)
	if err != nil {
		fmt.Printf("   profile: %v\n", err)
		return
	}
	defer resp.Body.Close()
	f, err := os.Create(file)
	if err != nil {
		fmt.Printf("   profile: %v\n", err)
		return
	}
	defer f.Close()
	io.Copy(f, resp.Body)
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func check(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, "stall:", err)
		stopStarted()
		os.Exit(1)
	}
}

// started are the bfserver nodes running, stopped (and their data
// directories removed) when this program gives up or is interrupted.
var (
	startedMu sync.Mutex
	started   = map[*server]bool{}
)

func stopStarted() {
	startedMu.Lock()
	defer startedMu.Unlock()
	for s := range started {
		s.cmd.Process.Signal(syscall.SIGTERM)
		<-s.exited
		os.RemoveAll(s.dir)
	}
	clear(started)
}

// stopOnSignal stops the nodes on SIGINT or SIGTERM, then exits.
func stopOnSignal() {
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, syscall.SIGINT, syscall.SIGTERM)
	go func() {
		<-ch
		stopStarted()
		os.Exit(1)
	}()
}
