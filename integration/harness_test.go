// Package integration runs the built bfserver binary as real processes and
// talks to it with real clients.
package integration

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

var binary string

// binDir holds the builds the tests run.
var binDir string

var (
	fpOnce   sync.Once
	fpBinary string
	fpErr    error
)

// failpointBinary builds, once, bfserver with the failpoints tag: a test
// can stop it at a named place (replication/failpoint_on.go).
func failpointBinary(t testing.TB) string {
	t.Helper()
	fpOnce.Do(func() {
		fpBinary = filepath.Join(binDir, "bfserver-failpoints")
		out, err := exec.Command("go", "build", "-tags", "failpoints", "-o", fpBinary, "../cmd/bfserver").CombinedOutput()
		if err != nil {
			fpErr = fmt.Errorf("go build -tags failpoints: %v\n%s", err, out)
		}
	})
	if fpErr != nil {
		t.Fatal(fpErr)
	}
	return fpBinary
}

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "bfserver-bin")
	if err != nil {
		panic(err)
	}
	binary = filepath.Join(dir, "bfserver")
	build := exec.Command("go", "build", "-o", binary, "../cmd/bfserver")
	build.Stdout, build.Stderr = os.Stdout, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "build failed:", err)
		os.Exit(1)
	}
	binDir = dir
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// node is one running bfserver process.
type node struct {
	t        testing.TB
	cmd      *exec.Cmd
	addr     string
	raftAddr string
	dataDir  string
	args     []string
	tls      *pki // when set, clients speak TLS with this PKI
	// started: the node has listened once (its addresses are its own);
	// retries counts first starts that found a port taken.
	started bool
	retries int
	// logs keeps the tail of the process's log (stderr).
	logs *tailWriter
	// bin, when set, is the binary to run instead of the default build
	// (a failpoints build, say); env is added to the process's environment;
	// wrap, when set, is a command the binary runs under (prlimit ...).
	bin  string
	env  []string
	wrap []string
	// startWait bounds how long launch waits for the node to listen
	// (default 15s): a node loading gigabytes of image, beside the other
	// tests' load, takes longer.
	startWait time.Duration
}

func freeAddr(t testing.TB) string { return freeAddrOn(t, "127.0.0.1") }

