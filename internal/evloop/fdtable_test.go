//go:build linux

package evloop

import "testing"

// TestFDTable: a loop's connections by descriptor: found by their own
// descriptor only, counted once however often put, gone once deleted,
// whatever the order of descriptors.
func TestFDTable(t *testing.T) {
	var tb fdTable
	conns := map[int]*Conn{}
	for _, fd := range []int{7, 3, 300, 3, 0, 64} {
		c := &Conn{fd: fd}
		tb.put(c)
		conns[fd] = c
	}
	if tb.n != len(conns) {
		t.Fatalf("%d counted, want %d", tb.n, len(conns))
	}
	for fd := -1; fd < 400; fd++ {
		if got := tb.get(fd); got != conns[fd] {
			t.Fatalf("fd %d: %p, want %p", fd, got, conns[fd])
		}
	}
	tb.del(300)
	tb.del(300)
	tb.del(1000)
	delete(conns, 300)
	if tb.n != len(conns) || tb.get(300) != nil {
		t.Fatalf("after deleting 300: %d counted (want %d), get %p", tb.n, len(conns), tb.get(300))
	}
}
