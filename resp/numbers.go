package resp

import (
	"math"
	"strconv"
)

// parseLL is Redis's string2ll: optional '-', no '+', no leading zeros, no
// spaces, within int64.
func parseLL(b []byte) (int64, bool) {
	if len(b) == 0 || len(b) > 20 {
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
	return v, err == nil
}

// parseFloat is RedisModule_StringToDouble: strtod over the whole string,
// no leading space, NaN refused.
func parseFloat(b []byte) (float64, bool) {
	if len(b) == 0 || isSpace(b[0]) || len(b) > 256 {
		return 0, false
	}
	for _, c := range b {
		if c == '_' { // Go accepts digit separators; strtod does not
			return 0, false
		}
	}
	s := string(b)
	v, err := strconv.ParseFloat(s, 64)
	if err != nil {
		if ne, ok := err.(*strconv.NumError); ok && ne.Err == strconv.ErrRange {
			return v, true // strtod saturates to ±HUGE_VAL or 0
		}
		return 0, false
	}
	if math.IsNaN(v) {
		return 0, false
	}
	return v, true
}
