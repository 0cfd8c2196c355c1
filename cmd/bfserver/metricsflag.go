package main

import (
	"flag"
	"fmt"
	"math"
	"strconv"

	"github.com/bfserver/bfserver/admin"
)

// metricsConfig holds the /metrics settings: which filters get series of
// their own, and when a filter is recommended for a rebuild.
type metricsConfig struct {
	filters metricsFilters
	rebuild rebuildFactor
}

// addMetricsFlags registers --metrics-filters and --rebuild-factor (so
// also BFSERVER_METRICS_FILTERS, BFSERVER_REBUILD_FACTOR and config-file
// lines) with their defaults.
func addMetricsFlags(fs *flag.FlagSet, m *metricsConfig) {
	m.filters = metricsFilters{top: admin.DefaultTopFilters}
	m.rebuild = admin.DefaultRebuildFactor
	fs.Var(&m.filters, "metrics-filters", "per-filter /metrics series: N (the N largest filters by bytes), all or none; the totals by type always count every filter")
	fs.Var(&m.rebuild, "rebuild-factor", "bfserver_filter_rebuild_recommended is 1 once a filter's estimated false-positive rate passes this multiple of its target")
}

// series is the admin option.
func (m *metricsConfig) series() *admin.FilterSeries {
	return &admin.FilterSeries{Top: m.filters.top, All: m.filters.all, RebuildFactor: float64(m.rebuild)}
}

type metricsFilters struct {
	top int
	all bool
}

func (f *metricsFilters) String() string {
	switch {
	case f.all:
		return "all"
	case f.top == 0:
		return "none"
	}
	return strconv.Itoa(f.top)
}

func (f *metricsFilters) Set(v string) error {
	switch v {
	case "all":
		*f = metricsFilters{all: true}
		return nil
	case "none":
		*f = metricsFilters{}
		return nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		return fmt.Errorf("want a count, all or none")
	}
	*f = metricsFilters{top: n}
	return nil
}

type rebuildFactor float64

func (r *rebuildFactor) String() string { return strconv.FormatFloat(float64(*r), 'g', -1, 64) }

func (r *rebuildFactor) Set(v string) error {
	x, err := strconv.ParseFloat(v, 64)
	if err != nil || !(x > 0) || math.IsInf(x, 0) {
		return fmt.Errorf("want a number above 0")
	}
	*r = rebuildFactor(x)
	return nil
}
