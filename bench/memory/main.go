// Command memory measures what filters cost a node in memory, against
// RedisBloom holding the same filters, on this machine and in one run. A
// sampler reads each process's resident memory every 100 ms (the Pss of
// the process and its children, so a fork's copy-on-write pages count
// once) through every path a node takes, and reports each phase's peak
// and end as a ratio to the filters' bytes (BF.INFO SIZE).
//
//	go run ./bench/memory -scenario five     # five 100M-item filters at 0.1%, 20,000 items each
//	go run ./bench/memory -scenario big      # one filter of about 1 GiB, every chunk written
//	go run ./bench/memory -scenario small    # 100,000 auto-created filters (BF.ADD tenant:N x)
//	go run ./bench/memory -scenario cluster  # three nodes; a wiped follower rejoins by snapshot
//	go run ./bench/memory -scenario restart  # cold restart of the five-filter node vs a raw read
//	go run ./bench/memory -scenario restart-ab -baseline OLD -runs 10 # the same, the binaries in turn on one directory
//	go run ./bench/memory -scenario writes   # bytes a flush writes per item added (write amplification)
//	go run ./bench/memory -scenario sustained # a 1 GiB filter under steady BF.MADDs: items/s, slowest reply, disk
//
// -bfserver names the binary (default: build ./cmd/bfserver); -baseline a
// second bfserver binary measured in the same run (an earlier build);
// -redisbloom the start-redisbloom script (default ../shared/anchors).
// It drops the page cache (echo 3 > /proc/sys/vm/drop_caches) for the
// restart scenario, so run it as root on a machine you may do that on.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
)

var (
	bfBin      = flag.String("bfserver", "", "bfserver binary (default: build ./cmd/bfserver)")
	baseline   = flag.String("baseline", "", "another bfserver binary to measure in the same run")
	redisbloom = flag.String("redisbloom", "../shared/anchors/start-redisbloom", "start-redisbloom script ('' to skip RedisBloom)")
	scenario   = flag.String("scenario", "five", "five, big, small, cluster, restart, restart-ab, fresh, writes or sustained")
	runs       = flag.Int("runs", 3, "restart scenario: runs per server")
	seconds    = flag.Int("seconds", 120, "sustained scenario: seconds of writes per server")
	serverLog  = flag.String("server-log", "", "append bfserver's log to this file (with GODEBUG=gctrace=1, the collector's too)")
)

func main() {
	flag.Parse()
	shareClusterSecret()
	if *bfBin == "" {
		dir, err := os.MkdirTemp("", "bfmem")
		check(err)
		defer os.RemoveAll(dir)
		*bfBin = filepath.Join(dir, "bfserver")
		build := exec.Command("go", "build", "-o", *bfBin, "./cmd/bfserver")
		build.Stdout, build.Stderr = os.Stdout, os.Stderr
		check(build.Run())
	}
	bins := []string{*bfBin}
	if *baseline != "" {
		bins = append(bins, *baseline)
	}
	// each runs a one-server scenario on every bfserver binary, started
	// with args, and then on RedisBloom.
	each := func(scenario func(*server), args ...string) {
		for _, b := range bins {
			scenario(startBF(b, args...))
		}
		if *redisbloom != "" {
			scenario(startRB())
		}
	}
	switch *scenario {
	case "five":
		each(five, "--flush-interval", "1s")
	case "big":
		each(big, "--flush-interval", "1s", "--max-filter-bytes", "4294967296")
	case "small":
		each(small, "--flush-interval", "1s")
	case "cluster":
		for _, b := range bins {
			cluster(b)
		}
	case "writes":
		for _, b := range bins {
			writes(b)
		}
	case "sustained":
		each(sustained, "--max-filter-bytes", "4294967296")
	case "fresh":
		// What a start pays before it reads a byte: its filters' memory.
		for r := 0; r < *runs; r++ {
			dropCaches()
			fmt.Printf("1 GiB of fresh memory faulted in as huge pages on two threads: %v\n", touchFresh(1<<30).Round(time.Millisecond))
		}
	case "restart":
		for _, b := range bins {
			restart(b)
		}
		if *redisbloom != "" {
			restartRB()
		}
	case "restart-ab":
		restartAB(bins)
	default:
		check(fmt.Errorf("unknown scenario %q", *scenario))
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
		fmt.Fprintln(os.Stderr, "memory:", err)
		os.Exit(1)
	}
}

