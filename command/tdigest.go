package command

import (
	"encoding/binary"
	"math"
	"slices"

	"github.com/bfserver/bfserver/sketch/tdigest"
)

// The t-digest's argument errors, carried in Field after CMS's and
// Top-K's (sketch.go): as for them, RedisBloom opens the key before it
// parses the arguments, so the proposer parses them and Apply, or Read,
// answers the error after the key's own. Append only: the codes are in
// the log. Each comment is RedisBloom's reply.
const (
	TDArgWrongKeyword     = sketchArgLast + 1 + iota // ERR T-Digest: wrong keyword
	TDArgParseCompression                            // ERR T-Digest: error parsing compression parameter
	TDArgCompressionRange                            // ERR T-Digest: compression parameter needs to be a positive integer
	TDArgAlloc                                       // ERR T-Digest: allocation failed
	TDArgParseVal                                    // ERR T-Digest: error parsing val parameter
	TDArgValNotFinite                                // ERR T-Digest: val parameter needs to be a finite number
	TDArgParseNumkeys                                // ERR T-Digest: error parsing numkeys
	TDArgNumkeysRange                                // ERR T-Digest: numkeys needs to be a positive integer
	TDArgMergeArity                                  // ERR wrong number of arguments for 'tdigest.merge' command
	TDArgParseQuantile                               // ERR T-Digest: error parsing quantile
	TDArgQuantileRange                               // ERR T-Digest: quantile should be in [0,1]
	TDArgParseCDF                                    // ERR T-Digest: error parsing cdf
	TDArgParseValue                                  // ERR T-Digest: error parsing value
	TDArgParseRank                                   // ERR T-Digest: error parsing rank
	TDArgRankNegative                                // ERR T-Digest: rank needs to be non negative
	TDArgParseLowCut                                 // ERR T-Digest: error parsing low_cut_percentile
	TDArgParseHighCut                                // ERR T-Digest: error parsing high_cut_percentile
	TDArgCutRange                                    // ERR T-Digest: low_cut_percentile and high_cut_percentile should be in [0,1]
	TDArgCutOrder                                    // ERR T-Digest: low_cut_percentile should be lower than high_cut_percentile
	// TDArgFirst and TDArgLast bound the t-digest's codes.
	TDArgFirst = TDArgWrongKeyword
	TDArgLast  = TDArgCutOrder
)

// tdArgOps lists, per op, the argument errors its parser can give.
var tdArgOps = map[Op][]uint8{
	TDCreate:      {TDArgWrongKeyword, TDArgParseCompression, TDArgCompressionRange, TDArgAlloc},
	TDAdd:         {TDArgParseVal, TDArgValNotFinite},
	TDMerge:       {TDArgParseNumkeys, TDArgNumkeysRange, TDArgMergeArity, TDArgParseCompression, TDArgCompressionRange, TDArgWrongKeyword},
	TDQuantile:    {TDArgParseQuantile, TDArgQuantileRange},
	TDCDF:         {TDArgParseCDF},
	TDRank:        {TDArgParseValue},
	TDByRank:      {TDArgParseRank, TDArgRankNegative},
	TDTrimmedMean: {TDArgParseLowCut, TDArgParseHighCut, TDArgCutRange, TDArgCutOrder},
}

// Floats packs doubles as the t-digest commands carry them in Data.
func Floats(v []float64) []byte {
	b := make([]byte, 0, 8*len(v))
	for _, x := range v {
		b = binary.LittleEndian.AppendUint64(b, math.Float64bits(x))
	}
	return b
}

// FloatsOf unpacks Floats.
func FloatsOf(b []byte) []float64 {
	out := make([]float64, len(b)/8)
	for i := range out {
		out[i] = math.Float64frombits(binary.LittleEndian.Uint64(b[8*i:]))
	}
	return out
}

// Int64sOf unpacks Int64s.
func Int64sOf(b []byte) []int64 {
	out := make([]int64, len(b)/8)
	for i := range out {
		out[i] = Int64At(b, i)
	}
	return out
}

// tdigestParams: an argument error its op can give, alone; or arguments
// as the t-digest's parsers accept them, which Apply uses as they are.
func tdigestParams(c *Cmd) error {
	if c.Field != 0 {
		if slices.Contains(tdArgOps[c.Op], c.Field) {
			return nil
		}
		return invalid(c, "argument error %d unknown to op", c.Field)
	}
	if len(c.Data)%8 != 0 {
		return invalid(c, "%d bytes of values", len(c.Data))
	}
	n := len(c.Data) / 8
	each := func(ok func(float64) bool) error {
		for i := 0; i < n; i++ {
			if v := math.Float64frombits(binary.LittleEndian.Uint64(c.Data[8*i:])); !ok(v) {
				return invalid(c, "value %v out of range", v)
			}
		}
		return nil
	}
	switch c.Op {
	case TDCreate:
		if c.Count < 1 || c.Count > tdigest.MaxCompression {
			return invalid(c, "compression %d", c.Count)
		}
		return nil
	case TDReset, TDMin, TDMax, TDInfo:
		return nil
	case TDMerge:
		if c.Count < 0 {
			return invalid(c, "compression %d", c.Count)
		}
		return atLeastOne(c, c.Keys)
	case TDTrimmedMean:
		if n != 2 {
			return invalid(c, "%d cuts", n)
		}
		lo := math.Float64frombits(binary.LittleEndian.Uint64(c.Data))
		hi := math.Float64frombits(binary.LittleEndian.Uint64(c.Data[8:]))
		if !(lo >= 0 && hi <= 1 && lo < hi) {
			return invalid(c, "cuts %v, %v", lo, hi)
		}
		return nil
	}
	if n == 0 {
		return invalid(c, "no values")
	}
	switch c.Op {
	case TDAdd:
		return each(func(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) })
	case TDQuantile:
		return each(func(v float64) bool { return v >= 0 && v <= 1 })
	case TDCDF, TDRank:
		return each(func(v float64) bool { return !math.IsNaN(v) })
	case TDByRank:
		for i := 0; i < n; i++ {
			if Int64At(c.Data, i) < 0 {
				return invalid(c, "negative rank")
			}
		}
	}
	return nil
}
