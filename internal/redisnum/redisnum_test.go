package redisnum

import (
	"math"
	"testing"
)

func TestFormatDoubleForms(t *testing.T) {
	for _, c := range []struct {
		f    float64
		want string
	}{
		{math.NaN(), "nan"}, {math.Inf(1), "inf"}, {math.Inf(-1), "-inf"},
		{0, "0"}, {math.Copysign(0, -1), "-0"}, {1, "1"}, {-7, "-7"},
		{0x1p62, "4611686018427387904"}, {-0x1p62, "-4611686018427387904"},
		{0x1p62 + 1024, "4611686018427389000"}, {1e17, "100000000000000000"},
		{1e21, "1e+21"}, {1e-7, "1e-7"}, {1e-6, "0.000001"}, {0.1, "0.1"},
		{5e-324, "5e-324"}, {1.7976931348623157e308, "1.7976931348623157e+308"},
		{-3.5e300, "-3.5e+300"}, {123.456, "123.456"},
	} {
		if got := FormatDouble(c.f); got != c.want {
			t.Errorf("FormatDouble(%v) = %q, want %q", c.f, got, c.want)
		}
	}
}

func TestParseLongLong(t *testing.T) {
	for _, c := range []struct {
		s  string
		v  int64
		ok bool
	}{
		{"0", 0, true}, {"1", 1, true}, {"-1", -1, true}, {"9223372036854775807", math.MaxInt64, true},
		{"-9223372036854775808", math.MinInt64, true}, {"9223372036854775808", 0, false},
		{"-0", 0, false}, {"+1", 0, false}, {"01", 0, false}, {" 1", 0, false}, {"1 ", 0, false},
		{"", 0, false}, {"-", 0, false}, {"1.0", 0, false}, {"1e3", 0, false},
		{"000000000000000000001", 0, false},
	} {
		v, ok := ParseLL([]byte(c.s))
		if ok != c.ok || v != c.v {
			t.Errorf("ParseLL(%q) = %d, %v; want %d, %v", c.s, v, ok, c.v, c.ok)
		}
	}
}
