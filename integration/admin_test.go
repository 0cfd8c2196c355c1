package integration

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// lockedBuffer collects a process's output while it runs.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// startProcess runs a tool until the test ends, then kills it by PID.
func startProcess(t *testing.T, out io.Writer, name string, args ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Stdout, cmd.Stderr = out, out
	keepRunning(t, cmd)
	return cmd
}

func httpGet(url string) (string, error) {
	c := &http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}

// TestRedisExporter runs prometheus-redis-exporter against the leader and a
// follower of a two-node cluster: both scrape without an error (it reads
// INFO ALL, CONFIG GET *, SLOWLOG, LATENCY LATEST, …), report role master
// and slave with a run_id, and log nothing at error or warning level.
func TestRedisExporter(t *testing.T) {
	exporter := needTool(t, "prometheus-redis-exporter", "prometheus-redis-exporter")
	nodes := startCluster(t, []string{"127.0.0.1", "127.0.0.1"})
	leader := leaderOf(t, nodes)
	follower := without(nodes, leader)[0]
	c := leader.client(2)
	if err := c.Do(ctx(t), "BF.ADD", "k", "x").Err(); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		n    *node
		role string
	}{{leader, "master"}, {follower, "slave"}} {
		web := freeAddr(t)
		var log lockedBuffer
		startProcess(t, &log, exporter, "--redis.addr=redis://"+tc.n.addr, "--web.listen-address="+web)
		var metrics string
		waitFor(t, 20*time.Second, "the exporter to scrape "+tc.role, func() bool {
			m, err := httpGet("http://" + web + "/metrics")
			metrics = m
			return err == nil && strings.Contains(m, "\nredis_up 1\n")
		})
		info := regexp.MustCompile(`(?m)^redis_instance_info\{.*\} 1$`).FindString(metrics)
		if !strings.Contains(info, `role="`+tc.role+`"`) || !regexp.MustCompile(`run_id="[0-9a-f]{40}"`).MatchString(info) {
			t.Errorf("%s: redis_instance_info %q", tc.role, info)
		}
		_, port, _ := net.SplitHostPort(tc.n.addr)
		for _, want := range []string{
			`redis_exporter_last_scrape_error{err=""} 0`,
			`tcp_port="` + port + `"`,
			"\nredis_config_maxclients 10000\n",
			"\nredis_connected_clients ",
			"\nredis_commands_processed_total ",
			"\nredis_slowlog_length ",
			"\nredis_memory_used_bytes ",
			"\nredis_db_keys{db=\"db0\"} 1\n",
		} {
			if !strings.Contains(metrics, want) {
				t.Errorf("%s: the exporter's metrics lack %q", tc.role, want)
			}
		}
		if tc.role == "master" && !strings.Contains(metrics, "\nredis_connected_slaves 1\n") {
			t.Errorf("master: redis_connected_slaves is not 1")
		}
		if tc.role == "slave" {
			_, lport, _ := net.SplitHostPort(leader.addr)
			if want := `redis_master_link_up{master_host="127.0.0.1",master_port="` + lport + `"} 1`; !strings.Contains(metrics, want) {
				t.Errorf("slave: no %s in\n%s", want, regexp.MustCompile(`(?m)^redis_master.*$`).FindAllString(metrics, -1))
			}
		}
		for _, l := range strings.Split(log.String(), "\n") {
			if strings.Contains(l, "level=error") || strings.Contains(l, "level=warn") || strings.Contains(l, "level=fatal") {
				t.Errorf("%s: the exporter logged %q", tc.role, l)
			}
		}
	}
}

// populateAdmin makes four keys: two Bloom filters (one large), a large Cuckoo
// filter and a string.
func populateAdmin(t *testing.T, c *redis.Client) {
	t.Helper()
	for _, cmd := range [][]any{
		{"BF.RESERVE", "big", "0.001", "100000"}, {"BF.ADD", "small", "x"},
		{"CF.RESERVE", "cbig", "100000"}, {"SET", "str", "hello"},
	} {
		if err := c.Do(ctx(t), cmd...).Err(); err != nil {
			t.Fatalf("%v: %v", cmd, err)
		}
	}
}

