package keyspace

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"runtime"
	"strconv"
	"testing"
	"time"
	"unsafe"

	"github.com/bfserver/bfserver/command"
	"github.com/bfserver/bfserver/engine"
	"github.com/bfserver/bfserver/rdb"
	"github.com/bfserver/bfserver/sketch/tdigest"
)

// loadImage installs v at key in k as a start would from an image holding
// it whole: its metadata, then every chunk of its arrays (as a full
// write stores them).
// encodeMeta is the metadata of a value as a keyspace that tracks no
// versions writes it.
func encodeMeta(v *Value) []byte { return appendMeta(nil, v, 0) }

func loadImage(t testing.TB, k *Keyspace, key string, v *Value) {
	t.Helper()
	if err := k.LoadValue(0, key, encodeMeta(v), capBytes); err != nil {
		t.Fatal(err)
	}
	eachPart(v, func(part uint32, size uint64, _ *engine.Dirty, read func([]byte, uint64)) {
		for off := uint64(0); off < size; off += engine.ChunkSize {
			buf := make([]byte, min(engine.ChunkSize, size-off))
			read(buf, off)
			if err := k.LoadChunk(0, key, Chunk{Part: part, Index: uint32(off / engine.ChunkSize), Data: buf}); err != nil {
				t.Fatal(err)
			}
		}
	})
	k.ForgetChanges()
}

// sketchSame fails unless key holds the same sketch in a and b: equal
// digests (Marshal, all of the state).
func sketchSame(t *testing.T, a, b *Keyspace, key string) {
	t.Helper()
	va, vb := a.Lookup(0, []byte(key), 0), b.Lookup(0, []byte(key), 0)
	if va == nil || vb == nil || Digest(va) != Digest(vb) {
		t.Fatalf("%s: the image does not hold the sketch (present %v, %v)", key, va != nil, vb != nil)
	}
}

// wholeMeta is v's metadata as builds before the chunked form stored a
// sketch: the whole state (Marshal) as its body.
func wholeMeta(v *Value) []byte {
	m := encodeMeta(v)
	return append(m[:len(m)-len(v.Sketch().header())], v.Sketch().Marshal()...)
}

