package main

import (
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// The peer mode: bfserver against RedisBloom itself (the reference build in
// ../shared/anchors), durability matched, every case of issue #25, servers
// alternating, ratios first.

// startRedisBloom starts the anchors' RedisBloom with extra redis-server
// arguments. The script daemonizes it and prints its PID.
func startRedisBloom(args ...string) *server {
	script := *redisBloom
	if script == "" {
		check(fmt.Errorf("peer mode needs -redisbloom (../shared/anchors/start-redisbloom)"))
	}
	port := freePort()
	out, err := exec.Command(script, append([]string{strconv.Itoa(port)}, args...)...).Output()
	check(err)
	pid, err := strconv.Atoi(strings.TrimSpace(string(out)))
	check(err)
	s := &server{name: "redisbloom", port: port, pid: pid}
	s.waitReady()
	return s
}

// peerRun is one redis-benchmark run with the latency distribution parsed
// (its CSV has no p99.9).
type peerRun struct {
	rps, p50, p99, p999 float64
	cpuPerReq           time.Duration
}

func peerBench(s *server, clients, pipeline, n int, keyspace string, args []string) peerRun {
	cmdArgs := []string{"-p", strconv.Itoa(s.port), "-n", strconv.Itoa(n), "-c", strconv.Itoa(clients),
		"-P", strconv.Itoa(pipeline), "-r", keyspace}
	cmdArgs = append(cmdArgs, args...)
	before := s.cpu()
	out, err := exec.Command("redis-benchmark", cmdArgs...).Output()
	check(err)
	r := peerRun{cpuPerReq: (s.cpu() - before) / time.Duration(n)}
	// "  99.900% <= 0.623 milliseconds (cumulative count 199800)": the
	// first line at or past each percentile; "throughput summary: N
	// requests per second".
	for _, line := range strings.Split(string(out), "\n") {
		line = strings.TrimSpace(line)
		if v, ok := strings.CutPrefix(line, "throughput summary:"); ok {
			r.rps, _ = strconv.ParseFloat(strings.Fields(v)[0], 64)
			continue
		}
		pct, rest, ok := strings.Cut(line, "% <= ")
		if !ok {
			continue
		}
		p, err1 := strconv.ParseFloat(pct, 64)
		f := strings.Fields(rest)
		if err1 != nil || len(f) == 0 {
			continue
		}
		ms, _ := strconv.ParseFloat(f[0], 64)
		for _, t := range []struct {
			at float64
			v  *float64
		}{{50, &r.p50}, {99, &r.p99}, {99.9, &r.p999}} {
			if p >= t.at && *t.v == 0 {
				*t.v = ms
			}
		}
	}
	return r
}

// peerCase is one row: the same command on both servers.
type peerCase struct {
	name              string
	args              []string
	clients, pipeline int
	n                 int    // requests per run
	keyspace          string // redis-benchmark -r
	perReq            int    // items per request, for the items/s column
}

func peerCompare(a, b *server, label string, cases []peerCase) {
	printPeerHeader(label, a.name, b.name)
	for _, c := range cases {
		if *only != "" && !strings.Contains(c.name, *only) {
			continue
		}
		var ra, rb []peerRun
		for r := 0; r < *rounds; r++ {
			x, y := peerRound(a, b, r, c)
			ra, rb = append(ra, x), append(rb, y)
		}
		printPeerRow(c, ra, rb)
	}
	fmt.Printf("peak RSS: %s %d MiB, %s %d MiB\n", a.name, a.memKB("VmHWM")/1024, b.name, b.memKB("VmHWM")/1024)
}

// peerFresh is peerCompare for one case whose every round starts from two
// fresh servers (start), stopped after it: creating N filters in an empty
// node, as the issue asks, not beside the rounds before. Emptying the
// servers instead (FLUSHALL, then BGSAVE) left bfserver writing the last
// round's deletions to its image through the next round's creations.
func peerFresh(label string, c peerCase, start func() (a, b *server)) {
	if *only != "" && !strings.Contains(c.name, *only) {
		return
	}
	printPeerHeader(label+", fresh servers every round", "bfserver", "redisbloom")
	var ra, rb []peerRun
	var peakA, peakB int64
	for r := 0; r < *rounds; r++ {
		a, b := start()
		x, y := peerRound(a, b, r, c)
		ra, rb = append(ra, x), append(rb, y)
		peakA, peakB = max(peakA, a.memKB("VmHWM")), max(peakB, b.memKB("VmHWM"))
		a.stop()
		b.stop()
	}
	printPeerRow(c, ra, rb)
	fmt.Printf("peak RSS: bfserver %d MiB, redisbloom %d MiB\n", peakA/1024, peakB/1024)
}

// peerRound runs c once on each server, the first alternating by round.
func peerRound(a, b *server, r int, c peerCase) (x, y peerRun) {
	if r%2 == 1 {
		y = peerBench(b, c.clients, c.pipeline, c.n, c.keyspace, c.args)
		x = peerBench(a, c.clients, c.pipeline, c.n, c.keyspace, c.args)
		return x, y
	}
	x = peerBench(a, c.clients, c.pipeline, c.n, c.keyspace, c.args)
	y = peerBench(b, c.clients, c.pipeline, c.n, c.keyspace, c.args)
	return x, y
}

func printPeerHeader(label, a, b string) {
	fmt.Printf("\n# %s: %s vs %s, %d rounds alternating, medians\n", label, a, b, *rounds)
	fmt.Printf("%-34s | %6s %6s %6s | %10s %7s %7s %7s %7s | %10s %7s %7s %7s %7s\n", "case", "rps×", "p99×", "cpu×",
		a+" rps", "p50", "p99", "p99.9", "µs/req", b+" rps", "p50", "p99", "p99.9", "µs/req")
}

// printPeerRow prints a case's medians, ratios first.
func printPeerRow(c peerCase, ra, rb []peerRun) {
	med := medianOf[peerRun]
	rps := func(r peerRun) float64 { return r.rps * float64(c.perReq) }
	p50 := func(r peerRun) float64 { return r.p50 }
	p99 := func(r peerRun) float64 { return r.p99 }
	p999 := func(r peerRun) float64 { return r.p999 }
	cpu := func(r peerRun) float64 { return float64(r.cpuPerReq.Nanoseconds()) / 1000 / float64(c.perReq) }
	ratio := func(f func(peerRun) float64) float64 {
		if med(rb, f) == 0 {
			return 0
		}
		return med(ra, f) / med(rb, f)
	}
	name := c.name
	if c.perReq > 1 {
		name += " (items/s)"
	}
	fmt.Printf("%-34s | %6.2f %6.2f %6.2f | %10.0f %7.3f %7.3f %7.3f %7.2f | %10.0f %7.3f %7.3f %7.3f %7.2f\n", name,
		ratio(rps), ratio(p99), ratio(cpu),
		med(ra, rps), med(ra, p50), med(ra, p99), med(ra, p999), med(ra, cpu),
		med(rb, rps), med(rb, p50), med(rb, p99), med(rb, p999), med(rb, cpu))
}

// peer runs issue #25's cases against RedisBloom: reads at depth 1 (50
// and 1,000 clients) and 32, BF.ADD under each matched durability, a bulk
// load by BF.MADD of 1,000 items, and the creation of many small filters.
func peer() {
	madd := items("BF.MADD", "bulk", 1000)
	durabilities := []struct {
		label string
		bf    []string
		rb    []string
	}{
		{"durable (--fsync always vs appendfsync always)", []string{"--fsync", "always"}, []string{"--appendonly", "yes", "--appendfsync", "always"}},
		{"everysec (--fsync everysec vs appendfsync everysec)", []string{"--fsync", "everysec"}, []string{"--appendonly", "yes", "--appendfsync", "everysec"}},
		{"memory (--in-memory vs no persistence)", []string{"--in-memory"}, nil},
	}
	for i, d := range durabilities {
		if *durability != "" && !strings.Contains(d.label, *durability) {
			continue
		}
		bf := startBF(append(d.bf, "--max-filter-bytes", "4294967296")...)
		rb := startRedisBloom(d.rb...)
		for _, s := range []*server{bf, rb} {
			s.do("BF.RESERVE", "bf", "0.01", "100000000", "NONSCALING")
			s.do("CF.RESERVE", "cf", "100000000")
			s.do("BF.ADD", "bf", "x")
			s.do("CF.ADD", "cf", "x")
			if i == 0 && *fillReads {
				// The lookups find filters as full as a cache guard's:
				// every page of them in use, half a Bloom filter's bits set.
				c := s.client()
				fillRandomAs(c, "BF", "bf")
				fillRandomAs(c, "CF", "cf")
				c.Close()
				s.settle()
			}
		}
		var cases []peerCase
		if i == 0 {
			cases = append(cases,
				peerCase{"BF.EXISTS P1 c50", []string{"BF.EXISTS", "bf", "__rand_int__"}, 50, 1, 200000, "10000000", 1},
				peerCase{"CF.EXISTS P1 c50", []string{"CF.EXISTS", "cf", "__rand_int__"}, 50, 1, 200000, "10000000", 1},
				peerCase{"BF.EXISTS P1 c1000", []string{"BF.EXISTS", "bf", "__rand_int__"}, 1000, 1, 200000, "10000000", 1},
				peerCase{"CF.EXISTS P1 c1000", []string{"CF.EXISTS", "cf", "__rand_int__"}, 1000, 1, 200000, "10000000", 1},
				peerCase{"BF.EXISTS P32 c50", []string{"BF.EXISTS", "bf", "__rand_int__"}, 50, 32, 2000000, "10000000", 1},
				peerCase{"CF.EXISTS P32 c50", []string{"CF.EXISTS", "cf", "__rand_int__"}, 50, 32, 2000000, "10000000", 1},
			)
		}
		cases = append(cases,
			peerCase{"BF.ADD P1 c50", []string{"BF.ADD", "bf", "__rand_int__"}, 50, 1, 100000, "10000000", 1},
			peerCase{"BF.ADD P32 c50", []string{"BF.ADD", "bf", "__rand_int__"}, 50, 32, 1000000, "10000000", 1},
		)
		if i == 0 {
			cases = append(cases,
				peerCase{"bulk BF.MADD x1000 P8 c10", madd, 10, 8, 1000, "1000000000", 1000},
			)
		}
		peerCompare(bf, rb, d.label, cases)
		bf.stop()
		rb.stop()
		if i == 0 && *creates > 0 {
			create := peerCase{"create BF.ADD tenant:N P100 c10", []string{"BF.ADD", "tenant:__rand_int__", "x"}, 10, 100, *creates, "100000000000", 1}
			peerFresh(d.label, create, func() (*server, *server) {
				return startBF(append(d.bf, "--max-filter-bytes", "4294967296")...), startRedisBloom(d.rb...)
			})
		}
	}
}

// sketches runs issue #26's sketch cases against RedisBloom: CMS.INCRBY,
// TOPK.ADD and TDIGEST.ADD at depth 1 and 32, durable (fsync always on
// both) and in memory, servers alternating as in peer.
func sketches() {
	for _, d := range []struct {
		label  string
		bf, rb []string
	}{
		{"durable (--fsync always vs appendfsync always)", []string{"--fsync", "always"}, []string{"--appendonly", "yes", "--appendfsync", "always"}},
		{"memory (--in-memory vs no persistence)", []string{"--in-memory"}, nil},
	} {
		if *durability != "" && !strings.Contains(d.label, *durability) {
			continue
		}
		bf := startBF(d.bf...)
		rb := startRedisBloom(d.rb...)
		for _, s := range []*server{bf, rb} {
			s.do("CMS.INITBYPROB", "cms", "0.001", "0.01")
			s.do("TOPK.RESERVE", "topk", "50", "2000", "7", "0.925")
			s.do("TDIGEST.CREATE", "td", "COMPRESSION", "100")
		}
		peerCompare(bf, rb, d.label, []peerCase{
			{"CMS.INCRBY P1 c50", []string{"CMS.INCRBY", "cms", "__rand_int__", "1"}, 50, 1, 100000, "100000", 1},
			{"CMS.INCRBY P32 c50", []string{"CMS.INCRBY", "cms", "__rand_int__", "1"}, 50, 32, 1000000, "100000", 1},
			{"TOPK.ADD P1 c50", []string{"TOPK.ADD", "topk", "__rand_int__"}, 50, 1, 100000, "100000", 1},
			{"TOPK.ADD P32 c50", []string{"TOPK.ADD", "topk", "__rand_int__"}, 50, 32, 1000000, "100000", 1},
			{"TDIGEST.ADD P1 c50", []string{"TDIGEST.ADD", "td", "__rand_int__"}, 50, 1, 100000, "100000", 1},
			{"TDIGEST.ADD P32 c50", []string{"TDIGEST.ADD", "td", "__rand_int__"}, 50, 32, 1000000, "100000", 1},
		})
		bf.stop()
		rb.stop()
	}
}

// stopPID ends a server this tool did not start as its child (the anchors'
// script daemonizes RedisBloom) and removes nothing: the script's temp dir
// is printed on its stderr.
func stopPID(pid int) {
	p, err := os.FindProcess(pid)
	if err != nil {
		return
	}
	p.Signal(syscall.SIGTERM)
	for i := 0; i < 500; i++ {
		if p.Signal(syscall.Signal(0)) != nil {
			return
		}
		time.Sleep(10 * time.Millisecond) // polling the process's exit: it is not our child
	}
	p.Kill()
}
