package integration

import (
	bin "encoding/binary"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

func scrape(t *testing.T, addr, path string) (int, string) {
	t.Helper()
	resp, err := http.Get("http://" + addr + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func metricValue(t *testing.T, body, series string) float64 {
	t.Helper()
	re := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(series) + ` (\S+)$`)
	m := re.FindStringSubmatch(body)
	if m == nil {
		t.Fatalf("no series %s in scrape", series)
	}
	v, _ := strconv.ParseFloat(m[1], 64)
	return v
}

// TestMetricsAndHealth: /healthz and /readyz answer; /metrics passes
// promtool's checks; the per-filter series follow a filter as it fills.
func TestMetricsAndHealth(t *testing.T) {
	httpAddr := freeAddr(t)
	n := start(t, "--http-addr", httpAddr)
	if code, _ := scrape(t, httpAddr, "/healthz"); code != 200 {
		t.Fatalf("/healthz %d", code)
	}
	waitFor(t, 20e9, "/readyz", func() bool { code, _ := scrape(t, httpAddr, "/readyz"); return code == 200 })
	c := n.client(2)
	if err := c.Do(ctx(t), "BF.RESERVE", "m", "0.01", "1000").Err(); err != nil {
		t.Fatal(err)
	}
	_, before := scrape(t, httpAddr, "/metrics")
	series := `bfserver_filter_fill_ratio{db="0",key="m",type="bloom"}`
	fill0 := metricValue(t, before, series)
	args := []any{"BF.MADD", "m"}
	for i := 0; i < 500; i++ {
		args = append(args, "x"+strconv.Itoa(i))
	}
	if err := c.Do(ctx(t), args...).Err(); err != nil {
		t.Fatal(err)
	}
	c.Do(ctx(t), "BF.EXISTS", "m", "never-added")
	_, after := scrape(t, httpAddr, "/metrics")
	if fill := metricValue(t, after, series); fill <= fill0 || fill > 1 {
		t.Fatalf("fill ratio %v -> %v", fill0, fill)
	}
	if items := metricValue(t, after, `bfserver_filter_items{db="0",key="m",type="bloom"}`); items < 490 {
		t.Fatalf("items = %v", items)
	}
	if fpr := metricValue(t, after, `bfserver_filter_false_positive_rate{db="0",key="m",type="bloom"}`); fpr <= 0 || fpr > 0.01 {
		t.Fatalf("estimated fpr = %v", fpr)
	}
	if v := metricValue(t, after, `bfserver_commands_total{command="bf.madd"}`); v < 1 {
		t.Fatalf("bf.madd counted %v times", v)
	}
	if v := metricValue(t, after, `bfserver_ready`); v != 1 {
		t.Fatalf("ready = %v", v)
	}
	if v := metricValue(t, after, `bfserver_raft_leader`); v != 1 {
		t.Fatalf("raft leader = %v", v)
	}
	if !strings.Contains(after, "bfserver_negatives_total") {
		t.Fatal("no negatives counter")
	}

	promtool := needTool(t, "promtool", "prometheus")
	cmd := exec.Command(promtool, "check", "metrics")
	cmd.Stdin = strings.NewReader(after)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("promtool check metrics: %v\n%s", err, out)
	}
}

// promtoolCheckMetrics runs `promtool check metrics` on a scrape.
func promtoolCheckMetrics(t *testing.T, body string) {
	t.Helper()
	promtool := needTool(t, "promtool", "prometheus")
	cmd := exec.Command(promtool, "check", "metrics")
	cmd.Stdin = strings.NewReader(body)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("promtool check metrics: %v\n%s", err, out)
	}
}

var filterKeyLabel = regexp.MustCompile(`(?m)^bfserver_filter_bytes\{db="\d+",key="([^"]*)"`)

// exportedFilters lists the keys that have per-filter series in a scrape.
func exportedFilters(body string) map[string]bool {
	keys := map[string]bool{}
	for _, m := range filterKeyLabel.FindAllStringSubmatch(body, -1) {
		keys[m[1]] = true
	}
	return keys
}