func freePort() int {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	check(err)
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// server is a process under test.
type server struct {
	name     string
	host     string
	bin      string
	args     []string
	pid      int
	cmd      *exec.Cmd
	port     int
	raftPort int
	dir      string
}

func startBF(bin string, args ...string) *server {
	dir, err := os.MkdirTemp("", "bfmemdata")
	check(err)
	s := &server{name: "bfserver " + filepath.Base(bin), bin: bin, port: freePort(), raftPort: freePort(), dir: dir}
	s.args = append([]string{"--addr", fmt.Sprintf("127.0.0.1:%d", s.port), "--raft-addr", fmt.Sprintf("127.0.0.1:%d", s.raftPort),
		"--data-dir", dir}, args...)
	s.launch()
	return s
}

func (s *server) launch() {
	s.spawn()
	s.waitReady()
}

// spawn starts the process without waiting for it.
func (s *server) spawn() {
	s.cmd = exec.Command(s.bin, s.args...)
	if *serverLog != "" {
		f, err := os.OpenFile(*serverLog, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
		check(err)
		defer f.Close()
		s.cmd.Stderr = f
	}
	check(s.cmd.Start())
	s.pid = s.cmd.Process.Pid
}

// startRB starts RedisBloom with matched durability: the AOF fsynced on
// every write, as bfserver's log is.
func startRB() *server {
	port := freePort()
	out, err := exec.Command(*redisbloom, strconv.Itoa(port), "--appendonly", "yes", "--appendfsync", "always").Output()
	check(err)
	pid, err := strconv.Atoi(strings.TrimSpace(string(out)))
	check(err)
	s := &server{name: "RedisBloom 8.8.0", port: port, pid: pid}
	s.dir = rbDir(pid)
	s.waitReady()
	return s
}

// rbDir is the working directory of a RedisBloom process.
func rbDir(pid int) string {
	d, err := os.Readlink(fmt.Sprintf("/proc/%d/cwd", pid))
	check(err)
	return d
}

func (s *server) client() *redis.Client {
	host := s.host
	if host == "" {
		host = "127.0.0.1"
	}
	return redis.NewClient(&redis.Options{Addr: fmt.Sprintf("%s:%d", host, s.port), Protocol: 2,
		ReadTimeout: 5 * time.Minute, WriteTimeout: time.Minute, MaxRetries: -1})
}

func (s *server) waitReady() {
	s.waitPort()
	c := s.client()
	defer c.Close()
	deadline := time.Now().Add(5 * time.Minute)
	for c.Ping(context.Background()).Err() != nil {
		if time.Now().After(deadline) {
			check(fmt.Errorf("%s did not start", s.name))
		}
		time.Sleep(10 * time.Millisecond) // polling the listener
	}
}

// waitPort returns once the server takes connections. It dials itself
// every 2 ms: the client's own dialing waits 100 ms between attempts, and
// after 20 failed ones tries only once a second, which would add up to
// that much to a start timed by its first answer.
func (s *server) waitPort() {
	host := s.host
	if host == "" {
		host = "127.0.0.1"
	}
	addr := net.JoinHostPort(host, strconv.Itoa(s.port))
	deadline := time.Now().Add(5 * time.Minute)
	for {
		conn, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			conn.Close()
			return
		}
		if time.Now().After(deadline) {
			check(fmt.Errorf("%s did not start", s.name))
		}
		time.Sleep(2 * time.Millisecond) // polling the listener
	}
}

func (s *server) do(args ...any) any {
	c := s.client()
	defer c.Close()
	v, err := c.Do(context.Background(), args...).Result()
	check(err)
	return v
}

func (s *server) kill() {
	syscall.Kill(s.pid, syscall.SIGKILL)
	if s.cmd != nil {
		s.cmd.Wait()
	} else {
		for syscall.Kill(s.pid, 0) == nil {
			time.Sleep(5 * time.Millisecond) // waiting for the daemon to go
		}
	}
}

func (s *server) stop() {
	s.kill()
	if s.cmd != nil {
		os.RemoveAll(s.dir)
	}
}

// ---- sampling ----

// pss is the proportional resident memory of pid and its children, in
// bytes, that the kernel cannot drop: anonymous and shared memory, each
// page counted once between a fork's parent and child. File-backed pages
// (the Raft log's mmap, the image's page cache) are reclaimable and
// reported apart (pssFile).
func pss(pid int) int64 { return pssOf(pid, "Pss_Anon:", "Pss_Shmem:") }

// pssFile is the file-backed part.
func pssFile(pid int) int64 { return pssOf(pid, "Pss_File:") }

func pssOf(pid int, fields ...string) int64 {
	total := int64(0)
	var walk func(int)
	walk = func(p int) {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/smaps_rollup", p))
		if err == nil {
			for _, line := range strings.Split(string(b), "\n") {
				for _, f := range fields {
					if v, ok := strings.CutPrefix(line, f); ok {
						n, _ := strconv.ParseInt(strings.Fields(v)[0], 10, 64)
						total += n << 10
					}
				}
			}
		}
		kids, _ := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", p, p))
		for _, k := range strings.Fields(string(kids)) {
			if c, err := strconv.Atoi(k); err == nil {
				walk(c)
			}
		}
	}
	walk(pid)
	return total
}

// sampler records the peak of each phase, every 100 ms.
type sampler struct {
	mu     sync.Mutex
	pids   func() []int
	phase  string
	peaks  map[string]int64
	files  map[string]int64
	order  []string
	ends   map[string]int64
	stop   chan struct{}
	done   chan struct{}
	sample func() int64
}

func newSampler(pids func() []int) *sampler {
	s := &sampler{pids: pids, peaks: map[string]int64{}, files: map[string]int64{}, ends: map[string]int64{}, stop: make(chan struct{}), done: make(chan struct{})}
	s.sample = func() int64 {
		var n int64
		for _, p := range s.pids() {
			n += pss(p)
		}
		return n
	}
	go func() {
		defer close(s.done)
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-s.stop:
				return
			case <-t.C:
			}
			v := s.sample()
			var f int64
			for _, p := range s.pids() {
				f += pssFile(p)
			}
			s.mu.Lock()
			if s.phase != "" && v > s.peaks[s.phase] {
				s.peaks[s.phase] = v
			}
			if s.phase != "" && f > s.files[s.phase] {
				s.files[s.phase] = f
			}
			s.mu.Unlock()
		}
	}()
	return s
}

