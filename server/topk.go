package server

import (
	"encoding/binary"
	"math"

	"github.com/bfserver/bfserver/command"
	"github.com/bfserver/bfserver/internal/ascii"
	"github.com/bfserver/bfserver/internal/redisnum"
	"github.com/bfserver/bfserver/keyspace"
	"github.com/bfserver/bfserver/resp"
	"github.com/bfserver/bfserver/sketch/topk"
)

// Top-K: TOPK.RESERVE/ADD/INCRBY/QUERY/COUNT/LIST/INFO as RedisBloom 8.8
// answers them; argument errors as for CMS (cms.go). One deliberate
// difference: RedisBloom answers a TOPK.INCRBY whose bad increment is not
// the last with an array header counting every item but only the items
// before it and the error after it, which leaves a client one reply out of
// step; bfserver's header counts what follows (see docs/COMMANDS.md).

const msgTopKIncrement = "TopK: increment must be an integer greater or equal to 0                            and smaller or equal to 100,000"

var (
	catTopKW  = []string{"@write", "@topk"}
	catTopKWF = []string{"@write", "@fast", "@topk"}
	catTopKR  = []string{"@read", "@topk"}
	catTopKRF = []string{"@read", "@fast", "@topk"}
)

func registerTopK() {
	module("topk.reserve", -3, flagsWrite, catTopKWF, kRW, parseTopKReserve, renderOK)
	module("topk.add", -3, flagsWrite, catTopKW, kRW, parseTopKAdd(false), renderTopKAdd)
	module("topk.incrby", -4, flagsWrite, catTopKW, kRW, parseTopKAdd(true), renderTopKAdd)
	module("topk.query", -3, flagsReadSlow, catTopKR, kRO, parseItems(command.TopKQuery, true), renderTopKQuery)
	module("topk.count", -3, flagsReadSlow, catTopKR, kRO, parseItems(command.TopKCount, true), renderInts)
	module("topk.list", -2, flagsReadSlow, catTopKR, kRO, parseTopKList, renderTopKList)
	module("topk.info", 2, flagsReadSlow, catTopKRF, kRO, parseKeyOnly(command.TopKInfo), renderTopKInfo)
}

// parseTopKReserve: key topk [width depth decay]; RedisBloom's defaults
// 8, 7 and 0.9 without them.
func parseTopKReserve(s *session, args [][]byte) (command.Cmd, string) {
	if len(args) != 3 && len(args) != 6 {
		return command.Cmd{}, arityError("topk.reserve")
	}
	c := command.Cmd{Op: command.TopKReserve, Key: args[1], Capacity: 8, Count: 7, ErrorRate: 0.9}
	k, ok := redisnum.ParseLL(args[2])
	if !ok || k < 1 || k > math.MaxUint32 {
		c.Field = command.TopKArgK
		return c, ""
	}
	c.Iter = k
	if len(args) == 6 {
		w, ok := redisnum.ParseLL(args[3])
		if !ok || w < 1 || w > math.MaxUint32 {
			c.Field = command.TopKArgWidth
			return c, ""
		}
		d, ok := redisnum.ParseLL(args[4])
		if !ok || d < 1 || d > math.MaxUint32 {
			c.Field = command.TopKArgDepth
			return c, ""
		}
		decay, ok := redisnum.ParseDouble(args[5])
		if !ok || !(decay > 0 && decay <= 1) {
			c.Field = command.TopKArgDecay
			return c, ""
		}
		c.Capacity, c.Count, c.ErrorRate = uint64(w), d, decay
	}
	if _, ok := topk.Bytes(uint64(c.Iter), c.Capacity, uint64(c.Count)); !ok {
		c.Field = command.TopKArgNoMemory
	}
	return c, ""
}

// parseTopKAdd: TOPK.ADD key item…, or TOPK.INCRBY key (item increment)…
// whose first bad increment ends the items to add (Iter).
func parseTopKAdd(incr bool) func(*session, [][]byte) (command.Cmd, string) {
	return func(s *session, args [][]byte) (command.Cmd, string) {
		c := command.Cmd{Op: command.TopKAdd, Key: args[1], Iter: -1, Multi: true}
		if !incr {
			c.Items = args[2:]
			vals := make([]int64, len(c.Items))
			for i := range vals {
				vals[i] = 1
			}
			c.Data = command.Int64s(vals)
			return c, ""
		}
		if len(args)%2 == 1 {
			return command.Cmd{}, arityError("topk.incrby")
		}
		var vals []int64
		for i := 2; i+1 < len(args); i += 2 {
			c.Items = append(c.Items, args[i])
			v, ok := redisnum.ParseLL(args[i+1])
			if !ok || v < 0 || v > topk.MaxIncrement {
				c.Iter = int64(len(vals))
				vals = append(vals, 0)
				break
			}
			vals = append(vals, v)
		}
		c.Data = command.Int64s(vals)
		return c, ""
	}
}

// parseTopKList: WITHCOUNT is any prefix of the word, the empty one
// included (strncasecmp over the argument's length), checked before the
// key.
func parseTopKList(s *session, args [][]byte) (command.Cmd, string) {
	if len(args) > 3 {
		return command.Cmd{}, arityError("topk.list")
	}
	c := command.Cmd{Op: command.TopKList, Key: args[1]}
	if len(args) == 3 {
		a := string(args[2])
		if len(a) > len("WITHCOUNT") || !ascii.EqualFold(a, "WITHCOUNT"[:len(a)]) {
			return c, "WITHCOUNT keyword expected"
		}
		c.Flag = true
	}
	return c, ""
}

func renderTopKAdd(w *resp.Writer, c *command.Cmd, r *keyspace.Result) {
	n := len(r.Ints)
	if r.Tail() != nil {
		n++
	}
	w.Array(n)
	for i, x := range r.Ints {
		if x == 0 {
			w.Null()
		} else {
			w.Bulk(r.List()[i])
		}
	}
	if r.Tail() != nil {
		w.Error(wireError(r.Tail()))
	}
}

func renderTopKQuery(w *resp.Writer, c *command.Cmd, r *keyspace.Result) {
	w.Array(len(r.Ints))
	for _, x := range r.Ints {
		w.Bool(x == 1)
	}
}

func renderTopKList(w *resp.Writer, c *command.Cmd, r *keyspace.Result) {
	if c.Flag {
		w.Array(2 * len(r.List()))
	} else {
		w.Array(len(r.List()))
	}
	for i, item := range r.List() {
		if r.Ints[2*i+1] == 1 {
			w.Null()
		} else {
			w.Bulk(item)
		}
		if c.Flag {
			w.Int(r.Ints[2*i])
		}
	}
}

func renderTopKInfo(w *resp.Writer, c *command.Cmd, r *keyspace.Result) {
	if w.Proto == 3 {
		w.Map(4)
	} else {
		w.Array(8)
	}
	for i, name := range []string{"k", "width", "depth"} {
		w.Simple(name)
		w.Int(r.Ints[i])
	}
	w.Simple("decay")
	w.ModuleDouble(math.Float64frombits(binary.LittleEndian.Uint64(r.Bytes())))
}