// TestSketchImage: each sketch goes into the image as its header and the
// chunks of its array: a new one whole, then only the chunks its changes
// touched (a few of a large one's, counted in bytes), and loaded back it
// is the same sketch. A t-digest whose nodes shrink (a compress, RESET)
// is written whole again, without the chunks past its end. A sketch
// stored whole by an older build loads, and the next cut writes it in
// chunks.
func TestSketchImage(t *testing.T) {
	k := New()
	k.TrackChanges()
	// CMS 100,000 x 5 (2 MB, 31 chunks), Top-K of 50,000 x 4 buckets
	// (1.6 MB, 25 chunks), a t-digest of compression 10,000 holding 50,000
	// nodes (800 KB, 13 chunks).
	apply(t, k, cmsInit("c", 100_000, 5))
	apply(t, k, &command.Cmd{Op: command.TopKReserve, Key: []byte("p"), Iter: 10, Capacity: 50_000, Count: 4, ErrorRate: 0.9, MaxBytes: capBytes})
	apply(t, k, tdCreate("d", 10_000))
	for i := 0; i < 50_000; i += 1000 {
		var kv []any
		var items []string
		vals := make([]float64, 1000)
		for j := range 1000 {
			kv = append(kv, "i"+strconv.Itoa(i+j), 1+j%3)
			items = append(items, "i"+strconv.Itoa((i+j)%20_000))
			vals[j] = float64((i + j) * 7919 % 50_000)
		}
		apply(t, k, cmsIncr("c", kv...))
		apply(t, k, topkAdd("p", items...))
		apply(t, k, &command.Cmd{Op: command.TDAdd, Key: []byte("d"), Data: command.Floats(vals), MaxBytes: capBytes})
	}
	var st store
	st.write(t, k.Cut())
	check := func() {
		t.Helper()
		img := st.load(t)
		for _, key := range []string{"c", "p", "d"} {
			sketchSame(t, k, img, key)
		}
		if got, want := img.Bytes(), k.Bytes(); got != want {
			t.Fatalf("the loaded keyspace counts %d bytes, the live one %d", got, want)
		}
	}
	check()
	chunksOf := func(key string) int {
		size, _, _ := k.Lookup(0, []byte(key), 0).Sketch().s.Array()
		return int((size + engine.ChunkSize - 1) / engine.ChunkSize)
	}
	if n := chunksOf("c"); n != 31 || len(st.chunks[db0("c")]) != n {
		t.Fatalf("the CMS spans %d chunks, the image holds %d", n, len(st.chunks[db0("c")]))
	}

	// Three items: at most one chunk per row of each sketch; the digest's
	// ADD appends into its last chunk.
	apply(t, k, cmsIncr("c", "x", 1, "y", 2, "z", 3))
	apply(t, k, topkAdd("p", "x", "y", "z"))
	apply(t, k, tdAdd("d", 1, 2, 3))
	n := st.write(t, k.Cut())
	check()
	for key, most := range map[string]int{"c": 3 * 5, "p": 3 * 4, "d": 2} {
		if n[key] == 0 || n[key] > most {
			t.Errorf("%s: three adds wrote %d chunks (%d bytes) of %d", key, n[key], st.written[key], chunksOf(key))
		}
		if max := 10 + len(k.Lookup(0, []byte(key), 0).Sketch().header()) + n[key]*engine.ChunkSize; st.written[key] > max {
			t.Errorf("%s: %d bytes written, more than its header and %d chunks", key, st.written[key], n[key])
		}
		t.Logf("%s: three adds wrote %d of %d chunks, %d bytes", key, n[key], chunksOf(key), st.written[key])
	}

	// A compress shrinks the digest's nodes to its centroids: rewritten
	// whole, the chunks past the end dropped; then RESET: none.
	before := chunksOf("d")
	apply(t, k, tdQuantile("d", 0.5))
	if chunksOf("d") >= before {
		t.Fatalf("the compress left %d chunks of %d", chunksOf("d"), before)
	}
	st.write(t, k.Cut())
	check()
	if len(st.chunks[db0("d")]) != chunksOf("d") {
		t.Fatalf("the image holds %d chunks of a digest of %d", len(st.chunks[db0("d")]), chunksOf("d"))
	}
	apply(t, k, &command.Cmd{Op: command.TDReset, Key: []byte("d")})
	st.write(t, k.Cut())
	check()
	if len(st.chunks[db0("d")]) != 0 {
		t.Fatalf("the image holds %d chunks of an empty digest", len(st.chunks[db0("d")]))
	}

	// Stored whole (the form before chunks): loads, and the first cut
	// writes each in chunks.
	legacy := New()
	for _, key := range []string{"c", "p", "d"} {
		if err := legacy.LoadValue(0, key, wholeMeta(k.Lookup(0, []byte(key), 0)), capBytes); err != nil {
			t.Fatal(err)
		}
	}
	legacy.ForgetChanges()
	legacy.TrackChanges()
	var again store
	again.write(t, legacy.Cut())
	img := again.load(t)
	for _, key := range []string{"c", "p", "d"} {
		sketchSame(t, k, legacy, key)
		sketchSame(t, k, img, key)
		// The digest's header differs in the room its nodes have: a dump
		// does not say, and a digest read from one has room for its nodes.
		want := encodeMeta(k.Lookup(0, []byte(key), 0))
		if key == "d" {
			want = encodeMeta(legacy.Lookup(0, []byte(key), 0))
		}
		if !bytes.Equal(again.meta[db0(key)], want) || len(want) != 10+len(k.Lookup(0, []byte(key), 0).Sketch().header()) {
			t.Errorf("%s: the first cut after a whole-form load wrote metadata %x", key, again.meta[db0(key)])
		}
	}
	if len(again.chunks[db0("c")]) != 31 {
		t.Errorf("the first cut after a whole-form load wrote %d of the CMS's 31 chunks", len(again.chunks[db0("c")]))
	}

	// Chunks that do not fit the array are corrupt.
	for _, c := range []Chunk{
		{Part: 1, Data: make([]byte, 8)},
		{Index: 31, Data: make([]byte, 8)},
		{Index: 30, Data: make([]byte, engine.ChunkSize)}, // past the end of the last, partial chunk
		{Data: make([]byte, 6)},                           // not whole counters
	} {
		if err := img.LoadChunk(0, "c", c); err != ErrCorruptImage {
			t.Errorf("chunk %d/%d of %d bytes: %v", c.Part, c.Index, len(c.Data), err)
		}
	}
	if err := img.LoadChunk(0, "d", Chunk{Data: make([]byte, 16)}); err != ErrCorruptImage {
		t.Errorf("a node of an empty digest: %v", err)
	}
	for _, key := range []string{"c", "p", "d"} {
		m := encodeMeta(k.Lookup(0, []byte(key), 0))
		for _, bad := range [][]byte{m[:len(m)-1], append(m, 0)} {
			if err := New().LoadValue(0, "bad", bad, capBytes); err != ErrCorruptImage {
				t.Errorf("%s: metadata of %d bytes, %d expected: %v", key, len(bad), len(m), err)
			}
		}
		if err := New().LoadValue(0, "big", m, 1000); err != ErrTooLarge {
			t.Errorf("%s: over the cap: %v", key, err)
		}
	}
}

