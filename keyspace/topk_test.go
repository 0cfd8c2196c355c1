package keyspace

import (
	"strconv"
	"testing"

	"github.com/bfserver/bfserver/command"
)

func topkAdd(key string, items ...string) *command.Cmd {
	c := &command.Cmd{Op: command.TopKAdd, Key: []byte(key), Iter: -1, Multi: true}
	vals := make([]int64, len(items))
	for i, it := range items {
		c.Items = append(c.Items, []byte(it))
		vals[i] = 1
	}
	c.Data = command.Int64s(vals)
	return c
}

// TestTopKReplicasAgree: two keyspaces that apply the same log (adds that
// collide, so the decay coin is drawn) hold byte-identical Top-Ks and
// answer every add alike, expelled items included; the image and DUMP
// carry the sketch (the image with its generator: a node that restarts
// from it goes on drawing the same coins).
func TestTopKReplicasAgree(t *testing.T) {
	a, b := New(), New()
	var log []*command.Cmd
	log = append(log, &command.Cmd{Op: command.TopKReserve, Key: []byte("t"), Iter: 5, Capacity: 8, Count: 3, ErrorRate: 0.9, MaxBytes: capBytes})
	for i := 0; i < 400; i++ {
		var items []string
		for j := 0; j < 5; j++ {
			items = append(items, "i"+strconv.Itoa((i*j+i/3)%40))
		}
		log = append(log, topkAdd("t", items...))
	}
	for i, c := range log {
		ra, rb := a.Apply(c), b.Apply(c)
		if ra.Err != rb.Err || len(ra.Ints) != len(rb.Ints) {
			t.Fatalf("entry %d: %+v and %+v", i, ra, rb)
		}
		for j := range ra.Ints {
			if ra.Ints[j] != rb.Ints[j] || string(ra.List()[j]) != string(rb.List()[j]) {
				t.Fatalf("entry %d item %d: expelled %q/%d and %q/%d", i, j, ra.List()[j], ra.Ints[j], rb.List()[j], rb.Ints[j])
			}
		}
	}
	va, vb := a.Lookup(0, []byte("t"), 0), b.Lookup(0, []byte("t"), 0)
	if Digest(va) != Digest(vb) {
		t.Fatal("replicas differ")
	}
	if va.Kind.TypeName() != "TopK-TYPE" || KeyMemoryUsage([]byte("t"), va) != 2088+8*3*8+5*24+32 {
		t.Fatalf("TYPE %s, MEMORY USAGE %d", va.Kind.TypeName(), KeyMemoryUsage([]byte("t"), va))
	}
	// A node restarted from its image draws the coins its peers draw.
	c := New()
	loadImage(t, c, "t", va)
	more := topkAdd("t", "x", "y", "z", "i1", "i2", "w")
	a.Apply(more)
	c.Apply(more)
	if Digest(a.Lookup(0, []byte("t"), 0)) != Digest(c.Lookup(0, []byte("t"), 0)) {
		t.Fatal("a node loaded from the image diverged")
	}
	// DUMP/RESTORE carries RedisBloom's fields (not the generator).
	apply(t, a, &command.Cmd{Op: command.Restore, Key: []byte("r"), Data: EncodeDump(va), MaxBytes: capBytes})
	r := a.Read(&command.Cmd{Op: command.TopKList, Key: []byte("r"), Flag: true})
	want := a.Read(&command.Cmd{Op: command.TopKList, Key: []byte("t"), Flag: true})
	if len(r.List()) != len(want.List()) {
		t.Fatalf("restored list %q, want %q", r.List(), want.List())
	}
	if got, want := a.Bytes(), a.countBytes(); got != want {
		t.Errorf("memory total %d, recount %d", got, want)
	}
}

func TestTopKErrors(t *testing.T) {
	k := New()
	apply(t, k, &command.Cmd{Op: command.Set, Key: []byte("s"), Data: []byte("v")})
	apply(t, k, &command.Cmd{Op: command.TopKReserve, Key: []byte("t"), Iter: 3, Capacity: 8, Count: 7, ErrorRate: 0.9, MaxBytes: capBytes})
	for _, c := range []struct {
		cmd  *command.Cmd
		want error
	}{
		{&command.Cmd{Op: command.TopKReserve, Key: []byte("t"), Field: command.TopKArgK}, ErrTopKExists},
		{&command.Cmd{Op: command.TopKReserve, Key: []byte("s"), Iter: 3, Capacity: 8, Count: 7, ErrorRate: 0.9}, ErrTopKExists},
		{&command.Cmd{Op: command.TopKReserve, Key: []byte("n"), Field: command.TopKArgDecay}, ErrTopKDecay},
		{&command.Cmd{Op: command.TopKReserve, Key: []byte("n"), Iter: 1 << 20, Capacity: 1 << 20, Count: 8, ErrorRate: 0.9, MaxBytes: capBytes}, ErrTopKNoMemory},
		{&command.Cmd{Op: command.TopKReserve, Key: []byte("n"), Field: command.CMSArgWidth}, ErrInvalidCommand},
		{topkAdd("missing", "a"), ErrTopKNotFound},
		{topkAdd("s", "a"), ErrWrongType},
	} {
		if r := k.Apply(c.cmd); r.Err != c.want {
			t.Errorf("%+v: %v, want %v", c.cmd, r.Err, c.want)
		}
	}
	c := &command.Cmd{Op: command.TopKAdd, Key: []byte("t"), Items: [][]byte{[]byte("a"), []byte("b")}, Data: command.Int64s([]int64{2, 0}), Iter: 1}
	r := apply(t, k, c)
	if r.Tail() != ErrTopKIncrement || len(r.Ints) != 1 {
		t.Fatalf("INCRBY with a bad last increment: %+v", r)
	}
	if r := k.Read(&command.Cmd{Op: command.TopKCount, Key: []byte("t"), Items: [][]byte{[]byte("a"), []byte("b")}}); r.Ints[0] != 2 || r.Ints[1] != 0 {
		t.Fatalf("counts %v", r.Ints)
	}
}
