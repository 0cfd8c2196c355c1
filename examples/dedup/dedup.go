package main

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// A Deduper tells, for a batch of event ids in arrival order, which are
// new: not seen within the window (a repeat inside the batch counts).
type Deduper interface {
	New(ctx context.Context, ids []string) ([]bool, error)
	// Commands is how many commands it sent so far (one round trip per
	// batch either way: the rotating filters' three are pipelined).
	Commands() int
}

// Window is the sliding-window filter: one bfserver key, BFX.WINSERT,
// one command per batch. The server stamps the time; every client and
// every replica agree on it, so the window's edge is the same for all.
//
// Guarantees (docs/COMMANDS.md, Sliding windows): an id seen less than
// the window ago is always reported a duplicate; an id never seen, or
// seen longer ago than the window plus its forgetting margin (a few
// percent to a quarter more), is reported new except with probability at
// most the error rate.
type Window struct {
	rdb  *redis.Client
	key  string
	spec []any // the window, for BFX.WINSERT to create the key with
	cmds int
}

// NewWindow is a Window over key: of a duration (window > 0) with the
// inserts expected in it (capacity), or of the last count events.
func NewWindow(rdb *redis.Client, key string, window time.Duration, count, capacity int64, errorRate float64) *Window {
	spec := []any{"ERROR", strconv.FormatFloat(errorRate, 'g', -1, 64)}
	if count > 0 {
		spec = append(spec, "COUNT", count)
	} else {
		spec = append(spec, "PX", window.Milliseconds(), "CAPACITY", capacity)
	}
	return &Window{rdb: rdb, key: key, spec: spec}
}

func (w *Window) New(ctx context.Context, ids []string) ([]bool, error) {
	// BFX.WINSERT key ERROR e PX ms CAPACITY c ITEMS id...: creates the
	// window on first use (several consumers may race to: the first
	// creates it, the others add to it), adds every id, and answers 1 for
	// each that was not already in the window.
	args := append(append([]any{"BFX.WINSERT", w.key}, w.spec...), "ITEMS")
	for _, id := range ids {
		args = append(args, id)
	}
	w.cmds++
	// Integers in RESP2, booleans in RESP3 (go-redis's default): BoolSlice
	// takes either.
	out, err := w.rdb.Do(ctx, args...).BoolSlice()
	if err != nil {
		return nil, fmt.Errorf("BFX.WINSERT %s: %w", w.key, err)
	}
	return out, nil
}

func (w *Window) Commands() int { return w.cmds }

// Rotating is the workaround a Bloom filter without a window forces
// (RedisBloom's BF.*, also on bfserver): one filter per period of the
// window's length, named by the client's clock, expiring after two
// periods; an id is a duplicate if the current or the previous period's
// filter has it. Each filter gets half the error rate, so that the two
// together stay within it, and the whole window's capacity.
//
// What it gets wrong, by construction:
//   - The window's edge jumps: an id is remembered until the end of the
//     period after the one it was seen in, between one and two windows,
//     depending on where in its period it came. An hourly de-duplication
//     drops a legitimate repeat 1h59m later, and keeps one 1h01m later.
//   - Two lookups and an add per batch (three commands), and two filters'
//     memory: each sized for the whole window at half the rate.
//   - The period comes from each client's clock: clients whose clocks
//     differ by s disagree on which filter is current for s around every
//     rotation, and the early one creates the next filter before the late
//     one stops writing to the last.
type Rotating struct {
	rdb       *redis.Client
	key       string
	window    time.Duration
	capacity  int64
	errorRate float64
	now       func() time.Time
	cmds      int
}

// NewRotating is the two-filter workaround over key:<period>.
func NewRotating(rdb *redis.Client, key string, window time.Duration, capacity int64, errorRate float64) *Rotating {
	return &Rotating{rdb: rdb, key: key, window: window, capacity: capacity, errorRate: errorRate, now: time.Now}
}

func (r *Rotating) period(p int64) string { return r.key + ":" + strconv.FormatInt(p, 10) }

func (r *Rotating) New(ctx context.Context, ids []string) ([]bool, error) {
	p := r.now().UnixMilli() / r.window.Milliseconds()
	cur, prev := r.period(p), r.period(p-1)
	items := make([]any, len(ids))
	for i, id := range ids {
		items[i] = id
	}
	pipe := r.rdb.Pipeline()
	// The previous period's filter (absent: nothing seen then).
	old := pipe.Do(ctx, append([]any{"BF.MEXISTS", prev}, items...)...)
	// The current one: created on first use at half the rate, and each
	// id added (0: it was there already).
	add := pipe.Do(ctx, append([]any{"BF.INSERT", cur, "CAPACITY", r.capacity,
		"ERROR", strconv.FormatFloat(r.errorRate/2, 'g', -1, 64), "ITEMS"}, items...)...)
	// It must outlive the next period, in which it is the previous one.
	pipe.Do(ctx, "EXPIRE", cur, int64((2*r.window+time.Second-1)/time.Second), "NX")
	_, err := pipe.Exec(ctx)
	r.cmds += 3
	if err != nil && !errors.Is(err, redis.Nil) {
		return nil, fmt.Errorf("rotating filters %s: %w", cur, err)
	}
	seenBefore, err := old.BoolSlice()
	if err != nil {
		return nil, fmt.Errorf("BF.MEXISTS %s: %w", prev, err)
	}
	added, err := add.BoolSlice()
	if err != nil {
		return nil, fmt.Errorf("BF.INSERT %s: %w", cur, err)
	}
	out := make([]bool, len(ids))
	for i := range ids {
		out[i] = !seenBefore[i] && added[i]
	}
	return out, nil
}

func (r *Rotating) Commands() int { return r.cmds }
