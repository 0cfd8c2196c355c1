package merge

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// TestRuns: the merge of sorted runs of random lengths (duplicates within
// and across runs) visits every element once, in sorted order, and stops
// when told to.
func TestRuns(t *testing.T) {
	rng := rand.New(rand.NewPCG(51, 52))
	for range 200 {
		var vals []int
		var runs []Run
		for range 1 + rng.IntN(20) {
			run := make([]int, 1+rng.IntN(50))
			for i := range run {
				run[i] = rng.IntN(100)
			}
			slices.Sort(run)
			runs = append(runs, Run{len(vals), len(vals) + len(run)})
			vals = append(vals, run...)
		}
		want := slices.Sorted(slices.Values(vals))
		again := slices.Clone(runs) // Runs reuses runs
		var got []int
		Runs(runs, func(i, j int) bool { return vals[i] < vals[j] }, func(i int) bool {
			got = append(got, vals[i])
			return true
		})
		if !slices.Equal(got, want) {
			t.Fatalf("merged %v, want %v", got, want)
		}
		n := 0
		Runs(again, func(i, j int) bool { return vals[i] < vals[j] }, func(int) bool {
			n++
			return n < 3
		})
		if n != min(3, len(vals)) {
			t.Fatalf("told to stop at the third, it visited %d", n)
		}
	}
}