// TestRedisCLIModes runs redis-cli's --bigkeys, --memkeys, --scan,
// --latency and --stat against a node and checks what they print.
func TestRedisCLIModes(t *testing.T) {
	cli := needTool(t, "redis-cli", "redis-tools")
	n := start(t)
	c := n.client(2)
	populateAdmin(t, c)
	host, port, _ := net.SplitHostPort(n.addr)
	run := func(args ...string) string {
		t.Helper()
		cmd := exec.Command(cli, append([]string{"-h", host, "-p", port}, args...)...)
		done := make(chan struct{})
		timer := time.AfterFunc(30*time.Second, func() {
			select {
			case <-done:
			default:
				syscall.Kill(cmd.Process.Pid, syscall.SIGKILL)
			}
		})
		defer timer.Stop()
		out, err := cmd.CombinedOutput()
		close(done)
		if err != nil {
			t.Fatalf("redis-cli %v: %v\n%s", args, err, out)
		}
		return string(out)
	}

	// --bigkeys sizes the types it knows (strings here) and counts module
	// types' keys without a size, as it does against Redis.
	big := run("--bigkeys")
	for _, want := range []string{
		"Sampled 4 keys in the keyspace!",
		`Biggest string found '"str"' has 5 bytes`,
		"2 MBbloom--s with 0 ? (50.00% of keys, avg size 0.00)",
		"1 MBbloomCFs with 0 ? (25.00% of keys, avg size 0.00)",
		"1 strings with 5 bytes (25.00% of keys, avg size 5.00)",
	} {
		if !strings.Contains(big, want) {
			t.Errorf("--bigkeys lacks %q:\n%s", want, big)
		}
	}

	// --memkeys sizes every key with MEMORY USAGE and names the biggest.
	usage := func(key string) int64 {
		v, err := c.Do(ctx(t), "MEMORY", "USAGE", key).Int64()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	mem := run("--memkeys")
	for _, want := range []string{
		fmt.Sprintf(`Biggest MBbloom-- found '"big"' has %d bytes`, usage("big")),
		fmt.Sprintf(`Biggest MBbloomCF found '"cbig"' has %d bytes`, usage("cbig")),
		fmt.Sprintf("2 MBbloom--s with %d bytes", usage("big")+usage("small")),
	} {
		if !strings.Contains(mem, want) {
			t.Errorf("--memkeys lacks %q:\n%s", want, mem)
		}
	}

	scan := strings.Fields(run("--scan"))
	if strings.Join(sortedStrings(scan), " ") != "big cbig small str" {
		t.Errorf("--scan: %q", scan)
	}
	if got := strings.TrimSpace(run("--scan", "--pattern", "*big")); strings.Join(sortedStrings(strings.Fields(got)), " ") != "big cbig" {
		t.Errorf("--scan --pattern *big: %q", got)
	}

	// --latency with its output piped prints one line after -i seconds:
	// min, max, average and the number of PINGs.
	lat := strings.Fields(run("--latency", "-i", "1"))
	if len(lat) != 4 {
		t.Fatalf("--latency: %q", lat)
	}
	for i, f := range lat {
		if _, err := strconv.ParseFloat(f, 64); err != nil {
			t.Fatalf("--latency field %d %q", i, f)
		}
	}
	if samples, _ := strconv.Atoi(lat[3]); samples < 10 {
		t.Fatalf("--latency took %d samples in a second", samples)
	}

	// --stat runs until killed; its lines show the keys, memory and clients
	// from INFO, and the requests counter moving.
	stdbuf := needTool(t, "stdbuf", "coreutils")
	cmd := exec.Command(stdbuf, "-oL", cli, "-h", host, "-p", port, "--stat", "-i", "0.2")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		syscall.Kill(cmd.Process.Pid, syscall.SIGKILL)
		cmd.Wait()
	}()
	lines := make(chan string)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	row := regexp.MustCompile(`^(\d+)\s+(\d+(\.\d+)?[BKMG])\s+(\d+)\s+(\d+)\s+(\d+) \(\+(\d+)\)\s+(\d+)`)
	var rows [][]string
	timeout := time.After(20 * time.Second)
	for len(rows) < 3 {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("--stat ended after %d rows", len(rows))
			}
			if m := row.FindStringSubmatch(l); m != nil {
				rows = append(rows, m)
			}
		case <-timeout:
			t.Fatalf("--stat printed %d rows in 20s", len(rows))
		}
	}
	for _, r := range rows {
		if clients, _ := strconv.Atoi(r[4]); r[1] != "4" || clients < 1 || r[5] != "0" {
			t.Errorf("--stat row %q: want 4 keys, a client, none blocked", r[0])
		}
	}
	// Each row's INFO is a request: the counter grows between rows.
	if a, b := rows[0][6], rows[2][6]; atoi(a) >= atoi(b) {
		t.Errorf("--stat requests did not grow: %s then %s", a, b)
	}
}

