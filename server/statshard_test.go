package server_test

import (
	"fmt"
	"runtime"
	"strings"
	"testing"

	"github.com/bfserver/bfserver/internal/golden"
	"github.com/bfserver/bfserver/server"
)

// TestCommandStatsShards: connections served by different event loops (or
// goroutines) count in different shards of the commands' counters; INFO
// commandstats and latencystats and the metrics sum them exactly, and
// CONFIG RESETSTAT zeroes every shard but never the metrics.
func TestCommandStatsShards(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(4)) // four shards and three loops, whatever the machine
	for _, mode := range ioModes {
		t.Run(string(mode), func(t *testing.T) {
			srv := startServerIn(t, nil, mode)
			admin := dial(t, srv)
			admin.run(t, "BF.ADD", "k", "a")
			// run pipelines n BF.EXISTS and failed BF.INFO of a missing key.
			run := func(cl *client, n, failed int) {
				var pipe []byte
				for i := range n {
					pipe = append(pipe, golden.Encode(argv("BF.EXISTS", "k", fmt.Sprint(i)))...)
				}
				for range failed {
					pipe = append(pipe, golden.Encode(argv("BF.INFO", "nosuch"))...)
				}
				if _, err := cl.c.Write(pipe); err != nil {
					t.Fatal(err)
				}
				for range n + failed {
					if _, err := golden.ReadFrame(cl.r); err != nil {
						t.Fatal(err)
					}
				}
			}
			var calls, failed int64
			for i := range 8 {
				cl := dial(t, srv)
				run(cl, 10*(i+1), i)
				calls, failed = calls+int64(10*(i+1)), failed+int64(i)
			}
			used := 0
			for _, n := range server.ShardCalls(srv, "bf.exists") {
				if n > 0 {
					used++
				}
			}
			if used < 2 {
				t.Fatalf("bf.exists counted in %d shard(s): %v", used, server.ShardCalls(srv, "bf.exists"))
			}
			stats := infoFields(t, admin, "commandstats")
			if got, want := stats["cmdstat_bf.exists"], fmt.Sprintf("calls=%d,", calls); !strings.HasPrefix(got, want) {
				t.Errorf("cmdstat_bf.exists:%s, want %s…", got, want)
			}
			if got, want := stats["cmdstat_bf.info"], fmt.Sprintf("rejected_calls=0,failed_calls=%d", failed); !strings.HasPrefix(got, fmt.Sprintf("calls=%d,", failed)) || !strings.HasSuffix(got, want) {
				t.Errorf("cmdstat_bf.info:%s, want %d calls, %s", got, failed, want)
			}
			if _, ok := infoFields(t, admin, "latencystats")["latency_percentiles_usec_bf.exists"]; !ok {
				t.Error("no latencystats for bf.exists")
			}
			metric := func() server.CommandStat {
				for _, c := range srv.CommandStats() {
					if c.Name == "bf.exists" {
						return c
					}
				}
				return server.CommandStat{}
			}
			// The metrics count a batch once its reply is out, which the
			// client may read first.
			waitFor(t, "the metrics' bf.exists", func() bool {
				m := metric()
				return m.Calls == calls && m.BucketCounts[len(m.BucketCounts)-1] == calls
			})
			if m := metric(); m.Errors != 0 {
				t.Errorf("metrics: bf.exists errors %d", m.Errors)
			}

			admin.run(t, "CONFIG", "RESETSTAT")
			if got := server.ShardCalls(srv, "bf.exists"); strings.Trim(fmt.Sprint(got), "[0 ]") != "" {
				t.Errorf("bf.exists per shard after RESETSTAT: %v", got)
			}
			stats = infoFields(t, admin, "commandstats")
			for _, name := range []string{"cmdstat_bf.exists", "cmdstat_bf.info"} {
				if v, ok := stats[name]; ok {
					t.Errorf("after RESETSTAT %s:%s", name, v)
				}
			}
			if v, ok := infoFields(t, admin, "latencystats")["latency_percentiles_usec_bf.exists"]; ok {
				t.Errorf("after RESETSTAT latencystats bf.exists %s", v)
			}
			if m := metric(); m.Calls != calls {
				t.Errorf("metrics after RESETSTAT: bf.exists calls %d, want %d (they never go down)", m.Calls, calls)
			}
			// Counting goes on in every shard from zero.
			for range 4 {
				run(dial(t, srv), 5, 0)
			}
			if got := infoFields(t, admin, "commandstats")["cmdstat_bf.exists"]; !strings.HasPrefix(got, "calls=20,") {
				t.Errorf("after RESETSTAT and 20 more: cmdstat_bf.exists:%s", got)
			}
			waitFor(t, "the metrics' bf.exists", func() bool { return metric().Calls == calls+20 })
		})
	}
}
