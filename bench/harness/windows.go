package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// The windows mode (issue #27): a sliding-window filter (BFX.W*) against
// a plain Bloom filter on the same bfserver, and against the workaround
// RedisBloom users build, two rotating Bloom filters, on RedisBloom itself:
// the same window (the last -window-count inserts; the rotating filters
// rotate every that many adds), the same false-positive target.
//
//	go run ./bench/harness windows
//	go run ./bench/harness -window-count 1000000 -window-error 0.01 -rounds 3 windows
//	go run ./bench/harness -durability memory windows    # --in-memory against no persistence
//
// Throughput: add and exists at depth 1 and 32, from 50 connections. An
// add to the window is BFX.WADD (its answer says whether the item was new);
// to the rotating filters it is what a de-duplicating client sends for
// one item, BF.EXISTS on the previous period's filter and BF.INSERT into
// the current one, pipelined as one request; an exists is BFX.WEXISTS, or
// BF.EXISTS on both filters. The client rotates the filters every
// -window-count adds (BF.INSERT creates the new one at half the target
// rate, the one two periods old is deleted), as examples/dedup does by the
// clock. The plain Bloom filter (BF.ADD, BF.EXISTS) never forgets: it is
// sized for every add of the run. redis-benchmark sends one command per
// request, so this mode drives all three sides with its own raw RESP
// client, the same for each; servers alternate within each round.
//
// Memory: each side's filters as MEMORY USAGE counts them, at steady
// state. The false-positive rate each reaches: a stream of five windows of
// distinct items through each (the window and the rotating filters probed
// at their fullest: the end of a generation, the end of a period), then
// 200,000 items never added; and, of the stream's items aged between 1.25
// and 2 windows (past the window and its margin), how many each still
// reports.

// loadRun is one driven run.
type loadRun struct {
	rps      float64 // requests per second
	p50, p99 float64 // ms, per request (its batch's round trip)
	cpuPerRq time.Duration
}

// request appends one request's commands (RESP) to buf for connection c,
// request i, and says how many replies it expects.
type request func(buf []byte, c, i int) ([]byte, int)

// appendCmd appends a RESP command.
func appendCmd(buf []byte, args ...string) []byte {
	buf = append(buf, '*')
	buf = strconv.AppendInt(buf, int64(len(args)), 10)
	buf = append(buf, '\r', '\n')
	for _, a := range args {
		buf = append(buf, '$')
		buf = strconv.AppendInt(buf, int64(len(a)), 10)
		buf = append(buf, '\r', '\n')
		buf = append(buf, a...)
		buf = append(buf, '\r', '\n')
	}
	return buf
}

// skipReply reads one RESP reply, and returns the first error reply in
// it, if any.
func skipReply(r *bufio.Reader) (error, error) {
	line, err := r.ReadSlice('\n')
	if err != nil {
		return nil, err
	}
	if len(line) < 3 {
		return nil, fmt.Errorf("short reply %q", line)
	}
	switch line[0] {
	case '-':
		return errors.New(strings.TrimSpace(string(line[1:]))), nil
	case '+', ':', '_', '#', ',':
		return nil, nil
	case '$':
		n, _ := strconv.Atoi(strings.TrimSpace(string(line[1:])))
		if n >= 0 {
			_, err = r.Discard(n + 2)
		}
		return nil, err
	case '*', '%':
		n, _ := strconv.Atoi(strings.TrimSpace(string(line[1:])))
		if line[0] == '%' {
			n *= 2
		}
		var first error
		for range max(n, 0) {
			e, err := skipReply(r)
			if err != nil {
				return nil, err
			}
			if first == nil {
				first = e
			}
		}
		return first, nil
	}
	return nil, fmt.Errorf("unknown reply %q", line)
}

// drive sends n requests to s from conns connections, each writing
// pipeline requests and then reading their replies, and times each batch.
func drive(s *server, conns, pipeline, n int, req request) loadRun {
	var next atomic.Int64
	var mu sync.Mutex
	var lat []time.Duration
	var firstErr error
	var wg sync.WaitGroup
	before := s.cpu()
	t0 := time.Now()
	for c := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			conn, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", s.port))
			check(err)
			defer conn.Close()
			r := bufio.NewReaderSize(conn, 1<<16)
			var buf []byte
			var mine []time.Duration
			for {
				from := int(next.Add(int64(pipeline))) - pipeline
				if from >= n {
					break
				}
				buf = buf[:0]
				replies := 0
				for i := from; i < min(n, from+pipeline); i++ {
					var k int
					buf, k = req(buf, c, i)
					replies += k
				}
				began := time.Now()
				_, err := conn.Write(buf)
				check(err)
				for range replies {
					e, err := skipReply(r)
					check(err)
					if e != nil && firstErr == nil {
						mu.Lock()
						firstErr = e
						mu.Unlock()
					}
				}
				mine = append(mine, time.Since(began))
			}
			mu.Lock()
			lat = append(lat, mine...)
			mu.Unlock()
		}()
	}
	wg.Wait()
	el := time.Since(t0)
	if firstErr != nil {
		check(fmt.Errorf("%s answered an error: %v", s.name, firstErr))
	}
	slices.Sort(lat)
	q := func(p float64) float64 {
		if len(lat) == 0 {
			return 0
		}
		return float64(lat[min(len(lat)-1, int(p*float64(len(lat))))]) / float64(time.Millisecond)
	}
	return loadRun{rps: float64(n) / el.Seconds(), p50: q(0.5), p99: q(0.99), cpuPerRq: (s.cpu() - before) / time.Duration(n)}
}