func atoi(s string) int {
	n, _ := strconv.Atoi(s)
	return n
}

func sortedStrings(s []string) []string {
	out := slices.Clone(s)
	slices.Sort(out)
	return out
}

// exitStatus waits for the process to end by itself and returns its status.
func (n *node) exitStatus(t *testing.T) int {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- n.cmd.Wait() }()
	select {
	case err := <-done:
		if err == nil {
			return 0
		}
		if ee, ok := err.(*exec.ExitError); ok {
			return ee.ExitCode()
		}
		t.Fatal(err)
	case <-time.After(30 * time.Second):
		t.Fatal("bfserver did not exit")
	}
	return -1
}

// TestShutdownCommand: SHUTDOWN stops the node cleanly (status 0) without
// a reply; SHUTDOWN SAVE snapshots first; the data is there on restart.
func TestShutdownCommand(t *testing.T) {
	n := start(t)
	c := n.client(2)
	if err := c.Do(ctx(t), "BF.ADD", "k", "before").Err(); err != nil {
		t.Fatal(err)
	}
	if err := c.Do(ctx(t), "SHUTDOWN", "ABORT").Err(); err == nil || err.Error() != "ERR No shutdown in progress." {
		t.Fatalf("SHUTDOWN ABORT: %v", err)
	}
	if err := c.Do(ctx(t), "SHUTDOWN").Err(); err == nil {
		t.Fatal("SHUTDOWN answered")
	}
	if st := n.exitStatus(t); st != 0 {
		t.Fatalf("SHUTDOWN: status %d", st)
	}
	n.launch()
	c = n.client(2)
	if v, err := c.Do(ctx(t), "BF.EXISTS", "k", "before").Int(); err != nil || v != 1 {
		t.Fatalf("after restart: %v %v", v, err)
	}
	before, _ := c.Do(ctx(t), "LASTSAVE").Int64()
	c.Do(ctx(t), "BF.ADD", "k", "saved")
	if err := c.Do(ctx(t), "SHUTDOWN", "SAVE").Err(); err == nil {
		t.Fatal("SHUTDOWN SAVE answered")
	}
	if st := n.exitStatus(t); st != 0 {
		t.Fatalf("SHUTDOWN SAVE: status %d", st)
	}
	n.launch()
	c = n.client(2)
	if v, err := c.Do(ctx(t), "BF.EXISTS", "k", "saved").Int(); err != nil || v != 1 {
		t.Fatalf("after SHUTDOWN SAVE: %v %v", v, err)
	}
	if after, _ := c.Do(ctx(t), "LASTSAVE").Int64(); after < before {
		t.Fatalf("LASTSAVE %d before, %d after SHUTDOWN SAVE", before, after)
	}
}

