// Package merge visits sorted runs of one slice in their merged order: a
// k-way merge over a min-heap of the runs' heads, by index, so the
// elements are neither copied nor moved. The image's metadata order
// (persistence) and a cut's walk order (keyspace) merge runs this way.
package merge

// Run is the unread part of one sorted run: indices Next to End-1 of the
// caller's slice. A run is not empty.
type Run struct{ Next, End int }

// Runs calls fn with the index of every element of runs, in the order
// less (a strict order on indices) gives, each run being sorted by it;
// it stops early when fn returns false. It reuses runs.
func Runs(runs []Run, less func(i, j int) bool, fn func(i int) bool) {
	h := heap{runs: runs, less: less}
	for i := len(runs)/2 - 1; i >= 0; i-- {
		h.down(i)
	}
	for len(h.runs) > 0 {
		r := &h.runs[0]
		if !fn(r.Next) {
			return
		}
		if r.Next++; r.Next == r.End {
			last := len(h.runs) - 1
			h.runs[0] = h.runs[last]
			h.runs = h.runs[:last]
		}
		h.down(0)
	}
}

// heap is a min-heap of runs by the element at their Next.
type heap struct {
	runs []Run
	less func(i, j int) bool
}

// down restores the heap below i.
func (h *heap) down(i int) {
	n := len(h.runs)
	for {
		l := 2*i + 1
		if l >= n {
			return
		}
		m := l
		if r := l + 1; r < n && h.less(h.runs[r].Next, h.runs[l].Next) {
			m = r
		}
		if !h.less(h.runs[m].Next, h.runs[i].Next) {
			return
		}
		h.runs[i], h.runs[m] = h.runs[m], h.runs[i]
		i = m
	}
}
