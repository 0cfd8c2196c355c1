package main

import (
	"context"
	"flag"
	"fmt"
	"slices"
	"strings"
)

var (
	baseline = flag.String("baseline", "", "logstores mode: another bfserver build (say main's) run as a further server, with its own defaults")
	stages   = flag.Bool("stages", true, "logstores mode: print each bfserver's INFO writestages after each case")
)

// logStores is issue #25's durable BF.ADD through bfserver on each Raft
// log store (and, with -baseline, another build) against RedisBloom with
// appendfsync always, all in one run, the order rotating every round:
// medians, and each bfserver's ratio to RedisBloom and to bolt.
func logStores() {
	var servers []*server
	for _, store := range []string{"wal", "bolt"} {
		s := startBF("--fsync", "always", "--raft-log-store", store, "--max-filter-bytes", "4294967296")
		s.name = "bf-" + store
		servers = append(servers, s)
	}
	if *baseline != "" {
		bin := *bfBin
		*bfBin = *baseline
		s := startBF("--fsync", "always", "--max-filter-bytes", "4294967296")
		*bfBin = bin
		s.name = "bf-baseline"
		servers = append(servers, s)
	}
	rb := startRedisBloom("--appendonly", "yes", "--appendfsync", "always")
	servers = append(servers, rb)
	for _, s := range servers {
		s.do("BF.RESERVE", "bf", "0.01", "100000000", "NONSCALING")
		s.do("BF.ADD", "bf", "x")
	}
	cases := []peerCase{
		{"BF.ADD P1 c50", []string{"BF.ADD", "bf", "__rand_int__"}, 50, 1, 100000, "10000000", 1},
		{"BF.ADD P32 c50", []string{"BF.ADD", "bf", "__rand_int__"}, 50, 32, 1000000, "10000000", 1},
	}
	for _, c := range cases {
		if *only != "" && !strings.Contains(c.name, *only) {
			continue
		}
		if *requests > 0 {
			c.n = *requests
			if c.pipeline > 1 {
				c.n *= 10
			}
		}
		runs := make([][]peerRun, len(servers))
		for r := 0; r < *rounds; r++ {
			for k := range servers {
				i := (r + k) % len(servers)
				s := servers[i]
				runs[i] = append(runs[i], peerBench(s, c.clients, c.pipeline, c.n, c.keyspace, c.args))
			}
		}
		fmt.Printf("\n# %s, %d requests, %d rounds rotating, medians (each round's ratio to %s in brackets: min..max)\n", c.name, c.n, *rounds, rb.name)
		fmt.Printf("%-12s | %10s %7s %7s %7s %7s | %6s %6s %14s\n", "server", "rps", "p50", "p99", "p99.9", "µs/req", "rps×rb", "p99×rb", "rounds rps×rb")
		for i, s := range servers {
			rps := medianOf(runs[i], func(r peerRun) float64 { return r.rps })
			p99 := medianOf(runs[i], func(r peerRun) float64 { return r.p99 })
			var per []float64
			for j := range runs[i] {
				per = append(per, runs[i][j].rps/runs[len(servers)-1][j].rps)
			}
			slices.Sort(per)
			fmt.Printf("%-12s | %10.0f %7.3f %7.3f %7.3f %7.2f | %6.2f %6.2f %6.2f..%-6.2f\n", s.name, rps,
				medianOf(runs[i], func(r peerRun) float64 { return r.p50 }), p99,
				medianOf(runs[i], func(r peerRun) float64 { return r.p999 }),
				medianOf(runs[i], func(r peerRun) float64 { return float64(r.cpuPerReq.Nanoseconds()) / 1000 }),
				rps/medianOf(runs[len(servers)-1], func(r peerRun) float64 { return r.rps }),
				p99/medianOf(runs[len(servers)-1], func(r peerRun) float64 { return r.p99 }),
				per[0], per[len(per)-1])
		}
		if *stages {
			for _, s := range servers[:len(servers)-1] {
				c := s.client()
				info, err := c.Do(context.Background(), "INFO", "writestages").Text()
				c.Close()
				if err == nil && strings.Contains(info, ":") {
					fmt.Printf("%s INFO writestages (cumulative):\n%s", s.name, info)
				}
				s.do("CONFIG", "RESETSTAT")
			}
		}
	}
	for _, s := range servers {
		fmt.Printf("peak RSS %s %d MiB\n", s.name, s.memKB("VmHWM")/1024)
		s.stop()
	}
}

// medianOf is the median of f over runs of any kind.
func medianOf[R any](rs []R, f func(R) float64) float64 {
	v := make([]float64, len(rs))
	for i, r := range rs {
		v[i] = f(r)
	}
	slices.Sort(v)
	return v[len(v)/2]
}
