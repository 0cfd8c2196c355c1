package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/bfserver/bfserver/admin"
)

// TestMetricsFlags: --metrics-filters and --rebuild-factor default to the
// top 100 and 2, take all, none or a count, come from the environment and
// the config file like every flag, and refuse nonsense.
func TestMetricsFlags(t *testing.T) {
	quiet := func(args ...string) (*config, error) {
		stderr := os.Stderr
		os.Stderr, _ = os.Open(os.DevNull)
		defer func() { os.Stderr = stderr }()
		return parseFlags(args)
	}
	c, err := quiet()
	if err != nil {
		t.Fatal(err)
	}
	if s := c.metrics.series(); *s != (admin.FilterSeries{Top: 100, RebuildFactor: 2}) {
		t.Fatalf("defaults %+v", *s)
	}
	for arg, want := range map[string]admin.FilterSeries{
		"all":  {All: true, RebuildFactor: 2},
		"none": {RebuildFactor: 2},
		"7":    {Top: 7, RebuildFactor: 2},
	} {
		c, err := quiet("--metrics-filters", arg)
		if err != nil || *c.metrics.series() != want {
			t.Fatalf("--metrics-filters %s: %v %+v", arg, err, c)
		}
	}
	t.Setenv("BFSERVER_REBUILD_FACTOR", "1.5")
	file := filepath.Join(t.TempDir(), "bf.conf")
	os.WriteFile(file, []byte("metrics-filters none\n"), 0o600)
	c, err = quiet("--config", file)
	if err != nil || *c.metrics.series() != (admin.FilterSeries{RebuildFactor: 1.5}) {
		t.Fatalf("env and file: %v %+v", err, c)
	}
	for _, bad := range [][]string{{"--metrics-filters", "-1"}, {"--metrics-filters", "some"}, {"--rebuild-factor", "0"}, {"--rebuild-factor", "-2"}, {"--rebuild-factor", "NaN"}} {
		if _, err := quiet(bad...); err == nil {
			t.Fatalf("%v accepted", bad)
		}
	}
}
