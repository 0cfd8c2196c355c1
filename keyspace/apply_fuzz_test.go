package keyspace

import (
	"encoding/binary"
	"math"
	"testing"

	"github.com/bfserver/bfserver/command"
	"github.com/bfserver/bfserver/sketch/window"
)

// fuzzCap keeps the fuzzer's filters small: a command may carry any cap up
// to command.MaxFilterBytes, and the fuzzer must not spend its memory on
// valid giant filters.
const fuzzCap = 1 << 16

// cmdFrom builds a command from fuzz bytes, field by field, so that most
// draws name a real op and nearby values (zero, one, a range's ends, just
// past them) instead of the codec's corrupt inputs.
func cmdFrom(b []byte) *command.Cmd {
	next := func() uint64 {
		if len(b) == 0 {
			return 0
		}
		v := uint64(b[0])
		b = b[1:]
		return v
	}
	edge := func(lo, hi uint64) uint64 {
		switch next() % 8 {
		case 0:
			return 0
		case 1:
			return lo
		case 2:
			return hi
		case 3:
			return hi + 1
		case 4:
			return lo + next()
		case 5:
			return math.MaxUint64
		}
		return next() | next()<<8
	}
	word := func() []byte {
		return []byte{'k', byte(next() % 4)}
	}
	list := func() [][]byte {
		l := make([][]byte, next()%4)
		for i := range l {
			l[i] = word()
		}
		return l
	}
	ops := []command.Op{command.BFReserve, command.BFAdd, command.BFLoadChunk, command.CFReserve,
		command.CFAdd, command.CFDel, command.CFCompact, command.CFLoadChunk, command.Del, command.Rename,
		command.Expire, command.Persist, command.FlushDB, command.FlushAll, command.Set, command.Restore,
		command.ExpireDue, command.Copy, command.SetMember, command.BFExists, command.BFInfo,
		command.BFScanDump, command.CFScanDump, command.CFCount, command.Scan, command.Dump, command.Digest,
		command.MemUsage, command.Watch, command.BFLoadPart, command.CFLoadPart, command.WReserve, command.WAdd,
		command.WLoadChunk, command.WExists, command.WInfo, command.WScanDump,
		command.CMSInit, command.CMSIncrBy, command.CMSMerge, command.CMSQuery, command.CMSInfo,
		command.TopKReserve, command.TopKAdd, command.TopKQuery, command.TopKCount, command.TopKList, command.TopKInfo,
		command.TDCreate, command.TDReset, command.TDAdd, command.TDMerge, command.TDMin, command.TDMax,
		command.TDInfo, command.TDQuantile, command.TDCDF, command.TDTrimmedMean, command.TDRank, command.TDByRank,
		command.Op(next())}
	c := &command.Cmd{Op: ops[next()%uint64(len(ops))], DB: uint8(edge(0, 15)), Now: int64(next()) * 1000}
	c.Key, c.Dst, c.Keys, c.Items = word(), word(), list(), list()
	c.Data = make([]byte, next()*next()%300)
	for i := range c.Data {
		c.Data[i] = byte(next())
	}
	c.Iter = int64(edge(0, 3)) - 1
	c.Count = int64(edge(0, 10))
	f := next()
	c.Multi, c.NX, c.NoCreate, c.NonScaling, c.Flag = f&1 != 0, f&2 != 0, f&4 != 0, f&8 != 0, f&16 != 0
	c.ErrorRate = []float64{0, 0.01, 0.25, 0.3, 1, -1, math.NaN(), math.Inf(1), 1e-300}[next()%9]
	c.Capacity = edge(1, 1<<30)
	c.Expansion = uint32(edge(0, 32768))
	c.BucketSize = uint16(edge(1, 255))
	c.MaxIterations = uint16(edge(1, 65535))
	c.MaxExpansions = uint32(edge(1, 65536))
	c.MaxBytes = edge(0, fuzzCap) % (2 * fuzzCap)
	c.Field = uint8(edge(0, 5))
	if (c.Op == command.WReserve || c.Op == command.WAdd) && next()%2 == 0 {
		// A window the proposer sized (most random Data is no shape), of
		// either kind, at a window near its edges.
		c.Field, c.Iter = uint8(1+next()%2), int64(edge(1, 64))
		c.ErrorRate = []float64{0.01, 0.1, 0.5}[next()%3]
		if s, err := window.Size(c.ErrorRate, uint64(max(c.Iter, 1))); err == nil {
			c.Data = command.EncodeShape(s)
		}
		c.Capacity = uint64(max(c.Iter, 1))
	}
	if (c.Op == command.CMSInit || c.Op == command.CMSIncrBy || c.Op == command.CMSMerge) && next()%2 == 0 {
		// The shapes the proposer makes: small sketches, an increment or
		// a weight per item or source, now and then an argument error.
		c.Capacity, c.Count = 1+next()%20, int64(1+next()%4)
		c.Field = uint8(next() % 16)
		if c.Field > 12 {
			c.Field = 0
		}
		vals := make([]int64, max(len(c.Items), len(c.Keys)))
		for i := range vals {
			vals[i] = []int64{0, 1, 3, 1 << 31, 1<<32 - 1, 1 << 32, math.MaxInt64, -1}[next()%8]
		}
		if c.Op == command.CMSIncrBy {
			vals = vals[:len(c.Items)]
			for i := range vals {
				vals[i] = max(vals[i], 0)
			}
		} else if c.Op == command.CMSMerge {
			vals = vals[:len(c.Keys)]
			c.Iter = int64(next()%uint64(len(c.Keys)+2)) - 1
		}
		c.Data = command.Int64s(vals)
	}
	if (c.Op == command.TopKReserve || c.Op == command.TopKAdd) && next()%2 == 0 {
		// The shapes the proposer makes: small sketches, decay in (0, 1],
		// increments within RedisBloom's bound, a bad one last.
		c.Iter, c.Capacity, c.Count = int64(1+next()%8), 1+next()%16, int64(1+next()%4)
		c.ErrorRate = []float64{0.9, 1, 0.5, 1e-300}[next()%4]
		c.Field = 0
		if next()%8 == 0 {
			c.Field = uint8(command.TopKArgK + next()%5)
		}
		if c.Op == command.TopKAdd {
			vals := make([]int64, len(c.Items))
			for i := range vals {
				vals[i] = []int64{0, 1, 2, 100, 100000}[next()%5]
			}
			c.Iter = -1
			if len(vals) > 0 && next()%4 == 0 {
				c.Iter, vals[len(vals)-1] = int64(len(vals)-1), 0
			}
			c.Data = command.Int64s(vals)
		}
	}
	if c.Op >= command.TDCreate && c.Op <= command.TDMerge || c.Op >= command.TDMin && c.Op <= command.TDByRank {
		if next()%2 == 0 {
			tdShape(c, next)
		}
	}
	return c
}