// enter starts a phase; the one before it ends with a last sample.
func (s *sampler) enter(phase string) {
	v := s.sample()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.phase != "" {
		s.ends[s.phase] = v
		s.peaks[s.phase] = max(s.peaks[s.phase], v)
	}
	s.phase = phase
	if phase != "" {
		s.order = append(s.order, phase)
		s.peaks[phase] = v
	}
}

func (s *sampler) close() {
	s.enter("")
	close(s.stop)
	<-s.done
}

func (s *sampler) report(name string, filters int64) {
	fmt.Printf("%s, filters %.1f MiB (anonymous memory; file-backed pages apart):\n", name, mib(filters))
	for _, p := range s.order {
		fmt.Printf("  %-28s peak %8.1f MiB (%.2f× the filters)  end %8.1f MiB (%.2f×)  file-backed peak %7.1f MiB\n", p,
			mib(s.peaks[p]), ratio(s.peaks[p], filters), mib(s.ends[p]), ratio(s.ends[p], filters), mib(s.files[p]))
	}
}

func mib(b int64) float64 { return float64(b) / (1 << 20) }

func ratio(a, b int64) float64 {
	if b == 0 {
		return 0
	}
	return float64(a) / float64(b)
}

// ---- filling ----

func sizeOf(s *server, keys []string) int64 {
	c := s.client()
	defer c.Close()
	var total int64
	for _, k := range keys {
		v, err := c.Do(context.Background(), "BF.INFO", k, "SIZE").Slice()
		check(err)
		total += v[0].(int64)
	}
	return total
}

// addItems sends n items to key in pipelined BF.MADD batches.
func addItems(c *redis.Client, key string, n int) { addItemsFrom(c, key, 0, n) }

// addItemsFrom adds item:from … item:from+n-1, pipelined BF.MADDs of 1,000.
func addItemsFrom(c *redis.Client, key string, from, n int) {
	ctx := context.Background()
	p := c.Pipeline()
	for i := from; i < from+n; i += 1000 {
		args := []any{"BF.MADD", key}
		for j := i; j < min(from+n, i+1000); j++ {
			args = append(args, "item:"+strconv.Itoa(j))
		}
		p.Do(ctx, args...)
	}
	_, err := p.Exec(ctx)
	check(err)
}

// fillRandom writes every chunk of a Bloom filter with random bits, as a
// filter that took its capacity would hold: every page resident.
func fillRandom(c *redis.Client, key string) {
	ctx := context.Background()
	for it := int64(1); ; {
		res, err := c.Do(ctx, "BF.SCANDUMP", key, it).Slice()
		check(err)
		next := res[0].(int64)
		if next == 0 {
			return
		}
		data := []byte(res[1].(string))
		for i := range data {
			data[i] = byte(rand.Uint32())
		}
		check(c.Do(ctx, "BF.LOADCHUNK", key, next, data).Err())
		it = next
	}
}

