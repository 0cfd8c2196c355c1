package keyspace

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"testing"

	"github.com/bfserver/bfserver/command"
)

// TestFreshRecordNoMap: keys created fresh are recorded by their values'
// marks and a list, with no entry in the record's map (no hash of the
// key, no map growth: issue #25's creation of a million filters), and a
// key created over one removed within the same record is still whole.
func TestFreshRecordNoMap(t *testing.T) {
	k := New()
	k.TrackChanges()
	add := func(db uint8, key string) {
		t.Helper()
		if r := k.Apply(&command.Cmd{Op: command.BFAdd, DB: db, Key: []byte(key), Items: [][]byte{[]byte("x")}, ErrorRate: 0.01, Capacity: 100, Expansion: 2, MaxBytes: capBytes}); r.Err != nil {
			t.Fatal(r.Err)
		}
	}
	for i := range 1000 {
		add(0, "tenant:"+strconv.Itoa(i))
		add(0, "tenant:"+strconv.Itoa(i)) // an add in place right after: recorded already
	}
	add(1, "tenant:0") // the same name in another database
	for i := range 1000 {
		add(0, "tenant:"+strconv.Itoa(i)) // again, each far from its creation
	}
	if len(k.dirty) != 0 || k.fresh.Len() != 1001 {
		t.Fatalf("record: %d map entries, %d listed; want 0 and 1001", len(k.dirty), k.fresh.Len())
	}
	// Removed then created again within one record: whole, as before.
	k.Apply(&command.Cmd{Op: command.Del, Keys: [][]byte{[]byte("tenant:5")}})
	add(0, "tenant:5")
	got := map[string]string{}
	k.Cut().Walk(func(ck *CutKey) error {
		got[fmt.Sprintf("%d %s", ck.DB, ck.Key)] = fmt.Sprint(ck.Full, ck.Fresh, ck.gone)
		return nil
	})
	if len(got) != 1001 || got["0 tenant:5"] != "true false false" || got["0 tenant:6"] != "true true false" || got["1 tenant:0"] != "true true false" {
		t.Fatalf("walked %d keys; tenant:5 %s, tenant:6 %s, db 1 %s", len(got), got["0 tenant:5"], got["0 tenant:6"], got["1 tenant:0"])
	}
	// The next record starts empty; the marks of the last mean nothing.
	add(0, "tenant:7")
	if len(k.dirty) != 1 || k.fresh.Len() != 0 {
		t.Fatalf("after the cut: %d map entries, %d listed; want 1 and 0", len(k.dirty), k.fresh.Len())
	}
}

// TestRecordModel: the change record after random creates, in-place adds,
// SET, DEL, RENAME, EXPIRE, FLUSHDB and WATCH over keys in two databases,
// with cuts (some restored) between them, is what the map alone recorded
// before the marks: each key once, created where the image holds nothing
// fresh, replaced or removed whole, changed in place otherwise.
func TestRecordModel(t *testing.T) {
	for seed := range uint64(40) {
		t.Run(strconv.Itoa(int(seed)), func(t *testing.T) { recordModel(t, seed) })
	}
}

