package tdigest

import (
	"math"

	"github.com/bfserver/bfserver/internal/redisnum"
)

// Error is a RedisBloom error reply, without the leading '-'.
type Error string

func (e Error) Error() string { return string(e) }

// RedisBloom's T-Digest error replies (rm_tdigest.c), verbatim.
const (
	ErrKeyMissing       Error = "ERR T-Digest: key does not exist"
	ErrKeyExists        Error = "ERR T-Digest: key already exists"
	ErrWrongKeyword     Error = "ERR T-Digest: wrong keyword"
	ErrParseCompression Error = "ERR T-Digest: error parsing compression parameter"
	ErrCompressionRange Error = "ERR T-Digest: compression parameter needs to be a positive integer"
	ErrAlloc            Error = "ERR T-Digest: allocation failed"
	ErrMergeAlloc       Error = "ERR T-Digest: allocation of destination digest failed"
	ErrParseVal         Error = "ERR T-Digest: error parsing val parameter"
	ErrValNotFinite     Error = "ERR T-Digest: val parameter needs to be a finite number"
	ErrOverflow         Error = "ERR T-Digest: overflow detected"
	ErrParseNumkeys     Error = "ERR T-Digest: error parsing numkeys"
	ErrNumkeysRange     Error = "ERR T-Digest: numkeys needs to be a positive integer"
	ErrParseQuantile    Error = "ERR T-Digest: error parsing quantile"
	ErrQuantileRange    Error = "ERR T-Digest: quantile should be in [0,1]"
	ErrParseCDF         Error = "ERR T-Digest: error parsing cdf"
	ErrParseValue       Error = "ERR T-Digest: error parsing value"
	ErrParseRank        Error = "ERR T-Digest: error parsing rank"
	ErrRankNegative     Error = "ERR T-Digest: rank needs to be non negative"
	ErrParseLowCut      Error = "ERR T-Digest: error parsing low_cut_percentile"
	ErrParseHighCut     Error = "ERR T-Digest: error parsing high_cut_percentile"
	ErrCutRange         Error = "ERR T-Digest: low_cut_percentile and high_cut_percentile should be in [0,1]"
	ErrCutOrder         Error = "ERR T-Digest: low_cut_percentile should be lower than high_cut_percentile"
	// ErrWrongType is Redis's WRONGTYPE, which RedisBloom replies for a
	// key of another type.
	ErrWrongType Error = "WRONGTYPE Operation against a key holding the wrong kind of value"
)

// ArityError is Redis's arity error for a command (its lower-case name),
// which RedisModule_WrongArity replies too.
func ArityError(name string) Error {
	return Error("ERR wrong number of arguments for '" + name + "' command")
}

// Arity is the arity each TDIGEST command registers (COMMAND INFO): n
// arguments exactly, or at least −n when negative, the command's name
// counted. Redis checks it before the module runs, and when MULTI queues
// the command (a failure aborts the EXEC); the module's own checks
// (CheckArity) fail only when the command runs.
var Arity = map[string]int{
	"tdigest.create": -2, "tdigest.reset": 2, "tdigest.add": -3, "tdigest.merge": -4,
	"tdigest.min": 2, "tdigest.max": 2, "tdigest.quantile": -3, "tdigest.cdf": -3,
	"tdigest.trimmed_mean": 4, "tdigest.rank": -3, "tdigest.revrank": -3,
	"tdigest.byrank": -3, "tdigest.byrevrank": -3, "tdigest.info": 2,
}

// CheckArity is every argument count check made before the key is
// looked at: the registered Arity, then the module's (TDIGEST.CREATE
// takes 2 or 4 arguments; its others equal the registered ones). name is
// the lower-case command name, argc counts it. MERGE checks more counts
// later (ParseMergeArgs).
func CheckArity(name string, argc int) error {
	a, ok := Arity[name]
	if !ok || a >= 0 && argc != a || a < 0 && argc < -a || name == "tdigest.create" && argc != 2 && argc != 4 {
		return ArityError(name)
	}
	return nil
}

// ParseCompression is the COMPRESSION argument of TDIGEST.CREATE and
// TDIGEST.MERGE.
func ParseCompression(b []byte) (int64, error) {
	c, ok := redisnum.ParseLL(b)
	if !ok {
		return 0, ErrParseCompression
	}
	if c <= 0 {
		return 0, ErrCompressionRange
	}
	return c, nil
}

// argIndex is RMUtil_ArgIndex: the first argument equal to tok, ignoring
// case, or -1.
func argIndex(tok string, args [][]byte) int {
	for i, a := range args {
		if len(a) == len(tok) && eqFoldUpper(a, tok) {
			return i
		}
	}
	return -1
}

func eqFoldUpper(b []byte, upper string) bool {
	for i := range b {
		c := b[i]
		if c >= 'a' && c <= 'z' {
			c -= 'a' - 'A'
		}
		if c != upper[i] {
			return false
		}
	}
	return true
}

// CreateArgs checks TDIGEST.CREATE's arguments after the key (none, or
// two) and returns the compression. RedisBloom checks, in order: the
// argument count (CheckArity), the key (ErrKeyExists or ErrWrongType: the
// caller, before calling this), then COMPRESSION among the two arguments
// (ErrWrongKeyword), then the second argument as the value (ParseCompression; RedisBloom
// reads argv[3] wherever COMPRESSION was), then New (ErrAlloc).
func CreateArgs(rest [][]byte) (int64, error) {
	switch len(rest) {
	case 0:
		return DefaultCompression, nil
	case 2:
	default:
		return 0, ArityError("tdigest.create")
	}
	if argIndex("COMPRESSION", rest) < 0 {
		return 0, ErrWrongKeyword
	}
	return ParseCompression(rest[1])
}

