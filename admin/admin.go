// Package admin serves the operators' HTTP endpoints: /metrics in the
// Prometheus text format, /healthz (the process is alive) and /readyz (the
// state is loaded and a leader is known).
//
// Per-filter series are computed at scrape time from each filter's own
// counters (no scan of bit arrays), so a scrape costs O(keys). With a
// filter per tenant the keys grow without bound, so per-filter series are
// written only for the largest filters (FilterSeries); the aggregate
// series by type count every filter.
package admin

import (
	"container/heap"
	"fmt"
	"io"
	"math"
	"net/http"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/bfserver/bfserver/keyspace"
	"github.com/bfserver/bfserver/scalable"
	"github.com/bfserver/bfserver/server"
)

// Sources is what the endpoints report on. Fields left nil are skipped.
type Sources struct {
	// Server is the RESP server (command, client and negative counters).
	Server *server.Server
	// State returns the keyspace to describe.
	State func() *keyspace.Keyspace
	// Replication returns INFO replication's fields, if the node replicates.
	Replication func() [][2]string
	// Ready reports whether the node can serve (state loaded, leader known,
	// its log applies and its disk takes writes), and why not.
	Ready func() (bool, string)
	// Filters bounds the per-filter series; nil is DefaultFilterSeries.
	Filters *FilterSeries
}

// Handler returns the mux serving /metrics, /healthz and /readyz.
func Handler(src Sources) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "ok\n")
	})
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, r *http.Request) {
		if src.Ready != nil {
			if ok, why := src.Ready(); !ok {
				http.Error(w, "not ready: "+why+"\n", http.StatusServiceUnavailable)
				return
			}
		}
		io.WriteString(w, "ready\n")
	})
	mux.HandleFunc("/metrics", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
		writeMetrics(w, src)
	})
	return mux
}

// label escapes a label value as the text format requires; bytes that are
// not UTF-8 are written as \xHH so every key yields a valid series.
func label(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			fmt.Fprintf(&b, "\\\\x%02x", s[i])
		case r == '\\':
			b.WriteString(`\\`)
		case r == '"':
			b.WriteString(`\"`)
		case r == '\n':
			b.WriteString(`\n`)
		default:
			b.WriteString(s[i : i+size])
		}
		i += size
	}
	return b.String()
}

type writer struct {
	w    io.Writer
	seen map[string]bool
}

func (m *writer) header(name, typ, help string) {
	if !m.seen[name] {
		m.seen[name] = true
		fmt.Fprintf(m.w, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, typ)
	}
}

func (m *writer) sample(name, labels string, v float64) {
	if labels != "" {
		labels = "{" + labels + "}"
	}
	fmt.Fprintf(m.w, "%s%s %s\n", name, labels, strconv.FormatFloat(v, 'g', -1, 64))
}

