package replication

import (
	"context"
	"sync"
	"time"
)

// coalescer shares one call of fn among every caller that arrives before
// it starts: concurrent linearizable reads need one read index, not one
// each. A caller only joins a round that has not started, so the index it
// gets was obtained after it asked. Up to maxRounds run at once, so a
// caller that arrives mid-round starts the next one at once instead of
// waiting for the current one to finish.
type coalescer struct {
	fn      func(context.Context) (uint64, error)
	mu      sync.Mutex
	next    *round // not started; new callers join it
	running int
}

const maxRounds = 4

type round struct {
	done chan struct{}
	idx  uint64
	err  error
}

func newCoalescer(fn func(context.Context) (uint64, error)) *coalescer {
	return &coalescer{fn: fn}
}

func (c *coalescer) do(ctx context.Context) (uint64, error) {
	c.mu.Lock()
	r := c.next
	if r == nil {
		r = &round{done: make(chan struct{})}
		c.next = r
	}
	if c.running < maxRounds {
		c.running++
		c.next = nil
		go c.run(r)
	}
	c.mu.Unlock()
	select {
	case <-r.done:
		return r.idx, r.err
	case <-ctx.Done():
		return 0, ctx.Err()
	}
}

// run completes a round, then starts the waiting one, if any, in its place.
func (c *coalescer) run(r *round) {
	for r != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		r.idx, r.err = c.fn(ctx)
		cancel()
		close(r.done)
		c.mu.Lock()
		r, c.next = c.next, nil
		if r == nil {
			c.running--
		}
		c.mu.Unlock()
	}
}