// TestSaveCommands on a real node: SAVE and BGSAVE snapshot it (INFO
// persistence follows), DEBUG RELOAD reloads the image and keeps every
// filter, and the changes since the last save are counted.
func TestSaveCommands(t *testing.T) {
	n := start(t, "--enable-debug-command", "yes")
	c := n.client(2)
	populateAdmin(t, c)
	info := func() map[string]string {
		s, err := c.Info(ctx(t), "persistence").Result()
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]string{}
		for _, l := range strings.Split(s, "\r\n") {
			if k, v, ok := strings.Cut(l, ":"); ok {
				out[k] = v
			}
		}
		return out
	}
	if ch, _ := strconv.Atoi(info()["rdb_changes_since_last_save"]); ch == 0 {
		t.Fatal("no changes counted before SAVE")
	}
	if err := c.Do(ctx(t), "SAVE").Err(); err != nil {
		t.Fatal(err)
	}
	if got := info()["rdb_changes_since_last_save"]; got != "0" {
		t.Fatalf("rdb_changes_since_last_save after SAVE: %s", got)
	}
	if last, _ := c.Do(ctx(t), "LASTSAVE").Int64(); time.Now().Unix()-last > 10 {
		t.Fatalf("LASTSAVE %d", last)
	}
	c.Do(ctx(t), "BF.ADD", "small", "y")
	if got, err := c.Do(ctx(t), "BGSAVE").Text(); err != nil || got != "Background saving started" {
		t.Fatalf("BGSAVE: %q %v", got, err)
	}
	waitFor(t, 20*time.Second, "the background save", func() bool {
		i := info()
		return i["rdb_bgsave_in_progress"] == "0" && i["rdb_saves"] == "2" && i["rdb_last_bgsave_status"] == "ok"
	})
	digest := func() string {
		d, err := c.Do(ctx(t), "BFX.DIGEST", "big").Text()
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	d := digest()
	if err := c.Do(ctx(t), "DEBUG", "RELOAD").Err(); err != nil {
		t.Fatal(err)
	}
	if digest() != d {
		t.Fatal("DEBUG RELOAD changed a filter")
	}
	if v, _ := c.Do(ctx(t), "BF.EXISTS", "small", "y").Int(); v != 1 {
		t.Fatal("DEBUG RELOAD lost an item")
	}
}

// TestConfigRewriteRestart: settings changed with CONFIG SET and written
// by CONFIG REWRITE into the --config file are the node's settings after a
// restart; the file's comments stay.
func TestConfigRewriteRestart(t *testing.T) {
	path := filepath.Join(t.TempDir(), "bfserver.conf")
	if err := os.WriteFile(path, []byte("# test node\nmaxmemory 100mb\nslowlog-max-len 10\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	n := start(t, "--config", path)
	c := n.client(2)
	if err := c.Do(ctx(t), "CONFIG", "SET", "maxmemory", "20mb", "latency-monitor-threshold", "25", "bf-error-rate", "0.001").Err(); err != nil {
		t.Fatal(err)
	}
	if err := c.Do(ctx(t), "CONFIG", "REWRITE").Err(); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(path)
	if want := "# test node\nmaxmemory 20971520\nslowlog-max-len 10\n# Generated by CONFIG REWRITE\nbf-error-rate 0.001\nlatency-monitor-threshold 25\n"; string(b) != want {
		t.Fatalf("rewritten:\n%s\nwant:\n%s", b, want)
	}
	if file, _ := c.Info(ctx(t), "server").Result(); !strings.Contains(file, "config_file:"+path+"\r\n") {
		t.Fatalf("INFO config_file: %s", file)
	}
	n.stop()
	n.launch()
	c = n.client(2)
	for k, want := range map[string]string{"maxmemory": "20971520", "latency-monitor-threshold": "25", "bf-error-rate": "0.001", "slowlog-max-len": "10"} {
		got, err := c.ConfigGet(ctx(t), k).Result()
		if err != nil || got[k] != want {
			t.Errorf("after restart CONFIG GET %s = %v %v, want %s", k, got, err, want)
		}
	}
}