func writeMetrics(w io.Writer, src Sources) {
	m := &writer{w: w, seen: map[string]bool{}}
	ready := true
	if src.Ready != nil {
		ready, _ = src.Ready()
	}
	m.header("bfserver_ready", "gauge", "1 while /readyz answers 200: the state is loaded, a leader is known, the log applies and the disk takes writes.")
	m.sample("bfserver_ready", "", b2f(ready))
	if s := src.Server; s != nil {
		m.header("bfserver_connected_clients", "gauge", "Clients connected now.")
		m.sample("bfserver_connected_clients", "", float64(s.Clients()))
		m.header("bfserver_rejected_connections_total", "counter", "Connections refused at maxclients.")
		m.sample("bfserver_rejected_connections_total", "", float64(s.Rejected()))
		m.header("bfserver_negatives_total", "counter", "Membership checks answered \"definitely not\".")
		m.sample("bfserver_negatives_total", "", float64(s.Negatives()))
		stats := s.CommandStats()
		m.header("bfserver_commands_total", "counter", "Commands executed, by name.")
		for _, c := range stats {
			m.sample("bfserver_commands_total", `command="`+label(c.Name)+`"`, float64(c.Calls))
		}
		m.header("bfserver_command_errors_total", "counter", "Commands that answered an error, by name.")
		for _, c := range stats {
			m.sample("bfserver_command_errors_total", `command="`+label(c.Name)+`"`, float64(c.Errors))
		}
		m.header("bfserver_command_duration_seconds", "histogram", "Time from receiving a command to writing its reply.")
		for _, c := range stats {
			l := `command="` + label(c.Name) + `"`
			for i, le := range server.LatencyBuckets {
				m.sample("bfserver_command_duration_seconds_bucket", l+`,le="`+strconv.FormatFloat(le, 'g', -1, 64)+`"`, float64(c.BucketCounts[i]))
			}
			m.sample("bfserver_command_duration_seconds_bucket", l+`,le="+Inf"`, float64(c.Calls))
			m.sample("bfserver_command_duration_seconds_sum", l, c.Seconds)
			m.sample("bfserver_command_duration_seconds_count", l, float64(c.Calls))
		}
	}
	if src.Replication != nil {
		info := map[string]string{}
		for _, f := range src.Replication() {
			info[f[0]] = f[1]
		}
		m.header("bfserver_raft_leader", "gauge", "1 if this node is the Raft leader.")
		m.sample("bfserver_raft_leader", "", b2f(info["raft_role"] == "leader"))
		m.header("bfserver_raft_role", "gauge", "This node's Raft role (1 for the current one).")
		for _, role := range []string{"leader", "follower", "candidate", "shutdown"} {
			m.sample("bfserver_raft_role", `role="`+role+`"`, b2f(info["raft_role"] == role))
		}
		for _, f := range []struct{ key, name, help string }{
			{"raft_term", "bfserver_raft_term", "Current Raft term."},
			{"commit_index", "bfserver_raft_commit_index", "Highest log index known committed."},
			{"applied_index", "bfserver_raft_applied_index", "Highest log index applied to this node's state."},
			{"last_log_index", "bfserver_raft_last_log_index", "Last index in this node's log."},
			{"raft_num_members", "bfserver_raft_members", "Voters in the cluster."},
		} {
			v, _ := strconv.ParseFloat(info[f.key], 64)
			m.header(f.name, "gauge", f.help)
			m.sample(f.name, "", v)
		}
	}
	if src.State != nil {
		fs := DefaultFilterSeries()
		if src.Filters != nil {
			fs = *src.Filters
		}
		writeFilters(m, src.State(), fs)
	}
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	m.header("bfserver_heap_bytes", "gauge", "Bytes of allocated heap objects.")
	m.sample("bfserver_heap_bytes", "", float64(ms.HeapAlloc))
}

func b2f(v bool) float64 {
	if v {
		return 1
	}
	return 0
}

// FilterSeries says which filters get series of their own, labelled by
// key, and when a filter is worth rebuilding.
type FilterSeries struct {
	// Top is how many filters, the largest by bytes (ties by db, then key),
	// get per-filter series. 0 exports none.
	Top int
	// All exports every filter; Top is then ignored.
	All bool
	// RebuildFactor: a filter whose estimated false-positive rate passes
	// RebuildFactor × its target rate is recommended for a rebuild. 0 is
	// DefaultRebuildFactor.
	RebuildFactor float64
}

// Defaults of FilterSeries.
const (
	DefaultTopFilters    = 100
	DefaultRebuildFactor = 2
)

// DefaultFilterSeries is the top 100 filters, rebuild at twice the target.
func DefaultFilterSeries() FilterSeries {
	return FilterSeries{Top: DefaultTopFilters, RebuildFactor: DefaultRebuildFactor}
}

// filterStat is one filter's figures.
type filterStat struct {
	db           uint8
	key, typ     string
	capacity     float64 // items all links or sub-filters are sized for
	initial      float64 // the capacity it was created with
	items, bytes float64
	fpr, target  float64
	rebuild      bool
	over         bool // holds at least its initial capacity
}

// bigger orders filters for the top N: more bytes first, then db, then key.
func bigger(a, b *filterStat) bool {
	if a.bytes != b.bytes {
		return a.bytes > b.bytes
	}
	if a.db != b.db {
		return a.db < b.db
	}
	return a.key < b.key
}