// snapshot takes a snapshot: SAVE on bfserver (a Raft snapshot, image and
// all), BGSAVE on RedisBloom (a fork writing an RDB), waiting for it.
func snapshot(s *server) bool {
	c := s.client()
	defer c.Close()
	ctx := context.Background()
	if s.cmd == nil {
		before, _ := c.LastSave(ctx).Result()
		check(c.BgSave(ctx).Err())
		for {
			info, _ := c.Info(ctx, "persistence").Result()
			last, _ := c.LastSave(ctx).Result()
			if last != before && strings.Contains(info, "rdb_bgsave_in_progress:0") {
				return true
			}
			time.Sleep(20 * time.Millisecond) // polling the fork
		}
	}
	return c.Save(ctx).Err() == nil
}

// waitFlush waits for a few flush intervals of bfserver's image.
func waitFlush(s *server) {
	if s.cmd != nil {
		time.Sleep(3 * time.Second) // three --flush-interval 1s flushes
	}
}

// ---- scenarios ----

func five(s *server) {
	smp := newSampler(func() []int { return []int{s.pid} })
	keys := []string{"f0", "f1", "f2", "f3", "f4"}
	c := s.client()
	smp.enter("reserve and 20,000 adds each")
	for _, k := range keys {
		check(c.Do(context.Background(), "BF.RESERVE", k, "0.001", "100000000").Err())
		addItems(c, k, 20000)
	}
	smp.enter("flush (3 s)")
	waitFlush(s)
	smp.enter("snapshot")
	ok := snapshot(s)
	smp.enter("restart after kill -9")
	c.Close()
	c = s.restartAndRead("f4")
	smp.enter("steady (2 s)")
	time.Sleep(2 * time.Second) // watching memory settle
	smp.close()
	c.Close()
	name := s.name
	if !ok {
		name += " (SAVE refused: no snapshot phase)"
	}
	smp.report(name, sizeOf(s, keys))
	s.stop()
}

// restartAndRead kills the server, starts it again and returns a client
// once key answers its first read.
func (s *server) restartAndRead(key string) *redis.Client {
	s.kill()
	if s.cmd != nil {
		s.launch()
	} else {
		restartRBProcess(s)
	}
	c := s.client()
	waitFirstRead(c, key)
	return c
}

// waitFirstRead polls until key holds item:1.
func waitFirstRead(c *redis.Client, key string) {
	for c.Do(context.Background(), "BF.EXISTS", key, "item:1").Val() != int64(1) {
		time.Sleep(2 * time.Millisecond) // polling the first read
	}
}

func big(s *server) {
	smp := newSampler(func() []int { return []int{s.pid} })
	c := s.client()
	smp.enter("reserve and fill 1 GiB")
	check(c.Do(context.Background(), "BF.RESERVE", "big", "0.01", "900000000", "NONSCALING").Err())
	fillRandom(c, "big")
	smp.enter("flush (3 s)")
	waitFlush(s)
	smp.enter("snapshot")
	snapshot(s)
	smp.enter("adds after (100,000)")
	addItems(c, "big", 100000)
	smp.enter("restart after kill -9")
	c.Close()
	c = s.restartAndRead("big")
	smp.close()
	c.Close()
	smp.report(s.name, sizeOf(s, []string{"big"}))
	s.stop()
}

// restartRBProcess starts RedisBloom again on its directory, which loads
// its AOF.
func restartRBProcess(s *server) {
	conf := []string{strconv.Itoa(s.port), "--appendonly", "yes", "--appendfsync", "always", "--dir", s.dir}
	out, err := exec.Command(*redisbloom, conf...).Output()
	check(err)
	s.pid, err = strconv.Atoi(strings.TrimSpace(string(out)))
	check(err)
	s.waitReady()
}

