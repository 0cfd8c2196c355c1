package movein

import (
	"context"
	"crypto/rand"
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

// claim is one run's hold on a key's load: its lock key and token.
type claim struct {
	c           *redis.Client
	lock, token string
}

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
	cl := &claim{c: c, lock: key + LockSuffix, token: newToken()}
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

// errLost means the run no longer holds its lock: another run took it
// over (--force), or it was deleted.
var errLost = errors.New("lost the lock")

func (cl *claim) lost() error {
	return fmt.Errorf("%s no longer holds this run's token: another load took it over (--force) or it was deleted: %w",
		showKey(cl.lock), errLost)
}

// do runs queue's commands in one MULTI/EXEC if the lock still holds this
// run's token, with the lock WATCHed from the check to the EXEC: a run
// that has lost the lock never writes to the keys of the run that holds it
// now. check, when set, runs in between on the same connection (to see
// that a key is still there, say). An error reply to a queued command is
// returned with the command's name (the commands after it have run).
func (cl *claim) do(ctx context.Context, check func(tx *redis.Tx) error, queue func(p redis.Pipeliner)) error {
	err := cl.c.Watch(ctx, func(tx *redis.Tx) error {
		v, err := tx.Get(ctx, cl.lock).Result()
		if errors.Is(err, redis.Nil) || err == nil && v != cl.token {
			return cl.lost()
		}
		if err != nil {
			return fmt.Errorf("reading %s: %w", showKey(cl.lock), err)
		}
		if check != nil {
			if err := check(tx); err != nil {
				return err
			}
		}
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
	}, cl.lock)
	if errors.Is(err, redis.TxFailedErr) {
		return cl.lost()
	}
	return err
}

// release deletes keys and the lock if the lock still holds this run's
// token; otherwise nothing: they are another run's now.
func (cl *claim) release(ctx context.Context, keys ...string) error {
	return cl.do(ctx, nil, func(p redis.Pipeliner) {
		p.Del(ctx, append(keys, cl.lock)...)
	})
}