// smallest is a min-heap under bigger: its root is the first to drop.
type smallest []*filterStat

func (h smallest) Len() int           { return len(h) }
func (h smallest) Less(i, j int) bool { return bigger(h[j], h[i]) }
func (h smallest) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *smallest) Push(x any)        { *h = append(*h, x.(*filterStat)) }
func (h *smallest) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// clock is the scrape's time in unix ms (a test sets it).
var clock = func() int64 { return time.Now().UnixMilli() }

// filterTypes are the type labels of the filter series: RedisBloom's
// two, and bfserver's sliding windows (BFX.W*).
var filterTypes = []string{"bloom", "cuckoo", "window"}

// typeTotals are the aggregate series of one filter type.
type typeTotals struct {
	count, bytes, items, over, rebuild float64
}

func writeFilters(m *writer, k *keyspace.Keyspace, opts FilterSeries) {
	factor := opts.RebuildFactor
	if !(factor > 0) {
		factor = DefaultRebuildFactor
	}
	totals := map[string]*typeTotals{}
	for _, typ := range filterTypes {
		totals[typ] = &typeTotals{}
	}
	var top smallest
	// A time window ages by the clock: a scrape describes it as of now, by
	// this node's clock (an observation, not the log's state).
	now := clock()
	for db := uint8(0); db < keyspace.NumDBs; db++ {
		k.Range(db, func(key string, v *keyspace.Value) bool {
			f, ok := describe(v, factor, now)
			if !ok {
				return true
			}
			f.db, f.key = db, key
			t := totals[f.typ]
			t.count++
			t.bytes += f.bytes
			t.items += f.items
			t.over += b2f(f.over)
			t.rebuild += b2f(f.rebuild)
			switch {
			case opts.All:
				top = append(top, &f)
			case opts.Top <= 0:
			case len(top) < opts.Top:
				heap.Push(&top, &f)
			case bigger(&f, top[0]):
				top[0] = &f
				heap.Fix(&top, 0)
			}
			return true
		})
	}
	aggregates := []struct {
		name, help string
		get        func(*typeTotals) float64
	}{
		{"bfserver_filters", "Filters, by type.", func(t *typeTotals) float64 { return t.count }},
		{"bfserver_filters_bytes", "Bytes of all filters, by type.", func(t *typeTotals) float64 { return t.bytes }},
		{"bfserver_filters_items", "Items in all filters, by type.", func(t *typeTotals) float64 { return t.items }},
		{"bfserver_filters_over_capacity", "Filters holding at least the capacity they were created with (a Bloom chain's first link, a Cuckoo filter's first sub-filter): they grew, or refuse adds if they cannot; windows whose current generation took more inserts than its share of the capacity.", func(t *typeTotals) float64 { return t.over }},
		{"bfserver_filters_rebuild_recommended", "Filters whose estimated false-positive rate passes the rebuild factor times their target.", func(t *typeTotals) float64 { return t.rebuild }},
	}
	for _, a := range aggregates {
		m.header(a.name, "gauge", a.help)
		for _, typ := range filterTypes {
			m.sample(a.name, `type="`+typ+`"`, a.get(totals[typ]))
		}
	}
	m.header("bfserver_filters_exported", "gauge", "Filters that have per-filter series in this scrape (see --metrics-filters).")
	m.sample("bfserver_filters_exported", "", float64(len(top)))
	m.header("bfserver_filter_rebuild_factor", "gauge", "A filter is recommended for a rebuild past this multiple of its target false-positive rate.")
	m.sample("bfserver_filter_rebuild_factor", "", factor)
	if len(top) == 0 {
		return
	}
	sort.Slice(top, func(i, j int) bool {
		if top[i].db != top[j].db {
			return top[i].db < top[j].db
		}
		return top[i].key < top[j].key
	})
	series := []struct {
		name, help string
		get        func(*filterStat) float64
	}{
		{"bfserver_filter_capacity", "Items the filter is sized for (all links or sub-filters; a window: in its window).", func(f *filterStat) float64 { return f.capacity }},
		{"bfserver_filter_initial_capacity", "Items the filter was created for (its first link or sub-filter).", func(f *filterStat) float64 { return f.initial }},
		{"bfserver_filter_items", "Items the filter holds (a window: estimated from its fills, in its window).", func(f *filterStat) float64 { return f.items }},
		{"bfserver_filter_bytes", "Bytes of the filter's arrays and bookkeeping (INFO Size).", func(f *filterStat) float64 { return f.bytes }},
		{"bfserver_filter_fill_ratio", "Items over capacity.", func(f *filterStat) float64 { return safeDiv(f.items, f.capacity) }},
		{"bfserver_filter_false_positive_rate", "Estimated current false-positive rate.", func(f *filterStat) float64 { return f.fpr }},
		{"bfserver_filter_target_false_positive_rate", "The rate the filter was created for (Bloom: its error rate; Cuckoo: one full sub-filter's).", func(f *filterStat) float64 { return f.target }},
		{"bfserver_filter_rebuild_recommended", "1 when the estimated false-positive rate passes the rebuild factor times the target.", func(f *filterStat) float64 { return b2f(f.rebuild) }},
	}
	for _, s := range series {
		m.header(s.name, "gauge", s.help)
		for _, f := range top {
			m.sample(s.name, `db="`+strconv.Itoa(int(f.db))+`",key="`+label(f.key)+`",type="`+f.typ+`"`, s.get(f))
		}
	}
}