func small(s *server) {
	c := s.client()
	ctx := context.Background()
	check(c.Do(ctx, "MEMORY", "PURGE").Err())
	usedBefore, rssBefore := usedMemory(c), pss(s.pid)
	const n = 100000
	p := c.Pipeline()
	for i := 0; i < n; i++ {
		p.Do(ctx, "BF.ADD", "tenant:"+strconv.Itoa(i), "x")
		if i%1000 == 999 {
			_, err := p.Exec(ctx)
			check(err)
		}
	}
	time.Sleep(3 * time.Second) // a flush, for bfserver
	c.Do(ctx, "MEMORY", "PURGE")
	used, rss := usedMemory(c), pss(s.pid)
	fmt.Printf("%s, %d auto-created filters: used_memory %.1f MiB (%.0f bytes per filter beyond the empty server's %.1f MiB), RSS %.1f MiB (%.0f bytes per filter beyond %.1f MiB)\n",
		s.name, n, mib(used), float64(used-usedBefore)/n, mib(usedBefore), mib(rss), float64(rss-rssBefore)/n, mib(rssBefore))
	c.Close()
	s.stop()
}

func usedMemory(c *redis.Client) int64 {
	info, err := c.Info(context.Background(), "memory").Result()
	check(err)
	for _, line := range strings.Split(info, "\r\n") {
		if v, ok := strings.CutPrefix(line, "used_memory:"); ok {
			n, _ := strconv.ParseInt(v, 10, 64)
			return n
		}
	}
	return 0
}

func cluster(bin string) {
	ips := []string{"127.0.0.11", "127.0.0.12", "127.0.0.13"}
	var nodes []*server
	for i, ip := range ips {
		dir, err := os.MkdirTemp("", "bfmemcluster")
		check(err)
		s := &server{name: fmt.Sprintf("n%d", i+1), bin: bin, dir: dir, host: ip}
		s.port, s.raftPort = freePortOn(ip), freePortOn(ip)
		s.args = []string{"--addr", fmt.Sprintf("%s:%d", ip, s.port), "--raft-addr", fmt.Sprintf("%s:%d", ip, s.raftPort),
			"--data-dir", dir, "--node-id", s.name, "--flush-interval", "1s",
			// SAVE then leaves ten entries of the log: the wiped follower
			// can only come back through a snapshot.
			"--trailing-logs", "10"}
		if i > 0 {
			s.args = append(s.args, "--join", fmt.Sprintf("%s:%d", ips[0], nodes[0].port))
		}
		s.cmd = exec.Command(bin, s.args...)
		check(s.cmd.Start())
		s.pid = s.cmd.Process.Pid
		nodes = append(nodes, s)
	}
	for _, n := range nodes {
		n.waitInfo("raft_num_members:3")
	}
	leader := nodes[0]
	for _, n := range nodes {
		if n.info("raft_role") == "leader" {
			leader = n
		}
	}
	var followers []*server
	for _, n := range nodes {
		if n != leader {
			followers = append(followers, n)
		}
	}
	rejoiner := followers[1]
	samplers := map[*server]*sampler{}
	for _, n := range nodes {
		n := n
		samplers[n] = newSampler(func() []int { return []int{n.pid} })
		samplers[n].enter("load")
	}
	c := leader.client()
	check(c.Do(context.Background(), "BF.RESERVE", "f", "0.001", "100000000").Err())
	addItems(c, "f", 20000)
	c.Close()
	for _, n := range nodes {
		samplers[n].enter("snapshot")
	}
	snapshot(leader)
	for _, f := range followers {
		snapshot(f)
	}
	for _, n := range nodes {
		samplers[n].enter("a wiped follower rejoins")
	}
	rejoiner.kill()
	os.RemoveAll(rejoiner.dir)
	os.MkdirAll(rejoiner.dir, 0o755)
	began := time.Now()
	rejoiner.cmd = exec.Command(bin, rejoiner.args...)
	check(rejoiner.cmd.Start())
	rejoiner.pid = rejoiner.cmd.Process.Pid
	rc := rejoiner.client()
	for {
		rc.Do(context.Background(), "CONSISTENCY", "STALE")
		if v, _ := rc.Do(context.Background(), "BF.EXISTS", "f", "item:19999").Int(); v == 1 {
			break
		}
		time.Sleep(20 * time.Millisecond) // polling the rejoined node
	}
	caught := time.Since(began)
	rc.Close()
	if snaps, _ := os.ReadDir(filepath.Join(rejoiner.dir, "snapshots")); len(snaps) == 0 {
		fmt.Println("  (the rejoiner caught up from the log, without installing a snapshot)")
	}
	for _, n := range nodes {
		samplers[n].enter("steady (2 s)")
	}
	time.Sleep(2 * time.Second) // watching memory settle
	size := sizeOf(leader, []string{"f"})
	fmt.Printf("three nodes (%s), the rejoiner caught up in %v:\n", filepath.Base(bin), caught.Round(time.Millisecond))
	for _, n := range nodes {
		samplers[n].close()
		role := "follower"
		if n == leader {
			role = "leader"
		} else if n == rejoiner {
			role = "rejoining follower"
		}
		samplers[n].report("  "+n.name+" ("+role+")", size)
	}
	for _, n := range nodes {
		n.stop()
	}
}

