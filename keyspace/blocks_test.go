package keyspace

import "testing"

// TestPages: a list in pages gives back by index what was added, in
// order, across page boundaries, and no page is larger than blockLen.
func TestPages(t *testing.T) {
	for _, n := range []int{0, 1, 255, blockLen - 1, blockLen, blockLen + 1, 3*blockLen + 5} {
		var p pages[int]
		for i := range n {
			p.add(i)
		}
		if p.Len() != n {
			t.Fatalf("n=%d: Len %d", n, p.Len())
		}
		for i := range n {
			if got := *p.at(i); got != i {
				t.Fatalf("n=%d: at(%d) = %d", n, i, got)
			}
		}
		for j, pg := range p.ps {
			if cap(pg) > blockLen {
				t.Fatalf("n=%d: page %d has room for %d", n, j, cap(pg))
			}
		}
	}
}
