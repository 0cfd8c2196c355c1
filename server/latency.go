package server

import (
	"fmt"
	"math"
	"strings"
	"sync"
	"time"
)

// LATENCY: with latency-monitor-threshold set (milliseconds; 0 is off),
// every command that ran at least that long adds a sample to its event,
// "command" or "fast-command" (commands flagged fast), as Redis's latency
// monitor does; a second keeps its worst sample, and an event keeps its
// last 160 seconds with samples and its all-time maximum.

const latencyTSLen = 160

type latencySample struct{ at, ms int64 }

type latencySeries struct {
	samples [latencyTSLen]latencySample
	idx     int
	max     int64
}

type latencyMonitor struct {
	mu     sync.Mutex
	events map[string]*latencySeries
}

func (m *latencyMonitor) add(event string, now, ms int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.events == nil {
		m.events = map[string]*latencySeries{}
	}
	ts := m.events[event]
	if ts == nil {
		ts = &latencySeries{}
		m.events[event] = ts
	}
	ts.max = max(ts.max, ms)
	prev := &ts.samples[(ts.idx+latencyTSLen-1)%latencyTSLen]
	if prev.at == now {
		prev.ms = max(prev.ms, ms)
		return
	}
	ts.samples[ts.idx] = latencySample{now, ms}
	ts.idx = (ts.idx + 1) % latencyTSLen
}

// ordered is the series' samples, oldest first.
func (ts *latencySeries) ordered() []latencySample {
	var out []latencySample
	for j := range latencyTSLen {
		if s := ts.samples[(ts.idx+j)%latencyTSLen]; s.at != 0 {
			out = append(out, s)
		}
	}
	return out
}

func registerLatency() {
	conn("latency", -2, nil, nil, nil).subs = map[string]*spec{
		"latest":    {name: "latest", arity: 2, run: cmdLatencyLatest},
		"history":   {name: "history", arity: 3, run: cmdLatencyHistory},
		"reset":     {name: "reset", arity: -2, run: cmdLatencyReset},
		"doctor":    {name: "doctor", arity: 2, run: cmdLatencyDoctor},
		"graph":     {name: "graph", arity: 3, run: cmdLatencyGraph},
		"histogram": {name: "histogram", arity: -2, run: cmdLatencyHistogram},
		"help":      {name: "help", arity: 2, run: func(s *session, a [][]byte) { writeHelp(&s.w, latencyHelp) }},
	}
}

func cmdLatencyLatest(s *session, a [][]byte) {
	m := &s.srv.adm.latency
	m.mu.Lock()
	defer m.mu.Unlock()
	names := sortedKeys(m.events)
	s.w.Array(len(names))
	for _, n := range names {
		ts := m.events[n]
		last := ts.samples[(ts.idx+latencyTSLen-1)%latencyTSLen]
		s.w.Array(4)
		s.w.BulkString(n)
		s.w.Int(last.at)
		s.w.Int(last.ms)
		s.w.Int(ts.max)
	}
}

func cmdLatencyHistory(s *session, a [][]byte) {
	m := &s.srv.adm.latency
	m.mu.Lock()
	defer m.mu.Unlock()
	ts := m.events[string(a[2])]
	if ts == nil {
		s.w.Array(0)
		return
	}
	samples := ts.ordered()
	s.w.Array(len(samples))
	for _, x := range samples {
		s.w.Array(2)
		s.w.Int(x.at)
		s.w.Int(x.ms)
	}
}

func cmdLatencyReset(s *session, a [][]byte) {
	m := &s.srv.adm.latency
	m.mu.Lock()
	defer m.mu.Unlock()
	n := 0
	if len(a) == 2 {
		n = len(m.events)
		m.events = nil
	} else {
		for _, e := range a[2:] {
			if _, ok := m.events[string(e)]; ok {
				delete(m.events, string(e))
				n++
			}
		}
	}
	s.w.Int(int64(n))
}

func cmdLatencyGraph(s *session, a [][]byte) {
	m := &s.srv.adm.latency
	m.mu.Lock()
	defer m.mu.Unlock()
	event := string(a[2])
	ts := m.events[event]
	if ts == nil {
		s.w.Error("ERR No samples available for event '" + sanitize(event, 128) + "'")
		return
	}
	s.w.Verbatim(latencyGraph(event, ts, time.Now().Unix()))
}

