package server

import (
	"math"
	"testing"
)

// DEBUG SLEEP reads its seconds as strtod: "inf" in any ASCII case, but
// "İnf" (which Go's strings.ToLower makes "inf") is no number, 0.
func TestCDoubleASCII(t *testing.T) {
	for in, want := range map[string]float64{
		"INF": math.Inf(1), "-Infinity": math.Inf(-1), "\u0130nf": 0, "-\u0130NFINITY": 0, "\u212a": 0,
	} {
		if got := cDouble([]byte(in)); got != want {
			t.Errorf("cDouble(%q) = %v, want %v", in, got, want)
		}
	}
}
