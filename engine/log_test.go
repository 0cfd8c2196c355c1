package engine

import (
	"math"
	"testing"
)

// TestLogCache: a kept result is the exact one, a repeated call allocates
// nothing, and the cache stops growing at maxLogs however many distinct
// arguments come.
func TestLogCache(t *testing.T) {
	Log(0.01)
	if a := testing.AllocsPerRun(100, func() { Log(0.01) }); a != 0 {
		t.Fatalf("a kept Log allocates %v times", a)
	}
	for i := 0; i < maxLogs+200; i++ {
		x := 1e-6 + float64(i)*1e-4
		got := Log(x)
		if want := exactLog(x); got != want {
			t.Fatalf("Log(%v) = %v, exact %v", x, got, want)
		}
		if d := math.Abs(got - math.Log(x)); d > 4*math.Abs(math.Nextafter(got, 0)-got) {
			t.Fatalf("Log(%v) = %v, math.Log %v", x, got, math.Log(x))
		}
		if again := Log(x); again != got {
			t.Fatalf("Log(%v) again = %v, first %v", x, again, got)
		}
	}
	logs.mu.RLock()
	n := len(logs.m)
	logs.mu.RUnlock()
	if n > maxLogs {
		t.Fatalf("%d results kept, bound %d", n, maxLogs)
	}
	// The common rate is kept again once asked after the flood.
	Log(0.01)
	if a := testing.AllocsPerRun(100, func() { Log(0.01) }); a != 0 {
		t.Fatalf("after %d other rates, Log(0.01) allocates %v times", maxLogs+200, a)
	}
}
