package server

import (
	"math"

	"github.com/bfserver/bfserver/command"
	"github.com/bfserver/bfserver/internal/ascii"
	"github.com/bfserver/bfserver/internal/redisnum"
	"github.com/bfserver/bfserver/keyspace"
	"github.com/bfserver/bfserver/resp"
	"github.com/bfserver/bfserver/sketch/cms"
)

// Count-Min Sketch: CMS.INITBYDIM/INITBYPROB/INCRBY/QUERY/MERGE/INFO as
// RedisBloom 8.8 answers them. RedisBloom opens the key before it looks at
// the arguments, so an argument error is parsed here and carried in the
// command (command.CMSArg*): Apply answers it after the key's own errors.

var (
	flagsReadSlow = []string{"readonly", "module"}
	catCMSW       = []string{"@write", "@cms"}
	catCMSWF      = []string{"@write", "@fast", "@cms"}
	catCMSR       = []string{"@read", "@cms"}
	catCMSRF      = []string{"@read", "@fast", "@cms"}
)

func registerCMS() {
	module("cms.initbydim", 4, flagsWrite, catCMSWF, kRW, parseCMSInit(false), renderOK)
	module("cms.initbyprob", 4, flagsWrite, catCMSWF, kRW, parseCMSInit(true), renderOK)
	module("cms.incrby", -4, flagsWrite, catCMSW, kRW, parseCMSIncrBy, renderCMSIncrBy)
	module("cms.query", -3, flagsReadSlow, catCMSR, kRO, parseItems(command.CMSQuery, true), renderInts)
	module("cms.merge", -4, flagsWrite, catCMSW, kRW, parseCMSMerge, renderOK)
	module("cms.info", 2, flagsReadSlow, catCMSRF, kRO, parseKeyOnly(command.CMSInfo), renderCMSInfo)
}

// cmsDims is the check both INIT commands make of a width and depth (as
// signed 64-bit numbers), then NewCMSketch's: the counters' bytes must
// fit in a size_t.
func cmsDims(c *command.Cmd, width, depth int64) {
	switch {
	case width < 1 || depth < 1 || width > math.MaxInt64/depth:
		c.Field = command.CMSArgInit
	default:
		if _, ok := cms.Bytes(uint64(width), uint64(depth)); !ok {
			c.Field = command.CMSArgNoMemory
			return
		}
		c.Capacity, c.Count = uint64(width), depth
	}
}

func parseCMSInit(byProb bool) func(*session, [][]byte) (command.Cmd, string) {
	return func(s *session, args [][]byte) (command.Cmd, string) {
		c := command.Cmd{Op: command.CMSInit, Key: args[1]}
		if !byProb {
			w, ok := redisnum.ParseLL(args[2])
			if !ok || w < 1 {
				c.Field = command.CMSArgWidth
				return c, ""
			}
			d, ok := redisnum.ParseLL(args[3])
			if !ok || d < 1 {
				c.Field = command.CMSArgDepth
				return c, ""
			}
			cmsDims(&c, w, d)
			return c, ""
		}
		eps, ok := redisnum.ParseDouble(args[2])
		if !ok || !(eps > 0 && eps < 1) {
			c.Field = command.CMSArgOverEst
			return c, ""
		}
		delta, ok := redisnum.ParseDouble(args[3])
		if !ok || !(delta > 0 && delta < 1) {
			c.Field = command.CMSArgProb
			return c, ""
		}
		// Sized here, once, so that replicas never size by floating point.
		w, d := cms.DimFromProb(eps, delta)
		cmsDims(&c, int64(w), int64(d))
		return c, ""
	}
}

// parseCMSIncrBy: pairs of item and increment; every increment is parsed
// before any is applied, the first bad one deciding the error.
func parseCMSIncrBy(s *session, args [][]byte) (command.Cmd, string) {
	if len(args)%2 == 1 {
		return command.Cmd{}, arityError("cms.incrby")
	}
	c := command.Cmd{Op: command.CMSIncrBy, Key: args[1], Multi: true}
	n := (len(args) - 2) / 2
	items := make([][]byte, n)
	vals := make([]int64, n)
	for i := range n {
		v, ok := redisnum.ParseLL(args[3+2*i])
		switch {
		case !ok:
			c.Field = command.CMSArgNumber
		case v < 0:
			c.Field = command.CMSArgNegative
		}
		if c.Field != 0 {
			return c, ""
		}
		items[i], vals[i] = args[2+2*i], v
	}
	c.Items, c.Data = items, command.Int64s(vals)
	return c, ""
}

// parseCMSMerge: dest numkeys src... [WEIGHTS w...], checked as
// RedisBloom's parseMergeArgs checks them; WEIGHTS is found anywhere after
// numkeys, case-insensitively (RMUtil_ArgIndex).
func parseCMSMerge(s *session, args [][]byte) (command.Cmd, string) {
	c := command.Cmd{Op: command.CMSMerge, Key: args[1], Iter: -1}
	n, ok := redisnum.ParseLL(args[2])
	switch {
	case !ok:
		c.Field = command.CMSArgNumKeys
		return c, ""
	case n <= 0:
		c.Field = command.CMSArgKeysPositive
		return c, ""
	}
	rest := args[3:]
	pos := -1
	for i, a := range rest {
		if ascii.EqualFold(a, "WEIGHTS") {
			pos = i
			break
		}
	}
	switch {
	case pos < 0 && n != int64(len(rest)):
		c.Field = command.CMSArgKeys
		return c, ""
	case pos >= 0 && (int64(pos) != n || len(rest) != 1+2*pos):
		c.Field = command.CMSArgKeysWeights
		return c, ""
	}
	c.Keys = rest[:n]
	weights := make([]int64, n)
	for i := range weights {
		weights[i] = 1
		if pos < 0 {
			continue
		}
		w, ok := redisnum.ParseLL(rest[pos+1+i])
		if !ok {
			c.Iter = int64(i) // the rest are never looked at
			break
		}
		weights[i] = w
	}
	c.Data = command.Int64s(weights)
	return c, ""
}

// renderCMSIncrBy: each item's count, or RedisBloom's overflow error in
// its place (a count that reached 2^32-1).
func renderCMSIncrBy(w *resp.Writer, c *command.Cmd, r *keyspace.Result) {
	w.Array(len(r.Ints))
	for _, v := range r.Ints {
		if v == cms.CellMax {
			w.Error("CMS: INCRBY overflow")
		} else {
			w.Int(v)
		}
	}
}

func renderInts(w *resp.Writer, c *command.Cmd, r *keyspace.Result) {
	w.Array(len(r.Ints))
	for _, v := range r.Ints {
		w.Int(v)
	}
}

var cmsInfoNames = [...]string{"width", "depth", "count"}

func renderCMSInfo(w *resp.Writer, c *command.Cmd, r *keyspace.Result) {
	if w.Proto == 3 {
		w.Map(len(cmsInfoNames))
	} else {
		w.Array(2 * len(cmsInfoNames))
	}
	for i, name := range cmsInfoNames {
		w.Simple(name)
		w.Int(r.Ints[i])
	}
}
