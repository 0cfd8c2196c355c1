package server

import (
	"fmt"
	"math"
	"strconv"
	"strings"
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

// ParseMemory reads a memory value as Redis's config does: a byte count,
// or one with a unit (k, kb, m, mb, g, gb; k is 1000 and kb 1024), in any
// case.
func ParseMemory(v string) (uint64, error) {
	lv := strings.ToLower(v)
	mul := uint64(1)
	for _, u := range []struct {
		suffix string
		mul    uint64
	}{{"kb", 1 << 10}, {"mb", 1 << 20}, {"gb", 1 << 30}, {"k", 1e3}, {"m", 1e6}, {"g", 1e9}, {"b", 1}} {
		if strings.HasSuffix(lv, u.suffix) {
			lv, mul = strings.TrimSuffix(lv, u.suffix), u.mul
			break
		}
	}
	n, err := strconv.ParseUint(lv, 10, 64)
	if err != nil || lv == "" || n > math.MaxUint64/mul {
		return 0, fmt.Errorf("%q is not a memory value", v)
	}
	return n * mul, nil
}

func isSpace(c byte) bool {
	return c == ' ' || c == '\n' || c == '\r' || c == '\t' || c == '\v' || c == '\f'
}