func freePortOn(ip string) int {
	ln, err := net.Listen("tcp", ip+":0")
	check(err)
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

func (s *server) info(field string) string {
	c := s.client()
	defer c.Close()
	info, _ := c.Info(context.Background(), "replication").Result()
	for _, line := range strings.Split(info, "\r\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			return v
		}
	}
	return ""
}

func (s *server) waitInfo(want string) {
	k, v, _ := strings.Cut(want, ":")
	deadline := time.Now().Add(60 * time.Second)
	for s.info(k) != v {
		if time.Now().After(deadline) {
			check(fmt.Errorf("%s never reported %s", s.name, want))
		}
		time.Sleep(50 * time.Millisecond) // polling INFO
	}
}

// waitPersistence polls INFO persistence until it shows want.
func waitPersistence(c *redis.Client, want string) {
	for {
		info, err := c.Info(context.Background(), "persistence").Result()
		check(err)
		if strings.Contains(info, want+"\r\n") {
			return
		}
		time.Sleep(50 * time.Millisecond) // polling INFO
	}
}

// dropCaches empties the page cache, so reads come from the disk.
func dropCaches() {
	syscall.Sync()
	check(os.WriteFile("/proc/sys/vm/drop_caches", []byte("3\n"), 0o200))
	if waited := waitDiskIdle(os.TempDir()); waited > time.Second {
		fmt.Printf("  (waited %v for the disk to go idle)\n", waited.Round(100*time.Millisecond))
	}
}

// touchFresh is the time to fault in n bytes of fresh anonymous memory,
// as huge pages, on two threads (the cores a load has), for reference: a
// start allocates its filters' arrays and the kernel zeroes each page at
// its first touch, which the raw read does not do. On this VM that took
// 0.09-1.04 s per GiB, by whether the host still backed the pages freed
// before (its balloon takes them back).
func touchFresh(n int64) time.Duration {
	b, err := syscall.Mmap(-1, 0, int(n), syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_PRIVATE|syscall.MAP_ANON)
	check(err)
	defer syscall.Munmap(b)
	adviseHuge(b) // as the engine asks for large arrays
	began := time.Now()
	var wg sync.WaitGroup
	for w := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			part := b[w*len(b)/2 : (w+1)*len(b)/2]
			for i := 0; i < len(part); i += 4096 {
				part[i] = 1
			}
		}()
	}
	wg.Wait()
	return time.Since(began)
}

// freshNow reports what 1 GiB of fresh memory costs now, taken beside a
// server that just started: what its start paid for its filters' arrays,
// which no raw read pays in the same way, varies with it.
func freshNow() string {
	return fmt.Sprintf("1 GiB of fresh memory then %v", touchFresh(1<<30).Round(time.Millisecond))
}

// waitDiskIdle waits until the block device holding dir has had no I/O in
// flight and added no busy time for half a second, for at most a minute,
// and returns how long it waited. After a bulk load the kernel goes on
// discarding the blocks of the files Pebble and Raft deleted (ext4's
// discard mount option, as on this machine) and writing back what sync
// queued: a timed read that overlaps that work measures it, and either
// the raw read or the restart timed after it came out up to 2x slower.
func waitDiskIdle(dir string) time.Duration {
	var st syscall.Stat_t
	if syscall.Stat(dir, &st) != nil {
		return 0
	}
	major := (st.Dev>>8)&0xfff | (st.Dev>>32)&^0xfff
	minor := st.Dev&0xff | (st.Dev>>12)&^0xff
	path := fmt.Sprintf("/sys/dev/block/%d:%d/stat", major, minor)
	sample := func() (inFlight, ticks int64, ok bool) {
		b, err := os.ReadFile(path)
		f := strings.Fields(string(b))
		if err != nil || len(f) < 10 {
			return 0, 0, false
		}
		inFlight, _ = strconv.ParseInt(f[8], 10, 64)
		ticks, _ = strconv.ParseInt(f[9], 10, 64)
		return inFlight, ticks, true
	}
	began := time.Now()
	_, last, ok := sample()
	if !ok {
		return 0 // not a block device (tmpfs, overlay): nothing to wait for
	}
	quietSince := time.Now()
	for time.Since(began) < time.Minute {
		time.Sleep(50 * time.Millisecond) // polling the device's counters
		inFlight, ticks, _ := sample()
		if inFlight != 0 || ticks != last {
			last, quietSince = ticks, time.Now()
			continue
		}
		if time.Since(quietSince) >= 500*time.Millisecond {
			break
		}
	}
	return time.Since(began)
}

