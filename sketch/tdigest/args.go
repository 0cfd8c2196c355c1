package tdigest

import (
	"math"
	"strconv"
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

// ParseLongLong is RedisModule_StringToLongLong (Redis's string2ll): an
// optional '-', no '+', no leading zeros or spaces, within int64.
func ParseLongLong(b []byte) (int64, bool) {
	if len(b) == 0 || len(b) >= 21 {
		return 0, false
	}
	if len(b) == 1 && b[0] == '0' {
		return 0, true
	}
	p := b
	if p[0] == '-' {
		p = p[1:]
	}
	if len(p) == 0 || p[0] < '1' || p[0] > '9' {
		return 0, false
	}
	for _, c := range p {
		if c < '0' || c > '9' {
			return 0, false
		}
	}
	v, err := strconv.ParseInt(string(b), 10, 64)
	if err != nil {
		return 0, false
	}
	return v, true
}

// ParseDouble is RedisModule_StringToDouble (Redis's string2d over
// glibc's strtod): the whole string must be one strtod number in the C
// locale — decimal, hexadecimal ("0x1.8p3", exponent optional), "inf" or
// "infinity" in any case, with an optional sign — without leading space;
// nan in any spelling, a value that overflows to ±inf and a nonzero value
// that underflows to zero are refused. "inf" itself is accepted.
func ParseDouble(b []byte) (float64, bool) {
	if len(b) == 0 || isCSpace(b[0]) {
		return 0, false
	}
	s := b
	neg := false
	if s[0] == '+' || s[0] == '-' {
		neg = s[0] == '-'
		s = s[1:]
	}
	var v float64
	switch {
	case eqFold(s, "inf") || eqFold(s, "infinity"):
		v = math.Inf(1)
	case len(s) > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X'):
		f, ok := parseHex(s[2:])
		if !ok {
			return 0, false
		}
		v = f
	default:
		f, ok := parseDec(s)
		if !ok {
			return 0, false
		}
		v = f
	}
	if neg {
		v = -v
	}
	return v, true
}

func isCSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r'
}

func eqFold(b []byte, s string) bool {
	if len(b) != len(s) {
		return false
	}
	for i := range b {
		c := b[i]
		if c >= 'A' && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != s[i] {
			return false
		}
	}
	return true
}

// digits counts the leading bytes of b that satisfy ok, and whether any
// of them is nonzero.
func digits(b []byte, ok func(byte) bool) (n int, nonzero bool) {
	for n < len(b) && ok(b[n]) {
		if b[n] != '0' {
			nonzero = true
		}
		n++
	}
	return n, nonzero
}

func isDec(c byte) bool { return c >= '0' && c <= '9' }

func isHex(c byte) bool {
	return isDec(c) || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}

// mantissa checks digits[.digits] (at least one digit) followed by an
// exponent marked by one of exp with a decimal, optionally signed,
// exponent; it returns whether the whole of b is that and whether a
// mantissa digit is nonzero.
func mantissa(b []byte, ok func(byte) bool, exp string) (valid, nonzero bool) {
	n, nz := digits(b, ok)
	b = b[n:]
	if len(b) > 0 && b[0] == '.' {
		m, nz2 := digits(b[1:], ok)
		n += m
		nz = nz || nz2
		b = b[1+m:]
	}
	if n == 0 {
		return false, false
	}
	if len(b) == 0 {
		return true, nz
	}
	if b[0] != exp[0] && b[0] != exp[1] {
		return false, false
	}
	b = b[1:]
	if len(b) > 0 && (b[0] == '+' || b[0] == '-') {
		b = b[1:]
	}
	m, _ := digits(b, isDec)
	return m > 0 && m == len(b), nz
}

// parseDec reads an unsigned decimal strtod number: strconv's decimal
// conversion is correctly rounded, as glibc's is.
func parseDec(s []byte) (float64, bool) {
	ok, nonzero := mantissa(s, isDec, "eE")
	if !ok {
		return 0, false
	}
	return finish(strconv.ParseFloat(string(s), 64))(nonzero)
}

// parseHex reads the part of an unsigned hexadecimal strtod number after
// "0x"; strtod's binary exponent is optional, strconv's is not.
func parseHex(s []byte) (float64, bool) {
	ok, nonzero := mantissa(s, isHex, "pP")
	if !ok {
		return 0, false
	}
	str := "0x" + string(s)
	hasExp := false
	for _, c := range s {
		if c == 'p' || c == 'P' {
			hasExp = true
		}
	}
	if !hasExp {
		str += "p0"
	}
	return finish(strconv.ParseFloat(str, 64))(nonzero)
}

// finish applies string2d's range rule to a conversion: ±HUGE_VAL with
// ERANGE (overflow) and zero with ERANGE (a nonzero number that
// underflowed) are refused.
func finish(f float64, err error) func(nonzero bool) (float64, bool) {
	return func(nonzero bool) (float64, bool) {
		if err != nil || math.IsInf(f, 0) || f == 0 && nonzero {
			return 0, false
		}
		return f, true
	}
}

// ParseCompression is the COMPRESSION argument of TDIGEST.CREATE and
// TDIGEST.MERGE.
func ParseCompression(b []byte) (int64, error) {
	c, ok := ParseLongLong(b)
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
		v, ok := ParseDouble(a)
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
		v, ok := ParseLongLong(a)
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
	lo, ok := ParseDouble(low)
	if !ok {
		return 0, 0, ErrParseLowCut
	}
	hi, ok := ParseDouble(high)
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
	n, ok := ParseLongLong(args[0])
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
