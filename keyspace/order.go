package keyspace

import (
	"slices"

	"github.com/bfserver/bfserver/internal/merge"
)

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
// a BGSAVE beside bench/stall's flush held writes that long. Each page
// of keys (pages: blockLen of them) is sorted apart, looking at Abort
// between pages, and the pages are merged (internal/merge), looking at
// it every orderCheck keys merged. Neither list is one allocation.
func (c *Cut) walkOrder() (pages[dirtyKey], error) {
	var keys, out pages[dirtyKey]
	for dk := range c.pending {
		if keys.Len()%orderCheck == 0 && c.aborted.Load() {
			return pages[dirtyKey]{}, ErrCutAborted
		}
		keys.add(dk)
	}
	for _, b := range c.fresh.bs {
		if c.aborted.Load() {
			return pages[dirtyKey]{}, ErrCutAborted
		}
		for _, dk := range b {
			keys.add(dk)
		}
	}
	runs := make([]merge.Run, 0, len(keys.ps))
	for i, p := range keys.ps {
		if c.aborted.Load() {
			return pages[dirtyKey]{}, ErrCutAborted
		}
		slices.SortFunc(p, chunkOrder)
		runs = append(runs, merge.Run{Next: i * blockLen, End: i*blockLen + len(p)})
	}
	aborted := false
	merge.Runs(runs, func(i, j int) bool { return chunkOrder(*keys.at(i), *keys.at(j)) < 0 }, func(i int) bool {
		if out.Len()%orderCheck == 0 && c.aborted.Load() {
			aborted = true
			return false
		}
		// A key in both parts of the record comes twice.
		if n := out.Len(); n == 0 || *out.at(n - 1) != *keys.at(i) {
			out.add(*keys.at(i))
		}
		return true
	})
	if aborted {
		return pages[dirtyKey]{}, ErrCutAborted
	}
	return out, nil
}
