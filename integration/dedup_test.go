package integration

import (
	"bufio"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// buildDedup builds examples/dedup once per test.
func buildDedup(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "dedup")
	if out, err := exec.Command("go", "build", "-o", bin, "../examples/dedup").CombinedOutput(); err != nil {
		t.Fatalf("building the example: %v\n%s", err, out)
	}
	return bin
}

// dedupProc is a running example fed line by line.
type dedupProc struct {
	cmd *exec.Cmd
	in  io.WriteCloser
	out *bufio.Reader
}

func startDedup(t *testing.T, bin string, args ...string) *dedupProc {
	t.Helper()
	cmd := exec.Command(bin, args...)
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	keepRunning(t, cmd)
	return &dedupProc{cmd: cmd, in: in, out: bufio.NewReader(out)}
}

// send writes one event and reports whether the example passed it on as
// new: every event it reads is answered before the next is read, so the
// line with the event's sequence number appears on stdout only if new;
// a marker that is always new follows it to end the wait.
func (d *dedupProc) send(t *testing.T, id string, seq int) bool {
	t.Helper()
	marker := fmt.Sprintf("marker-%d-%d", seq, rand.Uint64())
	fmt.Fprintf(d.in, "%s\t%d\n", id, seq)
	// The marker goes after the event has been answered: the example
	// sends a batch when stdin has nothing more buffered.
	fresh := false
	fmt.Fprintf(d.in, "%s\n", marker)
	for {
		line, err := d.out.ReadString('\n')
		if err != nil {
			t.Fatalf("the example's output ended: %v", err)
		}
		switch strings.TrimSpace(line) {
		case marker:
			return fresh
		case fmt.Sprintf("%s\t%d", id, seq):
			fresh = true
		}
	}
}

// TestDedupExample runs examples/dedup against the built bfserver.
//
// A count window: 40,000 events, half of them repeats of an id seen
// between 1 and 15,000 events before, through `dedup --count 5000
// --error-rate 0.001`: no repeat of an id seen within the last 5,000
// events is passed on (no false negative), and of the events whose id was
// never seen, or last seen past the window's forgetting margin (BFX.WINFO
// "Forgotten after"), no more are dropped than the error rate allows.
//
// A time window of 4 s beside the rotating-keys workaround (two Bloom
// filters per 4 s period, TTLs, a double lookup), on the same bfserver: an
// id seen again once the window has forgotten it is new to the window,
// and still a duplicate to the rotating filters, whose previous period
// remembers it for up to twice the window.
func TestDedupExample(t *testing.T) {
	bin := buildDedup(t)
	bf := start(t)
	c := bf.client(2)

	const n, events, N = 40_000, 40_000, 5000
	rng := rand.New(rand.NewPCG(27, 27))
	ids := make([]string, 0, events)
	for i := range events {
		if i > 0 && rng.IntN(2) == 0 {
			ids = append(ids, ids[max(0, i-1-rng.IntN(3*N))])
		} else {
			ids = append(ids, "ev-"+strconv.Itoa(i))
		}
	}
	var input strings.Builder
	for i, id := range ids {
		fmt.Fprintf(&input, "%s\t%d\n", id, i)
	}
	cmd := exec.Command(bin, "--redis", bf.baseURL(), "--key", "counted", "--count", strconv.Itoa(N), "--error-rate", "0.001", "--batch", "500")
	cmd.Stdin = strings.NewReader(input.String())
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("dedup: %v\n%s", err, stderr.String())
	}
	t.Logf("%s", strings.TrimSpace(stderr.String()))
	passed := map[int]bool{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		_, seq, _ := strings.Cut(line, "\t")
		i, err := strconv.Atoi(seq)
		if err != nil {
			t.Fatalf("output line %q", line)
		}
		passed[i] = true
	}
	info := must(t, c, "BFX.WINFO", "counted").([]any)
	var forgotten int
	for i := 0; i+1 < len(info); i += 2 {
		if info[i] == "Forgotten after" {
			forgotten = int(info[i+1].(int64))
		}
	}
	if forgotten < N {
		t.Fatalf("WINFO: forgotten after %d", forgotten)
	}
	last := map[string]int{}
	var inWindow, repeatsPassed, strangers, strangersDropped int
	for i, id := range ids {
		j, seen := last[id]
		last[id] = i
		switch {
		case seen && i-j <= N:
			inWindow++
			if passed[i] {
				repeatsPassed++
			}
		case !seen || i-j > forgotten:
			strangers++
			if !passed[i] {
				strangersDropped++
			}
		}
	}
	if repeatsPassed > 0 {
		t.Errorf("%d of %d repeats within the last %d events passed on as new", repeatsPassed, inWindow, N)
	}
	if bound := float64(strangers)*0.001 + 4*math.Sqrt(float64(strangers)*0.001) + 1; float64(strangersDropped) > bound {
		t.Errorf("%d of %d new ids dropped as duplicates, bound %.0f at 0.1%%", strangersDropped, strangers, bound)
	}
	t.Logf("%d repeats within the window, all dropped; %d of %d new ids (never seen, or past %d events) dropped",
		inWindow, strangersDropped, strangers, forgotten)

	// A 4 s window, by time, beside the rotating filters. Start just
	// after a period boundary of the rotating filters (their periods are
	// multiples of 4 s of the clock, this machine's for both).
	const W = 4 * time.Second
	for time.Now().UnixMilli()%W.Milliseconds() > 200 {
		time.Sleep(10 * time.Millisecond) // waiting for the clock, not a condition
	}
	win := startDedup(t, bin, "--redis", bf.baseURL(), "--key", "timed", "--window", W.String(), "--capacity", "1000", "--error-rate", "0.01")
	rot := startDedup(t, bin, "--redis", bf.baseURL(), "--key", "rotated", "--mode", "rotate", "--window", W.String(), "--capacity", "1000", "--error-rate", "0.01")
	t0 := time.Now()
	for _, d := range []*dedupProc{win, rot} {
		if !d.send(t, "A", 1) {
			t.Fatal("A, never seen, was dropped")
		}
		if d.send(t, "A", 2) {
			t.Fatal("A, seen just now, was passed on")
		}
	}
	// The window forgets A within its margin (WINFO "Forgotten after").
	waitFor(t, 3*W, "the window to forget A", func() bool {
		return must(t, c, "BFX.WEXISTS", "timed", "A") == int64(0)
	})
	el := time.Since(t0)
	if el < W {
		t.Fatalf("the window forgot A after %v, under its %v", el, W)
	}
	if el >= 2*W-200*time.Millisecond {
		t.Skipf("the window took %v to forget A: past the rotating filters' next period, nothing to compare", el)
	}
	if !win.send(t, "A", 3) {
		t.Error("A, last seen more than the window ago, is still a duplicate to the window")
	}
	if rot.send(t, "A", 3) {
		t.Errorf("A, %v after it was last seen, is new to the rotating filters: expected them to remember it for up to two periods", el)
	}
	t.Logf("A seen again %v after it was first seen (window %v): new to the window, a duplicate to the rotating filters", el.Round(time.Millisecond), W)
}
