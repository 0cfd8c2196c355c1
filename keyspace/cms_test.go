package keyspace

import (
	"strconv"
	"sync"
	"testing"

	"github.com/bfserver/bfserver/command"
)

func cmsInit(key string, w uint64, d int64) *command.Cmd {
	return &command.Cmd{Op: command.CMSInit, Key: []byte(key), Capacity: w, Count: d, MaxBytes: capBytes}
}

func cmsIncr(key string, kv ...any) *command.Cmd {
	c := &command.Cmd{Op: command.CMSIncrBy, Key: []byte(key), Multi: true}
	var vals []int64
	for i := 0; i < len(kv); i += 2 {
		c.Items = append(c.Items, []byte(kv[i].(string)))
		vals = append(vals, int64(kv[i+1].(int)))
	}
	c.Data = command.Int64s(vals)
	return c
}

// TestCMSCommands: the keyspace side of CMS.*: RedisBloom's key errors
// before the argument errors the proposer found, counts, merge with
// weights, and a refused merge that changes nothing.
func TestCMSCommands(t *testing.T) {
	k := New()
	apply(t, k, &command.Cmd{Op: command.Set, Key: []byte("s"), Data: []byte("v")})
	apply(t, k, cmsInit("a", 50, 4))
	apply(t, k, cmsInit("b", 50, 4))
	apply(t, k, cmsInit("narrow", 49, 4))
	for _, c := range []struct {
		cmd  *command.Cmd
		want error
	}{
		{cmsInit("a", 5, 5), ErrCMSExists},
		{cmsInit("s", 5, 5), ErrCMSExists},
		{&command.Cmd{Op: command.CMSInit, Key: []byte("a"), Field: command.CMSArgWidth}, ErrCMSExists},
		{&command.Cmd{Op: command.CMSInit, Key: []byte("new"), Field: command.CMSArgWidth}, ErrCMSWidth},
		{&command.Cmd{Op: command.CMSInit, Key: []byte("huge"), Capacity: 1 << 30, Count: 1 << 10, MaxBytes: capBytes}, ErrCMSNoMemory},
		{cmsIncr("missing", "x", 1), ErrCMSNotFound},
		{cmsIncr("s", "x", 1), ErrWrongType},
		{&command.Cmd{Op: command.CMSIncrBy, Key: []byte("missing"), Field: command.CMSArgNumber}, ErrCMSNotFound},
		{&command.Cmd{Op: command.CMSIncrBy, Key: []byte("a"), Field: command.CMSArgNegative}, ErrCMSNegative},
		{&command.Cmd{Op: command.CMSMerge, Key: []byte("a"), Keys: [][]byte{[]byte("missing"), []byte("b")}, Data: command.Int64s([]int64{1, 1}), Iter: 1}, ErrCMSNotFound},
		{&command.Cmd{Op: command.CMSMerge, Key: []byte("a"), Keys: [][]byte{[]byte("b"), []byte("missing")}, Data: command.Int64s([]int64{1, 1}), Iter: 1}, ErrCMSWeight},
		{&command.Cmd{Op: command.CMSMerge, Key: []byte("a"), Keys: [][]byte{[]byte("narrow")}, Data: command.Int64s([]int64{1}), Iter: -1}, ErrCMSDims},
		{&command.Cmd{Op: command.CMSMerge, Key: []byte("missing"), Field: command.CMSArgNumKeys}, ErrCMSNotFound},
	} {
		if r := k.Apply(c.cmd); r.Err != c.want {
			t.Errorf("%+v: %v, want %v", c.cmd, r.Err, c.want)
		}
	}
	if k.Lookup(0, []byte("new"), 0) != nil || k.Lookup(0, []byte("huge"), 0) != nil {
		t.Fatal("a refused INIT created its key")
	}
	r := apply(t, k, cmsIncr("a", "x", 5, "y", 7))
	if r.Ints[0] != 5 || r.Ints[1] != 7 {
		t.Fatalf("INCRBY: %v", r.Ints)
	}
	apply(t, k, cmsIncr("b", "x", 2))
	apply(t, k, &command.Cmd{Op: command.CMSMerge, Key: []byte("b"), Keys: [][]byte{[]byte("a"), []byte("b")}, Data: command.Int64s([]int64{2, 3}), Iter: -1})
	r = k.Read(&command.Cmd{Op: command.CMSQuery, Key: []byte("b"), Items: [][]byte{[]byte("x"), []byte("y"), []byte("z")}})
	if r.Ints[0] != 16 || r.Ints[1] != 14 || r.Ints[2] != 0 {
		t.Fatalf("after MERGE: %v", r.Ints)
	}
	if r := k.Read(&command.Cmd{Op: command.CMSInfo, Key: []byte("b")}); r.Ints[0] != 50 || r.Ints[1] != 4 || r.Ints[2] != 30 {
		t.Fatalf("INFO: %v", r.Ints)
	}
	before := Digest(k.Lookup(0, []byte("b"), 0))
	if r := k.Apply(&command.Cmd{Op: command.CMSMerge, Key: []byte("b"), Keys: [][]byte{[]byte("a")}, Data: command.Int64s([]int64{-1}), Iter: -1}); r.Err != ErrCMSMergeOverflow {
		t.Fatalf("negative merge: %v", r.Err)
	}
	if Digest(k.Lookup(0, []byte("b"), 0)) != before {
		t.Fatal("a refused MERGE changed the sketch")
	}
	if r := k.Read(&command.Cmd{Op: command.CMSQuery, Key: []byte("s"), Items: [][]byte{[]byte("x")}}); r.Err != ErrWrongType {
		t.Fatalf("QUERY of a string: %v", r.Err)
	}
	if got, want := k.Bytes(), k.countBytes(); got != want {
		t.Errorf("memory total %d, recount %d", got, want)
	}
}

