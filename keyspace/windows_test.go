package keyspace

import (
	"fmt"
	"strconv"
	"testing"

	"github.com/bfserver/bfserver/command"
	"github.com/bfserver/bfserver/engine"
	"github.com/bfserver/bfserver/sketch/window"
)

// windowCmd is a WReserve (or auto-creating WAdd) as the resp layer
// prepares it: the shape sized at the proposer. t may be nil (it panics
// then on a sizing error).
func windowCmd(t testing.TB, op command.Op, key string, kind window.Kind, win int64, capa uint64, e float64) *command.Cmd {
	n := capa
	if kind == window.Count {
		n = uint64(win)
	}
	s, err := window.Size(e, n)
	if err != nil {
		panic(err)
	}
	return &command.Cmd{Op: op, Key: []byte(key), ErrorRate: e, Field: uint8(kind), Iter: win, Capacity: capa, Data: command.EncodeShape(s)}
}

func wItems(prefix string, from, to int) [][]byte {
	var out [][]byte
	for i := from; i < to; i++ {
		out = append(out, []byte(prefix+strconv.Itoa(i)))
	}
	return out
}

// TestWindowCommands: a count window through Apply and Read keeps its
// last N inserts (no false negative), forgets old ones, and answers the
// errors a filter command does.
func TestWindowCommands(t *testing.T) {
	k := New()
	apply(t, k, windowCmd(t, command.WReserve, "w", window.Count, 1000, 0, 0.01))
	if r := k.Apply(windowCmd(t, command.WReserve, "w", window.Count, 1000, 0, 0.01)); r.Err != ErrItemExists {
		t.Fatalf("WRESERVE over a window: %v", r.Err)
	}
	for i := 0; i < 20000; i += 100 {
		r := apply(t, k, &command.Cmd{Op: command.WAdd, Key: []byte("w"), Items: wItems("e", i, i+100), Multi: true, NoCreate: true, Now: int64(i)})
		if len(r.Ints) != 100 {
			t.Fatalf("WMADD of 100 answered %d", len(r.Ints))
		}
	}
	// The last 1000 are all present.
	r := k.Read(&command.Cmd{Op: command.WExists, Key: []byte("w"), Items: wItems("e", 19000, 20000), Multi: true})
	for i, x := range r.Ints {
		if x != 1 {
			t.Fatalf("e%d, within the window, reported absent", 19000+i)
		}
	}
	// Items far past the window are mostly forgotten (at the filter's
	// false-positive rate at most, here a few percent allowed).
	r = k.Read(&command.Cmd{Op: command.WExists, Key: []byte("w"), Items: wItems("e", 0, 1000), Multi: true})
	present := 0
	for _, x := range r.Ints {
		present += int(x)
	}
	if present > 50 {
		t.Errorf("%d of 1000 items 19x the window old still present", present)
	}
	apply(t, k, &command.Cmd{Op: command.Set, Key: []byte("s"), Data: []byte("v")})
	for _, c := range []*command.Cmd{
		{Op: command.WAdd, Key: []byte("s"), Items: [][]byte{[]byte("x")}, NoCreate: true},
		{Op: command.WExists, Key: []byte("s"), Items: [][]byte{[]byte("x")}},
		{Op: command.WInfo, Key: []byte("s")},
	} {
		if r := k.Apply(c); r.Err != ErrWrongType {
			t.Errorf("%v on a string: %v", c.Op, r.Err)
		}
	}
	if r := k.Apply(&command.Cmd{Op: command.WAdd, Key: []byte("nope"), Items: [][]byte{[]byte("x")}, NoCreate: true}); r.Err != ErrNotFound {
		t.Errorf("WADD on a missing key: %v", r.Err)
	}
	if r := k.Read(&command.Cmd{Op: command.WExists, Key: []byte("nope"), Items: [][]byte{[]byte("x")}}); r.Err != nil || r.Ints[0] != 0 {
		t.Errorf("WEXISTS on a missing key: %+v", r)
	}
	// WINSERT with a window creates the key; Info describes it.
	c := windowCmd(t, command.WAdd, "t", window.Time, 60000, 500, 0.001)
	c.Items, c.Multi, c.Now = [][]byte{[]byte("a")}, true, 1000
	apply(t, k, c)
	info := k.Read(&command.Cmd{Op: command.WInfo, Key: []byte("t"), Now: 1000}).List()
	if string(info[0]) != "Window type" || string(info[1]) != "time" || string(info[3]) != "60000" {
		t.Errorf("WINFO: %q", info[:4])
	}
}

