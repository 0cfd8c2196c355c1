package keyspace

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"reflect"
	"runtime"
	"testing"
	"weak"

	"github.com/bfserver/bfserver/command"
	"github.com/bfserver/bfserver/scalable"
)

// TestPretestMatchesApply: entries of large BF.MADDs, applied with the
// helper testing older links ahead of Apply (pretest), give the answers
// and the filters of the same commands applied one entry each, which no
// helper serves: into growing chains, a non-scaling one that fills, a
// missing key with NOCREATE, and a key that expires in the middle of an
// entry and is created again (its older tests belong to a chain gone).
// Twice: with the helper beside Apply, as in a node, and with it run to
// its end first, where every test it made is as old as it can be.
func TestPretestMatchesApply(t *testing.T) {
	for _, sync := range []bool{false, true} {
		t.Run(fmt.Sprint("sync=", sync), func(t *testing.T) {
			pretestFor(t, sync)
			pretestMatchesApply(t)
		})
	}
}

// pretestFor makes the helper take every entry it could serve while t
// runs, and run to its end before Apply if sync.
func pretestFor(t *testing.T, sync bool) {
	pretestAlways, pretestSync = true, sync
	t.Cleanup(func() { pretestAlways, pretestSync = false, false })
}

func pretestMatchesApply(t *testing.T) {
	helped, alone := New(), New()
	rng := rand.New(rand.NewPCG(7, 8))
	var next uint64
	items := func(n int) [][]byte {
		out := make([][]byte, n)
		for i := range out {
			v := next + uint64(i)
			if next > 0 && rng.IntN(6) == 0 {
				v = next - 1 - rng.Uint64N(min(next, 5000)) // added before: perhaps in a link that aged since
			}
			out[i] = binary.LittleEndian.AppendUint64(nil, v)
		}
		next += uint64(n)
		return out
	}
	add := func(key string, n int, now int64) *command.Cmd {
		return &command.Cmd{Op: command.BFAdd, Key: []byte(key), Items: items(n), Multi: true,
			ErrorRate: 0.01, Capacity: 100, Expansion: 2, MaxBytes: 1 << 30, Now: now, NoCreate: key == "missing"}
	}
	const expiresAt = 5_003 // the fourth command of round 5
	setup := []*command.Cmd{
		{Op: command.BFReserve, Key: []byte("full"), ErrorRate: 0.01, Capacity: 6000, Expansion: 2, NonScaling: true, MaxBytes: 1 << 30, Now: 1},
		add("e", 2000, 1),
		{Op: command.Expire, Key: []byte("e"), Iter: expiresAt, Now: 1},
	}
	for _, c := range setup {
		helped.Apply(c)
		alone.Apply(c)
	}
	keys := []string{"x", "x", "y", "e", "full", "missing"}
	for round := range 10 {
		var cmds []*command.Cmd
		for i := range 6 + rng.IntN(8) {
			key := keys[rng.IntN(len(keys))]
			if round == 5 && i < 6 {
				key = "e"
			}
			cmds = append(cmds, add(key, 256+rng.IntN(1500), int64(round*1000+i)))
		}
		applyBoth(t, helped, alone, cmds)
	}
	for _, key := range []string{"x", "y", "e", "full"} {
		a, b := filterOf(t, helped, key), filterOf(t, alone, key)
		if a != b {
			t.Fatalf("%s differs: %.200s against %.200s", key, a, b)
		}
	}
	if helped.pt.taken == 0 && (pretestSync || runtime.GOMAXPROCS(0) > 1) {
		t.Fatal("Apply never took the helper's tests")
	}
	t.Logf("%d commands added with the helper's tests", helped.pt.taken)
}

// applyBoth applies cmds to helped as one entry and to alone one entry
// each, and fails unless every answer is the same.
func applyBoth(t *testing.T, helped, alone *Keyspace, cmds []*command.Cmd) {
	t.Helper()
	users := func() command.Users { return command.Users{} }
	got := make([]Result, len(cmds))
	helped.ApplyEntry(cmds, got, users, nil)
	for i, c := range cmds {
		want := make([]Result, 1)
		alone.ApplyEntry([]*command.Cmd{c}, want, users, nil)
		if !reflect.DeepEqual(got[i], want[0]) {
			t.Fatalf("command %d (%s): %+v, alone %+v", i, c.Key, got[i], want[0])
		}
	}
}

// filterOf renders a Bloom filter whole: its BF.DEBUG lines and every
// SCANDUMP chunk.
func filterOf(t *testing.T, k *Keyspace, key string) string {
	t.Helper()
	v := k.Lookup(0, []byte(key), 1<<40)
	if v == nil || v.Bloom() == nil {
		t.Fatalf("%s: no filter", key)
	}
	ch := v.Bloom()
	s := fmt.Sprint(ch.Debug())
	for pos := int64(1); pos != 0; {
		var data []byte
		pos, data = ch.Chunk(pos)
		s += fmt.Sprintf("|%d:%x", pos, data)
	}
	return s
}

