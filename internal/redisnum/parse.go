package redisnum

import (
	"math"
	"strconv"

	"github.com/bfserver/bfserver/internal/ascii"
)

// ParseLL is RedisModule_StringToLongLong (Redis's string2ll): an
// optional '-', no '+', no leading zeros or spaces, within int64.
func ParseLL(b []byte) (int64, bool) {
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
	case ascii.EqualFold(s, "inf") || ascii.EqualFold(s, "infinity"):
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
