package server

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// TestSlowlogRing: the ring keeps what a list trimmed on each push keeps
// (Redis's slow log), newest first, through wraps, slowlog-max-len
// growing and shrinking (to 0 and back), resets and GETs of any count.
func TestSlowlogRing(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var l slowlog
	var model []int64 // ids, oldest first
	maxLen := int64(5)
	for step := range 5000 {
		switch r := rng.IntN(100); {
		case r < 3:
			maxLen = int64(rng.IntN(12))
		case r < 4:
			l.reset()
			model = nil
		}
		id := int64(step)
		l.add(slowEntry{id: id}, maxLen)
		model = append(model, id)
		if over := len(model) - int(maxLen); over > 0 {
			model = model[over:]
		}
		if int(l.len()) != len(model) {
			t.Fatalf("step %d: len %d, want %d", step, l.len(), len(model))
		}
		n := rng.IntN(len(model) + 2)
		var got []int64
		for _, e := range l.newest(n) {
			got = append(got, e.id)
		}
		want := slices.Clone(model[max(0, len(model)-n):])
		slices.Reverse(want)
		if !slices.Equal(got, want) {
			t.Fatalf("step %d (max-len %d): newest %d = %v, want %v", step, maxLen, n, got, want)
		}
	}
}