// rotating is the client's state of the two-filter workaround: the period
// advances every count adds, across connections.
type rotating struct {
	prefix   string
	count    int64
	capacity string
	errRate  string
	adds     atomic.Int64
	mu       sync.Mutex
	period   int64
	s        *server
}

func (r *rotating) key(p int64) string { return r.prefix + strconv.FormatInt(p, 10) }

// add is one de-duplicating add: the previous filter's BF.EXISTS and the
// current one's BF.INSERT, pipelined; every count adds the period moves
// and the filter two periods old is deleted.
func (r *rotating) add(buf []byte, item string) ([]byte, int) {
	n := r.adds.Add(1)
	p := (n - 1) / r.count
	if n%r.count == 0 {
		r.mu.Lock()
		if p+1 > r.period {
			r.period = p + 1
			go r.s.do("DEL", r.key(p-1)) // two periods old once p+1 starts
		}
		r.mu.Unlock()
	}
	buf = appendCmd(buf, "BF.EXISTS", r.key(p-1), item)
	buf = appendCmd(buf, "BF.INSERT", r.key(p), "CAPACITY", r.capacity, "ERROR", r.errRate, "ITEMS", item)
	return buf, 2
}

// exists is a lookup in both filters.
func (r *rotating) exists(buf []byte, item string) ([]byte, int) {
	p := (r.adds.Load() - 1) / r.count
	buf = appendCmd(buf, "BF.EXISTS", r.key(p), item)
	buf = appendCmd(buf, "BF.EXISTS", r.key(p-1), item)
	return buf, 2
}

func randItem() string { return strconv.FormatUint(rand.Uint64()%1_000_000_000_000, 10) }

// windows is the windows mode.
func windows() {
	N := int64(*windowCount)
	e := *windowError
	half := strconv.FormatFloat(e/2, 'g', -1, 64)
	es := strconv.FormatFloat(e, 'g', -1, 64)
	// Durability matched: durable by default, or in memory on both
	// (-durability memory).
	bfArgs, rbArgs, label := []string{"--fsync", "always"}, []string{"--appendonly", "yes", "--appendfsync", "always"},
		"durable (bfserver --fsync always, RedisBloom appendfsync always)"
	if strings.Contains(*durability, "memory") {
		bfArgs, rbArgs, label = []string{"--in-memory"}, nil, "in memory (bfserver --in-memory, RedisBloom without persistence)"
	}
	bf := startBF(append(bfArgs, "--max-filter-bytes", "4294967296")...)
	defer bf.stop()
	rb := startRedisBloom(rbArgs...)
	defer rb.stop()
	fmt.Printf("# sliding windows: the last %d inserts at %s, %s; %d rounds, sides alternating; machine shared\n", N, es, label, *rounds)

	// Steady state: the window and the rotating filters have seen two
	// windows of adds. The plain Bloom filter is sized for every add the
	// throughput runs will make: it never forgets.
	bf.do("BFX.WRESERVE", "w", es, "COUNT", N)
	fill(bf, 2*N, func(items []any) []any { return append([]any{"BFX.WMADD", "w"}, items...) })
	rot := &rotating{prefix: "rot:", count: N, capacity: strconv.FormatInt(N, 10), errRate: half, s: rb}
	fill(rb, N, func(items []any) []any {
		return append([]any{"BF.INSERT", rot.key(-1), "CAPACITY", rot.capacity, "ERROR", half, "ITEMS"}, items...)
	})
	bf.do("BF.RESERVE", "bf", es, 20*N)

	const conns = 50
	type side struct {
		name string
		s    *server
		add  request
		has  request
	}
	sides := []side{
		{"BFX.W (bfserver)", bf,
			func(b []byte, _, _ int) ([]byte, int) { return appendCmd(b, "BFX.WADD", "w", randItem()), 1 },
			func(b []byte, _, _ int) ([]byte, int) { return appendCmd(b, "BFX.WEXISTS", "w", randItem()), 1 }},
		{"BF (bfserver)", bf,
			func(b []byte, _, _ int) ([]byte, int) { return appendCmd(b, "BF.ADD", "bf", randItem()), 1 },
			func(b []byte, _, _ int) ([]byte, int) { return appendCmd(b, "BF.EXISTS", "bf", randItem()), 1 }},
		{"rotating (RedisBloom)", rb,
			func(b []byte, _, _ int) ([]byte, int) { return rot.add(b, randItem()) },
			func(b []byte, _, _ int) ([]byte, int) { return rot.exists(b, randItem()) }},
	}
	fmt.Printf("%-8s %-4s | %-22s %10s %7s %7s %7s | ratios to BFX.W: rps, cpu/req\n", "op", "P", "side", "req/s", "p50 ms", "p99 ms", "µs/req")
	for _, p := range []int{1, 32} {
		for _, op := range []string{"add", "exists"} {
			if *only != "" && !strings.Contains(fmt.Sprintf("%s P%d", op, p), *only) {
				continue
			}
			n := 100_000
			if p > 1 {
				n = 1_000_000
			}
			if *requests > 0 {
				n = *requests
			}
			runs := make([][]loadRun, len(sides))
			for r := range *rounds {
				for j := range sides {
					k := (j + r) % len(sides) // each round starts with another side
					sd := sides[k]
					req := sd.add
					if op == "exists" {
						req = sd.has
					}
					runs[k] = append(runs[k], drive(sd.s, conns, p, n, req))
				}
			}
			med := medianOf[loadRun]
			rps := func(r loadRun) float64 { return r.rps }
			cpu := func(r loadRun) float64 { return float64(r.cpuPerRq.Nanoseconds()) / 1000 }
			for k, sd := range sides {
				fmt.Printf("%-8s %-4d | %-22s %10.0f %7.3f %7.3f %7.2f | %.2f %.2f\n", op, p, sd.name,
					med(runs[k], rps), med(runs[k], func(r loadRun) float64 { return r.p50 }), med(runs[k], func(r loadRun) float64 { return r.p99 }),
					med(runs[k], cpu), med(runs[k], rps)/med(runs[0], rps), med(runs[k], cpu)/med(runs[0], cpu))
			}
		}
	}
	windowsAccuracy(bf, rb, N, e)
}