// TestWindowTimeUsesTheStampedClock: a time window ages by the commands'
// clock alone: an item is present until T after its add, gone once the
// window has passed by its documented margin, and a clock that moves
// backwards moves nothing.
func TestWindowTimeUsesTheStampedClock(t *testing.T) {
	k := New()
	c := windowCmd(t, command.WReserve, "t", window.Time, 1000, 100, 0.01)
	c.Now = 10_000
	apply(t, k, c)
	apply(t, k, &command.Cmd{Op: command.WAdd, Key: []byte("t"), Items: [][]byte{[]byte("x")}, NoCreate: true, Now: 10_000})
	exists := func(now int64) bool {
		return k.Read(&command.Cmd{Op: command.WExists, Key: []byte("t"), Items: [][]byte{[]byte("x")}, Now: now}).Ints[0] == 1
	}
	for _, now := range []int64{10_000, 10_500, 10_999, 5_000} {
		if !exists(now) {
			t.Errorf("x absent at %d, added at 10000 into a 1 s window", now)
		}
	}
	v := k.Lookup(0, []byte("t"), 0)
	forgotten := v.Window().f.Info(10_000).Forgotten
	if exists(10_000 + int64(forgotten) + 1) {
		t.Errorf("x present past its forgetting age %d ms", forgotten)
	}
}

// store is an image as persistence keeps it: each key's metadata and
// chunks (by dirtyKey; db0 names a key of database 0), a cut written over
// it as a flush writes it.
type store struct {
	meta   map[dirtyKey][]byte
	chunks map[dirtyKey]map[[2]uint32][]byte
	// written is the bytes the last write wrote per key (of any database):
	// its metadata and its chunks.
	written map[string]int
	// between, if set, runs after each key is written: Apply beside the
	// walk.
	between func()
	// seen, if set, is told of each key the walk gives before it is
	// written.
	seen func(*CutKey)
}

// db0 is key in database 0.
func db0(key string) dirtyKey { return dirtyKey{0, key} }