func safeDiv(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return a / b
}

// describe estimates a filter's false-positive rate from its parameters
// and item counts, without reading its bits. A Bloom link of m bits, k
// hashes and n items has a fraction p = 1−e^(−kn/m) of its bits set and
// answers a stranger positive with probability p^k; a chain is positive if
// any link is: 1 − Π(1 − p_i^k). A Cuckoo lookup compares 2·b slots of
// each sub-filter, each holding one of 255 8-bit fingerprints with
// probability load; over f sub-filters at the filter's mean load that is
// 1 − (1 − 1/255)^(2·b·load·f). A window reports its own (BFX.WINFO's,
// from the set bits it counts per slice) as of now.
func describe(v *keyspace.Value, factor float64, now int64) (filterStat, bool) {
	var f filterStat
	switch v.Kind {
	case keyspace.KindBloom:
		var one [1]*scalable.Link
		links := v.Bloom().LinksIn(&one)
		f = filterStat{typ: "bloom", bytes: float64(v.Bloom().MemUsage()), target: v.Bloom().ErrorRate(),
			initial: float64(links[0].Entries)}
		pass := 1.0
		for _, l := range links {
			f.capacity += float64(l.Entries)
			f.items += float64(l.Size())
			k, mbits, n := float64(l.Hashes), float64(l.Bits), float64(l.Size())
			pass *= 1 - math.Pow(1-math.Exp(-k*n/mbits), k)
		}
		f.fpr = 1 - pass
	case keyspace.KindCuckoo:
		i := v.Cuckoo().Info()
		slots := float64(i.Slots)
		f = filterStat{typ: "cuckoo", bytes: float64(i.Size), items: float64(i.NumItems), capacity: slots,
			initial: float64(i.NumBuckets) * float64(i.BucketSize), target: scalable.CuckooErrorRate(i.BucketSize)}
		load := safeDiv(f.items, slots)
		f.fpr = math.Min(1, 1-math.Pow(1-1.0/255, 2*float64(i.BucketSize)*load*float64(i.NumFilters)))
	case keyspace.KindWindow:
		i := v.Window().Info(now)
		f = filterStat{typ: "window", bytes: float64(i.MemoryBytes), items: i.Items, capacity: float64(i.Capacity),
			initial: float64(i.Capacity), target: i.ErrorRate, fpr: i.EstimatedFP}
		// Over: the current generation took more inserts than its share of
		// the capacity (only a KEEPTIME time window lets it).
		f.over = i.InsertsInGeneration > i.GenerationSize
		f.rebuild = f.fpr > factor*f.target
		return f, true
	default:
		return filterStat{}, false
	}
	f.over = f.initial > 0 && f.items >= f.initial
	f.rebuild = f.fpr > factor*f.target
	return f, true
}
