package server

import (
	"testing"
	"time"
)

// TestSlowPauseBacksOff: a lone slow write pauses the turns for
// turnPauseMin, however many loops' turn writes it held; slow writes that
// follow each other double the pause, up to turnPause; one long after the
// last starts again from turnPauseMin.
func TestSlowPauseBacksOff(t *testing.T) {
	var srv Server
	want := []time.Duration{turnPauseMin, 2 * turnPauseMin, 4 * turnPauseMin, 8 * turnPauseMin, turnPause, turnPause}
	for i, w := range want {
		start := time.Now()
		if !start.After(srv.lastSlow) {
			start = srv.lastSlow.Add(time.Nanosecond) // a coarse clock
		}
		if got := srv.slowPause(start); got != w {
			t.Fatalf("slow write %d: pause %v, want %v", i, got, w)
		}
		// Another loop's turn write, begun before this one was found
		// slow, met the same slow sync: the pause stays.
		if got := srv.slowPause(start); got != w {
			t.Fatalf("slow write %d seen by a second loop: pause %v, want %v", i, got, w)
		}
	}
	srv.lastSlow = time.Now().Add(-3 * turnPause)
	if got := srv.slowPause(time.Now()); got != turnPauseMin {
		t.Fatalf("a slow write long after the last: pause %v, want %v", got, turnPauseMin)
	}
}
