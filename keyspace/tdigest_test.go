package keyspace

import (
	"bytes"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/bfserver/bfserver/command"
	"github.com/bfserver/bfserver/sketch/tdigest"
)

func tdCreate(key string, compression int64) *command.Cmd {
	return &command.Cmd{Op: command.TDCreate, Key: []byte(key), Count: compression}
}

func tdAdd(key string, vals ...float64) *command.Cmd {
	return &command.Cmd{Op: command.TDAdd, Key: []byte(key), Data: command.Floats(vals)}
}

func tdQuantile(key string, qs ...float64) *command.Cmd {
	return &command.Cmd{Op: command.TDQuantile, Key: []byte(key), Data: command.Floats(qs)}
}

// TestTDigestReplicasAgree: two keyspaces that apply the same log (ADDs,
// queries that compress, MERGEs, RESETs, DUMPs) hold byte-identical
// digests after every entry and answer alike; a read of a digest with a
// buffer is refused for the log (ErrNeedsLog), and once the log
// compressed it, Read answers what Apply answered. The image keeps the
// whole state (unmerged nodes included), so a node loaded from it goes on
// as its peers do.
func TestTDigestReplicasAgree(t *testing.T) {
	a, b := New(), New()
	rng := rand.New(rand.NewPCG(26, 1))
	log := []*command.Cmd{tdCreate("x", 50), tdCreate("y", 100)}
	for i := 0; i < 300; i++ {
		key := []string{"x", "y"}[rng.IntN(2)]
		switch op := rng.IntN(10); {
		case op < 5:
			vals := make([]float64, 1+rng.IntN(60))
			for j := range vals {
				vals[j] = math.Round(rng.ExpFloat64()*100) / 10
			}
			log = append(log, tdAdd(key, vals...))
		case op == 5:
			log = append(log, tdQuantile(key, 0.01, 0.5, 0.99))
		case op == 6:
			log = append(log, &command.Cmd{Op: command.TDRank, Key: []byte(key), Data: command.Floats([]float64{1, 5}), Flag: rng.IntN(2) == 0})
		case op == 7:
			log = append(log, &command.Cmd{Op: command.TDMerge, Key: []byte("m"), Keys: [][]byte{[]byte("x"), []byte("y")}, Flag: rng.IntN(2) == 0})
		case op == 8:
			log = append(log, &command.Cmd{Op: command.Dump, Key: []byte(key)})
		default:
			if rng.IntN(8) == 0 {
				log = append(log, &command.Cmd{Op: command.TDReset, Key: []byte(key)})
			} else {
				log = append(log, &command.Cmd{Op: command.TDTrimmedMean, Key: []byte(key), Data: command.Floats([]float64{0.1, 0.9})})
			}
		}
	}
	compressed := 0
	for i, c := range log {
		c.MaxBytes = capBytes
		if !c.Op.IsWrite() {
			// What a replica's Read says before the log applies it.
			r := a.Read(c)
			if r.Err == ErrNeedsLog {
				compressed++
			} else {
				ra := a.Apply(c)
				if !bytes.Equal(r.Bytes(), ra.Bytes()) || !slices.Equal(r.Ints, ra.Ints) {
					t.Fatalf("entry %d: Read %+v, Apply %+v", i, r, ra)
				}
				b.Apply(c)
				continue
			}
		}
		ra, rb := a.Apply(c), b.Apply(c)
		if ra.Err != rb.Err || !bytes.Equal(ra.Bytes(), rb.Bytes()) || !slices.Equal(ra.Ints, rb.Ints) {
			t.Fatalf("entry %d (%v): %+v and %+v", i, c.Op, ra, rb)
		}
		if ra.Err == nil && !c.Op.IsWrite() && c.Op != command.Dump {
			// Compressed by the log: a replica's read now answers the same.
			if r := a.Read(c); r.Err != nil || !bytes.Equal(r.Bytes(), ra.Bytes()) || !slices.Equal(r.Ints, ra.Ints) {
				t.Fatalf("entry %d: after the log, Read %+v, Apply %+v", i, r, ra)
			}
		}
		for _, key := range []string{"x", "y", "m"} {
			va, vb := a.Lookup(0, []byte(key), 0), b.Lookup(0, []byte(key), 0)
			if (va == nil) != (vb == nil) || va != nil && Digest(va) != Digest(vb) {
				t.Fatalf("entry %d: replicas differ on %s", i, key)
			}
		}
	}
	if compressed < 20 {
		t.Fatalf("only %d reads needed the log", compressed)
	}
	// A buffered digest: the image keeps its buffer.
	apply(t, a, tdAdd("x", 1, 2, 3))
	vx := a.Lookup(0, []byte("x"), 0)
	if _, un := vx.Sketch().tdigest().NodeCounts(); un == 0 {
		t.Fatal("no buffer to keep")
	}
	c := New()
	loadImage(t, c, "x", vx)
	if Digest(c.Lookup(0, []byte("x"), 0)) != Digest(vx) {
		t.Fatal("the image lost state")
	}
	q := tdQuantile("x", 0.5)
	if ra, rc := apply(t, a, q), apply(t, c, q); !bytes.Equal(ra.Bytes(), rc.Bytes()) || Digest(a.Lookup(0, []byte("x"), 0)) != Digest(c.Lookup(0, []byte("x"), 0)) {
		t.Fatal("a node loaded from the image diverged")
	}
	if got, want := a.Bytes(), a.countBytes(); got != want {
		t.Errorf("memory total %d, recount %d", got, want)
	}
}

