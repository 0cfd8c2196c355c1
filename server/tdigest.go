package server

import (
	"github.com/bfserver/bfserver/command"
	"github.com/bfserver/bfserver/keyspace"
	"github.com/bfserver/bfserver/resp"
	"github.com/bfserver/bfserver/sketch/tdigest"
)

// t-digest: TDIGEST.* as RedisBloom 8.8 answers them, wired to package
// sketch/tdigest. The module's own arity checks (CREATE takes 2 or 4
// arguments) fail in the parser, so MULTI queues what Redis queues;
// argument errors travel in the command (command.TDArg codes) for the
// keyspace to answer after the key's own, in RedisBloom's order. The
// queries that compress the digest's buffer go through the log when they
// would (keyspace.ErrNeedsLog, session.execute): see docs/CONSISTENCY.md.

var (
	catTDW  = []string{"@write", "@tdigest"}
	catTDWF = []string{"@write", "@fast", "@tdigest"}
	catTDR  = []string{"@read", "@tdigest"}
	catTDRF = []string{"@read", "@fast", "@tdigest"}
)

// registerTDigest registers the TDIGEST.* commands.
func registerTDigest() {
	td := func(name string, flags, cats []string, keys []string, parse func([][]byte) command.Cmd,
		render func(*resp.Writer, *command.Cmd, *keyspace.Result)) {
		module(name, tdigest.Arity[name], flags, cats, keys, func(s *session, args [][]byte) (command.Cmd, string) {
			if err := tdigest.CheckArity(name, len(args)); err != nil {
				return command.Cmd{}, err.Error()
			}
			return parse(args), ""
		}, render)
	}
	td("tdigest.create", flagsWrite, catTDWF, kRW, parseTDCreate, renderOK)
	td("tdigest.reset", flagsWrite, catTDWF, kRW, tdKeyOnly(command.TDReset), renderOK)
	td("tdigest.add", flagsWrite, catTDW, kRW, parseTDAdd, renderOK)
	td("tdigest.merge", flagsWrite, catTDW, kRW, parseTDMerge, renderOK)
	td("tdigest.min", flagsReadSlow, catTDRF, kRO, tdKeyOnly(command.TDMin), renderTDDouble)
	td("tdigest.max", flagsReadSlow, catTDRF, kRO, tdKeyOnly(command.TDMax), renderTDDouble)
	td("tdigest.info", flagsReadSlow, catTDRF, kRO, tdKeyOnly(command.TDInfo), renderTDInfo)
	td("tdigest.quantile", flagsReadSlow, catTDRF, kRO, tdFloats(command.TDQuantile, false, tdigest.QuantileArgs), renderTDDoubles)
	td("tdigest.cdf", flagsReadSlow, catTDRF, kRO, tdFloats(command.TDCDF, false, tdigest.CDFArgs), renderTDDoubles)
	td("tdigest.rank", flagsReadSlow, catTDRF, kRO, tdFloats(command.TDRank, false, tdigest.RankArgs), renderInts)
	td("tdigest.revrank", flagsReadSlow, catTDRF, kRO, tdFloats(command.TDRank, true, tdigest.RankArgs), renderInts)
	td("tdigest.byrank", flagsReadSlow, catTDRF, kRO, parseTDByRank(false), renderTDDoubles)
	td("tdigest.byrevrank", flagsReadSlow, catTDRF, kRO, parseTDByRank(true), renderTDDoubles)
	td("tdigest.trimmed_mean", flagsReadSlow, catTDR, kRO, parseTDTrimmedMean, renderTDDouble)
}

func tdKeyOnly(op command.Op) func([][]byte) command.Cmd {
	return func(args [][]byte) command.Cmd { return command.Cmd{Op: op, Key: args[1]} }
}

// parseTDCreate: the compression, or the error CreateArgs or td_init
// (New) gives for it.
func parseTDCreate(args [][]byte) command.Cmd {
	c := command.Cmd{Op: command.TDCreate, Key: args[1]}
	comp, err := tdigest.CreateArgs(args[2:])
	if err == nil {
		if _, ok := tdigest.New(comp); !ok {
			err = tdigest.ErrAlloc
		}
	}
	c.Field, c.Count = command.TDArg(err), comp
	return c
}

func parseTDAdd(args [][]byte) command.Cmd {
	vals, err := tdigest.AddArgs(args[2:])
	return command.Cmd{Op: command.TDAdd, Key: args[1], Data: command.Floats(vals), Field: command.TDArg(err)}
}

// parseTDMerge: destination numkeys source… [COMPRESSION c] [OVERRIDE];
// Count is COMPRESSION's value (0 without it), Flag OVERRIDE.
func parseTDMerge(args [][]byte) command.Cmd {
	c := command.Cmd{Op: command.TDMerge, Key: args[1]}
	m, err := tdigest.ParseMergeArgs(args[2:])
	if err != nil {
		c.Field = command.TDArg(err)
		return c
	}
	c.Keys = args[3 : 3+m.NumKeys]
	if m.HasCompression {
		c.Count = m.Compression
	}
	c.Flag = m.Override
	return c
}

// tdFloats parses a query's doubles with one of the tdigest *Args
// functions; flag is REVRANK.
func tdFloats(op command.Op, flag bool, parse func([][]byte) ([]float64, error)) func([][]byte) command.Cmd {
	return func(args [][]byte) command.Cmd {
		vals, err := parse(args[2:])
		return command.Cmd{Op: op, Key: args[1], Data: command.Floats(vals), Flag: flag, Field: command.TDArg(err)}
	}
}

func parseTDByRank(rev bool) func([][]byte) command.Cmd {
	return func(args [][]byte) command.Cmd {
		ranks, err := tdigest.ByRankArgs(args[2:])
		return command.Cmd{Op: command.TDByRank, Key: args[1], Data: command.Int64s(ranks), Flag: rev, Field: command.TDArg(err)}
	}
}

func parseTDTrimmedMean(args [][]byte) command.Cmd {
	lo, hi, err := tdigest.TrimmedMeanArgs(args[2], args[3])
	c := command.Cmd{Op: command.TDTrimmedMean, Key: args[1], Field: command.TDArg(err)}
	if err == nil {
		c.Data = command.Floats([]float64{lo, hi})
	}
	return c
}

func renderTDDouble(w *resp.Writer, c *command.Cmd, r *keyspace.Result) {
	w.ModuleDouble(command.FloatsOf(r.Bytes)[0])
}

func renderTDDoubles(w *resp.Writer, c *command.Cmd, r *keyspace.Result) {
	vals := command.FloatsOf(r.Bytes)
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
