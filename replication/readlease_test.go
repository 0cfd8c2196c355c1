package replication

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"
)

// fakeFollowers answers holders.tell: each message waits for release, then
// succeeds unless the follower is down.
type fakeFollowers struct {
	mu      sync.Mutex
	down    map[string]bool
	told    map[string][]uint64
	release chan struct{}
}

func (f *fakeFollowers) tell(id string, index uint64) error {
	<-f.release
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.down[id] {
		return errors.New("down")
	}
	f.told[id] = append(f.told[id], index)
	return nil
}

func TestHoldersWait(t *testing.T) {
	f := &fakeFollowers{down: map[string]bool{}, told: map[string][]uint64{}, release: make(chan struct{})}
	h := newHolders(f.tell)
	ctx := context.Background()
	if err := h.wait(ctx, 10, time.Minute); err != nil {
		t.Fatalf("no holders: %v", err)
	}

	// A holder must be told of index 10 before a write at 10 returns.
	h.grant("b", time.Now().Add(time.Minute))
	done := make(chan error, 3)
	go func() { done <- h.wait(ctx, 10, time.Minute) }()
	waitWant(t, h, "b", 10)
	select {
	case err := <-done:
		t.Fatalf("returned before the follower was told: %v", err)
	default:
	}
	// Writes that arrive meanwhile share the next message.
	go func() { done <- h.wait(ctx, 11, time.Minute) }()
	go func() { done <- h.wait(ctx, 12, time.Minute) }()
	waitWant(t, h, "b", 12)
	close(f.release)
	for i := 0; i < 3; i++ {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	f.mu.Lock()
	if got := f.told["b"]; len(got) < 1 || len(got) > 2 || got[len(got)-1] != 12 {
		t.Fatalf("follower b was told %v, want at most two messages, the last about 12", got)
	}
	f.mu.Unlock()
	if h.count() != 1 {
		t.Fatalf("count %d, want 1", h.count())
	}
	// What it was told stays told, across a renewal too.
	h.grant("b", time.Now().Add(2*time.Minute))
	if err := h.wait(ctx, 12, time.Minute); err != nil {
		t.Fatal(err)
	}

	// A holder that cannot be told holds writes back until its lease ends,
	// and is not retried in the meantime.
	f.mu.Lock()
	f.down["c"] = true
	f.mu.Unlock()
	h.grant("c", time.Now().Add(50*time.Millisecond))
	began := time.Now()
	if err := h.wait(ctx, 20, time.Minute); err != nil {
		t.Fatal(err)
	}
	if waited := time.Since(began); waited < 30*time.Millisecond {
		t.Fatalf("returned after %v, before holder c's lease ended", waited)
	}
	if h.count() != 1 {
		t.Fatalf("count %d after c's lease ended, want 1", h.count())
	}
	if h.grant("c", time.Now().Add(time.Minute)) {
		t.Fatal("a lease was granted to c right after the leader failed to reach it")
	}
	short, cancel := context.WithTimeout(ctx, 10*time.Millisecond)
	defer cancel()
	f.mu.Lock()
	f.down["b"] = true
	f.mu.Unlock()
	h.grant("b", time.Now().Add(time.Minute))
	if err := h.wait(short, 30, time.Minute); err == nil {
		t.Fatal("returned although follower b, still holding a lease, was never told of 30")
	}
	if err := h.wait(ctx, 30, 10*time.Millisecond); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("past its deadline, with b still holding a lease: %v, want the deadline", err)
	}
}

// waitWant polls until writes wait for follower id to be told of index.
func waitWant(t *testing.T, h *holders, id string, index uint64) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		h.mu.Lock()
		want := h.m[id].want
		h.mu.Unlock()
		if want >= index {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("writes never waited for %s to be told of %d", id, index)
		}
		time.Sleep(time.Millisecond) // polling the table
	}
}