func recordModel(t *testing.T, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 25))
	k := New()
	k.TrackChanges()
	model := map[dirtyKey]change{}
	key := func() (uint8, string) { return uint8(rng.IntN(2)), "k" + strconv.Itoa(rng.IntN(12)) }
	exists := func(db uint8, name string) bool { return k.Lookup(db, []byte(name), 1) != nil }
	var pending *Cut
	var pendingModel map[dirtyKey]change
	var pendingState map[dirtyKey]string
	var st store
	state := func() map[dirtyKey]string { // every key's digest now
		out := map[dirtyKey]string{}
		for db := range uint8(2) {
			k.Range(db, func(key string, v *Value) bool {
				out[dirtyKey{db, key}] = Digest(v)
				return true
			})
		}
		return out
	}
	for step := range 400 {
		db, name := key()
		dk := dirtyKey{db, name}
		switch op := rng.IntN(20); {
		case op < 8: // BF.ADD: created or in place
			ch := inPlace
			if !exists(db, name) {
				ch = fresh
			}
			if k.Lookup(db, []byte(name), 1) != nil && k.Lookup(db, []byte(name), 1).Kind != KindBloom {
				continue
			}
			apply(t, k, &command.Cmd{Op: command.BFAdd, DB: db, Key: []byte(name), Items: [][]byte{[]byte(strconv.Itoa(step))}, ErrorRate: 0.01, Capacity: 100, Expansion: 2, Now: 1})
			if ch == fresh {
				model[dk] |= fresh
			} else {
				model[dk] = max(model[dk], inPlace)
			}
		case op < 10:
			apply(t, k, &command.Cmd{Op: command.Set, DB: db, Key: []byte(name), Data: []byte("v"), Now: 1})
			model[dk] = whole
		case op < 12:
			if exists(db, name) {
				model[dk] = whole
			}
			apply(t, k, &command.Cmd{Op: command.Del, DB: db, Keys: [][]byte{[]byte(name)}, Now: 1})
		case op < 14:
			_, dst := key()
			if !exists(db, name) || dst == name {
				continue
			}
			apply(t, k, &command.Cmd{Op: command.Rename, DB: db, Key: []byte(name), Dst: []byte(dst), Now: 1})
			model[dk], model[dirtyKey{db, dst}] = whole, whole
		case op < 15:
			if !exists(db, name) {
				continue
			}
			apply(t, k, &command.Cmd{Op: command.Expire, DB: db, Key: []byte(name), Iter: 1 << 40, Now: 1})
			model[dk] = max(model[dk], inPlace)
		case op < 16 && seed%4 == 0:
			for i := range 12 {
				if n := "k" + strconv.Itoa(i); exists(db, n) {
					model[dirtyKey{db, n}] = whole
				}
			}
			apply(t, k, &command.Cmd{Op: command.FlushDB, DB: db, Now: 1})
		case op < 17 && seed%3 == 0 && step > 200: // versions tracked from here on
			apply(t, k, &command.Cmd{Op: command.Watch, Now: 1})
		case op < 19:
			// A cut: walked now, or held while more changes come, then
			// restored (its keys merge back) or walked.
			if pending != nil {
				if rng.IntN(2) == 0 {
					pending.Restore()
					for dk, ch := range pendingModel {
						model[dk] = max(model[dk], ch)
					}
				} else {
					checkRecord(t, pending, pendingModel, &st, pendingState)
				}
				pending = nil
				continue
			}
			now := state()
			c := k.Cut()
			if rng.IntN(3) == 0 {
				pending, pendingModel, pendingState, model = c, model, now, map[dirtyKey]change{}
				continue
			}
			checkRecord(t, c, model, &st, now)
			model = map[dirtyKey]change{}
		}
	}
	if pending != nil {
		checkRecord(t, pending, pendingModel, &st, pendingState)
	}
	now := state()
	checkRecord(t, k.Cut(), model, &st, now)
}

// checkRecord walks c into st and compares each key's Full, Fresh and
// gone with the model's change, and the image then with want, every
// key's digest at the cut.
func checkRecord(t *testing.T, c *Cut, model map[dirtyKey]change, st *store, want map[dirtyKey]string) {
	t.Helper()
	got := map[dirtyKey]string{}
	st.seen = func(ck *CutKey) {
		dk := dirtyKey{ck.DB, ck.Key}
		if _, dup := got[dk]; dup {
			t.Errorf("%v walked twice", dk)
		}
		got[dk] = fmt.Sprint(ck.Full, ck.Fresh, ck.gone)
	}
	st.write(t, c)
	img := map[dirtyKey]string{}
	l := st.load(t)
	for db := range uint8(2) {
		l.Range(db, func(key string, v *Value) bool {
			img[dirtyKey{db, key}] = Digest(v)
			return true
		})
	}
	if fmt.Sprint(img) != fmt.Sprint(want) {
		t.Errorf("the image is not the state at the cut:\n%v\nwant\n%v", img, want)
	}
	if len(got) != len(model) {
		t.Errorf("walked %d keys, want %d: %v against %v", len(got), len(model), got, model)
	}
	for dk, ch := range model {
		g, ok := got[dk]
		if !ok {
			t.Errorf("%v (%d) not walked", dk, ch)
			continue
		}
		// gone at the cut is what the walk saw; Full and Fresh follow.
		gone := g[len(g)-4:] == "true"
		want := fmt.Sprint(ch != inPlace || gone, ch == fresh && !gone, gone)
		if g != want {
			t.Errorf("%v: walked %s, want %s (change %d)", dk, g, want, ch)
		}
	}
}