// TestCMSImageDumpDigest: a sketch survives the image and DUMP/RESTORE
// with the same digest; its DUMP is RedisBloom's module type; TYPE and
// MEMORY USAGE answer RedisBloom's; COPY is refused as RedisBloom refuses
// it.
func TestCMSImageDumpDigest(t *testing.T) {
	k := New()
	k.TrackChanges()
	apply(t, k, cmsInit("c", 10, 3))
	apply(t, k, cmsIncr("c", "a", 1, "b", 2))
	v := k.Lookup(0, []byte("c"), 0)
	want := Digest(v)
	if v.Kind.TypeName() != "CMSk-TYPE" || KeyMemoryUsage([]byte("c"), v) != 184 {
		t.Fatalf("TYPE %s, MEMORY USAGE %d", v.Kind.TypeName(), KeyMemoryUsage([]byte("c"), v))
	}
	k2 := New()
	loadImage(t, k2, "c", v)
	if got := Digest(k2.Lookup(0, []byte("c"), 0)); got != want {
		t.Errorf("image round trip: %s, want %s", got, want)
	}
	meta := encodeMeta(v)
	if err := k2.LoadValue(0, "bad", meta[:len(meta)-1], capBytes); err != ErrCorruptImage {
		t.Errorf("truncated image: %v", err)
	}
	if err := k2.LoadValue(0, "small", meta, 100); err != ErrTooLarge {
		t.Errorf("image over the cap: %v", err)
	}
	apply(t, k, &command.Cmd{Op: command.Restore, Key: []byte("r"), Data: EncodeDump(v), MaxBytes: capBytes})
	if got := Digest(k.Lookup(0, []byte("r"), 0)); got != want {
		t.Errorf("DUMP/RESTORE: %s, want %s", got, want)
	}
	if r := k.Apply(&command.Cmd{Op: command.Restore, Key: []byte("r2"), Data: EncodeDump(v), MaxBytes: 100}); r.Err != ErrTooLarge {
		t.Errorf("RESTORE over the cap: %v", r.Err)
	}
	if r := k.Apply(&command.Cmd{Op: command.Copy, Key: []byte("c"), Dst: []byte("d")}); r.Err != ErrModuleKeyCopy {
		t.Errorf("COPY: %v", r.Err)
	}
	if got, want := k.Bytes(), k.countBytes(); got != want {
		t.Errorf("memory total %d, recount %d", got, want)
	}
}

// TestCMSReadsBesideApply: queries run while Apply increments (go test
// -race checks the locking); a count only grows.
func TestCMSReadsBesideApply(t *testing.T) {
	k := New()
	apply(t, k, cmsInit("c", 100, 5))
	readersBeside(t, 3, func() func() bool {
		last := int64(0)
		return func() bool {
			r := k.Read(&command.Cmd{Op: command.CMSQuery, Key: []byte("c"), Items: [][]byte{[]byte("hot")}})
			if r.Ints[0] < last {
				t.Errorf("count went back from %d to %d", last, r.Ints[0])
				return false
			}
			last = r.Ints[0]
			k.Read(&command.Cmd{Op: command.CMSInfo, Key: []byte("c")})
			return true
		}
	}, func() {
		for i := 0; i < 2000; i++ {
			apply(t, k, cmsIncr("c", "hot", 1, "i"+strconv.Itoa(i), 1))
		}
	})
	if r := k.Read(&command.Cmd{Op: command.CMSQuery, Key: []byte("c"), Items: [][]byte{[]byte("hot")}}); r.Ints[0] < 2000 {
		t.Fatalf("hot counted %d", r.Ints[0])
	}
}

// readersBeside runs n readers, each looping on the function its factory
// makes until write has returned or it reports false, while write applies
// on the test's goroutine: the reads beside Apply that -race checks.
func readersBeside(t *testing.T, n int, reader func() func() bool, write func()) {
	t.Helper()
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for range n {
		wg.Add(1)
		read := reader()
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				if !read() {
					return
				}
			}
		}()
	}
	write()
	close(stop)
	wg.Wait()
}
