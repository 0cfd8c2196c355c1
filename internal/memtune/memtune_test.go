package memtune

import (
	"context"
	"math"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"testing"
	"time"
)

func TestPercent(t *testing.T) {
	for _, c := range []struct {
		live, headroom uint64
		want           int
	}{{0, 64 << 20, 100}, {32 << 20, 64 << 20, 100}, {640 << 20, 64 << 20, 10}, {128 << 20, 64 << 20, 50}, {10 << 30, 64 << 20, 5}} {
		if got := Percent(c.live, c.headroom); got != c.want {
			t.Errorf("Percent(%d, %d) = %d, want %d", c.live, c.headroom, got, c.want)
		}
	}
}

// TestRunFollowsTheLiveHeap: with 512 MiB live, GOGC comes down to the
// floor after the next collection.
func TestRunFollowsTheLiveHeap(t *testing.T) {
	defer debug.SetGCPercent(100)
	defer debug.SetMemoryLimit(math.MaxInt64)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go Run(ctx, Options{})
	live := make([]uint64, 64<<20) // 512 MiB, no pointers
	deadline := time.Now().Add(10 * time.Second)
	for {
		runtime.GC()
		if p := debug.SetGCPercent(-1); p != 100 && p > 0 {
			debug.SetGCPercent(p)
			if p != 6 && p != 5 { // 32 MiB of 512 MiB, a little more live
				t.Fatalf("GOGC %d with 512 MiB live", p)
			}
			break
		} else {
			debug.SetGCPercent(p)
		}
		if time.Now().After(deadline) {
			t.Fatal("GOGC never followed the live heap")
		}
		time.Sleep(10 * time.Millisecond) // letting the tuner run after the collection
	}
	runtime.KeepAlive(live)
}

// TestIdleCollects: garbage that the last collection saw live, with no
// allocation after it to start another, is collected and given back once
// the heap has gone IdleGC without a collection.
func TestIdleCollects(t *testing.T) {
	defer debug.SetGCPercent(100)
	defer debug.SetMemoryLimit(math.MaxInt64)
	burst := make([]uint64, 32<<20) // 256 MiB, live at this collection
	runtime.GC()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go Run(ctx, Options{IdleCheck: 20 * time.Millisecond, IdleGC: 100 * time.Millisecond})
	burst[len(burst)-1] = 1
	runtime.KeepAlive(burst)
	burst = nil
	var ms runtime.MemStats
	deadline := time.Now().Add(5 * time.Second)
	for {
		runtime.ReadMemStats(&ms)
		if ms.HeapAlloc < 64<<20 && ms.HeapIdle-ms.HeapReleased < 64<<20 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 5 s: heap %d MiB, idle unreleased %d MiB", ms.HeapAlloc>>20, (ms.HeapIdle-ms.HeapReleased)>>20)
		}
		time.Sleep(20 * time.Millisecond) // polling the runtime's counters
	}
}

// forcedGCs is the number of collections forced so far (FreeOSMemory's).
func forcedGCs() uint64 {
	s := []metrics.Sample{{Name: "/gc/cycles/forced:gc-cycles"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

var sink [][]byte

// TestIdleLeavesAGrowingHeap: while the node allocates, the idle check
// forces no collection (the runtime's own comes soon). That a quiet heap's
// garbage is still collected is TestIdleCollects.
func TestIdleLeavesAGrowingHeap(t *testing.T) {
	defer debug.SetGCPercent(100)
	defer debug.SetMemoryLimit(math.MaxInt64)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	live := make([]uint64, 32<<20) // 256 MiB: the collections' goal is 64 MiB above it
	runtime.GC()
	go Run(ctx, Options{Headroom: 64 << 20, IdleCheck: 100 * time.Millisecond, IdleGC: time.Hour})
	before := forcedGCs()
	// Allocating all the time (garbage, 1 MiB at a time) for 10 checks.
	for began := time.Now(); time.Since(began) < time.Second; {
		sink = append(sink, make([]byte, 1<<20))
		if len(sink) > 8 {
			sink = sink[1:]
		}
	}
	// The build before forced 27 here; a check that finds this loop
	// descheduled for its whole interval (a busy machine) may force one.
	if n := forcedGCs() - before; n > 2 {
		t.Fatalf("%d collections forced while the heap grew", n)
	}
	runtime.KeepAlive(live)
}

// TestLimitStepsDown: a limit never asks the runtime to give back more
// than maxScavengeStep at once.
func TestLimitStepsDown(t *testing.T) {
	const mib = 1 << 20
	for _, c := range []struct{ goal, mapped, want uint64 }{
		{goal: 100 * mib, mapped: 90 * mib, want: 100 * mib},
		{goal: 100 * mib, mapped: 110 * mib, want: 100 * mib},
		{goal: 100 * mib, mapped: 600 * mib, want: 600*mib - maxScavengeStep},
		{goal: 100 * mib, mapped: 0, want: 100 * mib},
		{goal: 1 * mib, mapped: 8 * mib, want: 1 * mib},
	} {
		if got := Limit(c.goal, c.mapped); got != c.want {
			t.Errorf("Limit(%d MiB, %d MiB) = %d MiB, want %d MiB", c.goal/mib, c.mapped/mib, got/mib, c.want/mib)
		}
	}
}