// sketchStep applies step s of a sequence of writes to sketches large
// enough to be held rather than copied at a cut, in arrays of more than
// 64 chunks (a Dirty's bitmap) and fewer: CMS increments and a merge into
// an existing destination; Top-K adds that collide (the decay coin, the
// heap); a t-digest grown past 64 chunks, compressed by a query (its
// nodes shrink), RESET, and a small-capacity digest whose ADDs compress
// inside them (shrink and grow in one entry); a t-digest MERGE (a new
// value).
func sketchStep(k *Keyspace, s int) {
	do := func(c *command.Cmd) {
		if c.MaxBytes == 0 {
			c.MaxBytes = capBytes
		}
		if r := k.Apply(c); r.Err != nil {
			panic(fmt.Sprintf("step %d: %v: %v", s, c.Op, r.Err))
		}
	}
	if s == 0 {
		do(cmsInit("c", 400_000, 5)) // 8 MB, 123 chunks
		do(cmsInit("c2", 400_000, 5))
		do(&command.Cmd{Op: command.TopKReserve, Key: []byte("p"), Iter: 50, Capacity: 100_000, Count: 4, ErrorRate: 0.9}) // 49 chunks
		do(tdCreate("d", 50_000))                                                                                          // up to 300,010 nodes: 74 chunks
		do(tdCreate("e", 5_000))                                                                                           // 30,010 nodes
		do(tdCreate("d2", 100))
	}
	rng := rand.New(rand.NewPCG(uint64(s), 7))
	var kv []any
	var items []string
	for range 1000 {
		kv = append(kv, "i"+strconv.Itoa(rng.IntN(1_000_000)), 1+rng.IntN(5))
		items = append(items, "t"+strconv.Itoa(int(rng.ExpFloat64()*3000)))
	}
	do(cmsIncr("c", kv...))
	do(cmsIncr("c2", kv[:200]...))
	do(topkAdd("p", items...))
	vals := make([]float64, 50_000)
	for i := range vals {
		vals[i] = rng.NormFloat64() * 1000
	}
	do(&command.Cmd{Op: command.TDAdd, Key: []byte("d"), Data: command.Floats(vals)})
	do(&command.Cmd{Op: command.TDAdd, Key: []byte("e"), Data: command.Floats(vals)})
	do(&command.Cmd{Op: command.TDAdd, Key: []byte("d2"), Data: command.Floats(vals[:100])})
	switch s % 4 {
	case 1:
		do(&command.Cmd{Op: command.CMSMerge, Key: []byte("c"), Keys: [][]byte{[]byte("c"), []byte("c2")}, Data: command.Int64s([]int64{1, 2}), Iter: -1})
	case 2:
		do(&command.Cmd{Op: command.TDMerge, Key: []byte("m"), Keys: [][]byte{[]byte("d2"), []byte("e")}})
	}
	// "d" holds 300,000 nodes (74 chunks) after step 5, compresses inside
	// the ADD of step 6, is compressed by a query at 7 and RESET at 8.
	switch s {
	case 7:
		do(tdQuantile("d", 0.5))
	case 8:
		do(&command.Cmd{Op: command.TDReset, Key: []byte("d")})
	}
}

// sketchDigests is every key's digest in k.
func sketchDigests(k *Keyspace) map[string]string {
	out := map[string]string{}
	k.Range(0, func(key string, v *Value) bool {
		out[key] = Digest(v)
		return true
	})
	return out
}

