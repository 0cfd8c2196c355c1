package main

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// writes measures the image's write amplification: for batches of adds of
// growing size to one 100M-item filter at 0.1% (180 MB), the bytes a flush
// writes (the image's tables and Pebble's compactions, from INFO
// persistence) and the bytes the whole process wrote to disk (the Raft
// log too, from /proc/PID/io), per item added and per filter byte
// changed (an add sets k = 10 bits, so it changes at most 10 bytes).
func writes(bin string) {
	s := startBF(bin, "--flush-interval", "2s")
	defer s.stop()
	c := s.client()
	defer c.Close()
	ctx := context.Background()
	check(c.Do(ctx, "BF.RESERVE", "f", "0.001", "100000000").Err())
	size := sizeOf(s, []string{"f"})
	fmt.Printf("%s, one filter of %.1f MiB, --flush-interval 2s:\n", s.name, mib(size))
	fmt.Printf("  %9s  %13s  %13s  %13s  %13s  %12s  %15s\n", "items", "chunks (MiB)", "tables (MiB)", "compact (MiB)", "disk (MiB)", "disk/item", "image/changed")
	total := 0
	for _, n := range []int{100, 1000, 10000, 100000, 1000000} {
		waitTables(s, 1) // a flush of nothing pending starts the count clean
		before, ioBefore := imageStats(s), diskWrites(s.pid)
		addItemsFrom(c, "f", total, n)
		total += n
		waitTables(s, 2)            // every add is in a flushed table
		time.Sleep(2 * time.Second) // Pebble's compactions run after the ingest
		after, ioAfter := imageStats(s), diskWrites(s.pid)
		chunks := after["image_value_bytes"] - before["image_value_bytes"]
		tables := after["image_table_bytes_written"] - before["image_table_bytes_written"]
		compact := after["image_compaction_bytes_written"] - before["image_compaction_bytes_written"]
		disk := ioAfter - ioBefore
		changed := int64(n) * 10
		fmt.Printf("  %9d  %13.2f  %13.2f  %13.2f  %13.2f  %10.0f B  %14.0f×\n", n, mib(chunks), mib(tables), mib(compact), mib(disk),
			float64(disk)/float64(n), float64(tables+compact)/float64(min(changed, size)))
	}
}

// imageStats reads INFO persistence's image_* counters.
func imageStats(s *server) map[string]int64 {
	c := s.client()
	defer c.Close()
	info, err := c.Info(context.Background(), "persistence").Result()
	check(err)
	out := map[string]int64{}
	for _, line := range strings.Split(info, "\r\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && strings.HasPrefix(k, "image_") {
			n, _ := strconv.ParseInt(v, 10, 64)
			out[k] = n
		}
	}
	return out
}

// waitTables waits until the image has ingested n more tables.
func waitTables(s *server, n int64) {
	start := imageStats(s)["image_tables_ingested"]
	for imageStats(s)["image_tables_ingested"] < start+n {
		time.Sleep(50 * time.Millisecond) // polling INFO for the next flush
	}
}

// diskWrites is what the process has written to storage (write_bytes).
func diskWrites(pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/io", pid))
	check(err)
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "write_bytes: "); ok {
			n, _ := strconv.ParseInt(v, 10, 64)
			return n
		}
	}
	return 0
}