// doubles parses each argument in turn with ParseDouble, failing with
// errParse, then applies check (nil: none).
func doubles(args [][]byte, errParse Error, check func(float64) error) ([]float64, error) {
	out := make([]float64, len(args))
	for i, a := range args {
		v, ok := redisnum.ParseDouble(a)
		if !ok {
			return nil, errParse
		}
		if check != nil {
			if err := check(v); err != nil {
				return nil, err
			}
		}
		out[i] = v
	}
	return out, nil
}

// AddArgs parses TDIGEST.ADD's values: each in turn must parse and not be
// nan (ErrParseVal), then be finite (ErrValNotFinite). RedisBloom checks
// the key first.
func AddArgs(args [][]byte) ([]float64, error) {
	return doubles(args, ErrParseVal, func(v float64) error {
		if math.IsInf(v, 0) {
			return ErrValNotFinite
		}
		return nil
	})
}

// QuantileArgs parses TDIGEST.QUANTILE's fractions: each in turn must
// parse (ErrParseQuantile) and lie in [0, 1] (ErrQuantileRange).
func QuantileArgs(args [][]byte) ([]float64, error) {
	return doubles(args, ErrParseQuantile, func(v float64) error {
		if v < 0 || v > 1 {
			return ErrQuantileRange
		}
		return nil
	})
}

// CDFArgs parses TDIGEST.CDF's values (any double, ±inf included).
func CDFArgs(args [][]byte) ([]float64, error) { return doubles(args, ErrParseCDF, nil) }

// RankArgs parses TDIGEST.RANK's and REVRANK's values (any double).
func RankArgs(args [][]byte) ([]float64, error) { return doubles(args, ErrParseValue, nil) }

// ByRankArgs parses TDIGEST.BYRANK's and BYREVRANK's ranks: each in turn
// an integer (ErrParseRank), non-negative (ErrRankNegative).
func ByRankArgs(args [][]byte) ([]int64, error) {
	out := make([]int64, len(args))
	for i, a := range args {
		v, ok := redisnum.ParseLL(a)
		if !ok {
			return nil, ErrParseRank
		}
		if v < 0 {
			return nil, ErrRankNegative
		}
		out[i] = v
	}
	return out, nil
}

// TrimmedMeanArgs parses TDIGEST.TRIMMED_MEAN's two cuts: low parses,
// high parses, both in [0, 1], low < high.
func TrimmedMeanArgs(low, high []byte) (float64, float64, error) {
	lo, ok := redisnum.ParseDouble(low)
	if !ok {
		return 0, 0, ErrParseLowCut
	}
	hi, ok := redisnum.ParseDouble(high)
	if !ok {
		return 0, 0, ErrParseHighCut
	}
	if lo < 0 || lo > 1 || hi < 0 || hi > 1 {
		return 0, 0, ErrCutRange
	}
	if lo >= hi {
		return 0, 0, ErrCutOrder
	}
	return lo, hi, nil
}

// MergeArgs is TDIGEST.MERGE's parsed arguments.
type MergeArgs struct {
	NumKeys        int
	Compression    int64
	HasCompression bool
	Override       bool
}

// ParseMergeArgs parses TDIGEST.MERGE's arguments after the destination
// key: numkeys, the source keys (args[1:1+NumKeys]) and the options.
// RedisBloom's order: the argument count (CheckArity), the destination's
// type (ErrWrongType, the caller's, before this), numkeys
// (ErrParseNumkeys, ErrNumkeysRange, then the arity error when fewer keys
// than numkeys follow), then the options: when arguments follow the keys,
// COMPRESSION among them (the first match) needs a value (arity error) that
// ParseCompression accepts; OVERRIDE anywhere among them; neither present
// is ErrWrongKeyword, and other tokens are ignored. The source keys are
// checked after all this, in order (ErrKeyMissing, WRONGTYPE; a source
// equal to the destination counts as present only if the destination
// exists), then Merge.
func ParseMergeArgs(args [][]byte) (MergeArgs, error) {
	var m MergeArgs
	arity := ArityError("tdigest.merge")
	if len(args) < 2 {
		return m, arity
	}
	n, ok := redisnum.ParseLL(args[0])
	if !ok {
		return m, ErrParseNumkeys
	}
	if n <= 0 {
		return m, ErrNumkeysRange
	}
	if n > int64(len(args)-1) {
		return m, arity
	}
	m.NumKeys = int(n)
	rest := args[1+n:]
	if len(rest) == 0 {
		return m, nil
	}
	ci := argIndex("COMPRESSION", rest)
	if ci >= 0 {
		if ci+1 >= len(rest) {
			return m, arity
		}
		c, err := ParseCompression(rest[ci+1])
		if err != nil {
			return m, err
		}
		m.Compression, m.HasCompression = c, true
	}
	m.Override = argIndex("OVERRIDE", rest) >= 0
	if ci < 0 && !m.Override {
		return m, ErrWrongKeyword
	}
	return m, nil
}