// TestSketchImageAtCut: an image written by cuts while Apply goes on
// loads, after every cut, exactly the state at the cut (every key's
// digest, the keyspace's bytes), though the writes beside each walk
// change held chunks (copied first), grow and shrink a digest's nodes,
// and replace keys. Apply runs between the walk's keys, before the walk
// begins (every key captured by Apply), and in another goroutine beside
// it with a cut budget of four chunks, so that Apply waits on the walk;
// the copies then never hold more than the budget and a chunk.
func TestSketchImageAtCut(t *testing.T) {
	for _, mode := range []string{"between", "before", "concurrent"} {
		t.Run(mode, func(t *testing.T) {
			if raceOn && mode != "concurrent" {
				t.Skip("single-goroutine: nothing for the race detector")
			}
			a, b := New(), New()
			a.TrackChanges()
			const budget = 4 * engine.ChunkSize
			if mode == "concurrent" {
				a.SetCutBudget(budget)
			}
			sketchStep(a, 0)
			sketchStep(b, 0)
			var st store
			rounds := 9
			if testing.Short() {
				rounds = 4
			}
			for s := 1; s <= rounds; s++ {
				cut := a.Cut()
				want, wantBytes := sketchDigests(b), b.Bytes()
				done := make(chan struct{})
				switch mode {
				case "before":
					sketchStep(a, s)
					close(done)
				case "between":
					stepped := false
					st.between = func() {
						if !stepped {
							stepped = true
							sketchStep(a, s)
							close(done)
						}
					}
				case "concurrent":
					go func() {
						defer close(done)
						sketchStep(a, s)
					}()
				}
				st.write(t, cut)
				<-done
				if mode == "concurrent" {
					if _, _, peak, _ := cut.Copied(); peak > budget+engine.ChunkSize {
						t.Fatalf("step %d: the copies held %d bytes at once, over the budget of %d and a chunk", s, peak, budget)
					}
				}
				img := st.load(t)
				if got := sketchDigests(img); !reflect.DeepEqual(got, want) {
					for key := range want {
						if got[key] != want[key] {
							t.Errorf("step %d: %s: the image loads another state than at the cut", s, key)
						}
					}
					t.Fatalf("step %d: the image holds %d keys, the cut %d", s, len(got), len(want))
				}
				if got := img.Bytes(); got != wantBytes {
					t.Fatalf("step %d: the image counts %d bytes, the state at the cut %d", s, got, wantBytes)
				}
				sketchStep(b, s)
			}
		})
	}
}

// FuzzLoadChunks: a sketch's image metadata and any chunks (part, index,
// bytes) load or are refused, never a panic, within the cap; what loads
// writes an image that loads back the same state, and the two go on
// alike through writes (a t-digest's ADD near the byte cap included,
// which depends on the room its nodes have) and reads.
func FuzzLoadChunks(f *testing.F) {
	const maxBytes = 1 << 17
	k := New()
	k.Apply(cmsInit("c", 5000, 3)) // 60 KB: one chunk
	k.Apply(cmsIncr("c", "a", 3, "b", 1))
	k.Apply(&command.Cmd{Op: command.TopKReserve, Key: []byte("p"), Iter: 3, Capacity: 10_000, Count: 1, ErrorRate: 0.9, MaxBytes: capBytes}) // two chunks
	k.Apply(topkAdd("p", "a", "b", "a", "c"))
	k.Apply(tdCreate("d", 1000))
	k.Apply(tdAdd("d", 4, 2, 9, 2, 7, 1, 5, 5))
	k.Apply(tdQuantile("d", 0.5))
	k.Apply(tdAdd("d", 3))
	for _, key := range []string{"c", "p", "d"} {
		v := k.Lookup(0, []byte(key), 0)
		var rec []byte
		eachPart(v, func(part uint32, size uint64, _ *engine.Dirty, read func([]byte, uint64)) {
			for off := uint64(0); off < size; off += engine.ChunkSize {
				buf := make([]byte, min(engine.ChunkSize, size-off))
				read(buf, off)
				rec = binary.AppendUvarint(rec, uint64(part))
				rec = binary.AppendUvarint(rec, off/engine.ChunkSize)
				rec = binary.AppendUvarint(rec, uint64(len(buf)))
				rec = append(rec, buf...)
			}
		})
		f.Add(encodeMeta(v), rec)
		f.Add(encodeMeta(v), []byte{})
	}
	f.Fuzz(func(t *testing.T, meta, records []byte) {
		k := New()
		if k.LoadValue(0, "x", meta, maxBytes) != nil {
			return
		}
		for len(records) > 0 {
			var f [3]uint64
			for i := range f {
				n := 0
				if f[i], n = binary.Uvarint(records); n <= 0 {
					return
				}
				records = records[n:]
			}
			if f[0] > math.MaxUint32 || f[1] > math.MaxUint32 || f[2] > uint64(len(records)) {
				return
			}
			_ = k.LoadChunk(0, "x", Chunk{Part: uint32(f[0]), Index: uint32(f[1]), Data: records[:f[2]]})
			records = records[f[2]:]
		}
		k.ForgetChanges()
		v := k.db(0).keys.get("x")
		v.ExpireAt = 0 // for the lookups and writes below
		if sk := v.Sketch(); sk != nil && sk.Bytes() > maxBytes+4096 {
			t.Fatalf("loaded %d bytes past the cap", sk.Bytes())
		}
		again := New()
		loadImage(t, again, "x", v)
		if Digest(again.Lookup(0, []byte("x"), 0)) != Digest(v) || again.Bytes() != k.Bytes() {
			t.Fatal("what loaded does not load back from its image")
		}
		var cmds []*command.Cmd
		switch v.Kind {
		case KindCMS:
			cmds = []*command.Cmd{cmsIncr("x", "a", 1, "z", 7), {Op: command.CMSQuery, Key: []byte("x"), Items: [][]byte{[]byte("a")}}}
		case KindTopK:
			cmds = []*command.Cmd{topkAdd("x", "a", "b", "a"), {Op: command.TopKList, Key: []byte("x"), Flag: true}}
		case KindTDigest:
			add := tdAdd("x", 1, 2, 3, 4, 5, 6, 7, 8, 9)
			add.MaxBytes = 4096
			cmds = append(tdQueries("x"), add)
		}
		for _, c := range cmds {
			ra, rb := k.Apply(c), again.Apply(c)
			if !reflect.DeepEqual(ra, rb) {
				t.Fatalf("%v: %+v from the loaded sketch, %+v from its image", c.Op, ra, rb)
			}
		}
		if Digest(again.Lookup(0, []byte("x"), 0)) != Digest(v) {
			t.Fatal("the loaded sketch and its image went apart")
		}
	})
}

