package replication

import (
	"context"
	"testing"
	"time"
)

func TestHoldersWait(t *testing.T) {
	h := newHolders()
	ctx := context.Background()
	if err := h.wait(ctx, 10, nil); err != nil {
		t.Fatalf("no holders: %v", err)
	}

	// A holder that has not applied the index holds the write back until
	// it reports it.
	h.report("b", 5, time.Now().Add(time.Minute))
	done := make(chan error, 1)
	go func() { done <- h.wait(ctx, 10, nil) }()
	h.report("b", 9, time.Time{})
	select {
	case err := <-done:
		t.Fatalf("returned at applied 9 < 10: %v", err)
	case <-time.After(20 * time.Millisecond):
	}
	h.report("b", 10, time.Time{})
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if h.count() != 1 {
		t.Fatalf("count %d, want 1", h.count())
	}

	// A report without a lease never shortens one.
	short, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	if err := h.wait(short, 11, nil); err == nil {
		t.Fatal("returned although holder b has not applied 11")
	}

	// A holder that stops reporting holds writes back only until its
	// lease ends.
	h.report("c", 0, time.Now().Add(50*time.Millisecond))
	h.report("b", 100, time.Time{})
	began := time.Now()
	if err := h.wait(ctx, 50, nil); err != nil {
		t.Fatal(err)
	}
	if waited := time.Since(began); waited < 30*time.Millisecond {
		t.Fatalf("returned after %v, before holder c's lease ended", waited)
	}
	if h.count() != 1 {
		t.Fatalf("count %d after c's lease ended, want 1", h.count())
	}
}
