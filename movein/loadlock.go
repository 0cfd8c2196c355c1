package movein

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// LockSuffix names the string key a load holds while it runs
// (KEY:bfload-lock): its value is a token only that run knows. A load
// starts only by setting it, and writes its temporary keys and swaps the
// result in only while it still holds that token.
const LockSuffix = ":bfload-lock"

// claim is one run's hold on a key's load: its lock key and token, and
// the mark it sets on the temporary keys it makes.
type claim struct {
	c           *redis.Client
	lock, token string
	// The mark: every temporary key this run makes gets an expiry of
	// markTTL, a century and a random part of this run's alone. Adding
	// items leaves a key's expiry alone; deleting the key or replacing it
	// (MULTI; DEL; BF.RESERVE; EXEC, a RESTORE, a RENAME onto it, another
	// run's reservation after --force) does not keep it. So a key whose TTL
	// is markTTL less the time since since is this run's, its own items
	// in it; PTTL reads it on RedisBloom and bfserver alike (bfserver has
	// no PEXPIRETIME). The swap PERSISTs the published key.
	markTTL time.Duration
	since   time.Time // when the run took the lock, before any mark
}

const (
	markBase = 100 * 365 * 24 * time.Hour
	// markSlack is how far a mark's PTTL may stray from what this
	// process's clock expects: the server's clock may be stepped (NTP)
	// while a load runs. The random part spans 2^40 ms (35 years), so
	// no other TTL lands this close to the mark by chance.
	markSlack = time.Hour
)

// busyError refuses a load: another load of the key holds its lock, or an
// interrupted one left its lock or temporary keys.
type busyError struct {
	key    string
	left   []string // the keys found
	holder string   // the lock's value, "" when there is no lock
}

func (e *busyError) Error() string {
	names := make([]string, len(e.left))
	for i, k := range e.left {
		names[i] = showKey(k)
	}
	if e.holder != "" { // the lock, first
		names[0] += " (held by " + e.holder + ")"
	}
	return fmt.Sprintf("%s: another load of %s is running, or an interrupted one left them: wait for it to end, or pass --force to delete them first",
		strings.Join(names, ", "), showKey(e.key))
}

// newToken names this run for the lock's value: who holds it and since
// when, and 16 random hex digits that make it this run's alone.
func newToken() string {
	host, _ := os.Hostname()
	return fmt.Sprintf("pid %d on %s since %s, run %s", os.Getpid(), host,
		time.Now().UTC().Format(time.RFC3339), rand.Text()[:16])
}

// take sets key's lock to a new token when neither the lock nor any of
// temps exists, atomically against other runs doing the same at the same
// moment: WATCH the lock, read it and temps, MULTI, SET, EXEC (bfserver's
// SET has no NX). Of runs racing for it one EXEC succeeds; the others'
// fail, and their next look finds the lock taken. temps are not watched:
// a writer's BF.INSERT … NOCREATE on a missing key counts as a change to
// it for WATCH (in RedisBloom as in bfserver), and only a run holding the
// lock creates them.
func take(ctx context.Context, c *redis.Client, key string, temps []string) (*claim, error) {
	var r [8]byte
	rand.Read(r[:])
	cl := &claim{c: c, lock: key + LockSuffix, token: newToken(), since: time.Now(),
		markTTL: markBase + time.Duration(binary.LittleEndian.Uint64(r[:])>>24)*time.Millisecond}
	for tries := 1; ; tries++ {
		err := c.Watch(ctx, func(tx *redis.Tx) error {
			var holder *redis.StringCmd
			exists := make([]*redis.IntCmd, len(temps))
			_, err := tx.Pipelined(ctx, func(p redis.Pipeliner) error {
				holder = p.Get(ctx, cl.lock)
				for i, k := range temps {
					exists[i] = p.Exists(ctx, k)
				}
				return nil
			})
			if err != nil && !errors.Is(err, redis.Nil) {
				return fmt.Errorf("reading %s: %w", showKey(cl.lock), err)
			}
			busy := &busyError{key: key}
			if holder.Err() == nil {
				busy.left, busy.holder = append(busy.left, cl.lock), holder.Val()
			}
			for i, k := range temps {
				if err := exists[i].Err(); err != nil {
					return fmt.Errorf("EXISTS %s: %w", showKey(k), err)
				}
				if exists[i].Val() > 0 {
					busy.left = append(busy.left, k)
				}
			}
			if len(busy.left) > 0 {
				return busy
			}
			_, err = tx.TxPipelined(ctx, func(p redis.Pipeliner) error {
				p.Set(ctx, cl.lock, cl.token, 0)
				return nil
			})
			return err
		}, cl.lock)
		if !errors.Is(err, redis.TxFailedErr) {
			if err != nil {
				return nil, err
			}
			return cl, nil
		}
		// The lock changed between WATCH and EXEC: another run took it
		// (or took it and is done already); look again.
		if tries == 100 {
			return nil, fmt.Errorf("%s keeps changing: other loads of %s are starting", showKey(cl.lock), showKey(key))
		}
	}
}

