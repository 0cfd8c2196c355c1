package scalable

import "testing"

// TestLinksNoAlloc: listing a one-link chain's links, as every test, add
// and count does per item, allocates nothing: Links inlines, and the
// array it lists the first link in stays on the caller's stack. It fails
// if Links stops inlining (or keeps its array on the heap).
func TestLinksNoAlloc(t *testing.T) {
	c, err := NewChain(1000, 0.01, 2, false, 1<<30)
	if err != nil {
		t.Fatal(err)
	}
	item := []byte("x")
	n := 0
	for name, fn := range map[string]func(){
		"Links":    func() { n += len(c.Links()) },
		"Test":     func() { c.Test(item) },
		"Add":      func() { c.Add(item, 1<<30) },
		"Size":     func() { n += int(c.Size()) },
		"MemUsage": func() { n += int(c.MemUsage()) },
	} {
		if a := testing.AllocsPerRun(100, fn); a != 0 {
			t.Errorf("%s on a one-link chain allocates %v times", name, a)
		}
	}
}
