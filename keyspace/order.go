package keyspace

import (
	"slices"

	"github.com/bfserver/bfserver/internal/merge"
)

// sortRun is how many keys walkOrder sorts at a time, between looks at
// whether the cut was given up (a few milliseconds' work).
const sortRun = 1 << 15

// orderCheck is how many keys walkOrder gathers or merges between looks
// at whether the cut was given up.
const orderCheck = 4096

// walkOrder lists the cut's keys, each once, in chunk order: the order
// the walk captures them in. It gives up (ErrCutAborted) within a few
// milliseconds of Abort.
//
// Why: a snapshot on Raft's state-machine goroutine waits for a walking
// flush to notice Abort (fsm.lockCut), and every write waits with it. One
// sort of a million keys, before the walk looked at Abort, took 900 ms
// while the collector marked (each swap of a key passes a write barrier):
// a BGSAVE beside bench/stall's flush held writes that long. Runs of
// sortRun keys are sorted apart and merged (internal/merge), looking at
// Abort between runs and every orderCheck keys merged.
func (c *Cut) walkOrder() ([]dirtyKey, error) {
	keys := make([]dirtyKey, 0, len(c.pending)+c.fresh.Len())
	for dk := range c.pending {
		if len(keys)%orderCheck == 0 && c.aborted.Load() {
			return nil, ErrCutAborted
		}
		keys = append(keys, dk)
	}
	for _, b := range c.fresh.bs {
		if c.aborted.Load() {
			return nil, ErrCutAborted
		}
		keys = append(keys, b...)
	}
	if len(keys) <= sortRun {
		slices.SortFunc(keys, chunkOrder)
		return slices.Compact(keys), nil // a key in both parts of the record
	}
	var runs []merge.Run
	for from := 0; from < len(keys); from += sortRun {
		if c.aborted.Load() {
			return nil, ErrCutAborted
		}
		run := merge.Run{Next: from, End: min(from+sortRun, len(keys))}
		slices.SortFunc(keys[run.Next:run.End], chunkOrder)
		runs = append(runs, run)
	}
	out := make([]dirtyKey, 0, len(keys))
	aborted := false
	merge.Runs(runs, func(i, j int) bool { return chunkOrder(keys[i], keys[j]) < 0 }, func(i int) bool {
		if len(out)%orderCheck == 0 && c.aborted.Load() {
			aborted = true
			return false
		}
		if n := len(out); n == 0 || out[n-1] != keys[i] { // a key in both parts of the record
			out = append(out, keys[i])
		}
		return true
	})
	if aborted {
		return nil, ErrCutAborted
	}
	return out, nil
}