// freeAddrOn picks a free port on ip below the kernel's ephemeral range
// (net.ipv4.ip_local_port_range): a node killed and started again binds
// its ports again, and a port of that range may meanwhile have become
// any outgoing connection's local port (TestLargeSnapshotInstall's
// follower once failed to start again so: "bind: address already in
// use"). Where the range leaves no room below it, any free port.
func freeAddrOn(t testing.TB, ip string) string {
	t.Helper()
	lo := 32768
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		if f := strings.Fields(string(b)); len(f) == 2 {
			if n, err := strconv.Atoi(f[0]); err == nil {
				lo = n
			}
		}
	}
	const first = 10000
	for range 500 {
		if lo-first < 1000 {
			break
		}
		addr := net.JoinHostPort(ip, strconv.Itoa(first+rand.IntN(lo-first)))
		if ln, err := net.Listen("tcp", addr); err == nil {
			ln.Close()
			return addr
		}
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// start launches a single durable node in a fresh data directory and waits
// until it answers PING.
func start(t testing.TB, args ...string) *node {
	t.Helper()
	n := &node{t: t, addr: freeAddr(t), raftAddr: freeAddr(t), dataDir: t.TempDir(), args: args}
	n.launch()
	return n
}

// launch (re)starts the process with the node's flags.
func (n *node) launch() {
	n.t.Helper()
	args := append([]string{"--addr", n.addr, "--raft-addr", n.raftAddr, "--data-dir", n.dataDir}, n.args...)
	bin := binary
	if n.bin != "" {
		bin = n.bin
	}
	argv := append(append(append([]string{}, n.wrap...), bin), args...)
	n.cmd = exec.Command(argv[0], argv[1:]...)
	if len(n.env) > 0 {
		n.cmd.Env = append(os.Environ(), n.env...)
	}
	// The log's tail is kept to explain a start that fails, quiet or not.
	tail := &tailWriter{}
	n.logs = tail
	n.cmd.Stderr = io.MultiWriter(os.Stderr, tail)
	if os.Getenv("BFSERVER_TEST_QUIET") != "" {
		n.cmd.Stderr = tail
	}
	if err := n.cmd.Start(); err != nil {
		n.t.Fatal(err)
	}
	n.t.Cleanup(n.kill)
	wait := n.startWait
	if wait == 0 {
		wait = 15 * time.Second
	}
	deadline := time.Now().Add(wait)
	for {
		c, err := net.DialTimeout("tcp", n.addr, time.Second)
		if err == nil {
			c.Close()
			n.started = true
			return
		}
		if exited(n.cmd.Process.Pid) {
			werr := n.cmd.Wait()
			// A port picked free can be taken before the node binds it
			// (by another test's connection); a first start takes others.
			if !n.started && n.retries < 3 && strings.Contains(tail.String(), "address already in use") {
				n.retries++
				ip, _, _ := net.SplitHostPort(n.addr)
				n.addr, n.raftAddr = freeAddrOn(n.t, ip), freeAddrOn(n.t, ip)
				n.launch()
				return
			}
			n.t.Fatalf("bfserver on %s exited at start (%v); its log ends:\n%s", n.addr, werr, tail)
		}
		if time.Now().After(deadline) {
			n.t.Fatalf("bfserver on %s did not start: %v; its log ends:\n%s", n.addr, err, tail)
		}
		time.Sleep(20 * time.Millisecond) // polling for the listener
	}
}

// exited reports whether the process has ended and waits to be reaped.
func exited(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	_, rest, _ := strings.Cut(string(b), ") ")
	return strings.HasPrefix(rest, "Z")
}

// tailWriter keeps the last 4 KiB written to it.
type tailWriter struct {
	mu  sync.Mutex
	buf []byte
}

func (w *tailWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf = append(w.buf, p...)
	if len(w.buf) > 4096 {
		w.buf = append(w.buf[:0], w.buf[len(w.buf)-4096:]...)
	}
	return len(p), nil
}

func (w *tailWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return string(w.buf)
}

// keepRunning starts a helper process (a tool, an example; its log on
// stderr unless BFSERVER_TEST_QUIET is set or the caller set one) and
// kills it by PID when the test ends.
func keepRunning(t *testing.T, cmd *exec.Cmd) {
	t.Helper()
	if cmd.Stderr == nil && os.Getenv("BFSERVER_TEST_QUIET") == "" {
		cmd.Stderr = os.Stderr
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		syscall.Kill(cmd.Process.Pid, syscall.SIGKILL)
		cmd.Wait()
	})
}

// kill ends the process with SIGKILL, by PID.
func (n *node) kill() {
	if n.cmd != nil && n.cmd.ProcessState == nil {
		syscall.Kill(n.cmd.Process.Pid, syscall.SIGKILL)
		n.cmd.Wait()
	}
}

// stop ends the process with SIGTERM and waits for a clean exit.
func (n *node) stop() {
	n.t.Helper()
	syscall.Kill(n.cmd.Process.Pid, syscall.SIGTERM)
	if err := n.cmd.Wait(); err != nil {
		n.t.Fatalf("bfserver exited uncleanly: %v", err)
	}
}

func (n *node) client(proto int) *redis.Client {
	if n.tls != nil {
		c := n.tls.client(n.addr)
		n.t.Cleanup(func() { c.Close() })
		return c
	}
	c := redis.NewClient(&redis.Options{Addr: n.addr, Protocol: proto, MaxRetries: -1})
	n.t.Cleanup(func() { c.Close() })
	return c
}

// needTool returns the path of an outside tool. Without it the test skips,
// naming the tool; under CI (CI=true), where .ci/run installs every tool,
// it fails instead.
func needTool(t testing.TB, name, pkg string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%s not installed (apt-get install %s)", name, pkg)
		}
		t.Skipf("%s not installed (apt-get install %s)", name, pkg)
	}
	return p
}

func ctx(t testing.TB) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return c
}
