package admin

import (
	"bytes"
	"fmt"
	"math"
	"regexp"
	"strings"
	"testing"

	"github.com/bfserver/bfserver/keyspace"
	"github.com/bfserver/bfserver/scalable"
	"github.com/bfserver/bfserver/sketch/window"
)

func bloom(t *testing.T, capacity uint64, errRate float64, nonScaling bool, items int) *keyspace.Value {
	t.Helper()
	c, err := scalable.NewChain(capacity, errRate, 2, nonScaling, 1<<30)
	if err != nil {
		t.Fatal(err)
	}
	for i := range items {
		if _, err := c.Add(fmt.Appendf(nil, "item-%d", i), 1<<30); err != nil && err != scalable.ErrNonScalingFull {
			t.Fatal(err)
		}
	}
	return keyspace.BloomValue(c)
}

func scrapeKeyspace(k *keyspace.Keyspace, fs *FilterSeries) string {
	var b bytes.Buffer
	writeMetrics(&b, Sources{State: func() *keyspace.Keyspace { return k }, Filters: fs})
	return b.String()
}

var keyLabel = regexp.MustCompile(`(?m)^bfserver_filter_bytes\{db="(\d+)",key="([^"]*)"`)

func exportedKeys(body string) []string {
	var keys []string
	for _, m := range keyLabel.FindAllStringSubmatch(body, -1) {
		keys = append(keys, m[1]+"/"+m[2])
	}
	return keys
}

// TestTopFilters: by default only the 100 largest filters have series of
// their own (ties by db, then key); All and Top 0 export all and none; the
// aggregate series count every filter either way.
func TestTopFilters(t *testing.T) {
	k := keyspace.New()
	for i := range 150 {
		k.Put(uint8(i%3), fmt.Sprintf("tenant-%03d", i), bloom(t, 100, 0.01, false, 0))
	}
	k.Put(5, "big", bloom(t, 10000, 0.01, false, 0))
	body := scrapeKeyspace(k, nil)
	keys := exportedKeys(body)
	if len(keys) != DefaultTopFilters || keys[len(keys)-1] != "5/big" {
		t.Fatalf("%d filters exported, last %v", len(keys), keys[len(keys)-1])
	}
	// 99 of the 150 equal ones: db 0 first (50 of them), then db 1 (49).
	if keys[0] != "0/tenant-000" || keys[49] != "0/tenant-147" || keys[98] != "1/tenant-145" {
		t.Fatalf("ties not broken by db, then key: %v %v %v", keys[0], keys[49], keys[98])
	}
	if !strings.Contains(body, `bfserver_filters{type="bloom"} 151`) || !strings.Contains(body, "bfserver_filters_exported 100\n") {
		t.Fatal("aggregates do not count every filter")
	}
	if n := len(exportedKeys(scrapeKeyspace(k, &FilterSeries{All: true}))); n != 151 {
		t.Fatalf("All exported %d", n)
	}
	none := scrapeKeyspace(k, &FilterSeries{})
	if n := len(exportedKeys(none)); n != 0 || strings.Contains(none, "bfserver_filter_items{") {
		t.Fatalf("Top 0 exported %d", n)
	}
	if !strings.Contains(none, `bfserver_filters_bytes{type="bloom"}`) {
		t.Fatal("no aggregates with Top 0")
	}
	if n := len(exportedKeys(scrapeKeyspace(k, &FilterSeries{Top: 3}))); n != 3 {
		t.Fatalf("Top 3 exported %d", n)
	}
}

