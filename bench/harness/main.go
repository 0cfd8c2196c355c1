// Command harness measures bfserver against redis-server (Debian's) on this
// machine, side by side in one run: it starts both on loopback, drives them
// with redis-benchmark, alternates A/B runs so machine noise hits both, and
// prints per-case medians, latency percentiles, server CPU, peak memory and
// the bfserver/redis-server ratio.
//
//	go run ./bench/harness peer         # issue #25's cases against RedisBloom itself, durability matched
//	go run ./bench/harness sketches     # issue #26's CMS.INCRBY, TOPK.ADD and TDIGEST.ADD at P1 and P32 against RedisBloom
//	go run ./bench/harness logstores    # durable BF.ADD on each Raft log store against RedisBloom, rotating
//	go run ./bench/harness windows      # issue #27: BFX.W* against BF.* and two rotating RedisBloom filters
//	go run ./bench/harness throughput   # read/write cases, P1 and P32, 50 clients
//	go run ./bench/harness durable      # BF.ADD --fsync always vs SADD appendfsync always
//	go run ./bench/harness cluster      # 3 nodes: linearizable vs stale BF.EXISTS
//	go run ./bench/harness clusterwrites # 3 nodes: BF.ADD with follower read leases on vs off
//	go run ./bench/harness memory       # RSS of 1M@1% and 100M@0.1% filters vs their bits
//	go run ./bench/harness startup      # restart time of a node holding 1 GiB of filters
package main

import (
	"bufio"
	"cmp"
	"context"
	"encoding/csv"
	"flag"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
)

var (
	bfBin    = flag.String("bfserver", "", "bfserver binary (default: build ./cmd/bfserver)")
	redisBin = flag.String("redis-server", "redis-server", "redis-server binary")
	rounds   = flag.Int("rounds", 3, "A/B rounds per case")
	clients  = flag.Int("clients", 50, "redis-benchmark clients")
	requests = flag.Int("n", 0, "requests per run (default: 200k at P1, 1M at P32, 4M at P128)")
	only     = flag.String("case", "", "run only cases whose name contains this")
	threads  = flag.Int("threads", 0, "redis-benchmark --threads (0: single-threaded)")
	roles    = flag.String("roles", "follower,leader", "cluster mode: the nodes to drive")
	pipes    = flag.String("pipelines", "1,32", "cluster mode: the pipeline depths to run")
	bfArgs   = flag.String("bfargs", "", "extra bfserver flags, space-separated, after the mode's own (e.g. \"--fsync=no\")")
	// peer mode
	redisBloom = flag.String("redisbloom", "../shared/anchors/start-redisbloom", "peer mode: RedisBloom's start script")
	durability = flag.String("durability", "", "peer mode: run only the durability whose label contains this (durable, everysec, memory); windows mode: memory runs both in memory")
	fillReads  = flag.Bool("fill", true, "peer mode: fill the read cases' filters first (random bits: a Bloom filter at capacity); false: lookups in empty ones, pages never touched")
	creates    = flag.Int("creates", 1000000, "peer mode: filters created by BF.ADD tenant:N x per run, each run on fresh servers (0: skip the creation case)")
	portBase   = flag.Int("port-base", 0, "first port of a range to use for the servers (0: any free port)")
	nextPort   int
	// windows mode
	windowCount = flag.Int("window-count", 1_000_000, "windows mode: the window (inserts), the rotating filters' period and capacity")
	windowError = flag.Float64("window-error", 0.01, "windows mode: the false-positive target")
)

func main() {
	flag.Parse()
	shareClusterSecret()
	if *bfBin == "" {
		dir, err := os.MkdirTemp("", "bfharness")
		check(err)
		defer os.RemoveAll(dir)
		*bfBin = filepath.Join(dir, "bfserver")
		build := exec.Command("go", "build", "-o", *bfBin, "./cmd/bfserver")
		build.Stdout, build.Stderr = os.Stdout, os.Stderr
		check(build.Run())
	}
	mode := flag.Arg(0)
	switch mode {
	case "throughput":
		throughput()
	case "durable":
		durable()
	case "cluster":
		cluster()
	case "clusterwrites":
		clusterWrites()
	case "memory":
		memory()
	case "startup":
		startup()
	case "peer":
		peer()
	case "sketches":
		sketches()
	case "logstores":
		logStores()
	case "windows":
		windows()
	default:
		fmt.Fprintln(os.Stderr, "usage: harness [flags] peer|sketches|logstores|windows|throughput|durable|cluster|clusterwrites|memory|startup")
		os.Exit(2)
	}
}

