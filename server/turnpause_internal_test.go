package server

import (
	"testing"
	"time"
)

// TestSlowPauseBacksOff: a lone slow write pauses the turns for
// turnPauseMin; slow writes that follow each other double the pause, up
// to turnPause; one long after the last starts again from turnPauseMin.
func TestSlowPauseBacksOff(t *testing.T) {
	var srv Server
	want := []time.Duration{turnPauseMin, 2 * turnPauseMin, 4 * turnPauseMin, 8 * turnPauseMin, turnPause, turnPause}
	for i, w := range want {
		if got := srv.slowPause(); got != w {
			t.Fatalf("slow write %d: pause %v, want %v", i, got, w)
		}
	}
	srv.lastSlow.Store(time.Now().Add(-3 * turnPause).UnixNano())
	if got := srv.slowPause(); got != turnPauseMin {
		t.Fatalf("a slow write long after the last: pause %v, want %v", got, turnPauseMin)
	}
}
