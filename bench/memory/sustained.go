package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"time"
)

// sustained: one 1028 MiB filter filled by LOADCHUNKs, then a steady
// stream of 100-item BF.MADDs from one client for -seconds; every 10 s it
// prints the items added per second and the slowest reply, and at the end
// the disk the server's directory took. bfserver runs with its defaults
// (flush every 30 s, snapshots by its own rule); RedisBloom with AOF
// always. What it shows: what flushes and snapshots of a large image cost
// a node's writes.
func sustained(s *server) {
	c := s.client()
	defer c.Close()
	ctx := context.Background()
	check(c.Do(ctx, "BF.RESERVE", "big", "0.01", "900000000", "NONSCALING").Err())
	fillRandom(c, "big")
	fmt.Printf("%s, one %.1f MiB filter filled; 100-item BF.MADDs from one client:\n", s.name, mib(sizeOf(s, []string{"big"})))
	t0 := time.Now()
	last, n, lastN := t0, 0, 0
	var worst time.Duration
	var rates []float64
	args := make([]any, 102)
	args[0], args[1] = "BF.MADD", "big"
	for time.Since(t0) < time.Duration(*seconds)*time.Second {
		for j := range 100 {
			args[2+j] = "item:" + strconv.Itoa(n+j)
		}
		t := time.Now()
		check(c.Do(ctx, args...).Err())
		worst = max(worst, time.Since(t))
		n += 100
		if since := time.Since(last); since >= 10*time.Second {
			rate := float64(n-lastN) / since.Seconds()
			rates = append(rates, rate)
			fmt.Printf("  %4.0f s  %8.0f items/s  slowest reply %v\n", time.Since(t0).Seconds(), rate, worst.Round(time.Millisecond))
			last, lastN, worst = time.Now(), n, 0
		}
	}
	slices.Sort(rates)
	fmt.Printf("  median %.0f items/s, range %.0f–%.0f; directory %.1f MiB\n", rates[len(rates)/2], rates[0], rates[len(rates)-1], mib(dirBytes(s.dir)))
	s.stop()
}

// dirBytes is the size of the regular files under dir.
func dirBytes(dir string) int64 {
	var total int64
	filepath.Walk(dir, func(_ string, fi os.FileInfo, err error) error {
		if err == nil && fi.Mode().IsRegular() {
			total += fi.Size()
		}
		return nil
	})
	return total
}
