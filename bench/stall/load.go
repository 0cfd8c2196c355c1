package main

import (
	"context"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// loadScenario creates the scenario sc on s (through c) and returns what
// the steady phase (and the throughput burst) sends.
func loadScenario(s *server, c *redis.Client, sc string, began time.Time) func(i int) []any {
	ctx := context.Background()
	switch sc {
	case "small":
		errs := load(s, *filters, 4, func(i int) []any { return []any{"BF.ADD", "tenant:" + strconv.Itoa(i), "x"} })
		fmt.Printf("   created %d filters in %.1f s (%d errors)\n", *filters, time.Since(began).Seconds(), errs)
		return func(int) []any {
			return []any{"BF.ADD", "tenant:" + strconv.Itoa(rand.IntN(*filters)), "y" + strconv.Itoa(rand.IntN(1000))}
		}
	case "large":
		bits := float64(*largeBytes) * 8
		capacity := uint64(bits * math.Ln2 * math.Ln2 / -math.Log(0.01))
		check(c.Do(ctx, "BF.RESERVE", "big", "0.01", capacity).Err())
		// Each add sets 7 bits; enough adds that every chunk is changed.
		chunks := int(*largeBytes / (64 << 10))
		n := max(100_000, chunks*int(math.Log(float64(chunks))+2))
		errs := load(s, n/100, 2, func(i int) []any {
			args := []any{"BF.MADD", "big"}
			for j := range 100 {
				args = append(args, "m"+strconv.Itoa(i*100+j))
			}
			return args
		})
		size := memoryUsage(c, "big")
		fmt.Printf("   reserved %d MiB of bits by the formula, %d MiB by RedisBloom's sizing (capacity %d), and added %d items in %.1f s (%d errors)\n",
			*largeBytes>>20, size>>20, capacity, n, time.Since(began).Seconds(), errs)
		return func(int) []any { return []any{"BF.ADD", "big", "r" + strconv.FormatUint(rand.Uint64(), 36)} }
	case "window":
		check(c.Do(ctx, "BFX.WRESERVE", "win", "0.01", "COUNT", *winCount).Err())
		errs := load(s, *winCount/1000, 2, func(i int) []any {
			args := []any{"BFX.WMADD", "win"}
			for j := range 1000 {
				args = append(args, "m"+strconv.Itoa(i*1000+j))
			}
			return args
		})
		size, _ := c.Do(ctx, "MEMORY", "USAGE", "win").Int64()
		winBytes = size
		fmt.Printf("   reserved a count window of %d (%d MiB) and added %d items in %.1f s (%d errors)\n", *winCount, size>>20, *winCount, time.Since(began).Seconds(), errs)
		return func(int) []any { return []any{"BFX.WADD", "win", "r" + strconv.FormatUint(rand.Uint64(), 36)} }
	}
	check(fmt.Errorf("unknown scenario %q", sc))
	return nil
}

// onConn runs fn on a connection of its own to s, on a goroutine counted
// in wg.
func onConn(wg *sync.WaitGroup, s *server, fn func(ctx context.Context, c *redis.Client)) {
	wg.Add(1)
	go func() {
		defer wg.Done()
		c := s.client(1)
		defer c.Close()
		fn(context.Background(), c)
	}()
}

// load sends n commands made by mk, pipelined in batches over conns
// connections, and returns the errors.
func load(s *server, n, conns int, mk func(i int) []any) int64 {
	var errs atomic.Int64
	var wg sync.WaitGroup
	var next atomic.Int64
	const batch = 1000
	for range conns {
		onConn(&wg, s, func(ctx context.Context, c *redis.Client) {
			for {
				from := int(next.Add(batch)) - batch
				if from >= n {
					return
				}
				pipe := c.Pipeline()
				for i := from; i < min(n, from+batch); i++ {
					pipe.Do(ctx, mk(i)...)
				}
				cmds, _ := pipe.Exec(ctx)
				for _, cmd := range cmds {
					if cmd.Err() != nil {
						errs.Add(1)
					}
				}
			}
		})
	}
	wg.Wait()
	return errs.Load()
}

// tally counts the replies of a load that runs until told to stop: the
// acknowledged writes and the errors by their first word (TRYAGAIN...).
type tally struct {
	acked atomic.Int64
	mu    sync.Mutex
	errs  map[string]int
}

func (t *tally) add(cmds []redis.Cmder) {
	for _, cmd := range cmds {
		if err := cmd.Err(); err != nil {
			t.mu.Lock()
			if t.errs == nil {
				t.errs = map[string]int{}
			}
			t.errs[errWord(err)]++
			t.mu.Unlock()
			continue
		}
		t.acked.Add(1)
	}
}

func (t *tally) errors() map[string]int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return maps.Clone(t.errs)
}

