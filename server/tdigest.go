package server

import (
	"math"

	"github.com/bfserver/bfserver/command"
	"github.com/bfserver/bfserver/internal/redisnum"
	"github.com/bfserver/bfserver/keyspace"
	"github.com/bfserver/bfserver/resp"
	"github.com/bfserver/bfserver/sketch/tdigest"
)

// t-digest: TDIGEST.* as RedisBloom 8.8 answers them, wired to package
// sketch/tdigest. Each registers RedisBloom's arity, which Redis checks
// before the module runs (and when MULTI queues the command); the
// module's own check (CREATE takes 2 or 4 arguments) fails in the parser,
// so MULTI queues what Redis queues. RedisBloom opens the key before it
// parses the arguments, so an argument error is parsed here and carried
// in the command (command.TDArg*), for the keyspace to answer after the
// key's own, as for CMS (cms.go). The queries that compress the digest's
// buffer go through the log when they would (keyspace.ErrNeedsLog,
// session.execute): see docs/CONSISTENCY.md.

var (
	catTDW  = []string{"@write", "@tdigest"}
	catTDWF = []string{"@write", "@fast", "@tdigest"}
	catTDR  = []string{"@read", "@tdigest"}
	catTDRF = []string{"@read", "@fast", "@tdigest"}
)

func registerTDigest() {
	module("tdigest.create", -2, flagsWrite, catTDWF, kRW, parseTDCreate, renderOK)
	module("tdigest.reset", 2, flagsWrite, catTDWF, kRW, parseKeyOnly(command.TDReset), renderOK)
	module("tdigest.add", -3, flagsWrite, catTDW, kRW, tdDoubles(command.TDAdd, false, command.TDArgParseVal, tdFinite), renderOK)
	module("tdigest.merge", -4, flagsWrite, catTDW, kRW, parseTDMerge, renderOK)
	module("tdigest.min", 2, flagsReadSlow, catTDRF, kRO, parseKeyOnly(command.TDMin), renderTDDouble)
	module("tdigest.max", 2, flagsReadSlow, catTDRF, kRO, parseKeyOnly(command.TDMax), renderTDDouble)
	module("tdigest.info", 2, flagsReadSlow, catTDRF, kRO, parseKeyOnly(command.TDInfo), renderTDInfo)
	module("tdigest.quantile", -3, flagsReadSlow, catTDRF, kRO, tdDoubles(command.TDQuantile, false, command.TDArgParseQuantile, tdFraction), renderTDDoubles)
	module("tdigest.cdf", -3, flagsReadSlow, catTDRF, kRO, tdDoubles(command.TDCDF, false, command.TDArgParseCDF, nil), renderTDDoubles)
	module("tdigest.rank", -3, flagsReadSlow, catTDRF, kRO, tdDoubles(command.TDRank, false, command.TDArgParseValue, nil), renderInts)
	module("tdigest.revrank", -3, flagsReadSlow, catTDRF, kRO, tdDoubles(command.TDRank, true, command.TDArgParseValue, nil), renderInts)
	module("tdigest.byrank", -3, flagsReadSlow, catTDRF, kRO, parseTDByRank(false), renderTDDoubles)
	module("tdigest.byrevrank", -3, flagsReadSlow, catTDRF, kRO, parseTDByRank(true), renderTDDoubles)
	module("tdigest.trimmed_mean", 4, flagsReadSlow, catTDR, kRO, parseTDTrimmedMean, renderTDDouble)
}

// tdCompression is the COMPRESSION value of CREATE and MERGE, or its
// argument error.
func tdCompression(b []byte) (int64, uint8) {
	c, ok := redisnum.ParseLL(b)
	switch {
	case !ok:
		return 0, command.TDArgParseCompression
	case c <= 0:
		return 0, command.TDArgCompressionRange
	}
	return c, 0
}

// parseTDCreate: key [COMPRESSION c], checked in RedisBloom's order: the
// argument count (2 or 4, the module's own check), then, after the key
// (Apply's), COMPRESSION among the two arguments, then the second as the
// value wherever COMPRESSION was, then td_init (New).
func parseTDCreate(s *session, args [][]byte) (command.Cmd, string) {
	if len(args) != 2 && len(args) != 4 {
		return command.Cmd{}, arityError("tdigest.create")
	}
	c := command.Cmd{Op: command.TDCreate, Key: args[1], Count: tdigest.DefaultCompression}
	if len(args) == 4 {
		c.Count = 0
		if argIndex(args[2:], "COMPRESSION") < 0 {
			c.Field = command.TDArgWrongKeyword
			return c, ""
		}
		if c.Count, c.Field = tdCompression(args[3]); c.Field != 0 {
			return c, ""
		}
	}
	if _, ok := tdigest.New(c.Count); !ok {
		c.Field = command.TDArgAlloc
	}
	return c, ""
}

// tdFinite is ADD's check of a value that parsed (not nan).
func tdFinite(v float64) uint8 {
	if math.IsInf(v, 0) {
		return command.TDArgValNotFinite
	}
	return 0
}

// tdFraction is QUANTILE's check of a fraction.
func tdFraction(v float64) uint8 {
	if v < 0 || v > 1 {
		return command.TDArgQuantileRange
	}
	return 0
}

