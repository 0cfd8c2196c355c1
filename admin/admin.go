// Package admin serves the operators' HTTP endpoints: /metrics in the
// Prometheus text format, /healthz (the process is alive) and /readyz (the
// state is loaded and a leader is known).
//
// Per-filter series are computed at scrape time from each filter's own
// counters (no scan of bit arrays), so a scrape costs O(keys).
package admin

import (
	"fmt"
	"io"
	"math"
	"net/http"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/bfserver/bfserver/keyspace"
	"github.com/bfserver/bfserver/resp"
)

// Sources is what the endpoints report on. Fields left nil are skipped.
type Sources struct {
	// Server is the RESP server (command, client and negative counters).
	Server *resp.Server
	// State returns the keyspace to describe.
	State func() *keyspace.Keyspace
	// Replication returns INFO replication's fields, if the node replicates.
	Replication func() [][2]string
	// Ready reports whether the node can serve (state loaded, leader known,
	// its log applies and its disk takes writes), and why not.
	Ready func() (bool, string)
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
			for i, le := range resp.LatencyBuckets {
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
		writeFilters(m, src.State())
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

// filterStat is one filter's series.
type filterStat struct {
	db, key, typ                 string
	capacity, items, bytes, fill float64
	fpr                          float64
}

func writeFilters(m *writer, k *keyspace.Keyspace) {
	var stats []filterStat
	for db := uint8(0); db < keyspace.NumDBs; db++ {
		k.Range(db, func(key string, v *keyspace.Value) bool {
			if fs, ok := describe(v); ok {
				fs.db, fs.key = strconv.Itoa(int(db)), key
				stats = append(stats, fs)
			}
			return true
		})
	}
	sort.Slice(stats, func(i, j int) bool { return stats[i].db+stats[i].key < stats[j].db+stats[j].key })
	series := []struct {
		name, help string
		get        func(filterStat) float64
	}{
		{"bfserver_filter_capacity", "Items the filter is sized for (all links or sub-filters).", func(f filterStat) float64 { return f.capacity }},
		{"bfserver_filter_items", "Items the filter holds.", func(f filterStat) float64 { return f.items }},
		{"bfserver_filter_bytes", "Bytes of the filter's arrays and bookkeeping (INFO Size).", func(f filterStat) float64 { return f.bytes }},
		{"bfserver_filter_fill_ratio", "Estimated fraction of bits (Bloom) or slots (Cuckoo) in use.", func(f filterStat) float64 { return f.fill }},
		{"bfserver_filter_false_positive_rate", "Estimated current false-positive rate.", func(f filterStat) float64 { return f.fpr }},
	}
	for _, s := range series {
		m.header(s.name, "gauge", s.help)
		for _, f := range stats {
			m.sample(s.name, `db="`+f.db+`",key="`+label(f.key)+`",type="`+f.typ+`"`, s.get(f))
		}
	}
}

// describe estimates a filter's fill and false-positive rate from its
// parameters and item counts: a Bloom link of m bits, k hashes and n items
// has (1−e^(−kn/m)) of its bits set and answers a stranger positive with
// that to the k; a chain is positive if any link is. A Cuckoo lookup checks
// 2·b slots, each holding a matching 8-bit fingerprint with probability
// load/255.
func describe(v *keyspace.Value) (filterStat, bool) {
	switch v.Kind {
	case keyspace.KindBloom:
		f := filterStat{typ: "bloom", bytes: float64(v.Bloom.MemUsage())}
		pass := 1.0
		var bits, set float64
		for _, l := range v.Bloom.Links() {
			f.capacity += float64(l.Entries)
			f.items += float64(l.Size())
			k, mbits, n := float64(l.Hashes), float64(l.Bits), float64(l.Size())
			frac := 1 - math.Exp(-k*n/mbits)
			bits += mbits
			set += frac * mbits
			pass *= 1 - math.Pow(frac, k)
		}
		f.fill = set / bits
		f.fpr = 1 - pass
		return f, true
	case keyspace.KindCuckoo:
		i := v.Cuckoo.Info()
		slots := float64(i.Slots)
		f := filterStat{typ: "cuckoo", bytes: float64(i.Size), items: float64(i.NumItems), capacity: slots}
		if slots > 0 {
			f.fill = float64(i.NumItems) / slots
		}
		f.fpr = math.Min(1, 1-math.Pow(1-1.0/255, 2*float64(i.BucketSize)*f.fill*float64(i.NumFilters)))
		return f, true
	}
	return filterStat{}, false
}