// latencyGraph is Redis's sparkline of an event's samples: 80 columns,
// 4 rows, each sample labelled with how long ago it was taken.
func latencyGraph(event string, ts *latencySeries, now int64) string {
	samples := ts.ordered()
	var lo, hi int64
	labels := make([]string, len(samples))
	for i, x := range samples {
		if i == 0 {
			lo, hi = x.ms, x.ms
		}
		lo, hi = min(lo, x.ms), max(hi, x.ms)
		el := now - x.at
		switch {
		case el < 60:
			labels[i] = fmt.Sprintf("%ds", el)
		case el < 3600:
			labels[i] = fmt.Sprintf("%dm", el/60)
		case el < 86400:
			labels[i] = fmt.Sprintf("%dh", el/3600)
		default:
			labels[i] = fmt.Sprintf("%dd", el/86400)
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s - high %d ms, low %d ms (all time high %d ms)\n", event, hi, lo, ts.max)
	b.WriteString(strings.Repeat("-", 80) + "\n")
	const cols, rows = 80, 4
	for j := 0; j < len(samples); j += cols {
		if j != 0 {
			b.WriteByte('\n')
		}
		end := min(j+cols, len(samples))
		sparkline(&b, samples[j:end], labels[j:end], lo, hi, rows)
	}
	return b.String()
}

// sparkline renders samples as Redis's sparklineRenderRange does with
// SPARKLINE_FILL: rows of "_o#" (and "|" below them), a blank line, then
// the labels written downwards.
func sparkline(b *strings.Builder, samples []latencySample, labels []string, lo, hi int64, rows int) {
	const charset = "_o#"
	rel := float64(hi - lo)
	if rel == 0 {
		rel = 1
	}
	steps := len(charset) * rows
	line := make([]byte, len(samples))
	for row := 0; ; row++ {
		more := false
		for j := range line {
			line[j] = ' '
		}
		for j, x := range samples {
			step := int(float64(int(float64(x.ms-lo)*float64(steps))) / rel)
			step = max(0, min(step, steps-1))
			if row < rows {
				more = true
				switch idx := step - (rows-row-1)*len(charset); {
				case idx >= 0 && idx < len(charset):
					line[j] = charset[idx]
				case idx >= len(charset):
					line[j] = '|'
				}
				continue
			}
			if row-rows < 1 { // the margin above the labels
				more = true
				break
			}
			if c := row - rows - 1; c < len(labels[j]) {
				more = true
				line[j] = labels[j][c]
			}
		}
		if !more {
			return
		}
		b.Write(line)
		b.WriteByte('\n')
	}
}

// cmdLatencyHistogram is LATENCY HISTOGRAM [command ...]: per command, its
// calls and the cumulative count of runs at most 1, 2, 4, … microseconds
// long, since start or CONFIG RESETSTAT.
func cmdLatencyHistogram(s *session, a [][]byte) {
	type entry struct {
		name string
		h    *latencyHist
	}
	var list []entry
	if len(a) == 2 {
		eachStat(func(full string, sp *spec) {
			if h := s.srv.histOf(sp); h != nil {
				list = append(list, entry{full, h})
			}
		})
	} else {
		seen := map[string]bool{}
		for _, n := range a[2:] {
			sp, full := lookupFull(n)
			if sp == nil || seen[full] {
				continue
			}
			seen[full] = true
			if h := s.srv.histOf(sp); h != nil {
				list = append(list, entry{full, h})
			}
		}
	}
	s.w.Map(len(list))
	for _, e := range list {
		calls, bounds, cum := e.h.powersOfTwo()
		s.w.BulkString(e.name)
		s.w.Map(2)
		s.w.BulkString("calls")
		s.w.Int(calls)
		s.w.BulkString("histogram_usec")
		s.w.Map(len(bounds))
		for i := range bounds {
			s.w.Int(bounds[i])
			s.w.Int(cum[i])
		}
	}
}

func cmdLatencyDoctor(s *session, a [][]byte) {
	s.w.Verbatim(s.srv.latencyReport())
}

// latencyReport is LATENCY DOCTOR's text, in Redis's words for the events
// this server records.
func (s *Server) latencyReport() string {
	threshold := s.adm.latencyMs.Load()
	m := &s.adm.latency
	m.mu.Lock()
	defer m.mu.Unlock()
	if threshold == 0 && len(m.events) == 0 {
		return "I'm sorry, Dave, I can't do that. Latency monitoring is disabled in this Redis instance. You may use \"CONFIG SET latency-monitor-threshold <milliseconds>.\" in order to enable it. If we weren't in a deep space mission I'd suggest to take a look at https://redis.io/topics/latency-monitor.\n"
	}
	var b strings.Builder
	now := time.Now().Unix()
	slower, slowMax := s.adm.slowlogSlower.Load(), s.adm.slowlogMax.Load()
	var slowEnable, slowTune, slowInspect, large, scheduler bool
	advices, n := 0, 0
	for _, name := range sortedKeys(m.events) {
		ts := m.events[name]
		samples := ts.ordered()
		if len(samples) == 0 {
			continue
		}
		if n == 0 {
			b.WriteString("Dave, I have observed latency spikes in this Redis instance. You don't mind talking about it, do you Dave?\n\n")
		}
		n++
		var sum, oldest int64
		for _, x := range samples {
			sum += x.ms
			if oldest == 0 || x.at < oldest {
				oldest = x.at
			}
		}
		avg := sum / int64(len(samples))
		period := max(now-oldest, 1)
		var dev int64
		for _, x := range samples {
			dev += int64(math.Abs(float64(avg - x.ms)))
		}
		mad := dev / int64(len(samples))
		fmt.Fprintf(&b, "%d. %s: %d latency spikes (average %dms, mean deviation %dms, period %.2f sec). Worst all time event %dms.\n",
			n, name, len(samples), avg, mad, float64(period)/float64(len(samples)), ts.max)
		switch name {
		case "command":
			if slower < 0 || slowMax == 0 {
				slowEnable = true
				advices++
			} else if slower/1000 > threshold {
				slowTune = true
				advices++
			}
			slowInspect, large = true, true
			advices += 2
		case "fast-command":
			scheduler = true
			advices++
		}
	}
	if n == 0 {
		return "Dave, no latency spike was observed during the lifetime of this Redis instance, not in the slightest bit. I honestly think you ought to sit down calmly, take a stress pill, and think things over.\n"
	}
	if advices == 0 {
		b.WriteString("\nWhile there are latency events logged, I'm not able to suggest any easy fix. Please use the Redis community to get some help, providing this report in your help request.\n")
		return b.String()
	}
	b.WriteString("\nI have a few advices for you:\n\n")
	if slowEnable {
		fmt.Fprintf(&b, "- There are latency issues with potentially slow commands you are using. Try to enable the Slow Log Redis feature using the command 'CONFIG SET slowlog-log-slower-than %d'. If the Slow log is disabled Redis is not able to log slow commands execution for you.\n", threshold*1000)
	}
	if slowTune {
		fmt.Fprintf(&b, "- Your current Slow Log configuration only logs events that are slower than your configured latency monitor threshold. Please use 'CONFIG SET slowlog-log-slower-than %d'.\n", threshold*1000)
	}
	if slowInspect {
		b.WriteString("- Check your Slow Log to understand what are the commands you are running which are too slow to execute. Please check https://redis.io/commands/slowlog for more information.\n")
	}
	if scheduler {
		b.WriteString("- The system is slow to execute Redis code paths not containing system calls. This usually means the system does not provide Redis CPU time to run for long periods. You should try to:\n" +
			"  1) Lower the system load.\n" +
			"  2) Use a computer / VM just for Redis if you are running other software in the same system.\n" +
			"  3) Check if you have a \"noisy neighbour\" problem.\n" +
			"  4) Check with 'redis-cli --intrinsic-latency 100' what is the intrinsic latency in your system.\n")
	}
	if large {
		b.WriteString("- Deleting, expiring or evicting (because of maxmemory policy) large objects is a blocking operation. If you have very large objects that are often deleted, expired, or evicted, try to fragment those objects into multiple smaller objects.\n")
	}
	return b.String()
}

var latencyHelp = []string{
	"LATENCY <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
	"DOCTOR",
	"    Return a human readable latency analysis report.",
	"GRAPH <event>",
	"    Return an ASCII latency graph for the <event> class.",
	"HISTORY <event>",
	"    Return time-latency samples for the <event> class.",
	"LATEST",
	"    Return the latest latency samples for all events.",
	"RESET [<event> ...]",
	"    Reset latency data of one or more <event> classes.",
	"    (default: reset all data for all event classes)",
	"HISTOGRAM [COMMAND ...]",
	"    Return a cumulative distribution of latencies in the format of a histogram for the specified command names.",
	"    If no commands are specified then all histograms are replied.",
	"HELP",
	"    Print this help.",
}
