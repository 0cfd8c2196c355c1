package keyspace

import "slices"

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
// sortRun keys are sorted apart and merged, looking at Abort between runs
// and every orderCheck keys merged.
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
	var runs [][]dirtyKey
	for from := 0; from < len(keys); from += sortRun {
		if c.aborted.Load() {
			return nil, ErrCutAborted
		}
		run := keys[from:min(from+sortRun, len(keys))]
		slices.SortFunc(run, chunkOrder)
		runs = append(runs, run)
	}
	out := make([]dirtyKey, 0, len(keys))
	h := runHeap(runs)
	h.init()
	for len(h) > 0 {
		if len(out)%orderCheck == 0 && c.aborted.Load() {
			return nil, ErrCutAborted
		}
		dk := h[0][0]
		if n := len(out); n == 0 || out[n-1] != dk { // a key in both parts of the record
			out = append(out, dk)
		}
		if h[0] = h[0][1:]; len(h[0]) == 0 {
			h[0] = h[len(h)-1]
			h = h[:len(h)-1]
		}
		h.down(0)
	}
	return out, nil
}

// runHeap is a min-heap of sorted runs by their first key.
type runHeap [][]dirtyKey

func (h runHeap) init() {
	for i := len(h)/2 - 1; i >= 0; i-- {
		h.down(i)
	}
}

func (h runHeap) down(i int) {
	for {
		l := 2*i + 1
		if l >= len(h) {
			return
		}
		m := l
		if r := l + 1; r < len(h) && chunkOrder(h[r][0], h[l][0]) < 0 {
			m = r
		}
		if chunkOrder(h[m][0], h[i][0]) >= 0 {
			return
		}
		h[i], h[m] = h[m], h[i]
		i = m
	}
}