// shareClusterSecret gives every bfserver this tool starts the same cluster
// secret, in the environment they inherit: a node that joins a cluster does
// not start without one, and a build from before the secret ignores the
// variable.
func shareClusterSecret() {
	if os.Getenv("BFSERVER_CLUSTER_SECRET") == "" && os.Getenv("BFSERVER_CLUSTER_SECRET_FILE") == "" {
		check(os.Setenv("BFSERVER_CLUSTER_SECRET", fmt.Sprintf("bench-%016x%016x", rand.Uint64(), rand.Uint64())))
	}
}

func check(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, "harness:", err)
		os.Exit(1)
	}
}

// freePort is a port for a server: the next of -port-base's when set (a
// range kept for this run on a shared machine), or any free one.
func freePort() int {
	if *portBase > 0 {
		nextPort++
		return *portBase + nextPort - 1
	}
	// The kernel may hand the same free port out twice in a row (a node's
	// client and Raft ports alike, and the second bind then fails), so a
	// port given out once is not given again.
	for {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		check(err)
		port := ln.Addr().(*net.TCPAddr).Port
		ln.Close()
		if !givenPorts[port] {
			givenPorts[port] = true
			return port
		}
	}
}

var givenPorts = map[int]bool{}

// server is a process under test.
type server struct {
	name string
	cmd  *exec.Cmd
	pid  int // a server not started as a child (RedisBloom's script daemonizes it)
	port int
	dir  string
	log  string // the server's standard error, shown when it does not start
}

func (s *server) procID() int {
	if s.cmd == nil {
		return s.pid
	}
	return s.cmd.Process.Pid
}

func startBF(args ...string) *server {
	port := freePort()
	dir, err := os.MkdirTemp("", "bfdata")
	check(err)
	all := append([]string{"--addr", fmt.Sprintf("127.0.0.1:%d", port), "--raft-addr", fmt.Sprintf("127.0.0.1:%d", freePort()),
		"--data-dir", dir}, args...)
	all = append(all, strings.Fields(*bfArgs)...)
	s := &server{name: "bfserver", port: port, dir: dir, cmd: exec.Command(*bfBin, all...)}
	logf, err := os.CreateTemp("", "bfserver-*.log")
	check(err)
	defer logf.Close()
	s.log, s.cmd.Stderr = logf.Name(), logf
	check(s.cmd.Start())
	s.waitReady()
	if !slices.Contains(args, "--join") {
		// A node answers PING before it has elected itself (Raft's
		// heartbeat timeout, about 0.6 s on a new node), and its first
		// writes wait for that: not what a run should time.
		s.poll("never led", func(c *redis.Client) bool {
			info, err := c.Info(context.Background(), "replication").Result()
			return err == nil && strings.Contains(info, "role:master")
		})
	}
	return s
}

func startRedis(args ...string) *server {
	port := freePort()
	dir, err := os.MkdirTemp("", "redisdata")
	check(err)
	all := append([]string{"--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--dir", dir, "--save", "", "--daemonize", "no"}, args...)
	s := &server{name: "redis-server", port: port, dir: dir, cmd: exec.Command(*redisBin, all...)}
	check(s.cmd.Start())
	s.waitReady()
	return s
}

func (s *server) client() *redis.Client {
	return redis.NewClient(&redis.Options{Addr: fmt.Sprintf("127.0.0.1:%d", s.port), Protocol: 2, ReadTimeout: time.Minute, WriteTimeout: time.Minute})
}

// waitReady polls until the server answers PING.
func (s *server) waitReady() {
	s.poll("did not start", func(c *redis.Client) bool { return c.Ping(context.Background()).Err() == nil })
}

// poll calls ok every 20 ms until it holds; after 30 s the harness exits
// saying what the server never did.
func (s *server) poll(never string, ok func(*redis.Client) bool) {
	s.pollFor(30*time.Second, never, ok)
}