// TestLargeSketchCutCopiesWithinBudget (F11): a cut of a 100 MB CMS costs
// Apply no copy of the sketch. The first write after the cut captures
// the key (its 24-byte header; its counters are held, not copied), and
// the writes beside the walk copy only the held chunks they change,
// never more at once than the cut's budget and a chunk. Before, the
// capture Marshal-copied the whole sketch inside Apply.
func TestLargeSketchCutCopiesWithinBudget(t *testing.T) {
	if testing.Short() || raceOn {
		t.Skip("100 MB")
	}
	const budget = 8 << 20
	k := New()
	k.TrackChanges()
	k.SetCutBudget(budget)
	create := cmsInit("c", 5_000_000, 5) // 100 MB, 1,526 chunks
	create.MaxBytes = 1 << 28
	if r := k.Apply(create); r.Err != nil {
		t.Fatal(r.Err)
	}
	incr := func(from, n int) *command.Cmd {
		kv := make([]any, 0, 2*n)
		for i := from; i < from+n; i++ {
			kv = append(kv, "i"+strconv.Itoa(i), 1)
		}
		return cmsIncr("c", kv...)
	}
	apply(t, k, incr(0, 20_000)) // every chunk changed
	var st store
	st.write(t, k.Cut())
	apply(t, k, incr(20_000, 20_000))

	cut := k.Cut()
	first := incr(40_000, 1)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	start := time.Now()
	r := k.Apply(first) // captures the key
	capture := time.Since(start)
	runtime.ReadMemStats(&after)
	if r.Err != nil {
		t.Fatal(r.Err)
	}
	alloc := after.TotalAlloc - before.TotalAlloc
	done := make(chan time.Duration)
	go func() {
		var slowest time.Duration
		for i := range 200 {
			start := time.Now()
			k.Apply(incr(50_000+i*100, 100))
			slowest = max(slowest, time.Since(start))
		}
		done <- slowest
	}()
	n := st.write(t, cut)
	slowest := <-done
	chunks, _, peak, waits := cut.Copied()
	start = time.Now()
	whole := len(k.Lookup(0, []byte("c"), 0).Sketch().Marshal())
	marshal := time.Since(start)
	// The capture's allocations are the held chunks its own write
	// changes (one a row: 5 x 64 KiB), copied first, and a few hundred
	// bytes.
	t.Logf("capture: %v, %d bytes allocated (a Marshal, as before: %d bytes, %v); walk wrote %d chunks; "+
		"beside it %d chunks copied, at most %d bytes at once (budget %d), %d waits; slowest write beside the walk %v",
		capture, alloc, whole, marshal, n["c"], chunks, peak, budget, waits, slowest)
	// Beside them, a capture may start the cut's slab of keys and its
	// metadata buffer (image.go, capture), each shared by the next few
	// hundred captures.
	if alloc > 6*engine.ChunkSize+256*uint64(unsafe.Sizeof(CutKey{}))+64<<10 {
		t.Errorf("the capture allocated %d bytes: a copy of the sketch", alloc)
	}
	if peak > budget+engine.ChunkSize {
		t.Errorf("copies held %d bytes at once, over the budget %d and a chunk", peak, budget)
	}
	if chunks == 0 {
		t.Error("nothing was copied: the writes did not run beside the walk")
	}
}

