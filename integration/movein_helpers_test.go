package integration

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// url is the node's redis:// URL for database db.
func (n *node) url(db int) string {
	return "redis://" + n.addr + "/" + strconv.Itoa(db)
}

func (n *node) baseURL() string { return "redis://" + n.addr }

// toolRun is the outcome of one `bfserver migrate` or `bfserver load` run.
type toolRun struct {
	stdout, stderr string
	code           int
	lines          []map[string]any // stderr's JSON log lines
}

// runTool runs the built binary with args (a subcommand first) to its end,
// at most two minutes (then it is killed by PID and the test fails).
func runTool(t *testing.T, stdin io.Reader, args ...string) toolRun {
	t.Helper()
	cx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(cx, binary, args...)
	var out, errb bytes.Buffer
	cmd.Stdin, cmd.Stdout, cmd.Stderr = stdin, &out, &errb
	err := cmd.Run()
	if cx.Err() != nil {
		t.Fatalf("%v did not finish in time; stderr:\n%s", args, errb.String())
	}
	r := toolRun{stdout: out.String(), stderr: errb.String()}
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		r.code = ee.ExitCode()
	default:
		t.Fatalf("%v: %v", args, err)
	}
	r.lines = jsonLines(r.stderr)
	return r
}

func jsonLines(s string) []map[string]any {
	var out []map[string]any
	for _, l := range strings.Split(s, "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(l), &m) == nil {
			out = append(out, m)
		}
	}
	return out
}

// outcomes maps each key of a migrate run's log to its outcome message
// (copied, identical, gone, failed).
func (r toolRun) outcomes() map[string]string {
	out := map[string]string{}
	for _, l := range r.lines {
		msg, _ := l["msg"].(string)
		key, ok := l["key"].(string)
		if !ok {
			continue
		}
		switch msg {
		case "copied", "identical", "gone", "failed":
			out[key] = msg
		}
	}
	return out
}

// liveTool is a migrate or load process still running, whose JSON log
// lines arrive on lines as it writes them.
type liveTool struct {
	cmd   *exec.Cmd
	lines chan map[string]any
	done  chan struct{}
	err   error
	mu    sync.Mutex
	all   []string
}

func startTool(t *testing.T, args ...string) *liveTool {
	t.Helper()
	return startToolIn(t, nil, args...)
}

// startToolIn is startTool with stdin as the process's standard input.
func startToolIn(t *testing.T, stdin io.Reader, args ...string) *liveTool {
	t.Helper()
	cmd := exec.Command(binary, args...)
	cmd.Stdin = stdin
	pipe, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lt := &liveTool{cmd: cmd, lines: make(chan map[string]any, 1<<16), done: make(chan struct{})}
	t.Cleanup(lt.kill)
	go func() {
		s := bufio.NewScanner(pipe)
		for s.Scan() {
			lt.mu.Lock()
			lt.all = append(lt.all, s.Text())
			lt.mu.Unlock()
			var m map[string]any
			if json.Unmarshal(s.Bytes(), &m) == nil {
				select {
				case lt.lines <- m:
				default:
				}
			}
		}
		lt.err = cmd.Wait()
		close(lt.lines)
		close(lt.done)
	}()
	return lt
}

// waitLine waits (at most a minute) for a log line that pred accepts.
func (lt *liveTool) waitLine(t *testing.T, what string, pred func(map[string]any) bool) map[string]any {
	t.Helper()
	timeout := time.After(time.Minute)
	for {
		select {
		case l, ok := <-lt.lines:
			if !ok {
				t.Fatalf("the process ended (%v) before %s; stderr:\n%s", lt.err, what, lt.stderr())
			}
			if pred(l) {
				return l
			}
		case <-timeout:
			t.Fatalf("no %s within a minute; stderr:\n%s", what, lt.stderr())
		}
	}
}

func (lt *liveTool) stderr() string {
	lt.mu.Lock()
	defer lt.mu.Unlock()
	return strings.Join(lt.all, "\n")
}

// kill ends the process with SIGKILL, by PID, and waits for it.
func (lt *liveTool) kill() {
	if lt.cmd.Process != nil {
		syscall.Kill(lt.cmd.Process.Pid, syscall.SIGKILL)
		<-lt.done
	}
}

// wait waits (at most two minutes) for the process to end by itself and
// returns its exit code.
func (lt *liveTool) wait(t *testing.T) int {
	t.Helper()
	select {
	case <-lt.done:
	case <-time.After(2 * time.Minute):
		t.Fatalf("the process did not end; stderr:\n%s", lt.stderr())
	}
	var ee *exec.ExitError
	if errors.As(lt.err, &ee) {
		return ee.ExitCode()
	}
	if lt.err != nil {
		t.Fatal(lt.err)
	}
	return 0
}

// digestOf is BFX.DIGEST (bfserver's own: SHA-256 of the filter's state,
// its expiry included).
func digestOf(t *testing.T, c *redis.Client, key string) string {
	t.Helper()
	d, err := c.Do(ctx(t), "BFX.DIGEST", key).Text()
	if err != nil {
		t.Fatalf("BFX.DIGEST %q: %v", key, err)
	}
	return d
}

// dumpOf is the filter's whole SCANDUMP, header and chunks, concatenated.
func dumpOf(t *testing.T, c *redis.Client, prefix, key string) []byte {
	t.Helper()
	var out []byte
	it := int64(0)
	for {
		v, err := c.Do(ctx(t), prefix+".SCANDUMP", key, it).Slice()
		if err != nil {
			t.Fatalf("%s.SCANDUMP %q %d: %v", prefix, key, it, err)
		}
		next := v[0].(int64)
		if next == 0 {
			return out
		}
		s, _ := v[1].(string)
		out = append(out, s...)
		it = next
	}
}

func must(t *testing.T, c *redis.Client, args ...any) any {
	t.Helper()
	v, err := c.Do(ctx(t), args...).Result()
	if err != nil {
		t.Fatalf("%v: %v", args, err)
	}
	return v
}

// dbClient is a client of the node on database db.
func (n *node) dbClient(db int) *redis.Client {
	c := redis.NewClient(&redis.Options{Addr: n.addr, DB: db, Protocol: 2, MaxRetries: -1,
		ReadTimeout: 30 * time.Second})
	n.t.Cleanup(func() { c.Close() })
	return c
}

// keysOf lists every key of db (KEYS *).
func keysOf(t *testing.T, c *redis.Client) []string {
	t.Helper()
	k, err := c.Keys(ctx(t), "*").Result()
	if err != nil {
		t.Fatal(err)
	}
	return k
}
