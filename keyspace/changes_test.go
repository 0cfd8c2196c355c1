package keyspace

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strconv"
	"testing"

	"github.com/bfserver/bfserver/command"
	"github.com/bfserver/bfserver/engine"
)

// TestTakeChangesAfterRepeats: the change record skips a key marked just
// before, so every mark after a Cut, a replacement after an
// in-place change, and keys of another database must still be recorded.
func TestTakeChangesAfterRepeats(t *testing.T) {
	k := New()
	k.TrackChanges()
	add := func(db uint8, key, item string) {
		t.Helper()
		r := k.Apply(&command.Cmd{Op: command.BFAdd, DB: db, Key: []byte(key), Items: [][]byte{[]byte(item)}, ErrorRate: 0.01, Capacity: 100, Expansion: 2, MaxBytes: capBytes})
		if r.Err != nil {
			t.Fatal(r.Err)
		}
	}
	type seen struct {
		db   uint8
		key  string
		full bool
	}
	take := func() []seen {
		var out []seen
		ks := &walked(k.Cut()).Keys
		for i := range ks.Len() {
			c := ks.At(i)
			out = append(out, seen{c.DB, c.Key, c.Full})
		}
		slices.SortFunc(out, func(a, b seen) int {
			if a.key != b.key {
				return map[bool]int{true: -1, false: 1}[a.key < b.key]
			}
			return int(a.db) - int(b.db)
		})
		return out
	}
	add(0, "a", "1") // created: replaced
	add(0, "a", "2")
	if got, want := take(), []seen{{0, "a", true}}; !slices.Equal(got, want) {
		t.Fatalf("after create: %v, want %v", got, want)
	}
	add(0, "a", "3") // the same key as the last mark, after a Cut
	add(0, "a", "4")
	if got, want := take(), []seen{{0, "a", false}}; !slices.Equal(got, want) {
		t.Fatalf("after in-place adds: %v, want %v", got, want)
	}
	add(0, "a", "5")
	k.Apply(&command.Cmd{Op: command.Del, Keys: [][]byte{[]byte("a")}}) // in place, then gone
	add(1, "a", "6")                                                    // same name, other database
	for i := 0; i < 3; i++ {
		add(0, "b"+strconv.Itoa(i%2), "x")
	}
	if got, want := take(), []seen{{0, "a", true}, {1, "a", true}, {0, "b0", true}, {0, "b1", true}}; !slices.Equal(got, want) {
		t.Fatalf("after mixed changes: %v, want %v", got, want)
	}
	if got := take(); len(got) != 0 {
		t.Fatalf("nothing changed, yet %v", got)
	}
}

// BenchmarkApplyEntry: what the state machine spends per BF.ADD of a
// 1,000-command log entry to a 60 MB filter, decoding and prefetching
// included, through ApplyEntry as replication's Apply.
func BenchmarkApplyEntry(b *testing.B) {
	k := New()
	k.TrackChanges() // as a persisted node does
	k.Apply(&command.Cmd{Op: command.BFReserve, Key: []byte("bf"), ErrorRate: 0.01, Capacity: 50_000_000, Expansion: 2, NonScaling: true, MaxBytes: 1 << 30})
	var cmds []*command.Cmd
	for i := 0; i < 1000; i++ {
		cmds = append(cmds, &command.Cmd{Op: command.BFAdd, Key: []byte("bf"), Items: [][]byte{[]byte(strconv.Itoa(i * 7919))}, ErrorRate: 0.01, Capacity: 100, Expansion: 2, Now: 5, MaxBytes: 1 << 30})
	}
	data := command.EncodeBatch(cmds)
	var dec command.Decoder
	out := make([]Result, len(cmds))
	users := func() command.Users { return command.Users{} }
	b.ReportAllocs()
	b.ResetTimer()
	for n := 0; n < b.N; n += len(cmds) {
		got, err := dec.Decode(data)
		if err != nil {
			b.Fatal(err)
		}
		k.ApplyEntry(got, out, users, nil)
	}
}