// TestTDigestDump: DUMP of a buffered digest needs the log (RedisBloom's
// rdb_save compresses the key); through the log it compresses, and the
// payload RESTOREs to a digest that answers the same.
func TestTDigestDump(t *testing.T) {
	k := New()
	apply(t, k, tdCreate("d", 20))
	apply(t, k, tdAdd("d", 5, 1, 4, 2, 3, 9, 7))
	dump := &command.Cmd{Op: command.Dump, Key: []byte("d")}
	if r := k.Read(dump); r.Err != ErrNeedsLog {
		t.Fatalf("Read of DUMP of a buffered digest: %+v", r)
	}
	p := apply(t, k, dump).Bytes()
	info := k.Read(&command.Cmd{Op: command.TDInfo, Key: []byte("d")}).Ints
	if info[2] == 0 || info[3] != 0 || info[7] != 1 {
		t.Fatalf("INFO after DUMP: %v", info)
	}
	if r := k.Read(dump); r.Err != nil || !bytes.Equal(r.Bytes(), p) {
		t.Fatalf("Read of DUMP once compressed: %+v", r)
	}
	apply(t, k, &command.Cmd{Op: command.Restore, Key: []byte("r"), Data: p})
	want := k.Read(tdQuantile("d", 0, 0.3, 0.5, 1))
	if got := k.Read(tdQuantile("r", 0, 0.3, 0.5, 1)); got.Err != nil || !bytes.Equal(got.Bytes(), want.Bytes()) {
		t.Fatalf("restored quantiles %+v, want %+v", got, want)
	}
	if v := k.Lookup(0, []byte("r"), 0); v.Kind.TypeName() != "TDIS-TYPE" {
		t.Fatalf("TYPE %s", v.Kind.TypeName())
	}
}

