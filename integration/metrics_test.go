package integration

import (
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