// TestHotLookupChangesNothing: the Apply side's cached lookup gives the
// same results and the same state as looking every key up afresh, through
// creates, deletes, renames, copies, expiries and flushes of a few keys in
// two databases.
func TestHotLookupChangesNothing(t *testing.T) {
	cached, fresh := New(), New()
	rng := rand.New(rand.NewPCG(1, 2))
	keys := [][]byte{[]byte("a"), []byte("b"), []byte("c")}
	now := int64(1000)
	src := New()
	src.Apply(&command.Cmd{Op: command.BFAdd, Key: []byte("x"), Items: [][]byte{[]byte("1"), []byte("2")}, Multi: true, ErrorRate: 0.01, Capacity: 50, Expansion: 2, MaxBytes: capBytes})
	payload := EncodeDump(src.Lookup(0, []byte("x"), 0))
	for i := 0; i < 20000; i++ {
		now += int64(rng.IntN(3))
		key, other := keys[rng.IntN(len(keys))], keys[rng.IntN(len(keys))]
		c := &command.Cmd{DB: uint8(rng.IntN(2)), Key: key, Now: now, MaxBytes: capBytes}
		switch r := rng.IntN(100); {
		case r < 60:
			c.Op, c.Items, c.ErrorRate, c.Capacity, c.Expansion = command.BFAdd, [][]byte{[]byte(strconv.Itoa(rng.IntN(500)))}, 0.01, 100, 2
		case r < 66:
			c.Op, c.Keys, c.Key = command.Del, [][]byte{key}, nil
		case r < 72:
			c.Op, c.Dst, c.NX = command.Rename, other, rng.IntN(2) == 0
		case r < 78:
			c.Op, c.Dst = command.Copy, other
		case r < 86:
			c.Op, c.Iter = command.Expire, int64(rng.IntN(5))
		case r < 90:
			c.Op = command.Persist
		case r < 92:
			c.Op = command.FlushDB
		case r < 95:
			c.Op, c.Data, c.NX = command.Restore, payload, rng.IntN(2) == 0
		default:
			c.Op, c.Items = command.BFExists, [][]byte{[]byte(strconv.Itoa(rng.IntN(500)))}
		}
		if j := rng.IntN(4); j == 0 {
			cached.Prefetch(c)
		}
		fresh.forget()
		a, b := cached.Apply(c), fresh.Apply(c)
		if !reflect.DeepEqual(a, b) {
			t.Fatalf("command %d (%v): %+v cached, %+v fresh", i, c.Op, a, b)
		}
		if got, want := cached.Bytes(), cached.countBytes(); got != want {
			t.Fatalf("command %d (%v): memory total %d, keys hold %d", i, c.Op, got, want)
		}
	}
	for db := uint8(0); db < 2; db++ {
		for _, key := range keys {
			if a, b := digestOf(cached.Lookup(db, key, now)), digestOf(fresh.Lookup(db, key, now)); a != b {
				t.Fatalf("db %d key %s: digests %s and %s", db, key, a, b)
			}
		}
	}
}

func digestOf(v *Value) string {
	if v == nil {
		return "none"
	}
	return Digest(v)
}

// chunksOfCut lists what a cut would write: each key's metadata and its
// chunks' contents.
func chunksOfCut(cut *Cut) map[string]string {
	out := map[string]string{}
	buf := make([]byte, engine.ChunkSize)
	cut.Walk(func(ck *CutKey) error {
		name := strconv.Itoa(int(ck.DB)) + "/" + ck.Key
		out[name] = fmt.Sprintf("full=%v meta=%x", ck.Full, ck.Meta())
		return ck.Chunks(buf, func(c Chunk) error {
			out[fmt.Sprintf("%s/%d/%d", name, c.Part, c.Index)] = string(c.Data)
			return nil
		})
	})
	return out
}

// walked walks a cut as a write that writes nothing would.
func walked(c *Cut) *Cut {
	c.Walk(func(*CutKey) error { return nil })
	return c
}

