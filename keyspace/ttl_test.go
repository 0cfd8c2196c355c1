package keyspace

import (
	"slices"
	"strconv"
	"testing"

	"github.com/bfserver/bfserver/command"
)

// TestDueTracksExpiries: active expiry and the key counts look only at
// keys with an expiry, so that set, EXPIRE, PERSIST, RENAME, DEL, RESTORE,
// a stored image and FLUSHDB must each keep that set right: Due finds
// exactly the expired keys, and Count agrees with a scan of every key.
func TestDueTracksExpiries(t *testing.T) {
	k := New()
	apply := func(c command.Cmd) Result {
		c.Now = 1000
		r := k.Apply(&c)
		if r.Err != nil {
			t.Fatalf("%v: %v", c.Op, r.Err)
		}
		return r
	}
	for i := 0; i < 2000; i++ {
		apply(command.Cmd{Op: command.Set, Key: []byte("plain:" + strconv.Itoa(i)), Data: []byte("v")})
	}
	for _, key := range []string{"a", "b", "c", "d", "e"} {
		apply(command.Cmd{Op: command.Set, Key: []byte(key), Data: []byte("v")})
		apply(command.Cmd{Op: command.Expire, Key: []byte(key), Iter: 5000})
	}
	apply(command.Cmd{Op: command.Persist, Key: []byte("b")})                        // no expiry now
	apply(command.Cmd{Op: command.Rename, Key: []byte("c"), Dst: []byte("c2")})      // the expiry moves
	apply(command.Cmd{Op: command.Del, Keys: [][]byte{[]byte("d")}})                 // gone
	apply(command.Cmd{Op: command.Set, Key: []byte("e"), Data: []byte("w")})         // SET drops it
	apply(command.Cmd{Op: command.Rename, Key: []byte("plain:1"), Dst: []byte("a")}) // over an expiring key
	apply(command.Cmd{Op: command.Expire, Key: []byte("plain:2"), Iter: 3000})       // a plain key gains one
	if err := k.LoadValue(0, "img", encodeMeta(&Value{Kind: KindString, ExpireAt: 4000}), 1<<20); err != nil {
		t.Fatal(err)
	}
	check := func(now int64, want []string) {
		t.Helper()
		var got []string
		for _, b := range k.Due(0, now, 1000) {
			got = append(got, string(b))
		}
		slices.Sort(got)
		if !slices.Equal(got, want) {
			t.Fatalf("Due at %d = %v, want %v", now, got, want)
		}
		keys, expires := k.Count(0, now)
		var wantKeys, wantExpires int
		k.Range(0, func(_ string, v *Value) bool {
			if !v.expired(now) {
				wantKeys++
				if v.ExpireAt != 0 {
					wantExpires++
				}
			}
			return true
		})
		if keys != wantKeys || expires != wantExpires {
			t.Fatalf("Count at %d = %d keys, %d expiring; a scan finds %d, %d", now, keys, expires, wantKeys, wantExpires)
		}
	}
	check(2000, nil)
	check(3500, []string{"plain:2"})
	check(6000, []string{"c2", "img", "plain:2"})
	apply(command.Cmd{Op: command.FlushDB})
	check(6000, nil)
}

// TestTTLReadsExpiryOnce: TTL and PTTL answer -2 for a key missing or
// expired at the command's time, -1 for one without expiry, else what is
// left of it (TTL rounded to seconds), from one lock-free read.
func TestTTLReadsExpiryOnce(t *testing.T) {
	k := New()
	item := [][]byte{[]byte("x")}
	k.Apply(&command.Cmd{Op: command.BFAdd, Key: []byte("f"), Items: item, Multi: true, ErrorRate: 0.01, Capacity: 100, Expansion: 2, MaxBytes: capBytes})
	ttl := func(now int64, ms bool) int64 {
		return k.Read(&command.Cmd{Op: command.TTL, Key: []byte("f"), Now: now, Flag: ms}).Int
	}
	if got := k.Read(&command.Cmd{Op: command.TTL, Key: []byte("none"), Now: 1}).Int; got != -2 {
		t.Fatalf("missing key: TTL %d, want -2", got)
	}
	if got := ttl(1, false); got != -1 {
		t.Fatalf("no expiry: TTL %d, want -1", got)
	}
	k.setExpire(0, []byte("f"), k.Lookup(0, []byte("f"), 1), 10_000)
	for _, c := range []struct {
		now  int64
		ms   bool
		want int64
	}{{1_000, true, 9_000}, {1_000, false, 9}, {9_400, false, 1}, {9_999, true, 1}, {10_000, true, -2}, {20_000, false, -2}} {
		if got := ttl(c.now, c.ms); got != c.want {
			t.Fatalf("expiry at 10000, now %d (ms %v): TTL %d, want %d", c.now, c.ms, got, c.want)
		}
	}
}
