package persistence

import (
	"slices"

	"github.com/bfserver/bfserver/keyspace"
)

// inKeyOrder calls fn with each of keys in metadata order (database, then
// key) until fn returns false. A cut's walk leaves its keys in chunk
// order (database, key length, key), so the keys of one database and one
// length are already in key order: merging those runs costs n·log(runs)
// comparisons and no copy, where sorting a million keys took a second of
// CPU beside Apply at every snapshot of a node of small filters. Keys in
// any other order are sorted first.
func inKeyOrder(keys []keyspace.Walked, fn func(*keyspace.Walked) bool) {
	if !inChunkOrder(keys) {
		sortByKey(keys)
		for i := range keys {
			if !fn(&keys[i]) {
				return
			}
		}
		return
	}
	// runs holds the unread part of each run of the database being
	// merged, as a min-heap on its first key.
	var runs []run
	for lo := 0; lo < len(keys); {
		db := keys[lo].DB
		runs = runs[:0]
		hi := lo
		for hi < len(keys) && keys[hi].DB == db {
			end := hi + 1
			for end < len(keys) && keys[end].DB == db && len(keys[end].Key) == len(keys[hi].Key) {
				end++
			}
			runs = append(runs, run{hi, end})
			hi = end
		}
		h := runHeap{keys: keys, runs: runs}
		for i := len(runs)/2 - 1; i >= 0; i-- {
			h.down(i)
		}
		for len(h.runs) > 0 {
			r := &h.runs[0]
			if !fn(&keys[r.next]) {
				return
			}
			if r.next++; r.next == r.end {
				last := len(h.runs) - 1
				h.runs[0] = h.runs[last]
				h.runs = h.runs[:last]
			}
			h.down(0)
		}
		lo = hi
	}
}

// inChunkOrder reports whether keys are in the walk's order, strictly.
func inChunkOrder(keys []keyspace.Walked) bool {
	for i := 1; i < len(keys); i++ {
		a, b := &keys[i-1], &keys[i]
		switch {
		case a.DB != b.DB:
			if a.DB > b.DB {
				return false
			}
		case len(a.Key) != len(b.Key):
			if len(a.Key) > len(b.Key) {
				return false
			}
		case a.Key >= b.Key:
			return false
		}
	}
	return true
}

// run is the unread part of one run of keys: keys[next:end].
type run struct{ next, end int }

type runHeap struct {
	keys []keyspace.Walked
	runs []run
}

func (h *runHeap) less(i, j int) bool {
	return h.keys[h.runs[i].next].Key < h.keys[h.runs[j].next].Key
}

// down restores the heap below i.
func (h *runHeap) down(i int) {
	n := len(h.runs)
	for {
		l := 2*i + 1
		if l >= n {
			return
		}
		m := l
		if r := l + 1; r < n && h.less(r, l) {
			m = r
		}
		if !h.less(m, i) {
			return
		}
		h.runs[i], h.runs[m] = h.runs[m], h.runs[i]
		i = m
	}
}

// sortByKey sorts keys in metadata order.
func sortByKey(keys []keyspace.Walked) {
	slices.SortFunc(keys, func(a, b keyspace.Walked) int {
		if a.DB != b.DB {
			return int(a.DB) - int(b.DB)
		}
		return compareStrings(a.Key, b.Key)
	})
}