// restoredAgainstOnce builds steps 0, 1 and 2 into two keyspaces: one
// writes step 0, fails to write step 1 (its cut restored) and cuts after
// step 2; the other writes step 0 and cuts once after step 2. It returns
// what each last cut writes.
func restoredAgainstOnce(build func(k *Keyspace, step int)) (got, want map[string]string) {
	failed, once := New(), New()
	failed.TrackChanges()
	once.TrackChanges()
	build(failed, 0)
	build(once, 0)
	walked(once.Cut())
	walked(failed.Cut())
	// Both wrote step 0. Now failed's cut of step 1 fails and is restored.
	build(failed, 1)
	walked(failed.Cut()).Restore()
	build(failed, 2)
	build(once, 1)
	build(once, 2)
	return chunksOfCut(failed.Cut()), chunksOfCut(once.Cut())
}

// TestCutRestore: a cut whose write failed and was restored is written by
// the next cut, merged with what changed since, as if the two had been
// one cut; a key replaced meanwhile is written whole.
func TestCutRestore(t *testing.T) {
	build := func(k *Keyspace, step int) {
		for i := 0; i < 3000; i++ {
			item := []byte(strconv.Itoa(step*100000 + i))
			k.Apply(&command.Cmd{Op: command.BFAdd, Key: []byte("big"), Items: [][]byte{item}, ErrorRate: 0.001, Capacity: 200000, Expansion: 2, MaxBytes: capBytes})
		}
		k.Apply(&command.Cmd{Op: command.CFAdd, Key: []byte("c" + strconv.Itoa(step%2)), Items: [][]byte{[]byte(strconv.Itoa(step))}, Capacity: 1024, BucketSize: 2, MaxIterations: 20, Expansion: 1, MaxExpansions: 32, MaxBytes: capBytes})
		if step == 2 {
			k.Apply(&command.Cmd{Op: command.Del, Keys: [][]byte{[]byte("c0")}})
		}
	}
	got, want := restoredAgainstOnce(build)
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("restored cut writes %d records, one cut %d", len(got), len(want))
	}
	if len(got) < 3 {
		t.Fatalf("the cut holds only %d records", len(got))
	}
}

// TestCutRestoreInPlaceKeys: a restored cut of many keys changed in place
// gives each back exactly the chunks its capture took, though the walk
// reused each capture's memory for the next key (a key removed, created
// or changed in other chunks). Keys of three or four chunks, copied whole
// by the walk, interleaved in walk order with removed and created ones;
// the step after the restore changes only some of them again, so the
// others' chunks come from what the restore gave back alone.
func TestCutRestoreInPlaceKeys(t *testing.T) {
	build := func(k *Keyspace, step int) {
		for i := range 300 {
			key := []byte("m" + strconv.Itoa(i))
			switch {
			case step == 0:
				k.Apply(&command.Cmd{Op: command.BFReserve, Key: key, ErrorRate: 0.01, Capacity: 120_000 + uint64(i)*200, Expansion: 2, MaxBytes: capBytes})
			case step == 1 && i%7 == 3:
				k.Apply(&command.Cmd{Op: command.Del, Keys: [][]byte{key}})
				continue
			case step == 1 && i%7 == 5:
				k.Apply(&command.Cmd{Op: command.BFAdd, Key: []byte("new" + strconv.Itoa(i)), Items: [][]byte{key}, ErrorRate: 0.01, Capacity: 100, Expansion: 2, MaxBytes: capBytes})
			case step == 2 && i%5 != 0:
				continue
			}
			item := []byte(strconv.Itoa(step*1000 + i))
			k.Apply(&command.Cmd{Op: command.BFAdd, Key: key, Items: [][]byte{item}, Multi: true, ErrorRate: 0.01, Capacity: 100, Expansion: 2, MaxBytes: capBytes})
		}
	}
	got, want := restoredAgainstOnce(build)
	if len(want) < 300 {
		t.Fatalf("the cut holds only %d records", len(want))
	}
	for name := range want {
		if _, ok := got[name]; !ok {
			t.Fatalf("after the restore, the next cut misses %s (%d records against %d)", name, len(got), len(want))
		}
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("restored cut writes %d records, one cut %d", len(got), len(want))
	}
}