// TestSketchImageFailedMerge: a TDIGEST.MERGE into an existing digest
// compresses it before it fails (a source's weight overflows): the
// destination keeps its compressed nodes, fewer chunks than the image
// holds, and the next cut must drop the chunks past their end, or the
// image no longer loads.
func TestSketchImageFailedMerge(t *testing.T) {
	k := New()
	k.TrackChanges()
	apply(t, k, tdCreate("dst", 10_000))
	vals := make([]float64, 10_000) // 160 KB of unmerged nodes: three chunks
	for i := range vals {
		vals[i] = float64(i * 7919 % 10_000)
	}
	apply(t, k, &command.Cmd{Op: command.TDAdd, Key: []byte("dst"), Data: command.Floats(vals)})
	// Two sources whose weights together overflow a long long: RedisBloom
	// RESTOREs such values.
	huge := rdb.AppendDouble(nil, 100)
	huge = rdb.AppendDouble(huge, 1)
	huge = rdb.AppendDouble(huge, 1)
	for _, n := range []uint64{610, 1, 0, 1} { // capacity, merged, unmerged, compressions
		huge = rdb.AppendUInt(huge, n)
	}
	huge = rdb.AppendDouble(huge, 0x1.8p62) // merged weight
	huge = rdb.AppendDouble(huge, 0)
	huge = rdb.AppendDouble(huge, 1)        // the node's mean
	huge = rdb.AppendDouble(huge, 0x1.8p62) // and weight
	d, err := tdigest.FromRDB(rdb.NewReader(huge, 1<<20), capBytes)
	if err != nil {
		t.Fatal(err)
	}
	payload := EncodeDump(sketchValue(KindTDigest, d))
	for _, key := range []string{"h1", "h2"} {
		apply(t, k, &command.Cmd{Op: command.Restore, Key: []byte(key), Data: payload})
	}
	var st store
	st.write(t, k.Cut())
	if len(st.chunks[db0("dst")]) != 3 {
		t.Fatalf("the digest spans %d chunks", len(st.chunks[db0("dst")]))
	}
	merge := &command.Cmd{Op: command.TDMerge, Key: []byte("dst"), Keys: [][]byte{[]byte("h1"), []byte("h2")}, MaxBytes: capBytes}
	if r := k.Apply(merge); r.Err == nil {
		t.Fatal("the merge did not overflow")
	}
	st.write(t, k.Cut())
	img := st.load(t)
	for _, key := range []string{"dst", "h1", "h2"} {
		sketchSame(t, k, img, key)
	}
}

// TestCutSmallKeyThenSketch: a walk that copies a small filter whole into
// its scratch, then meets a sketch larger than that scratch, holds the
// sketch's array (its size counted as eachPart counts it) and writes an
// image that loads back the same.
func TestCutSmallKeyThenSketch(t *testing.T) {
	k := New()
	k.TrackChanges()
	apply(t, k, &command.Cmd{Op: command.BFAdd, Key: []byte("a"), Items: [][]byte{[]byte("x")}, Multi: true, ErrorRate: 0.01, Capacity: 100, Expansion: 2, MaxBytes: capBytes})
	apply(t, k, cmsInit("z", 200_000, 5)) // 4 MB: past the walk's inline copy
	apply(t, k, cmsIncr("z", "i", 3))
	var st store
	st.write(t, k.Cut())
	img := st.load(t)
	sketchSame(t, k, img, "z")
	if Digest(img.Lookup(0, []byte("a"), 0)) != Digest(k.Lookup(0, []byte("a"), 0)) {
		t.Fatal("the small filter differs in the image")
	}
}
