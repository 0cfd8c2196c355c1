package command

import (
	"encoding/binary"
	"math"

	"github.com/bfserver/bfserver/sketch/tdigest"
)

// The t-digest's argument errors a command may carry in Field: code
// TDArgFirst+i is tdArgErrors[i]. Append only: the codes are in the log.
// RedisBloom opens the key before it parses the arguments, so the
// proposer parses them (tdigest's *Args functions) and Apply, or Read,
// answers the error after the key's own.
var tdArgErrors = [...]tdigest.Error{
	tdigest.ErrWrongKeyword, tdigest.ErrParseCompression, tdigest.ErrCompressionRange, tdigest.ErrAlloc,
	tdigest.ErrParseVal, tdigest.ErrValNotFinite,
	tdigest.ErrParseNumkeys, tdigest.ErrNumkeysRange, tdigest.ArityError("tdigest.merge"),
	tdigest.ErrParseQuantile, tdigest.ErrQuantileRange, tdigest.ErrParseCDF, tdigest.ErrParseValue,
	tdigest.ErrParseRank, tdigest.ErrRankNegative,
	tdigest.ErrParseLowCut, tdigest.ErrParseHighCut, tdigest.ErrCutRange, tdigest.ErrCutOrder,
}

// TDArgFirst is the first t-digest argument error code, after CMS's and
// Top-K's.
const TDArgFirst = sketchArgLast + 1

// tdArgOps lists, per op, the argument errors its parser can give.
var tdArgOps = map[Op][]tdigest.Error{
	TDCreate: {tdigest.ErrWrongKeyword, tdigest.ErrParseCompression, tdigest.ErrCompressionRange, tdigest.ErrAlloc},
	TDAdd:    {tdigest.ErrParseVal, tdigest.ErrValNotFinite},
	TDMerge: {tdigest.ErrParseNumkeys, tdigest.ErrNumkeysRange, tdigest.ArityError("tdigest.merge"),
		tdigest.ErrParseCompression, tdigest.ErrCompressionRange, tdigest.ErrWrongKeyword},
	TDQuantile:    {tdigest.ErrParseQuantile, tdigest.ErrQuantileRange},
	TDCDF:         {tdigest.ErrParseCDF},
	TDRank:        {tdigest.ErrParseValue},
	TDByRank:      {tdigest.ErrParseRank, tdigest.ErrRankNegative},
	TDTrimmedMean: {tdigest.ErrParseLowCut, tdigest.ErrParseHighCut, tdigest.ErrCutRange, tdigest.ErrCutOrder},
}

// TDArg is the Field code of a t-digest argument error; 0 for nil or an
// error that is none of them.
func TDArg(err error) uint8 {
	e, ok := err.(tdigest.Error)
	if !ok {
		return 0
	}
	for i, a := range tdArgErrors {
		if a == e {
			return TDArgFirst + uint8(i)
		}
	}
	return 0
}

// TDArgError is the error of a t-digest Field code, nil when it is none.
func TDArgError(field uint8) error {
	if field < TDArgFirst || int(field-TDArgFirst) >= len(tdArgErrors) {
		return nil
	}
	return tdArgErrors[field-TDArgFirst]
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
		e := TDArgError(c.Field)
		for _, ok := range tdArgOps[c.Op] {
			if e == ok {
				return nil
			}
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