// rawRead is the time to read every file under dir with 1 MiB reads,
// as cat does, from a cold page cache.
func rawRead(dir string) (time.Duration, int64) {
	dropCaches()
	began := time.Now()
	var total int64
	buf := make([]byte, 1<<20)
	filepath.Walk(dir, func(path string, fi os.FileInfo, err error) error {
		if err == nil && fi.IsDir() && path == filepath.Join(dir, "base") {
			// The base is a second copy of the large arrays, which a start
			// reads instead of Pebble's: the baseline stays the image's
			// bytes once, as before the base.
			return filepath.SkipDir
		}
		if err != nil || !fi.Mode().IsRegular() {
			return nil
		}
		f, err := os.Open(path)
		if err != nil {
			return nil
		}
		n, _ := io.CopyBuffer(io.Discard, struct{ io.Reader }{f}, buf)
		total += n
		f.Close()
		return nil
	})
	return time.Since(began), total
}

// startFive starts bin with the five filters of the restart scenario,
// every page of them written, and waits for the snapshot a running node
// takes once a bulk load ends (its log quiet for two seconds): the
// restarts are of a node that had.
func startFive(bin string) (*server, []string) {
	s := startBF(bin, "--flush-interval", "1s")
	c := s.client()
	defer c.Close()
	keys := []string{"f0", "f1", "f2", "f3", "f4"}
	for _, k := range keys {
		check(c.Do(context.Background(), "BF.RESERVE", k, "0.001", "100000000").Err())
		fillRandom(c, k) // every page of the image written
		addItems(c, k, 20000)
	}
	before, _ := c.LastSave(context.Background()).Result()
	waited := time.Now()
	for last, _ := c.LastSave(context.Background()).Result(); last == before; last, _ = c.LastSave(context.Background()).Result() {
		if time.Since(waited) > time.Minute {
			fmt.Println("  (no snapshot within a minute of the load)")
			break
		}
		time.Sleep(100 * time.Millisecond) // polling LASTSAVE
	}
	fmt.Printf("%s: snapshot %v after the load ended\n", s.name, time.Since(waited).Round(100*time.Millisecond))
	// A build with a base (persistence, base.go) writes it after that
	// snapshot: the restarts are of a node that had.
	for based := time.Now(); ; time.Sleep(100 * time.Millisecond) { // polling INFO
		info, _ := c.Info(context.Background(), "persistence").Result()
		i := strings.Index(info, "image_base_bytes:")
		if i < 0 || !strings.HasPrefix(info[i:], "image_base_bytes:0\r") {
			if i >= 0 {
				fmt.Printf("%s: base written %v after the snapshot\n", s.name, time.Since(based).Round(100*time.Millisecond))
			}
			break
		}
		if time.Since(based) > time.Minute {
			fmt.Println("  (no base within a minute of the snapshot)")
			break
		}
	}
	return s, keys
}

// coldStart starts s's process on its data directory with a cold page
// cache and returns when the port opened and when the first read was
// answered, from the exec.
func coldStart(s *server) (port, first time.Duration) {
	dropCaches()
	began := time.Now()
	s.spawn()
	s.waitPort()
	port = time.Since(began)
	c := s.client()
	waitFirstRead(c, "f4")
	first = time.Since(began)
	c.Close()
	return port, first
}

func restart(bin string) {
	s, keys := startFive(bin)
	size := sizeOf(s, keys)
	var ratios []float64
	for r := 0; r < *runs; r++ {
		waitFlush(s)
		s.kill()
		raw, bytes := rawRead(filepath.Join(s.dir, "image"))
		port, first := coldStart(s)
		ratios = append(ratios, first.Seconds()/raw.Seconds())
		fmt.Printf("%s holding %.0f MiB of filters (image %.0f MiB): first read %v after a cold start (port open at %v); raw read of the image %v; ratio %.2f; %s\n",
			s.name, mib(size), mib(bytes), first.Round(time.Millisecond), port.Round(time.Millisecond), raw.Round(time.Millisecond), first.Seconds()/raw.Seconds(), freshNow())
	}
	slices.Sort(ratios)
	fmt.Printf("%s: median ratio %.2f\n", s.name, ratios[len(ratios)/2])
	s.stop()
}