var (
	// errLost means the run no longer holds its lock: another run took it
	// over (--force), or it was deleted.
	errLost = errors.New("lost the lock")
	// errReplaced means a temporary key exists but lacks this run's mark:
	// another client replaced it (or another run made it).
	errReplaced = errors.New("not the filter this load made")
)

func (cl *claim) lost() error {
	return fmt.Errorf("%s no longer holds this run's token: another load took it over (--force) or it was deleted: %w",
		showKey(cl.lock), errLost)
}

// mark queues the expiry that marks key as this run's.
func (cl *claim) mark(ctx context.Context, p redis.Pipeliner, key string) {
	p.PExpire(ctx, key, cl.markTTL)
}

// owned queues a look at key in p and returns the check of its reply:
// key exists with this run's mark (else errGone, errReplaced).
func (cl *claim) owned(ctx context.Context, p redis.Pipeliner, key string) func() error {
	pttl := p.Do(ctx, "PTTL", key)
	return func() error {
		ttl, err := pttl.Int64()
		if err != nil {
			return fmt.Errorf("PTTL %s: %w", showKey(key), err)
		}
		if ttl == -2 {
			return errGone
		}
		// Every mark this run set has markTTL from a moment after since.
		low := cl.markTTL - time.Since(cl.since) - markSlack
		if got := time.Duration(ttl) * time.Millisecond; got < low || got > cl.markTTL+markSlack {
			return fmt.Errorf("%w: its PTTL is %d, not the expiry this load set", errReplaced, ttl)
		}
		return nil
	}
}

// do runs queue's commands in one MULTI/EXEC if the lock still holds this
// run's token, with the lock and keys WATCHed from the check to the EXEC:
// a run that has lost the lock never writes to the keys of the run that
// holds it now, and what check found of keys (that a key is still this
// run's, say) still holds at the EXEC. check, when set, queues its reads
// in the pipeline that reads the lock (one round trip between WATCH and
// EXEC) and returns what judges their replies. A transaction aborted by a
// change to keys (an item a writer added) is tried again. An error reply
// to a queued command is returned with the command's name (the commands
// after it have run).
func (cl *claim) do(ctx context.Context, keys []string, check func(p redis.Pipeliner) func() error, queue func(p redis.Pipeliner)) error {
	for tries := 1; ; tries++ {
		err := cl.c.Watch(ctx, func(tx *redis.Tx) error {
			// WATCH goes in the pipeline of reads, so that only one round
			// trip separates it from the EXEC: a writer adding to keys in
			// between aborts the transaction. Tx tracks only its own
			// Watch, so every way out but the EXEC unwatches here.
			var watch *redis.Cmd
			var lock *redis.StringCmd
			judge := func() error { return nil }
			execd := false
			defer func() {
				if !execd {
					tx.Unwatch(ctx)
				}
			}()
			tx.Pipelined(ctx, func(p redis.Pipeliner) error {
				args := []any{"WATCH", cl.lock}
				for _, k := range keys {
					args = append(args, k)
				}
				watch = p.Do(ctx, args...)
				lock = p.Get(ctx, cl.lock)
				if check != nil {
					judge = check(p)
				}
				return nil
			})
			if err := watch.Err(); err != nil {
				return fmt.Errorf("WATCH: %w", err)
			}
			v, err := lock.Result()
			if errors.Is(err, redis.Nil) || err == nil && v != cl.token {
				return cl.lost()
			}
			if err != nil {
				return fmt.Errorf("reading %s: %w", showKey(cl.lock), err)
			}
			if err := judge(); err != nil {
				return err
			}
			execd = true
			cmds, err := tx.TxPipelined(ctx, func(p redis.Pipeliner) error {
				queue(p)
				return nil
			})
			for _, c := range cmds {
				if c.Err() != nil && !errors.Is(err, redis.TxFailedErr) {
					return fmt.Errorf("%s: %w", strings.ToUpper(c.Name()), c.Err())
				}
			}
			return err
		})
		// Aborted: the lock changed (the next look says so) or one of keys.
		if !errors.Is(err, redis.TxFailedErr) {
			return err
		}
		if tries == 1000 {
			names := make([]string, len(keys))
			for i, k := range keys {
				names[i] = showKey(k)
			}
			return fmt.Errorf("%s kept changing (writers adding to it?): tried %d times", strings.Join(names, ", "), tries)
		}
	}
}

// release deletes those of keys that still carry this run's mark, and the
// lock, if the lock still holds this run's token; otherwise nothing: they
// are another run's (or client's) now.
func (cl *claim) release(ctx context.Context, keys ...string) error {
	var ours []string
	return cl.do(ctx, keys, func(p redis.Pipeliner) func() error {
		checks := make([]func() error, len(keys))
		for i, k := range keys {
			checks[i] = cl.owned(ctx, p, k)
		}
		return func() error {
			ours = ours[:0]
			for i, k := range keys {
				switch err := checks[i](); {
				case err == nil:
					ours = append(ours, k)
				case !errors.Is(err, errGone) && !errors.Is(err, errReplaced):
					return err
				}
			}
			return nil
		}
	}, func(p redis.Pipeliner) {
		p.Del(ctx, append(ours, cl.lock)...)
	})
}