// TestEstimates: a scaling chain filled far past its first link stays
// below its error rate (each link halves it); a full non-scaling filter
// reaches it; a Cuckoo filter spread over many sub-filters passes twice
// its nominal rate and is recommended for a rebuild; counters that claim
// more items than the links hold do too.
func TestEstimates(t *testing.T) {
	grown, _ := describe(bloom(t, 100, 0.01, false, 5000), 2, 0)
	if grown.target != 0.01 || grown.fpr >= 0.01 || grown.rebuild || !grown.over || grown.initial != 100 {
		t.Fatalf("grown chain: %+v", grown)
	}
	full, _ := describe(bloom(t, 1000, 0.01, true, 1100), 2, 0)
	if math.Abs(full.fpr-0.01) > 0.001 || full.rebuild || !full.over {
		t.Fatalf("full non-scaling: %+v", full)
	}
	if f, _ := describe(bloom(t, 1000, 0.01, true, 1100), 0.9, 0); !f.rebuild {
		t.Fatalf("full non-scaling at factor 0.9: %+v", f)
	}
	if f, _ := describe(bloom(t, 1000, 0.01, true, 500), 2, 0); f.over || f.fpr > 0.001 {
		t.Fatalf("half-full: %+v", f)
	}
	// A dump header whose link claims ten times its capacity.
	v := bloom(t, 1000, 0.01, true, 0)
	h := v.Bloom().Header()
	claim := uint64(10000)
	for i := range 8 {
		h[i], h[20+16+i] = byte(claim>>(8*i)), byte(claim>>(8*i))
	}
	loaded, err := scalable.ParseChainHeader(h, 1<<30)
	if err != nil {
		t.Fatal(err)
	}
	if f, _ := describe(keyspace.BloomValue(loaded), 2, 0); !f.rebuild || f.fpr < 0.5 {
		t.Fatalf("overfilled by its counters: %+v", f)
	}

	cf, err := scalable.NewCuckoo(scalable.CuckooParams{Capacity: 64, BucketSize: 2, MaxIterations: 20, Expansion: 1}, 1<<30)
	if err != nil {
		t.Fatal(err)
	}
	cv := keyspace.CuckooValue(cf)
	if f, _ := describe(cv, 2, 0); f.fpr != 0 || f.rebuild || f.initial != 64 {
		t.Fatalf("empty cuckoo: %+v", f)
	}
	for i := range 300 {
		if r := cf.Insert(fmt.Appendf(nil, "c-%d", i), false, 1<<30); r != scalable.Inserted {
			t.Fatalf("insert %d: %v", i, r)
		}
	}
	f, _ := describe(cv, 2, 0)
	if math.Abs(f.target-0.0156) > 0.0001 || !f.rebuild || !f.over || f.fpr <= 2*f.target {
		t.Fatalf("cuckoo over several sub-filters: %+v (%s)", f, cf.Debug())
	}
}

func windowValue(t *testing.T, o window.Options, items int, every int64) *keyspace.Value {
	t.Helper()
	f, err := window.New(o)
	if err != nil {
		t.Fatal(err)
	}
	now := o.Now
	for i := range items {
		f.Add(fmt.Appendf(nil, "w-%d", i), now)
		now += every
	}
	return keyspace.WindowValue(f)
}

// TestWindowSeries: sliding windows (BFX.W*) are in the filter series as
// type "window": counted in the aggregates, each with its capacity (its
// window), the items its fills say it holds in it, its rate against its
// target; a time window run at five times its capacity is over it and
// recommended for a rebuild, a count window never is.
func TestWindowSeries(t *testing.T) {
	k := keyspace.New()
	k.Put(0, "count", windowValue(t, window.Options{ErrorRate: 0.01, Kind: window.Count, Count: 10_000}, 50_000, 0))
	// 10,000 a minute against a capacity of 2,000: five times over.
	k.Put(0, "time", windowValue(t, window.Options{ErrorRate: 0.01, Kind: window.Time, WindowMs: 60_000, Capacity: 2000, Now: 1}, 30_000, 6))
	k.Put(0, "bloom", bloom(t, 100, 0.01, false, 10))
	defer func(c func() int64) { clock = c }(clock)
	clock = func() int64 { return 1 + 30_000*6 }
	body := scrapeKeyspace(k, nil)
	for _, want := range []string{
		`bfserver_filters{type="window"} 2`,
		`bfserver_filters_over_capacity{type="window"} 1`,
		`bfserver_filters_rebuild_recommended{type="window"} 1`,
		`bfserver_filter_capacity{db="0",key="count",type="window"} 10000`,
		`bfserver_filter_target_false_positive_rate{db="0",key="time",type="window"} 0.01`,
		`bfserver_filter_rebuild_recommended{db="0",key="count",type="window"} 0`,
		`bfserver_filter_rebuild_recommended{db="0",key="time",type="window"} 1`,
		`bfserver_filters{type="bloom"} 1`,
	} {
		if !strings.Contains(body, want+"\n") {
			t.Errorf("no %q in the scrape", want)
		}
	}
	count, _ := describe(k.Lookup(0, []byte("count"), 0), 2, 0)
	in := k.Lookup(0, []byte("count"), 0).Window().Info(0)
	if held := float64(uint64(in.L-1)*in.GenerationSize + in.InsertsInGeneration); math.Abs(count.items-held) > 0.05*held ||
		count.fpr > 0.012 || count.over || count.bytes != float64(in.MemoryBytes) {
		t.Fatalf("count window: %+v (holds %d generations of %d)", count, in.L, in.GenerationSize)
	}
	if !regexp.MustCompile(`(?m)^bfserver_filter_items\{db="0",key="time",type="window"\} [0-9.e+]+$`).MatchString(body) {
		t.Fatal("no items series for the time window")
	}
}