// pollFor is poll with another deadline.
func (s *server) pollFor(limit time.Duration, never string, ok func(*redis.Client) bool) {
	c := s.client()
	defer c.Close()
	deadline := time.Now().Add(limit)
	for !ok(c) {
		if time.Now().After(deadline) {
			if s.log != "" {
				b, _ := os.ReadFile(s.log)
				b = b[max(0, len(b)-4096):]
				fmt.Fprintf(os.Stderr, "%s (%s) said:\n%s\n", s.name, strings.Join(s.cmd.Args, " "), b)
			}
			check(fmt.Errorf("%s %s", s.name, never))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (s *server) stop() {
	if s.cmd == nil {
		stopPID(s.pid)
		return
	}
	s.cmd.Process.Signal(syscall.SIGTERM)
	s.cmd.Wait()
	os.RemoveAll(s.dir)
	if s.log != "" {
		os.Remove(s.log)
	}
}

func (s *server) do(args ...any) {
	c := s.client()
	defer c.Close()
	check(c.Do(context.Background(), args...).Err())
}

// settle waits until the server has written behind what it was sent, so
// that the cases after a fill measure their own requests: a read case
// started beside bfserver's first image flush of the filled filters (or
// RedisBloom's rewrite of an AOF that grew by them) counted that work's
// CPU to the reads. bfserver takes a snapshot (SAVE returns once its
// image is written); RedisBloom rewrites its AOF (BGREWRITEAOF: one it had
// begun on its own finishes first), so that none starts during the cases.
func (s *server) settle() {
	if s.name == "bfserver" {
		s.do("SAVE")
		return
	}
	s.do("BGREWRITEAOF")
	// A rewrite of the filled filters' AOF (hundreds of MB) may take a
	// while on a slow disk.
	s.pollFor(5*time.Minute, "never finished its AOF rewrite", func(c *redis.Client) bool {
		info, err := c.Info(context.Background(), "persistence").Result()
		return err == nil && !strings.Contains(info, "aof_rewrite_in_progress:1") &&
			!strings.Contains(info, "aof_rewrite_scheduled:1") && !strings.Contains(info, "rdb_bgsave_in_progress:1")
	})
}

// cpu is the process's user+system CPU time.
func (s *server) cpu() time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", s.procID()))
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+2:]))
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(ut+st) * time.Second / 100
}