// FuzzPretest: an entry of BF.MADDs drawn from the input (keys, sizes,
// items seen before, NOCREATE, growth settings) applied with the helper
// (run to its end first, so that each input takes the same path) gives
// the answers and filters of its commands applied one entry each.
func FuzzPretest(f *testing.F) {
	f.Add([]byte{0, 10, 1, 1, 200, 3, 0, 50, 0, 2, 255, 7, 3, 1, 1})
	f.Add([]byte{1, 0, 0, 1, 0, 0, 1, 0, 0, 1, 0, 0})
	f.Fuzz(func(t *testing.T, in []byte) {
		pretestFor(t, true) // the helper's path whatever the timing
		if len(in) > 60 {
			in = in[:60] // 20 commands at most
		}
		helped, alone := New(), New()
		seed := []*command.Cmd{
			{Op: command.BFReserve, Key: []byte("full"), ErrorRate: 0.01, Capacity: 3000, Expansion: 2, NonScaling: true, MaxBytes: fuzzCap, Now: 1},
		}
		var next uint64
		items := func(n int, dup byte) [][]byte {
			out := make([][]byte, n)
			for i := range out {
				v := next + uint64(i)
				if dup > 0 && next > 0 && (i*7+int(dup))%int(1+dup%5) == 0 {
					v = next - 1 - uint64(i*int(dup))%min(next, 4000)
				}
				out[i] = binary.LittleEndian.AppendUint64(nil, v)
			}
			next += uint64(n)
			return out
		}
		for _, key := range []string{"a", "b"} {
			seed = append(seed, &command.Cmd{Op: command.BFAdd, Key: []byte(key), Items: items(1500, 0), Multi: true,
				ErrorRate: 0.01, Capacity: 100, Expansion: 2, MaxBytes: 1 << 30, Now: 1})
		}
		for _, c := range seed {
			helped.Apply(c)
			alone.Apply(c)
		}
		keys := []string{"a", "b", "full", "new"}
		var cmds []*command.Cmd
		for len(in) >= 3 {
			k, n, dup := in[0], in[1], in[2]
			in = in[3:]
			cmds = append(cmds, &command.Cmd{Op: command.BFAdd, Key: []byte(keys[k%4]), Items: items(256+4*int(n), dup), Multi: true,
				ErrorRate: 0.01, Capacity: 100 + uint64(k/4%3)*50, Expansion: 1 + uint32(k/16%3), MaxBytes: 1 << 30, Now: 2, NoCreate: k/64%2 == 1})
		}
		applyBoth(t, helped, alone, cmds)
		for _, key := range keys {
			if alone.Lookup(0, []byte(key), 2) == nil {
				continue
			}
			if a, b := filterOf(t, helped, key), filterOf(t, alone, key); a != b {
				t.Fatalf("%s differs", key)
			}
		}
	})
}

// TestPretestChainReplaced: the helper tested a command against a chain
// that an expiry then replaced within the entry, by one created with
// smaller links that grows past the old one's number of links before the
// command runs: the old chain's tests must not be taken (they find in its
// older links items the new chain never had).
func TestPretestChainReplaced(t *testing.T) {
	pretestFor(t, true)
	helped, alone := New(), New()
	seq := func(from, n int) [][]byte {
		out := make([][]byte, n)
		for i := range out {
			out[i] = binary.LittleEndian.AppendUint64(nil, uint64(from+i))
		}
		return out
	}
	add := func(key string, items [][]byte, now int64, capacity uint64, expansion uint32) *command.Cmd {
		return &command.Cmd{Op: command.BFAdd, Key: []byte(key), Items: items, Multi: true,
			ErrorRate: 0.01, Capacity: capacity, Expansion: expansion, MaxBytes: 1 << 30, Now: now}
	}
	for _, c := range []*command.Cmd{
		add("e", seq(0, 3000), 1, 1000, 2), // two links
		{Op: command.Expire, Key: []byte("e"), Iter: 100, Now: 1},
	} {
		helped.Apply(c)
		alone.Apply(c)
	}
	applyBoth(t, helped, alone, []*command.Cmd{
		add("e", seq(50_000, 400), 200, 10, 1), // expired: created again, ten items a link
		add("e", seq(0, 3000), 201, 10, 1),     // the old chain's items, new to this one
	})
	var one [1]*scalable.Link
	if n := len(helped.Lookup(0, []byte("e"), 201).Bloom().LinksIn(&one)); n <= 2 {
		t.Fatalf("the new chain has %d links: not past the old one's 2", n)
	}
}

// TestPretestLetsGo: once an entry is applied the helper keeps no chain,
// so a filter deleted afterwards is collected.
func TestPretestLetsGo(t *testing.T) {
	pretestFor(t, true)
	k := New()
	var next uint64
	add := func(n int) *command.Cmd {
		items := make([][]byte, n)
		for i := range items {
			items[i] = binary.LittleEndian.AppendUint64(nil, next)
			next++
		}
		return &command.Cmd{Op: command.BFAdd, Key: []byte("big"), Items: items, Multi: true,
			ErrorRate: 0.01, Capacity: 100, Expansion: 2, MaxBytes: 1 << 30, Now: 1}
	}
	k.Apply(add(3000))
	cmds := []*command.Cmd{add(300), add(300), add(300)}
	k.ApplyEntry(cmds, make([]Result, len(cmds)), func() command.Users { return command.Users{} }, nil)
	if k.pt.taken == 0 {
		t.Fatal("the helper served nothing")
	}
	w := weak.Make(k.Lookup(0, []byte("big"), 1).Bloom())
	k.Apply(&command.Cmd{Op: command.Del, Keys: [][]byte{[]byte("big")}, Now: 2})
	for range 3 {
		runtime.GC()
	}
	if w.Value() != nil {
		t.Fatal("a deleted filter is still reachable")
	}
	runtime.KeepAlive(k) // the keyspace, helper included, outlives the check
}
