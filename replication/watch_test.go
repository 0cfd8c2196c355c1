package replication

import (
	"bytes"
	"io"
	"log/slog"
	"reflect"
	"testing"

	"github.com/bfserver/bfserver/command"
	"github.com/bfserver/bfserver/keyspace"
	"github.com/bfserver/bfserver/persistence"
	"github.com/hashicorp/raft"
)

func memFSM(t *testing.T, store *persistence.Store) *fsm {
	t.Helper()
	if store == nil {
		var err error
		if store, err = persistence.Open(persistence.Options{Dir: "/img", InMemory: true}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { store.Close() })
	}
	m, err := newFSM(store, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestWatchReplicasAgree: replicas that apply the same log give every
// Watch check the same outcome and hold the same versions, whether they
// applied the log straight through, restarted from their image midway
// (and replayed the entries after it, or some before it too), or
// installed another replica's snapshot midway. Some checks run after the
// restart against versions a replica saw before it, so versions that a
// restart or a snapshot did not carry exactly would show as a different
// outcome on that replica.
func TestWatchReplicasAgree(t *testing.T) {
	const t0 = 1_800_000_000_000
	bf := func(key, item string, now int64) *command.Cmd {
		return &command.Cmd{Op: command.BFAdd, Key: []byte(key), Items: [][]byte{[]byte(item)}, Now: now,
			ErrorRate: 0.01, Capacity: 100, Expansion: 2, MaxBytes: 1 << 20}
	}
	cf := func(op command.Op, key, item string, now int64) *command.Cmd {
		return &command.Cmd{Op: op, Key: []byte(key), Items: [][]byte{[]byte(item)}, Now: now,
			Capacity: 1024, BucketSize: 2, MaxIterations: 20, Expansion: 1, MaxExpansions: 32, MaxBytes: 1 << 20}
	}
	names := []string{"f", "c", "s", "e", "e2", "m", "other"}

	// a applies the log as it is written; the versions WATCH records are
	// read from it, between entries, as a node serving WATCH would.
	a := memFSM(t, nil)
	var log []*raft.Log
	results := map[uint64][]keyspace.Result{}
	apply := func(m *fsm, l *raft.Log) []keyspace.Result {
		r, _ := m.Apply(l).(applyResult)
		return r.results
	}
	entry := func(cmds ...*command.Cmd) []keyspace.Result {
		l := &raft.Log{Index: uint64(len(log) + 1), Type: raft.LogCommand, Data: command.EncodeBatch(cmds)}
		log = append(log, l)
		results[l.Index] = apply(a, l)
		return results[l.Index]
	}
	watch := func(now int64, keys ...string) func(now int64, n int) *command.Cmd {
		c := &command.Cmd{Op: command.Watch}
		for _, k := range keys {
			v, err := a.ks.Load().Version(0, []byte(k), now)
			if err != nil {
				t.Fatal(err)
			}
			c.Keys = append(c.Keys, []byte(k))
			c.Data = keyspace.AppendWatch(c.Data, 0, v)
		}
		return func(now int64, n int) *command.Cmd {
			w := *c
			w.Now, w.Count = now, int64(n)
			return &w
		}
	}
	check := func(what string, r []keyspace.Result, at int, wantAbort bool) {
		t.Helper()
		if got := r[at].Int == 1; got != wantAbort || r[at].Err != nil {
			t.Fatalf("%s: aborted %v (err %v), want %v", what, got, r[at].Err, wantAbort)
		}
	}

	entry(bf("f", "a", t0), cf(command.CFAdd, "c", "a", t0), &command.Cmd{Op: command.Set, Key: []byte("s"), Data: []byte("v"), Now: t0},
		bf("e", "x", t0), &command.Cmd{Op: command.Expire, Key: []byte("e"), Iter: t0 + 100, Now: t0},
		bf("e2", "x", t0), &command.Cmd{Op: command.Expire, Key: []byte("e2"), Iter: t0 + 250, Now: t0})
	// A Watch before tracking began knows nothing: it aborts, and turns
	// tracking on.
	early := watch(t0, "f")
	check("watch before tracking", entry(early(t0, 1), bf("f", "never", t0)), 0, true)

	w1 := watch(t0+1, "f", "c", "m", "e")
	r := entry(bf("other", "x", t0+1), w1(t0+1, 1), bf("f", "fromexec", t0+1), bf("other", "y", t0+1))
	check("untouched", r, 1, false)
	if r[2].Ints[0] != 1 || r[3].Ints[0] != 1 {
		t.Fatalf("commands around and in a passed transaction: %+v", r)
	}
	w2 := watch(t0+2, "f")
	entry(bf("f", "a", t0+2)) // present: a touch all the same
	check("no-op BF.ADD", entry(w2(t0+2, 2), bf("f", "z", t0+2), cf(command.CFAdd, "c", "z", t0+2), bf("other", "after", t0+2)), 0, true)
	across := watch(t0+3, "f", "s", "m", "other") // checked after the restarts
	restartAt := uint64(len(log))
	s, err := a.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	snap := persist(t, a, s)

	w3 := watch(t0+3, "c", "m2")
	entry(cf(command.CFDel, "m2", "nope", t0+3)) // a missing key: -Not found, and a touch
	check("CF.DEL on a missing key", entry(w3(t0+3, 1), cf(command.CFAdd, "c", "q", t0+3)), 0, true)
	w4 := watch(t0+50, "e")                                                                // live
	entry(&command.Cmd{Op: command.ExpireDue, Keys: [][]byte{[]byte("e")}, Now: t0 + 200}) // expired, deleted
	check("expired after WATCH", entry(w4(t0+200, 1), &command.Cmd{Op: command.Set, Key: []byte("s"), Data: []byte("w"), Now: t0 + 200}), 0, true)
	w5 := watch(t0+260, "e2")                                                               // already expired when watched
	entry(&command.Cmd{Op: command.ExpireDue, Keys: [][]byte{[]byte("e2")}, Now: t0 + 270}) // its deletion is no change
	check("expired before WATCH", entry(w5(t0+270, 1), bf("e2", "new", t0+270)), 0, false)
	check("across restart and snapshot", entry(across(t0+300, 1), bf("f", "late", t0+300)), 0, false)
	w6 := watch(t0+301, "f", "m")
	entry(&command.Cmd{Op: command.FlushAll, Now: t0 + 301})
	check("FLUSHALL of a live key", entry(w6(t0+301, 1), bf("f", "gone", t0+301)), 0, true)
	w7 := watch(t0+302, "m", "f")
	entry(&command.Cmd{Op: command.FlushAll, Now: t0 + 302})
	check("FLUSHALL of missing keys", entry(w7(t0+302, 1), bf("f", "again", t0+302)), 0, false)
	// A Watch claiming more commands than its entry holds skips to the
	// entry's end, and no further.
	w8 := watch(t0+303, "f")
	entry(bf("f", "touch", t0+303))
	check("overlong Watch", entry(w8(t0+303, 5), bf("f", "x", t0+303)), 0, true)
	if r := entry(bf("f", "next", t0+303)); r[0].Ints[0] != 1 {
		t.Fatal("the entry after an overlong Watch was skipped")
	}

	type replica struct {
		name string
		m    *fsm
	}
	state := func(m *fsm) (map[string]string, map[string]uint64) {
		ks := m.ks.Load()
		digests, versions := map[string]string{}, map[string]uint64{}
		for _, n := range names {
			if v := ks.Lookup(0, []byte(n), t0+400); v != nil {
				digests[n] = keyspace.Digest(v)
			}
			versions[n], _ = ks.Version(0, []byte(n), t0+400)
		}
		return digests, versions
	}
	wantD, wantV := state(a)
	if len(wantD) != 1 || wantV["f"]%2 != 1 || wantV["m"]%2 != 0 {
		t.Fatalf("unexpected final state: %v %v", wantD, wantV)
	}
	var replicas []replica
	// Straight through, on a fresh image.
	b := memFSM(t, nil)
	for _, l := range log {
		if got := apply(b, l); !reflect.DeepEqual(got, results[l.Index]) {
			t.Fatalf("straight replica, entry %d: %+v, want %+v", l.Index, got, results[l.Index])
		}
	}
	replicas = append(replicas, replica{"straight", b})
	// Restarted from its image at restartAt: Raft hands it the entries
	// after its image, or from an earlier index, and it skips what the
	// image covers.
	for _, from := range []uint64{restartAt + 1, 3} {
		store, err := persistence.Open(persistence.Options{Dir: "/img", InMemory: true})
		if err != nil {
			t.Fatal(err)
		}
		defer store.Close()
		m := memFSM(t, store)
		for _, l := range log[:restartAt] {
			apply(m, l)
		}
		if err := m.flush(); err != nil {
			t.Fatal(err)
		}
		m = memFSM(t, store) // the restart: a new state machine loads the image
		if m.applied.Load() != restartAt {
			t.Fatalf("restarted at %d, want %d", m.applied.Load(), restartAt)
		}
		for _, l := range log[from-1:] {
			got := apply(m, l)
			if l.Index > restartAt && !reflect.DeepEqual(got, results[l.Index]) {
				t.Fatalf("restarted replica, entry %d: %+v, want %+v", l.Index, got, results[l.Index])
			}
		}
		replicas = append(replicas, replica{"restarted", m})
	}
	// Installed a's snapshot taken at restartAt.
	c := memFSM(t, nil)
	if err := c.Restore(io.NopCloser(bytes.NewReader(snap.Bytes()))); err != nil {
		t.Fatal(err)
	}
	for _, l := range log[restartAt:] {
		if got := apply(c, l); !reflect.DeepEqual(got, results[l.Index]) {
			t.Fatalf("snapshot replica, entry %d: %+v, want %+v", l.Index, got, results[l.Index])
		}
	}
	replicas = append(replicas, replica{"snapshot", c})
	for _, rp := range replicas {
		d, v := state(rp.m)
		if !reflect.DeepEqual(d, wantD) || !reflect.DeepEqual(v, wantV) {
			t.Errorf("%s replica: digests %v versions %v, want %v %v", rp.name, d, v, wantD, wantV)
		}
	}
}