// fill adds n distinct items by pipelined batches of 1,000 made by mk.
func fill(s *server, n int64, mk func(items []any) []any) {
	c := s.client()
	defer c.Close()
	ctx := context.Background()
	for from := int64(0); from < n; {
		pipe := c.Pipeline()
		for range 10 {
			items := make([]any, 0, 1000)
			for range min(1000, n-from) {
				items = append(items, "fill-"+randItem())
			}
			from += int64(len(items))
			if len(items) > 0 {
				pipe.Do(ctx, mk(items)...)
			}
		}
		_, err := pipe.Exec(ctx)
		check(err)
	}
}

// streamItem is the stream's i-th item (distinct from every probe).
func streamItem(tag string, i int64) string { return tag + "-" + strconv.FormatInt(i, 10) }

// windowsAccuracy streams five windows of distinct items through a fresh
// window, fresh rotating filters and a plain Bloom filter sized for one
// window, probes each at its fullest, and prints memory and the rates.
func windowsAccuracy(bf, rb *server, N int64, e float64) {
	ctx := context.Background()
	es, half := strconv.FormatFloat(e, 'g', -1, 64), strconv.FormatFloat(e/2, 'g', -1, 64)
	cb, cr := bf.client(), rb.client()
	defer cb.Close()
	defer cr.Close()
	check(cb.Do(ctx, "BFX.WRESERVE", "acc:w", es, "COUNT", N).Err())
	check(cb.Do(ctx, "BF.RESERVE", "acc:bf", es, N).Err())
	info, err := cb.Do(ctx, "BFX.WINFO", "acc:w").Slice()
	check(err)
	field := func(name string) int64 {
		for i := 0; i+1 < len(info); i += 2 {
			if info[i] == name {
				return info[i+1].(int64)
			}
		}
		return 0
	}
	g, forgotten := field("Generation size"), field("Forgotten after")
	total := 5 * N
	total += (g - total%g) % g // the window at the end of a generation
	send := func(c *redis.Client, from, to int64, mk func(items []any) []any) {
		for from < to {
			pipe := c.Pipeline()
			for range 10 {
				items := make([]any, 0, 1000)
				for i := from; i < min(to, from+1000); i++ {
					items = append(items, streamItem("s", i))
				}
				from += int64(len(items))
				if len(items) > 0 {
					pipe.Do(ctx, mk(items)...)
				}
			}
			_, err := pipe.Exec(ctx)
			check(err)
		}
	}
	send(cb, 0, total, func(items []any) []any { return append([]any{"BFX.WMADD", "acc:w"}, items...) })
	send(cb, 0, total, func(items []any) []any { return append([]any{"BF.MADD", "acc:bf"}, items...) })
	// The rotating filters: period p holds items [p·N, (p+1)·N); the
	// probe comes at the end of the last period, both filters full.
	// The same at the full rate each ("full:"): half the memory's worth
	// of bits saved, the target no longer guaranteed (up to twice it).
	rotEnd := 5 * N
	for _, v := range []struct{ prefix, rate string }{{"acc:rot:", half}, {"acc:full:", es}} {
		for p := int64(0); p < 5; p++ {
			key := v.prefix + strconv.FormatInt(p, 10)
			send(cr, p*N, (p+1)*N, func(items []any) []any {
				return append([]any{"BF.INSERT", key, "CAPACITY", N, "ERROR", v.rate, "ITEMS"}, items...)
			})
			if p >= 2 {
				check(cr.Del(ctx, v.prefix+strconv.FormatInt(p-2, 10)).Err())
			}
		}
	}
	// Items never added.
	const q = 200_000
	probe := func(c *redis.Client, keys []string, items []string) int {
		hits := make([]bool, len(items))
		for _, key := range keys {
			for from := 0; from < len(items); from += 1000 {
				args := []any{"BF.MEXISTS", key}
				if strings.HasPrefix(key, "acc:w") {
					args[0] = "BFX.WMEXISTS"
				}
				for _, it := range items[from:min(len(items), from+1000)] {
					args = append(args, it)
				}
				res, err := c.Do(ctx, args...).Int64Slice()
				check(err)
				for i, v := range res {
					hits[from+i] = hits[from+i] || v == 1
				}
			}
		}
		n := 0
		for _, h := range hits {
			if h {
				n++
			}
		}
		return n
	}
	strangers := make([]string, q)
	for i := range strangers {
		strangers[i] = "never-" + randItem()
	}
	// Items aged 1.25 to 2 windows: the window has forgotten them (past
	// its margin, when that is under 1.25 windows), the rotating filters'
	// previous period holds those of its own.
	aged := func(end int64) []string {
		var out []string
		for i := end - 2*N; i < end-N-N/4; i++ {
			out = append(out, streamItem("s", i))
		}
		return out
	}
	wFP, rFP, bFP := probe(cb, []string{"acc:w"}, strangers), probe(cr, []string{"acc:rot:4", "acc:rot:3"}, strangers), probe(cb, []string{"acc:bf"}, strangers)
	wOld, rOld := aged(total), aged(rotEnd)
	wAged, rAged := probe(cb, []string{"acc:w"}, wOld), probe(cr, []string{"acc:rot:4", "acc:rot:3"}, rOld)
	fFP, fAged := probe(cr, []string{"acc:full:4", "acc:full:3"}, strangers), probe(cr, []string{"acc:full:4", "acc:full:3"}, rOld)
	mem := func(c *redis.Client, keys ...string) int64 {
		var n int64
		for _, k := range keys {
			v, err := c.MemoryUsage(ctx, k).Result()
			check(err)
			n += v
		}
		return n
	}
	mw, mr, mb, mf := mem(cb, "acc:w"), mem(cr, "acc:rot:4", "acc:rot:3"), mem(cb, "acc:bf"), mem(cr, "acc:full:4", "acc:full:3")
	fmt.Printf("\n# accuracy and memory: %d distinct items (five windows of %d) through each, then %d never added\n", total, N, q)
	fmt.Printf("%-34s %12s %10s %14s %22s\n", "side", "bytes", "bytes×", "false pos.", "aged 1.25–2 windows")
	fmt.Printf("%-34s %12d %10.2f %8.5f (%.2f×) %14.4f\n", "BFX.W window (bfserver)", mw, 1.0, float64(wFP)/q, float64(wFP)/q/e, float64(wAged)/float64(len(wOld)))
	fmt.Printf("%-34s %12d %10.2f %8.5f (%.2f×) %14.4f\n", "two rotating filters (RedisBloom)", mr, float64(mr)/float64(mw), float64(rFP)/q, float64(rFP)/q/e, float64(rAged)/float64(len(rOld)))
	fmt.Printf("%-34s %12d %10.2f %8.5f (%.2f×) %14.4f\n", "  the same at the full rate each", mf, float64(mf)/float64(mw), float64(fFP)/q, float64(fFP)/q/e, float64(fAged)/float64(len(rOld)))
	fmt.Printf("%-34s %12d %10.2f %8.5f (%.2f×) %14s\n", "BF created for one window (bfserver)", mb, float64(mb)/float64(mw), float64(bFP)/q, float64(bFP)/q/e, "all kept")
	fmt.Printf("(the window forgets an item after %d inserts, %.2f windows; the plain filter grew to hold all %d)\n", forgotten, float64(forgotten)/float64(N), total)
}