// TestTDigestOrderOfChecks: the key's errors come before the arguments'
// (RedisBloom opens the key first), MERGE checks its destination's type,
// then its arguments, then each source; a merge replaces the destination
// (its TTL goes); a value over the byte cap changes nothing.
func TestTDigestOrderOfChecks(t *testing.T) {
	k := New()
	apply(t, k, &command.Cmd{Op: command.Set, Key: []byte("s"), Data: []byte("v")})
	apply(t, k, tdCreate("d", 10))
	apply(t, k, tdAdd("d", 1, 2, 3))
	bad := func(op command.Op, key string, code uint8) *command.Cmd {
		return &command.Cmd{Op: op, Key: []byte(key), Field: code, MaxBytes: capBytes}
	}
	missing, exists := ErrTDKeyMissing, ErrTDKeyExists
	for _, c := range []struct {
		cmd  *command.Cmd
		want error
	}{
		{bad(command.TDCreate, "d", command.TDArgWrongKeyword), exists},
		{bad(command.TDCreate, "s", command.TDArgParseCompression), ErrWrongType},
		{bad(command.TDCreate, "n", command.TDArgCompressionRange), ErrTDCompressionRange},
		{bad(command.TDCreate, "n", command.TDArgAlloc), ErrTDAlloc},
		{bad(command.TDAdd, "n", command.TDArgParseVal), missing},
		{bad(command.TDAdd, "s", command.TDArgParseVal), ErrWrongType},
		{bad(command.TDAdd, "d", command.TDArgValNotFinite), ErrTDValNotFinite},
		{bad(command.TDQuantile, "n", command.TDArgParseQuantile), missing},
		{bad(command.TDQuantile, "d", command.TDArgQuantileRange), ErrTDQuantileRange},
		{bad(command.TDMerge, "s", command.TDArgParseNumkeys), ErrWrongType},
		{bad(command.TDMerge, "n", command.TDArgMergeArity), ErrTDMergeArity},
		{&command.Cmd{Op: command.TDMerge, Key: []byte("n"), Keys: [][]byte{[]byte("d"), []byte("n")}, MaxBytes: capBytes}, missing},
		{&command.Cmd{Op: command.TDMerge, Key: []byte("n"), Keys: [][]byte{[]byte("d"), []byte("s")}, MaxBytes: capBytes}, ErrWrongType},
		{&command.Cmd{Op: command.TDMerge, Key: []byte("n"), Keys: [][]byte{[]byte("d")}, Count: tdigest.MaxCompression + 1, MaxBytes: capBytes}, ErrTDMergeAlloc},
		{bad(command.TDTrimmedMean, "d", command.TDArgCutOrder), ErrTDCutOrder},
		{bad(command.TDCreate, "n", command.TDArgParseRank), ErrInvalidCommand}, // not CREATE's error
	} {
		if r := k.Apply(c.cmd); r.Err != c.want {
			t.Errorf("%v %s: %v, want %v", c.cmd.Op, c.cmd.Key, r.Err, c.want)
		}
	}
	if k.Lookup(0, []byte("n"), 0) != nil {
		t.Fatal("a failed command created a key")
	}
	// MERGE into an existing destination with a TTL: a new value, no TTL.
	apply(t, k, tdCreate("m", 5))
	apply(t, k, &command.Cmd{Op: command.Expire, Key: []byte("m"), Iter: 1 << 50})
	apply(t, k, &command.Cmd{Op: command.TDMerge, Key: []byte("m"), Keys: [][]byte{[]byte("d"), []byte("m")}})
	if v := k.Lookup(0, []byte("m"), 0); v.ExpireAt != 0 {
		t.Fatalf("merged destination kept its TTL %d", v.ExpireAt)
	}
	if info := k.Read(&command.Cmd{Op: command.TDInfo, Key: []byte("m")}).Ints; info[0] != 5 || info[6] != 3 {
		t.Fatalf("merged INFO %v", info)
	}
	// Over the byte cap: refused whole, the digest unchanged.
	apply(t, k, tdCreate("big", 100000))
	before := Digest(k.Lookup(0, []byte("big"), 0))
	vals := make([]float64, 5000)
	c := tdAdd("big", vals...)
	c.MaxBytes = 4096
	if r := k.Apply(c); r.Err != ErrTooLarge || Digest(k.Lookup(0, []byte("big"), 0)) != before {
		t.Fatalf("ADD over the cap: %v", r.Err)
	}
	apply(t, k, c) // under the test's cap
	mc := &command.Cmd{Op: command.TDMerge, Key: []byte("big2"), Keys: [][]byte{[]byte("big")}, MaxBytes: 4096}
	if r := k.Apply(mc); r.Err != ErrTooLarge || k.Lookup(0, []byte("big2"), 0) != nil {
		t.Fatalf("MERGE over the cap: %v", r.Err)
	}
}

// TestTDigestMemory: MEMORY USAGE is RedisBloom's (every node counted
// from creation; a wrapped capacity makes it negative), the keyspace's
// total counts what a digest holds, which grows as values arrive.
func TestTDigestMemory(t *testing.T) {
	k := New()
	apply(t, k, tdCreate("k", 100))
	v := k.Lookup(0, []byte("k"), 0)
	if got := int64(KeyMemoryUsage([]byte("k"), v)); got != 9840+32 {
		t.Fatalf("MEMORY USAGE %d, want %d", got, 9840+32)
	}
	empty := k.Bytes()
	apply(t, k, tdAdd("k", make([]float64, 500)...))
	if k.Bytes() <= empty || k.Bytes() != k.countBytes() {
		t.Fatalf("total %d after adds (empty %d, recount %d)", k.Bytes(), empty, k.countBytes())
	}
	apply(t, k, tdCreate("w", 357913940))
	if got := int64(KeyMemoryUsage([]byte("w"), k.Lookup(0, []byte("w"), 0))); got >= 0 {
		t.Fatalf("MEMORY USAGE of a wrapped capacity: %d", got)
	}
	if r := k.Apply(tdAdd("w", 1)); r.Err != ErrTDOverflow {
		t.Fatalf("ADD to a wrapped capacity: %v", r.Err)
	}
	if k.Bytes() != k.countBytes() || k.Bytes() > 1<<20 {
		t.Fatalf("total %d, recount %d", k.Bytes(), k.countBytes())
	}
}