// tdShape gives a t-digest command the shapes the proposer makes: small
// compressions, values the parsers accept (or, now and then, an argument
// error of any op's), fractions, ranks and cuts in range.
func tdShape(c *command.Cmd, next func() uint64) {
	c.Field, c.Count = 0, []int64{1, 2, 5, 100, 357913940, 0}[next()%6]
	if next()%8 == 0 {
		c.Field = command.TDArgFirst + uint8(next()%20)
	}
	n := 1 + int(next()%40)
	vals := make([]float64, n)
	for i := range vals {
		vals[i] = []float64{0, 1, -1, 0.5, 1e300, -1e-300, math.Copysign(0, -1), float64(next()), float64(next()) / 256}[next()%9]
	}
	switch c.Op {
	case command.TDAdd, command.TDCDF, command.TDRank:
		c.Data = command.Floats(vals)
	case command.TDQuantile:
		for i := range vals {
			vals[i] = math.Min(math.Abs(vals[i]), 1)
		}
		c.Data = command.Floats(vals)
	case command.TDTrimmedMean:
		lo := float64(next()%128) / 256
		c.Data = command.Floats([]float64{lo, lo + float64(1+next()%128)/256})
	case command.TDByRank:
		ranks := make([]int64, n)
		for i := range ranks {
			ranks[i] = int64(next() % 64)
		}
		c.Data = command.Int64s(ranks)
	case command.TDMerge:
		c.Count %= 300
		if len(c.Keys) == 0 {
			c.Keys = [][]byte{c.Key}
		}
	}
}

