package keyspace

import "iter"

// blocks is a list kept in blocks of at most blockLen elements: it grows
// without copying what it holds, and is copied out a block at a time. The
// record's fresh keys and a cut's kept chunks are such lists.
//
// Why: a slice of a million keys (the record's fresh creations) grew by
// copying them all at once, and a cut's walk copied them all at once
// again. Each key holds a pointer, so while the collector marks, such a
// copy passes every pointer through a write barrier in one step the
// runtime cannot preempt: 150 ms in which the walk kept its P while the
// collector's worker spun on the other, waiting to stop it, and the
// event loop, runnable, had neither (an execution trace of bench/stall,
// the longest write of its steady phase). A block's copy takes well under
// a millisecond.
type blocks[T any] struct {
	bs [][]T
	n  int
}

// blockLen is the most elements a block holds.
const blockLen = 4096

// add appends v. A list's first blocks are small (256 elements, doubling
// to blockLen), so a short list costs little.
func (l *blocks[T]) add(v T) {
	last := len(l.bs) - 1
	if last < 0 || len(l.bs[last]) == cap(l.bs[last]) {
		l.bs = append(l.bs, make([]T, 0, min(blockLen, max(256, l.n))))
		last++
	}
	l.bs[last] = append(l.bs[last], v)
	l.n++
}

// Len is how many elements the list holds.
func (l *blocks[T]) Len() int { return l.n }

// all yields the elements in the order they were added.
func (l *blocks[T]) all() iter.Seq[T] {
	return func(yield func(T) bool) {
		for _, b := range l.bs {
			for _, v := range b {
				if !yield(v) {
					return
				}
			}
		}
	}
}

// then is l followed by m, neither copied; l and m are not to be used
// after. A block of l that is not full stays where it is: add only ever
// appends to the last block.
func (l blocks[T]) then(m blocks[T]) blocks[T] {
	return blocks[T]{bs: append(l.bs, m.bs...), n: l.n + m.n}
}

// pages is a list kept in pages of blockLen elements, indexable (at),
// for the lists a cut's walk builds over every key it writes: the keys in
// chunk order (walkOrder) and what the image needs of each (WalkedKeys).
//
// Why: built as one slice, a million walked keys were one allocation of
// 53 MB. Allocating while the collector marks costs the goroutine an
// assist in proportion to the bytes, all at once and not preemptible: an
// execution trace of bench/stall's small scenario showed the flush's walk
// assisting for 226 ms in that one allocation, holding one of the two Ps
// while the collector's worker took the other, and writes waited. A page
// is at most a few hundred kilobytes.
//
// It is not blocks: a list of blocks joins another without copying
// (then, which Restore needs for a million fresh keys), so its blocks are
// not all full and it cannot be indexed; pages are all full but the last,
// and cannot be joined without copying.
type pages[T any] struct {
	ps [][]T
	n  int
}

// add appends v. The first page starts at 256 elements and doubles up
// to blockLen, so a short list costs little; the others are allocated
// whole.
func (p *pages[T]) add(v T) {
	last := len(p.ps) - 1
	switch {
	case last < 0 || len(p.ps[last]) == blockLen:
		p.ps = append(p.ps, make([]T, 0, min(blockLen, max(256, p.n))))
		last++
	case len(p.ps[last]) == cap(p.ps[last]):
		grown := make([]T, len(p.ps[last]), min(blockLen, 2*cap(p.ps[last])))
		copy(grown, p.ps[last])
		p.ps[last] = grown
	}
	p.ps[last] = append(p.ps[last], v)
	p.n++
}

// at is element i, 0 <= i < Len.
func (p *pages[T]) at(i int) *T {
	u := uint(i)
	return &p.ps[u/blockLen][u%blockLen]
}

// Len is how many elements the list holds.
func (p *pages[T]) Len() int { return p.n }