// memKB reads a field (VmRSS, VmHWM) from /proc/pid/status in KiB.
func (s *server) memKB(field string) int64 {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", s.procID()))
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

// result is one redis-benchmark run.
type result struct {
	rps, p50, p99 float64
	cpu           time.Duration
}

// bench runs redis-benchmark against s with the -clients flag's clients.
func bench(s *server, pipeline, n int, args []string) result {
	return benchClients(s, *clients, pipeline, n, args)
}

func benchClients(s *server, clients, pipeline, n int, args []string) result {
	cmdArgs := []string{"-p", strconv.Itoa(s.port), "-n", strconv.Itoa(n), "-c", strconv.Itoa(clients),
		"-P", strconv.Itoa(pipeline), "-r", "1000000000", "--csv"}
	if *threads > 0 {
		cmdArgs = append(cmdArgs, "--threads", strconv.Itoa(*threads))
	}
	cmdArgs = append(cmdArgs, args...)
	before := s.cpu()
	out, err := exec.Command("redis-benchmark", cmdArgs...).Output()
	check(err)
	r := result{cpu: s.cpu() - before}
	rows, err := csv.NewReader(strings.NewReader(string(out))).ReadAll()
	check(err)
	last := rows[len(rows)-1]
	r.rps, _ = strconv.ParseFloat(last[1], 64)
	r.p50, _ = strconv.ParseFloat(last[4], 64)
	r.p99, _ = strconv.ParseFloat(last[6], 64)
	return r
}

func median(rs []result, f func(result) float64) float64 { return medianOf(rs, f) }

// pair is one case: the bfserver command and redis-server's nearest native one.
type pair struct {
	name     string
	bf, base []string
	pipeline int
	items    int // items per request: runs send proportionally fewer requests
	clients  int // 0: the -clients flag
}

// row is one case's medians, as compare printed them.
type row struct {
	c          pair
	rpsA, rpsB float64
}

func items(cmd, key string, n int) []string {
	out := []string{cmd, key}
	for i := 0; i < n; i++ {
		out = append(out, "__rand_int__")
	}
	return out
}

// compare runs every case alternately on a and b and prints the table.
func compare(a, b *server, cases []pair) []row {
	var rows []row
	fmt.Printf("%-22s %4s %4s | %12s %8s %8s %7s | %12s %8s %8s %7s | %6s\n",
		"case", "C", "P", a.name+" rps", "p50 ms", "p99 ms", "cpu s", b.name+" rps", "p50 ms", "p99 ms", "cpu s", "ratio")
	for _, c := range cases {
		if *only != "" && !strings.Contains(c.name, *only) {
			continue
		}
		n := *requests
		if n == 0 {
			n = 200000
			if c.pipeline > 1 {
				// Deeper pipelines get longer runs, so that connecting and
				// draining stay a small part of each.
				n = 1000000 * max(1, c.pipeline/32)
			}
		}
		if c.items > 1 {
			n = max(n/c.items, 10000)
		}
		if c.clients == 0 {
			c.clients = *clients
		}
		var ra, rb []result
		for r := 0; r < *rounds; r++ {
			if r%2 == 0 {
				ra = append(ra, benchClients(a, c.clients, c.pipeline, n, c.bf))
				rb = append(rb, benchClients(b, c.clients, c.pipeline, n, c.base))
			} else {
				rb = append(rb, benchClients(b, c.clients, c.pipeline, n, c.base))
				ra = append(ra, benchClients(a, c.clients, c.pipeline, n, c.bf))
			}
		}
		rpsA, rpsB := median(ra, func(r result) float64 { return r.rps }), median(rb, func(r result) float64 { return r.rps })
		rows = append(rows, row{c, rpsA, rpsB})
		fmt.Printf("%-22s %4d %4d | %12.0f %8.3f %8.3f %7.2f | %12.0f %8.3f %8.3f %7.2f | %6.2f\n", c.name, c.clients, c.pipeline,
			rpsA, median(ra, func(r result) float64 { return r.p50 }), median(ra, func(r result) float64 { return r.p99 }),
			median(ra, func(r result) float64 { return r.cpu.Seconds() }),
			rpsB, median(rb, func(r result) float64 { return r.p50 }), median(rb, func(r result) float64 { return r.p99 }),
			median(rb, func(r result) float64 { return r.cpu.Seconds() }), rpsA/rpsB)
	}
	fmt.Printf("peak RSS: %s %d MiB, %s %d MiB\n", a.name, a.memKB("VmHWM")/1024, b.name, b.memKB("VmHWM")/1024)
	return rows
}

func throughputCases() []pair {
	var cases []pair
	for _, p := range []int{1, 32} {
		cases = append(cases,
			pair{"BF.ADD", []string{"BF.ADD", "bf", "__rand_int__"}, []string{"SADD", "s", "__rand_int__"}, p, 1, 0},
			pair{"BF.MADD x10", items("BF.MADD", "bf", 10), items("SADD", "s", 10), p, 10, 0},
			pair{"BF.MADD x100", items("BF.MADD", "bf", 100), items("SADD", "s", 100), p, 100, 0},
			pair{"CF.ADD", []string{"CF.ADD", "cf", "__rand_int__"}, []string{"SADD", "s", "__rand_int__"}, p, 1, 0},
			pair{"BF.EXISTS", []string{"BF.EXISTS", "bf", "__rand_int__"}, []string{"SISMEMBER", "s", "__rand_int__"}, p, 1, 0},
			pair{"BF.MEXISTS x10", items("BF.MEXISTS", "bf", 10), items("SMISMEMBER", "s", 10), p, 10, 0},
			pair{"CF.EXISTS", []string{"CF.EXISTS", "cf", "__rand_int__"}, []string{"SISMEMBER", "s", "__rand_int__"}, p, 1, 0},
		)
	}
	return cases
}

// throughput: the issue-4 cases, filters reserved large enough not to grow.
func throughput() {
	bf := startBF()
	defer bf.stop()
	rs := startRedis("--appendonly", "no")
	defer rs.stop()
	bf.do("BF.RESERVE", "bf", "0.01", "50000000", "NONSCALING")
	bf.do("CF.RESERVE", "cf", "50000000")
	fmt.Println("# throughput: bfserver (durable default, fsync always) vs redis-server (no persistence)")
	compare(bf, rs, throughputCases())
}

// durable: BF.ADD with --fsync always vs redis-server SADD with
// appendfsync always, from 50 clients one write at a time up to 200
// clients with 32 pipelined each; then each server's durable write rate,
// the best of its rows. redis-server applies and fsyncs on one thread and
// levels off once its loop is busy; bfserver's group commit puts more
// writes into each log write as more arrive.
func durable() {
	bf := startBF("--fsync", "always")
	defer bf.stop()
	// No automatic AOF rewrite: its forked child rewrites the whole set
	// (hundreds of MB by the last rows) on the same two cores and disk,
	// mostly while the other server's run is on.
	rs := startRedis("--appendonly", "yes", "--appendfsync", "always", "--auto-aof-rewrite-percentage", "0")
	defer rs.stop()
	bf.do("BF.RESERVE", "bf", "0.01", "50000000", "NONSCALING")
	fmt.Println("# durable writes: bfserver --fsync always vs redis-server appendfsync always")
	add, sadd := []string{"BF.ADD", "bf", "__rand_int__"}, []string{"SADD", "s", "__rand_int__"}
	rows := compare(bf, rs, []pair{
		{"BF.ADD vs SADD", add, sadd, 1, 1, 50},
		{"BF.ADD vs SADD", add, sadd, 32, 1, 50},
		{"BF.ADD vs SADD", add, sadd, 32, 1, 200},
		{"BF.ADD vs SADD", add, sadd, 128, 1, 50},
	})
	if len(rows) == 0 {
		return
	}
	best := func(rps func(row) float64) row {
		return slices.MaxFunc(rows, func(x, y row) int { return cmp.Compare(rps(x), rps(y)) })
	}
	a, b := best(func(r row) float64 { return r.rpsA }), best(func(r row) float64 { return r.rpsB })
	fmt.Printf("durable write rate (best row): bfserver %.0f (C%d P%d), redis-server %.0f (C%d P%d), ratio %.2f\n",
		a.rpsA, a.c.clients, a.c.pipeline, b.rpsB, b.c.clients, b.c.pipeline, a.rpsA/b.rpsB)
}

// cluster: three nodes; BF.EXISTS on a follower and on the leader, with
// linearizable reads (default) against stale reads.
func cluster() {
	nodes := startCluster()
	defer stopAll(nodes)
	first := nodes[0]
	first.do("BF.RESERVE", "bf", "0.01", "50000000", "NONSCALING")
	c := first.client()
	pipe := c.Pipeline()
	for i := 0; i < 100000; i++ {
		pipe.Do(context.Background(), "BF.ADD", "bf", rand.Int64N(1_000_000_000))
	}
	_, err := pipe.Exec(context.Background())
	check(err)
	c.Close()
	fmt.Println("# 3 nodes: BF.EXISTS linearizable (default) vs stale, on a follower and on the leader")
	for _, n := range []*server{nodes[1], nodes[0]} {
		role := "follower"
		if n == nodes[0] {
			role = "leader"
		}
		if !slices.Contains(strings.Split(*roles, ","), role) {
			continue
		}
		for _, ps := range strings.Split(*pipes, ",") {
			p, err := strconv.Atoi(ps)
			check(err)
			nn := *requests
			if nn == 0 {
				nn = 200000
				if p > 1 {
					nn = 1000000
				}
			}
			var lin, stale []result
			for r := 0; r < *rounds; r++ {
				lin = append(lin, bench(n, p, nn, []string{"BF.EXISTS", "bf", "__rand_int__"}))
				stale = append(stale, benchStale(n, p, nn))
			}
			l, s := median(lin, func(r result) float64 { return r.rps }), median(stale, func(r result) float64 { return r.rps })
			fmt.Printf("%-8s P%-3d linearizable %10.0f rps (p99 %.3f ms)  stale %10.0f rps (p99 %.3f ms)  ratio %.2f\n",
				role, p, l, median(lin, func(r result) float64 { return r.p99 }), s, median(stale, func(r result) float64 { return r.p99 }), l/s)
		}
	}
}

// startCluster starts three nodes, n1 first (so it leads), and waits until
// every node knows all three members.
func startCluster(args ...string) []*server {
	first := startBF(append([]string{"--node-id", "n1"}, args...)...)
	nodes := []*server{first}
	for i := 2; i <= 3; i++ {
		nodes = append(nodes, startBF(append([]string{"--node-id", fmt.Sprintf("n%d", i), "--join", fmt.Sprintf("127.0.0.1:%d", first.port)}, args...)...))
	}
	for _, n := range nodes {
		n.waitInfo("raft_num_members:3\r\n")
	}
	return nodes
}

// waitInfo polls INFO replication until it contains want.
func (s *server) waitInfo(want string) {
	s.poll(fmt.Sprintf("INFO replication never showed %q", want), func(c *redis.Client) bool {
		info, _ := c.Info(context.Background(), "replication").Result()
		return strings.Contains(info, want)
	})
}

func stopAll(nodes []*server) {
	for _, n := range nodes {
		n.stop()
	}
}

// clusterWrites: what follower read leases cost writes. Three nodes, a
// follower (n3) serving linearizable reads throughout; BF.ADD on the
// leader and on the other follower, with --follower-read-lease on and off.
func clusterWrites() {
	fmt.Println("# 3 nodes, n3 serving linearizable BF.EXISTS (4 clients): BF.ADD with follower read leases on vs off")
	type row struct {
		name string
		rps  [2]float64
		p50  [2]float64
	}
	var rows []*row
	get := func(name string) *row {
		for _, r := range rows {
			if r.name == name {
				return r
			}
		}
		r := &row{name: name}
		rows = append(rows, r)
		return r
	}
	for i, on := range []bool{true, false} {
		nodes := startCluster(fmt.Sprintf("--follower-read-lease=%v", on))
		nodes[0].do("BF.RESERVE", "bf", "0.01", "50000000", "NONSCALING")
		reader := exec.Command("redis-benchmark", "-p", strconv.Itoa(nodes[2].port), "-c", "4", "-n", "1000000000",
			"-r", "1000000000", "-q", "BF.EXISTS", "bf", "__rand_int__")
		check(reader.Start())
		holders := "lease_holders:0"
		if on {
			holders = "lease_holders:1"
		}
		nodes[0].waitInfo(holders)
		for _, target := range []struct {
			name string
			s    *server
		}{{"leader", nodes[0]}, {"follower", nodes[1]}} {
			for _, c := range []int{1, *clients} {
				n := 1000
				if c > 1 {
					n = 50000
				}
				var rs []result
				for r := 0; r < *rounds; r++ {
					rs = append(rs, benchClients(target.s, c, 1, n, []string{"BF.ADD", "bf", "__rand_int__"}))
				}
				x := get(fmt.Sprintf("%s, %d clients", target.name, c))
				x.rps[i] = median(rs, func(r result) float64 { return r.rps })
				x.p50[i] = median(rs, func(r result) float64 { return r.p50 })
			}
		}
		reader.Process.Kill()
		reader.Wait()
		stopAll(nodes)
	}
	for _, r := range rows {
		fmt.Printf("BF.ADD on %-20s leases on %8.0f rps (p50 %.3f ms)  off %8.0f rps (p50 %.3f ms)  ratio %.2f\n",
			r.name, r.rps[0], r.p50[0], r.rps[1], r.p50[1], r.rps[0]/r.rps[1])
	}
}

// benchStale measures BF.EXISTS with the server's default read consistency
// switched to stale (redis-benchmark cannot send a per-connection command).
func benchStale(s *server, pipeline, n int) result {
	// redis-benchmark sends one command per request; measure stale reads by
	// alternating the server-side default instead.
	s.do("CONFIG", "SET", "read-consistency", "stale")
	defer s.do("CONFIG", "SET", "read-consistency", "linearizable")
	return bench(s, pipeline, n, []string{"BF.EXISTS", "bf", "__rand_int__"})
}

// memory: anonymous RSS of a filled filter (every chunk written) against
// its theoretical size, after returning freed heap to the OS.
func memory() {
	for _, m := range []struct {
		n   int64
		err string
	}{{1_000_000, "0.01"}, {10_000_000, "0.001"}, {100_000_000, "0.001"}, {200_000_000, "0.001"}} {
		bf := startBF("--max-filter-bytes", "4294967296")
		// Anonymous memory only: the Raft log's mmap is file-backed and the
		// OS drops it under pressure. MEMORY PURGE returns freed heap first.
		bf.do("MEMORY", "PURGE")
		base := bf.memKB("RssAnon")
		bf.do("BF.RESERVE", "m", m.err, strconv.FormatInt(m.n, 10), "NONSCALING")
		// Touch every page as a full filter would: write each chunk.
		c := bf.client()
		ctx := context.Background()
		fillRandom(c, "m")
		info, err := c.Do(ctx, "BF.INFO", "m", "SIZE").Slice()
		check(err)
		size := info[0].(int64)
		bf.do("MEMORY", "PURGE")
		c.Close()
		rss := bf.memKB("RssAnon")
		extra := float64(rss*1024-base*1024-size) / (1 << 20)
		fmt.Printf("filter %11d items @ %-5s: %8.1f MiB theoretical; anonymous RSS %4d MiB idle, %5d MiB filled; beyond the filter: %5.1f MiB (%.2f%% of it)\n",
			m.n, m.err, float64(size)/(1<<20), base/1024, rss/1024, extra, 100*extra*(1<<20)/float64(size))
		bf.stop()
	}
}

// fillRandom writes random bytes into every chunk of a Bloom filter, so
// every page of it is touched, through SCANDUMP/LOADCHUNK.
func fillRandom(c *redis.Client, key string) { fillRandomAs(c, "BF", key) }

// fillRandomAs is fillRandom for a filter of family ("BF" or "CF"): a
// Bloom filter then has half its bits set, as at its capacity, and a
// Cuckoo filter random fingerprints in every slot.
func fillRandomAs(c *redis.Client, family, key string) {
	ctx := context.Background()
	for it := int64(1); ; { // past the header
		res, err := c.Do(ctx, family+".SCANDUMP", key, it).Slice()
		check(err)
		next := res[0].(int64)
		if next == 0 {
			return
		}
		data := []byte(res[1].(string))
		for i := range data {
			data[i] = byte(rand.Uint32())
		}
		check(c.Do(ctx, family+".LOADCHUNK", key, next, data).Err())
		it = next
	}
}

// startup: a node holding 1 GiB of filters is stopped cleanly and killed;
// the time until it serves a linearizable read again is measured.
func startup() {
	port, raft := freePort(), freePort()
	dir, err := os.MkdirTemp("", "bfstartup")
	check(err)
	defer os.RemoveAll(dir)
	args := []string{"--addr", fmt.Sprintf("127.0.0.1:%d", port), "--raft-addr", fmt.Sprintf("127.0.0.1:%d", raft), "--data-dir", dir, "--max-filter-bytes", "4294967296"}
	launch := func() (*server, time.Duration) {
		s := &server{name: "bfserver", port: port, cmd: exec.Command(*bfBin, args...)}
		t0 := time.Now()
		check(s.cmd.Start())
		c := s.client()
		defer c.Close()
		for c.Do(context.Background(), "BF.EXISTS", "f0", "x").Err() != nil {
			time.Sleep(5 * time.Millisecond)
		}
		return s, time.Since(t0)
	}
	s, _ := launch()
	c := s.client()
	ctx := context.Background()
	// Four filters of 256 MiB each, every chunk written.
	for f := 0; f < 4; f++ {
		key := fmt.Sprintf("f%d", f)
		check(c.Do(ctx, "BF.RESERVE", key, "0.01", "200000000", "NONSCALING").Err())
		fillRandom(c, key)
	}
	var total int64
	for f := 0; f < 4; f++ {
		v, err := c.Do(ctx, "BF.INFO", fmt.Sprintf("f%d", f), "SIZE").Slice()
		check(err)
		total += v[0].(int64)
	}
	c.Close()
	s.cmd.Process.Signal(syscall.SIGTERM)
	s.cmd.Wait()
	s, clean := launch()
	s.cmd.Process.Kill()
	s.cmd.Wait()
	s, dirty := launch()
	s.cmd.Process.Signal(syscall.SIGTERM)
	s.cmd.Wait()
	fmt.Printf("node holding %.2f GiB of filters: ready after a clean stop in %v, after kill -9 in %v\n",
		float64(total)/(1<<30), clean.Round(time.Millisecond), dirty.Round(time.Millisecond))
}