// FuzzApply drives arbitrary commands through the state machine: no panic,
// an invalid command changes nothing, and the memory total stays exact.
// Inputs are a sequence of commands built field by field (cmdFrom) or, when
// the first byte is odd, a log entry for the codec to decode.
func FuzzApply(f *testing.F) {
	f.Add([]byte{0, 1, 0, 0, 1, 1, 0, 0, 1, 5, 0, 2, 1, 1, 2, 1, 1, 0, 4})
	f.Add([]byte{0, 3, 0, 0, 2, 2, 0, 0, 3, 1, 0, 1, 2, 1, 1, 0, 0, 0})
	f.Add(append([]byte{1}, command.EncodeBatch([]*command.Cmd{
		{Op: command.BFAdd, Key: []byte("k"), Items: [][]byte{[]byte("a")}, ErrorRate: 0.01, Capacity: 100, Expansion: 2, MaxBytes: fuzzCap},
		{Op: command.CFAdd, Key: []byte("c"), Items: [][]byte{[]byte("a")}, Capacity: 8, BucketSize: 2, MaxIterations: 20, Expansion: 1, MaxExpansions: 32, MaxBytes: fuzzCap},
	})...))
	f.Add(append([]byte{1}, command.EncodeBatch([]*command.Cmd{
		{Op: command.TDCreate, Key: []byte("t"), Count: 5},
		{Op: command.TDAdd, Key: []byte("t"), Data: command.Floats([]float64{3, 1, 2, 5, 4, 1, 1, 9}), MaxBytes: fuzzCap},
		{Op: command.TDQuantile, Key: []byte("t"), Data: command.Floats([]float64{0.5})},
		{Op: command.TDAdd, Key: []byte("t"), Data: command.Floats([]float64{7}), MaxBytes: fuzzCap},
		{Op: command.TDMerge, Key: []byte("u"), Keys: [][]byte{[]byte("t"), []byte("t")}, MaxBytes: fuzzCap},
		{Op: command.Dump, Key: []byte("t")},
		{Op: command.TDByRank, Key: []byte("u"), Data: command.Int64s([]int64{0, 3, 99}), Flag: true},
	})...))
	f.Fuzz(func(t *testing.T, in []byte) {
		if len(in) == 0 {
			return
		}
		var cmds []*command.Cmd
		if in[0]&1 == 1 {
			var err error
			if cmds, err = command.DecodeBatch(in[1:]); err != nil {
				return
			}
		} else {
			for b := in[1:]; len(b) > 0; {
				n := min(len(b), 1+int(b[0])%48)
				cmds = append(cmds, cmdFrom(b[1:n]))
				b = b[n:]
			}
		}
		k := New()
		k.TrackChanges()
		var img store
		for i, c := range cmds {
			c.MaxBytes = min(c.MaxBytes, fuzzCap)
			if c.Op == command.Restore || c.Op == command.BFLoadChunk || c.Op == command.CFLoadChunk || c.Op == command.BFLoadPart || c.Op == command.CFLoadPart {
				c.MaxBytes = min(c.MaxBytes, 1<<12)
			}
			before := digestAll(k)
			if !c.Op.IsWrite() {
				// A read beside Apply never changes state; one that would
				// (a t-digest query that compresses) is refused for the log.
				if r := k.Read(c); digestAll(k) != before {
					t.Fatalf("Read %+v changed state (%v)", c, r.Err)
				}
			}
			r := k.Apply(c)
			if command.Validate(c) != nil {
				if r.Err != ErrInvalidCommand {
					t.Fatalf("invalid %+v applied: %+v", c, r)
				}
				if digestAll(k) != before {
					t.Fatalf("invalid %+v changed state", c)
				}
			}
			if got, want := k.Bytes(), k.countBytes(); got != want {
				t.Fatalf("after %+v: memory total %d, recount %d", c, got, want)
			}
			if i%3 == 2 {
				img.write(t, k.Cut())
				if got, want := digestAll(img.load(t)), digestAll(k); got != want {
					t.Fatalf("after %+v: the image loads another state", c)
				}
			}
		}
		img.write(t, k.Cut())
		if digestAll(img.load(t)) != digestAll(k) {
			t.Fatal("the image loads another state")
		}
	})
}

// digestAll is every key of every database with its digest.
func digestAll(k *Keyspace) string {
	var b []byte
	for db := range k.dbs {
		k.Range(uint8(db), func(key string, v *Value) bool {
			b = binary.AppendUvarint(b, uint64(db))
			b = append(b, key...)
			b = append(b, Digest(v)...)
			return true
		})
	}
	return string(b)
}