// write writes what a walk of cut writes, and returns the chunks written
// per key (of any database).
func (s *store) write(t *testing.T, cut *Cut) map[string]int {
	t.Helper()
	if s.meta == nil {
		s.meta, s.chunks = map[dirtyKey][]byte{}, map[dirtyKey]map[[2]uint32][]byte{}
	}
	n := map[string]int{}
	s.written = map[string]int{}
	buf := make([]byte, engine.ChunkSize)
	err := cut.Walk(func(ck *CutKey) error {
		dk := dirtyKey{ck.DB, ck.Key}
		if s.seen != nil {
			s.seen(ck)
		}
		if ck.Full || ck.Gone() {
			delete(s.chunks, dk)
		}
		if ck.Gone() {
			delete(s.meta, dk)
			return nil
		}
		s.meta[dk] = ck.Meta()
		s.written[ck.Key] += len(ck.Meta())
		if s.chunks[dk] == nil {
			s.chunks[dk] = map[[2]uint32][]byte{}
		}
		err := ck.Chunks(buf, func(c Chunk) error {
			n[ck.Key]++
			s.written[ck.Key] += len(c.Data)
			s.chunks[dk][[2]uint32{c.Part, c.Index}] = append([]byte(nil), c.Data...)
			return nil
		})
		if s.between != nil {
			s.between()
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// load is the keyspace the image holds, as a start loads it.
func (s *store) load(t *testing.T) *Keyspace {
	t.Helper()
	k := New()
	for dk, m := range s.meta {
		if err := k.LoadValue(dk.db, dk.key, m, capBytes); err != nil {
			t.Fatalf("%d/%q: %v", dk.db, dk.key, err)
		}
		for pi, data := range s.chunks[dk] {
			if err := k.LoadChunk(dk.db, dk.key, Chunk{Part: pi[0], Index: pi[1], Data: data}); err != nil {
				t.Fatalf("%d/%q chunk %v: %v", dk.db, dk.key, pi, err)
			}
		}
	}
	k.ForgetChanges()
	return k
}

// TestWindowImage: a window goes into the image as its header and the
// chunks of its bits: a new one whole, a changed one by the chunks its
// adds and shifts changed (a few of a large window's), and loaded back it
// is the same filter (digest, answers, WINFO's fills). An image written
// by the build that stored a window whole still loads, and the next cut
// writes that window whole in the new form.
func TestWindowImage(t *testing.T) {
	k := New()
	k.TrackChanges()
	apply(t, k, windowCmd(t, command.WReserve, "w", window.Count, 500_000, 0, 0.01))
	apply(t, k, windowCmd(t, command.WReserve, "small", window.Count, 300, 0, 0.01))
	add := func(key string, from, to int) {
		for i := from; i < to; i += 10_000 {
			apply(t, k, &command.Cmd{Op: command.WAdd, Key: []byte(key), Items: wItems("i", i, min(to, i+10_000)), Multi: true, NoCreate: true})
		}
	}
	add("w", 0, 1_000_000)
	add("small", 0, 500)
	var st store
	st.write(t, k.Cut())
	check := func(key string) {
		t.Helper()
		v, w := k.Lookup(0, []byte(key), 0), st.load(t).Lookup(0, []byte(key), 0)
		if w == nil || Digest(v) != Digest(w) {
			t.Fatalf("%s: the image is not the window", key)
		}
		a, b := WindowInfo(v.Window().f.Info(0)), WindowInfo(w.Window().f.Info(0))
		if fmt.Sprint(a) != fmt.Sprint(b) {
			t.Fatalf("%s: WINFO %q, loaded %q", key, a, b)
		}
	}
	check("w")
	check("small")
	size := k.Lookup(0, []byte("w"), 0).Window().f.Size()
	chunks := int((size + engine.ChunkSize - 1) / engine.ChunkSize)

	// 1,000 more adds: the k youngest slices and the one a shift cleared.
	add("w", 1_000_000, 1_001_000)
	n := st.write(t, k.Cut())
	check("w")
	in := k.Lookup(0, []byte("w"), 0).Window().f.Info(0)
	sliceChunks := int(in.SliceBits/8/engine.ChunkSize) + 2
	if n["w"] == 0 || n["w"] > (in.K+2)*sliceChunks || n["w"] >= chunks/2 {
		t.Fatalf("1,000 adds wrote %d of the window's %d chunks (k=%d, a slice in %d)", n["w"], chunks, in.K, sliceChunks)
	}
	t.Logf("1,000 adds wrote %d of %d chunks", n["w"], chunks)

	// The whole-value form of 55b879a: the metadata holds window.Marshal.
	v := k.Lookup(0, []byte("small"), 0)
	old := append(encodeMeta(v)[:10], v.Window().Marshal()...)
	legacy := New()
	if err := legacy.LoadValue(0, "small", old, capBytes); err != nil {
		t.Fatal(err)
	}
	legacy.ForgetChanges()
	legacy.TrackChanges()
	if Digest(legacy.Lookup(0, []byte("small"), 0)) != Digest(v) {
		t.Fatal("the whole-value image does not load")
	}
	var again store
	again.write(t, legacy.Cut())
	if w := again.load(t).Lookup(0, []byte("small"), 0); w == nil || Digest(w) != Digest(v) {
		t.Fatal("the first cut after loading a whole-value window does not write it whole")
	}
	meta := encodeMeta(v)
	for _, bad := range [][]byte{meta[:len(meta)-1], old[:len(old)-1]} {
		if err := New().LoadValue(0, "bad", bad, capBytes); err != ErrCorruptImage {
			t.Errorf("truncated image metadata: %v", err)
		}
	}
	img := st.load(t)
	if err := img.LoadChunk(0, "small", Chunk{Part: 1, Data: make([]byte, 8)}); err != ErrCorruptImage {
		t.Errorf("a chunk of a part a window lacks: %v", err)
	}
	if err := img.LoadChunk(0, "small", Chunk{Index: 1, Data: make([]byte, 8)}); err != ErrCorruptImage {
		t.Errorf("a chunk past the window's bits: %v", err)
	}
}

// TestWindowSurvivesDumpAndCopy: a window's DUMP payload and a COPY carry
// its full state (equal digests), and the copy is independent of the
// original.
func TestWindowSurvivesDumpAndCopy(t *testing.T) {
	k := New()
	k.TrackChanges()
	apply(t, k, windowCmd(t, command.WReserve, "w", window.Count, 300, 0, 0.01))
	apply(t, k, &command.Cmd{Op: command.WAdd, Key: []byte("w"), Items: wItems("i", 0, 500), Multi: true, NoCreate: true})
	v := k.Lookup(0, []byte("w"), 0)
	want := Digest(v)

	apply(t, k, &command.Cmd{Op: command.Restore, Key: []byte("r"), Data: EncodeDump(v)})
	if got := Digest(k.Lookup(0, []byte("r"), 0)); got != want {
		t.Errorf("DUMP/RESTORE: digest %s, want %s", got, want)
	}
	bad := EncodeDump(v)
	bad[len(bad)/2] ^= 1
	if r := k.Apply(&command.Cmd{Op: command.Restore, Key: []byte("r2"), Data: bad, MaxBytes: capBytes}); r.Err != ErrBadPayload {
		t.Errorf("damaged payload: %v", r.Err)
	}

	if r := apply(t, k, &command.Cmd{Op: command.Copy, Key: []byte("w"), Dst: []byte("c")}); r.Int != 1 {
		t.Fatalf("COPY answered %d", r.Int)
	}
	if got := Digest(k.Lookup(0, []byte("c"), 0)); got != want {
		t.Errorf("COPY: digest %s, want %s", got, want)
	}
	apply(t, k, &command.Cmd{Op: command.WAdd, Key: []byte("c"), Items: [][]byte{[]byte("new")}, NoCreate: true})
	if Digest(k.Lookup(0, []byte("w"), 0)) != want {
		t.Error("an add to the copy changed the original")
	}
	if got, want := k.Bytes(), k.countBytes(); got != want {
		t.Errorf("memory total %d, recount %d", got, want)
	}
}