// tdEach parses the arguments in turn with parse, which gives a value or
// an argument error code: the first error ends it.
func tdEach[T any](args [][]byte, parse func([]byte) (T, uint8)) ([]T, uint8) {
	out := make([]T, len(args))
	for i, a := range args {
		v, code := parse(a)
		if code != 0 {
			return nil, code
		}
		out[i] = v
	}
	return out, 0
}

// tdDoubles parses the doubles after the key (RedisModule_StringToDouble,
// which refuses nan): one that does not parse is bad's error, one check
// refuses check's (nil: none). flag is REVRANK.
func tdDoubles(op command.Op, flag bool, bad uint8, check func(float64) uint8) func(*session, [][]byte) (command.Cmd, string) {
	return func(s *session, args [][]byte) (command.Cmd, string) {
		vals, code := tdEach(args[2:], func(a []byte) (float64, uint8) {
			v, ok := redisnum.ParseDouble(a)
			switch {
			case !ok:
				return 0, bad
			case check != nil:
				return v, check(v)
			}
			return v, 0
		})
		return command.Cmd{Op: op, Key: args[1], Flag: flag, Data: command.Floats(vals), Field: code}, ""
	}
}

// parseTDByRank: ranks, each an integer, not negative.
func parseTDByRank(rev bool) func(*session, [][]byte) (command.Cmd, string) {
	return func(s *session, args [][]byte) (command.Cmd, string) {
		ranks, code := tdEach(args[2:], func(a []byte) (int64, uint8) {
			v, ok := redisnum.ParseLL(a)
			switch {
			case !ok:
				return 0, command.TDArgParseRank
			case v < 0:
				return 0, command.TDArgRankNegative
			}
			return v, 0
		})
		return command.Cmd{Op: command.TDByRank, Key: args[1], Flag: rev, Data: command.Int64s(ranks), Field: code}, ""
	}
}

// parseTDTrimmedMean: the low cut parses, the high cut parses, both lie
// in [0, 1], low < high.
func parseTDTrimmedMean(s *session, args [][]byte) (command.Cmd, string) {
	c := command.Cmd{Op: command.TDTrimmedMean, Key: args[1]}
	lo, okLo := redisnum.ParseDouble(args[2])
	hi, okHi := redisnum.ParseDouble(args[3])
	switch {
	case !okLo:
		c.Field = command.TDArgParseLowCut
	case !okHi:
		c.Field = command.TDArgParseHighCut
	case lo < 0 || lo > 1 || hi < 0 || hi > 1:
		c.Field = command.TDArgCutRange
	case lo >= hi:
		c.Field = command.TDArgCutOrder
	default:
		c.Data = command.Floats([]float64{lo, hi})
	}
	return c, ""
}

// parseTDMerge: destination numkeys source… [COMPRESSION c] [OVERRIDE];
// Count is COMPRESSION's value (0 without it), Flag OVERRIDE. RedisBloom's
// order: the destination's type (Apply's), numkeys (it parses, is
// positive, and no more keys than arguments follow it: the arity error),
// then the options: when arguments follow the keys, COMPRESSION among
// them (the first match) needs a value (the arity error) that parses as
// CREATE's does; OVERRIDE anywhere among them; neither present is the
// wrong keyword, other tokens are ignored. Apply checks the sources after
// all this.
func parseTDMerge(s *session, args [][]byte) (command.Cmd, string) {
	c := command.Cmd{Op: command.TDMerge, Key: args[1]}
	n, ok := redisnum.ParseLL(args[2])
	switch {
	case !ok:
		c.Field = command.TDArgParseNumkeys
	case n <= 0:
		c.Field = command.TDArgNumkeysRange
	case n > int64(len(args)-3):
		c.Field = command.TDArgMergeArity
	}
	if c.Field != 0 {
		return c, ""
	}
	var comp int64
	override := false
	if opts := args[3+n:]; len(opts) > 0 {
		ci := argIndex(opts, "COMPRESSION")
		if ci >= 0 {
			if ci+1 >= len(opts) {
				c.Field = command.TDArgMergeArity
				return c, ""
			}
			if comp, c.Field = tdCompression(opts[ci+1]); c.Field != 0 {
				return c, ""
			}
		}
		override = argIndex(opts, "OVERRIDE") >= 0
		if ci < 0 && !override {
			c.Field = command.TDArgWrongKeyword
			return c, ""
		}
	}
	c.Keys, c.Count, c.Flag = args[3:3+n], comp, override
	return c, ""
}

func renderTDDouble(w *resp.Writer, c *command.Cmd, r *keyspace.Result) {
	w.ModuleDouble(command.FloatsOf(r.Bytes())[0])
}

func renderTDDoubles(w *resp.Writer, c *command.Cmd, r *keyspace.Result) {
	vals := command.FloatsOf(r.Bytes())
	w.Array(len(vals))
	for _, v := range vals {
		w.ModuleDouble(v)
	}
}

// renderTDInfo: RESP2 an array of 18, RESP3 a map of 9, field names as
// simple strings.
func renderTDInfo(w *resp.Writer, c *command.Cmd, r *keyspace.Result) {
	if w.Proto == 3 {
		w.Map(len(tdigest.InfoFieldNames))
	} else {
		w.Array(2 * len(tdigest.InfoFieldNames))
	}
	for i, name := range tdigest.InfoFieldNames {
		w.Simple(name)
		w.Int(r.Ints[i])
	}
}