// TestMetricsFilterSeries: per-filter series are bounded on a real
// process. By default only the 100 largest filters of 153 (150 small ones
// auto-created by BF.ADD, three reserved larger) get series; `all` and
// `none` export every filter and none, while the totals by type count
// every filter in each case. bfserver_filter_rebuild_recommended flips for
// a Cuckoo filter filled over many sub-filters past twice its nominal rate
// and for a Bloom filter whose dump claims ten times its capacity; a full
// non-scaling Bloom filter sits at its target rate, so it flips only with
// --rebuild-factor below 1. Every scrape passes promtool check metrics.
func TestMetricsFilterSeries(t *testing.T) {
	fill := func(t *testing.T, n *node) {
		t.Helper()
		c := n.client(2)
		pipe := c.Pipeline()
		for i := range 150 {
			pipe.Do(ctx(t), "BF.ADD", fmt.Sprintf("tenant-%03d", i), "x")
		}
		for i := range 3 {
			pipe.Do(ctx(t), "BF.RESERVE", fmt.Sprintf("big-%d", i), "0.01", 10000+1000*i)
		}
		pipe.Do(ctx(t), "CF.RESERVE", "cf", "64", "EXPANSION", "1")
		for i := range 300 {
			pipe.Do(ctx(t), "CF.ADD", "cf", "c"+strconv.Itoa(i))
		}
		// A sliding window (bfserver's own type) holding its last 5,000.
		pipe.Do(ctx(t), "BFX.WRESERVE", "events", "0.01", "COUNT", "5000")
		wmadd := []any{"BFX.WMADD", "events"}
		for i := range 20000 {
			wmadd = append(wmadd, "e"+strconv.Itoa(i))
		}
		pipe.Do(ctx(t), wmadd...)
		pipe.Do(ctx(t), "BF.RESERVE", "full", "0.01", "1000", "NONSCALING")
		madd := []any{"BF.MADD", "full"}
		for i := range 1100 {
			madd = append(madd, "f"+strconv.Itoa(i))
		}
		pipe.Do(ctx(t), madd...)
		if _, err := pipe.Exec(ctx(t)); err != nil && !strings.Contains(err.Error(), "non scaling filter is full") {
			t.Fatal(err)
		}
		// A filter restored from a dump whose header claims 10,000 items
		// in a link of capacity 1,000 (RedisBloom loads it as it is).
		dump, err := c.Do(ctx(t), "BF.SCANDUMP", "full", 0).Slice()
		if err != nil {
			t.Fatal(err)
		}
		h := []byte(dump[1].(string))
		bin.LittleEndian.PutUint64(h[0:], 10000)     // the chain's items
		bin.LittleEndian.PutUint64(h[20+16:], 10000) // its one link's
		if err := c.Do(ctx(t), "BF.LOADCHUNK", "claims", 1, string(h)).Err(); err != nil {
			t.Fatal(err)
		}
	}
	run := func(t *testing.T, args ...string) string {
		t.Helper()
		httpAddr := freeAddr(t)
		n := start(t, append([]string{"--http-addr", httpAddr}, args...)...)
		waitFor(t, 20e9, "/readyz", func() bool { code, _ := scrape(t, httpAddr, "/readyz"); return code == 200 })
		fill(t, n)
		_, body := scrape(t, httpAddr, "/metrics")
		promtoolCheckMetrics(t, body)
		for series, want := range map[string]float64{
			`bfserver_filters{type="bloom"}`:                      155,
			`bfserver_filters{type="cuckoo"}`:                     1,
			`bfserver_filters_over_capacity{type="bloom"}`:        2, // full, claims
			`bfserver_filters_over_capacity{type="cuckoo"}`:       1,
			`bfserver_filters_rebuild_recommended{type="cuckoo"}`: 1,
			`bfserver_filters{type="window"}`:                     1,
			`bfserver_filters_over_capacity{type="window"}`:       0,
		} {
			if v := metricValue(t, body, series); v != want {
				t.Errorf("%s = %v, want %v", series, v, want)
			}
		}
		return body
	}

	t.Run("default", func(t *testing.T) {
		body := run(t)
		keys := exportedFilters(body)
		if len(keys) != 100 || metricValue(t, body, "bfserver_filters_exported") != 100 {
			t.Fatalf("%d filters exported", len(keys))
		}
		for _, k := range []string{"big-0", "big-1", "big-2", "cf", "full", "claims", "events"} {
			if !keys[k] {
				t.Fatalf("%s, one of the largest, has no series", k)
			}
		}
		for _, series := range []string{`{db="0",key="cf",type="cuckoo"}`, `{db="0",key="claims",type="bloom"}`} {
			if v := metricValue(t, body, "bfserver_filter_rebuild_recommended"+series); v != 1 {
				t.Errorf("rebuild_recommended%s = %v", series, v)
			}
		}
		full := `{db="0",key="full",type="bloom"}`
		if v := metricValue(t, body, "bfserver_filter_rebuild_recommended"+full); v != 0 {
			t.Errorf("a full non-scaling filter at its target rate: rebuild_recommended %v", v)
		}
		if v := metricValue(t, body, "bfserver_filter_fill_ratio"+full); v != 1 {
			t.Errorf("fill ratio of a full filter %v", v)
		}
		if v := metricValue(t, body, "bfserver_filter_target_false_positive_rate"+full); v != 0.01 {
			t.Errorf("target rate %v", v)
		}
		if v := metricValue(t, body, `bfserver_filters_rebuild_recommended{type="bloom"}`); v != 1 {
			t.Errorf("bloom filters to rebuild: %v", v)
		}
		// The window holds about its last 5,000 (l generations: a little
		// more), at about its 1% rate.
		events := `{db="0",key="events",type="window"}`
		if v := metricValue(t, body, "bfserver_filter_items"+events); v < 4750 || v > 5750 {
			t.Errorf("window items %v, want about 5,000", v)
		}
		if v := metricValue(t, body, "bfserver_filter_false_positive_rate"+events); v <= 0 || v > 0.012 {
			t.Errorf("window false-positive rate %v", v)
		}
		if v := metricValue(t, body, `bfserver_filters_rebuild_recommended{type="window"}`); v != 0 {
			t.Errorf("a window at its rate recommended for a rebuild: %v", v)
		}
	})
	t.Run("all", func(t *testing.T) {
		body := run(t, "--metrics-filters", "all")
		if n := len(exportedFilters(body)); n != 157 {
			t.Fatalf("all: %d filters exported", n)
		}
	})
	t.Run("none", func(t *testing.T) {
		body := run(t, "--metrics-filters", "none", "--rebuild-factor", "0.9")
		if strings.Contains(body, "bfserver_filter_items{") || metricValue(t, body, "bfserver_filters_exported") != 0 {
			t.Fatal("none: per-filter series exported")
		}
		if v := metricValue(t, body, `bfserver_filters_rebuild_recommended{type="bloom"}`); v != 2 {
			t.Errorf("at factor 0.9 the full filter is to rebuild too: %v bloom filters", v)
		}
	})
}
