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