// errWord is an error's first word: its Redis error code.
func errWord(err error) string {
	msg := err.Error()
	if f := strings.Fields(msg); len(f) > 0 {
		msg = f[0]
	}
	return msg
}

// burst measures the durable write throughput (-rate half): -burst-conns
// connections, spread over targets, each pipelining -burst-depth commands
// made by mk at a time, for -burst. It returns the acknowledged writes a
// second and the tally.
func burst(targets []*server, mk func(i int) []any) (float64, *tally) {
	t := &tally{}
	var wg sync.WaitGroup
	began := time.Now()
	end := began.Add(*burstFor)
	for k := range *burstConns {
		onConn(&wg, targets[k%len(targets)], func(ctx context.Context, c *redis.Client) {
			for i := 0; time.Now().Before(end); {
				pipe := c.Pipeline()
				for range *burstDepth {
					pipe.Do(ctx, mk(i)...)
					i++
				}
				cmds, _ := pipe.Exec(ctx)
				t.add(cmds)
			}
		})
	}
	wg.Wait()
	return float64(t.acked.Load()) / time.Since(began).Seconds(), t
}

// perConn is the most adds a second one steady connection is asked for:
// past it a target gets more connections, so that a slow reply does not
// hold the rate back.
//
// minConns is the fewest a target gets: a connection waits on its
// pipeline's durable reply, so with replies slow (a flushing node's log
// syncs wait on the disk) fewer could not keep the rate.
const (
	perConn  = 5000
	minConns = 4
)

// steadyLoad sends rate commands a second (made by mk) in pipelined
// batches, shared evenly by targets, until stop is closed. A connection that falls
// behind catches up, by at most a second's batches (what clients whose
// writes were held up would send).
func steadyLoad(targets []*server, rate int, mk func(i int) []any, stop chan struct{}) (*sync.WaitGroup, *tally) {
	var wg sync.WaitGroup
	t := &tally{}
	share := float64(rate) / float64(len(targets))
	conns := max(minConns, int(math.Ceil(share/perConn)))
	// Batches of 100, fewer when a connection's rate is low, so that it
	// sends at least 20 a second rather than in lumps.
	perSecond := share / float64(conns)
	batch := int(min(100, max(1, perSecond/20)))
	every := time.Duration(float64(time.Second) * float64(batch) / perSecond)
	for _, s := range targets {
		for range conns {
			onConn(&wg, s, func(ctx context.Context, c *redis.Client) {
				next := time.Now()
				for i := 0; ; {
					next = next.Add(every)
					if floor := time.Now().Add(-time.Second); next.Before(floor) {
						next = floor
					}
					select {
					case <-stop:
						return
					case <-time.After(time.Until(next)):
					}
					pipe := c.Pipeline()
					for range batch {
						pipe.Do(ctx, mk(i)...)
						i++
					}
					cmds, _ := pipe.Exec(ctx)
					t.add(cmds)
				}
			})
		}
	}
	return &wg, t
}

// steadyRate is the steady phase's adds a second: -rate, or with -rate
// half, half the throughput a burst through targets measures (printed).
func steadyRate(targets []*server, mk func(i int) []any) int {
	if !halfRate {
		return fixedRate
	}
	tput, t := burst(targets, mk)
	var names []string
	for _, s := range targets {
		names = append(names, s.name)
	}
	rate := max(1, int(tput/2))
	fmt.Printf("   durable throughput: %.0f adds/s (a %v burst of BF.ADD from %d connections over %s, %d pipelined each; errors %v); steady rate: half, %d adds/s\n",
		tput, *burstFor, *burstConns, strings.Join(names, " and "), *burstDepth, t.errors(), rate)
	return rate
}

// report is a steady load's acknowledged writes, their rate over d and
// the errors.
func (t *tally) report(d time.Duration) string {
	n := t.acked.Load()
	return fmt.Sprintf("%d adds acknowledged (%.0f a second), errors %v", n, float64(n)/d.Seconds(), t.errors())
}

// settle waits, with -rate half, until each bfserver node has ingested
// two more image tables (the second cut after the load ended), at most
// three minutes: the throughput measured is the loaded node's, not the
// load's flush's.
func settle(nodes []*server) {
	if !halfRate {
		return
	}
	began := time.Now()
	want := map[*server]int{}
	for _, s := range nodes {
		if s.cmd != nil {
			n, _ := strconv.Atoi(s.infoMap("persistence")["image_tables_ingested"])
			want[s] = n + 2
		}
	}
	if len(want) == 0 {
		return
	}
	for time.Since(began) < 3*time.Minute {
		done := true
		for s, n := range want {
			got, _ := strconv.Atoi(s.infoMap("persistence")["image_tables_ingested"])
			done = done && got >= n
		}
		if done {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	fmt.Printf("   settled: %.1f s for the load's flushes (two image tables on every node) before the burst\n", time.Since(began).Seconds())
}