// TestTDigestReadsBesideApply: readers query a digest while Apply adds
// to it and the log compresses it (-race checks the locking).
func TestTDigestReadsBesideApply(t *testing.T) {
	k := New()
	apply(t, k, tdCreate("d", 20))
	readersBeside(t, 3, func() func() bool {
		return func() bool {
			for _, c := range []*command.Cmd{tdQuantile("d", 0.5), {Op: command.TDInfo, Key: []byte("d")},
				{Op: command.TDMin, Key: []byte("d")}, {Op: command.Dump, Key: []byte("d")}} {
				if r := k.Read(c); r.Err != nil && r.Err != ErrNeedsLog {
					t.Errorf("%v: %v", c.Op, r.Err)
					return false
				}
			}
			return true
		}
	}, func() {
		for i := 0; i < 2000; i++ {
			apply(t, k, tdAdd("d", float64(i), float64(i%7)))
			if i%10 == 0 {
				apply(t, k, tdQuantile("d", 0.5))
			}
			if i%97 == 0 {
				apply(t, k, &command.Cmd{Op: command.TDMerge, Key: []byte("d"), Keys: [][]byte{[]byte("d")}})
			}
		}
	})
	if n := k.Read(&command.Cmd{Op: command.TDInfo, Key: []byte("d")}).Ints[6]; n < 4000 {
		t.Fatalf("%d observations", n)
	}
}

// tdQueries is one of each t-digest query, DUMP and MEMORY USAGE.
func tdQueries(key string) []*command.Cmd {
	k := []byte(key)
	return []*command.Cmd{
		{Op: command.TDMin, Key: k}, {Op: command.TDMax, Key: k}, {Op: command.TDInfo, Key: k},
		{Op: command.TDQuantile, Key: k, Data: command.Floats([]float64{0, 0.5, 0.25, 1})},
		{Op: command.TDCDF, Key: k, Data: command.Floats([]float64{math.Inf(-1), 0, 1, math.Inf(1)})},
		{Op: command.TDTrimmedMean, Key: k, Data: command.Floats([]float64{0.1, 0.9})},
		{Op: command.TDRank, Key: k, Data: command.Floats([]float64{-1, 0, 3}), Flag: true},
		{Op: command.TDByRank, Key: k, Data: command.Int64s([]int64{0, 1, 7, 1 << 40})},
		{Op: command.Dump, Key: k}, {Op: command.MemUsage, Key: k}, {Op: command.Digest, Key: k},
	}
}

// FuzzLoadValue: an image's metadata for any kind (the sketches' headers,
// and their exact dumps as older builds stored them) is refused or loaded
// within the cap, never a panic; a sketch loaded from it writes the same
// metadata back (a header) or has the same full state (a dump, which is
// then to be rewritten), and a digest answers every query.
func FuzzLoadValue(f *testing.F) {
	k := New()
	k.Apply(&command.Cmd{Op: command.TDCreate, Key: []byte("t"), Count: 5})
	k.Apply(&command.Cmd{Op: command.TDAdd, Key: []byte("t"), Data: command.Floats([]float64{4, 2, 9, 2, 7, 1, 5, 5}), MaxBytes: capBytes})
	k.Apply(&command.Cmd{Op: command.CMSInit, Key: []byte("m"), Capacity: 4, Count: 2, MaxBytes: capBytes})
	k.Apply(&command.Cmd{Op: command.TopKReserve, Key: []byte("p"), Iter: 2, Capacity: 4, Count: 2, ErrorRate: 0.9, MaxBytes: capBytes})
	k.Apply(&command.Cmd{Op: command.Set, Key: []byte("s"), Data: []byte("v")})
	for _, key := range []string{"t", "m", "p", "s"} {
		v := k.Lookup(0, []byte(key), 0)
		f.Add(encodeMeta(v))
		if sk := v.Sketch(); sk != nil {
			f.Add(append(encodeMeta(v)[:10], sk.Marshal()...)) // stored whole
		}
	}
	f.Fuzz(func(t *testing.T, meta []byte) {
		k := New()
		if k.LoadValue(0, "x", meta, 1<<16) != nil {
			return
		}
		v := k.db(0).keys.get("x")
		if v.Sketch() != nil {
			if v.Sketch().Bytes() > 1<<17 {
				t.Fatalf("loaded %d bytes past the cap", v.Sketch().Bytes())
			}
			again := encodeMeta(v)
			n := len(again) - len(v.Sketch().header())
			whole := append(again[:n:n], v.Sketch().Marshal()...) // not into again's spare room
			if len(k.rewrite) == 0 && !bytes.Equal(again, meta) || len(k.rewrite) != 0 && !bytes.Equal(whole, meta) {
				t.Fatalf("metadata %x loads to a value whose metadata is %x (whole %x)", meta, again, whole)
			}
		}
		if v.Kind == KindTDigest {
			v.ExpireAt = 0
			for _, c := range tdQueries("x") {
				k.Apply(c)
			}
		}
	})
}