// restartAB restarts every binary in turn on one data directory, the
// first binary's, and reads the image raw among them: each round the raw
// read and a cold start of each binary, the order rotating by round and
// reversed every other n rounds, so that a comparison holds while the
// machine drifts between rounds (on this VM by tens of percent within
// minutes) and none of them always comes right after another: a start
// right after the raw read measured 0.1-0.5 s slower than one after a
// start, and a rotation alone keeps each one's neighbours (with two
// binaries, the first came right after the raw read in 5 of 8 rounds, the
// second in none). Take a multiple of 2n rounds. The binaries must read
// each other's images.
func restartAB(bins []string) {
	s, keys := startFive(bins[0])
	size := sizeOf(s, keys)
	waitFlush(s)
	s.kill()
	n := len(bins) + 1 // the raw read, then the binaries
	times := make([][]float64, n)
	ratios := make([][]float64, len(bins))
	wins := make([]int, len(bins))
	for r := 0; r < *runs; r++ {
		took := make([]time.Duration, n)
		var order []string
		for j := range n {
			i := (j + r) % n
			if (r/n)%2 == 1 {
				i = (n - 1 - j + r) % n
			}
			if i == 0 {
				took[0], _ = rawRead(filepath.Join(s.dir, "image"))
				order = append(order, "raw")
				continue
			}
			s.bin = bins[i-1]
			_, took[i] = coldStart(s)
			waitFlush(s)
			s.kill()
			order = append(order, filepath.Base(s.bin))
		}
		line := fmt.Sprintf("round %d (%s): raw read %v", r+1, strings.Join(order, ", "), took[0].Round(time.Millisecond))
		best := 1
		for i := 1; i < n; i++ {
			ratio := took[i].Seconds() / took[0].Seconds()
			ratios[i-1] = append(ratios[i-1], ratio)
			line += fmt.Sprintf("; %s %v (%.2f)", filepath.Base(bins[i-1]), took[i].Round(time.Millisecond), ratio)
			if took[i] < took[best] {
				best = i
			}
		}
		for i := range n {
			times[i] = append(times[i], took[i].Seconds())
		}
		wins[best-1]++
		fmt.Println(line)
	}
	os.RemoveAll(s.dir)
	median := func(v []float64) float64 {
		v = slices.Clone(v)
		slices.Sort(v)
		if len(v)%2 == 0 {
			return (v[len(v)/2-1] + v[len(v)/2]) / 2
		}
		return v[len(v)/2]
	}
	fmt.Printf("raw read of the image: median %.3fs (%.3f-%.3fs)\n", median(times[0]), slices.Min(times[0]), slices.Max(times[0]))
	for i, b := range bins {
		fmt.Printf("%s, %.0f MiB of filters: first read median %.3fs (%.3f-%.3fs), %.2f x the raw read (%.2f-%.2f), fastest in %d of %d rounds\n",
			filepath.Base(b), mib(size), median(times[i+1]), slices.Min(times[i+1]), slices.Max(times[i+1]),
			median(ratios[i]), slices.Min(ratios[i]), slices.Max(ratios[i]), wins[i], *runs)
	}
}

func restartRB() {
	s := startRB()
	c := s.client()
	keys := []string{"f0", "f1", "f2", "f3", "f4"}
	for _, k := range keys {
		check(c.Do(context.Background(), "BF.RESERVE", k, "0.001", "100000000").Err())
		fillRandom(c, k)
		addItems(c, k, 20000)
	}
	// An RDB preamble, as a long-running server has (Redis may have
	// started a rewrite of its own: wait for it first).
	waitPersistence(c, "aof_rewrite_in_progress:0")
	check(c.Do(context.Background(), "BGREWRITEAOF").Err())
	time.Sleep(100 * time.Millisecond) // the rewrite starts
	waitPersistence(c, "aof_rewrite_in_progress:0")
	c.Close()
	for r := 0; r < *runs; r++ {
		s.kill()
		raw, bytes := rawRead(s.dir)
		dropCaches()
		began := time.Now()
		restartRBProcess(s)
		c = s.client()
		waitFirstRead(c, "f4")
		first := time.Since(began)
		c.Close()
		fmt.Printf("%s (AOF with RDB preamble, %.0f MiB): first read %v after a cold start; raw read %v; ratio %.2f; %s\n",
			s.name, mib(bytes), first.Round(time.Millisecond), raw.Round(time.Millisecond), first.Seconds()/raw.Seconds(), freshNow())
	}
	s.kill()
}
