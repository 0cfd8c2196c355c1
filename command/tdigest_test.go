package command

import (
	"errors"
	"math"
	"testing"

	"github.com/bfserver/bfserver/sketch/tdigest"
)

// TestTDigestValidate: the t-digest commands the RESP layer builds pass;
// values its parsers refuse, argument errors of another op, and codes no
// error has are refused, so Apply never meets them.
func TestTDigestValidate(t *testing.T) {
	k := []byte("t")
	for _, c := range []*Cmd{
		{Op: TDCreate, Key: k, Count: 1}, {Op: TDCreate, Key: k, Count: tdigest.MaxCompression},
		{Op: TDCreate, Key: k, Field: TDArgAlloc},
		{Op: TDAdd, Key: k, Data: Floats([]float64{-math.MaxFloat64, 0, math.Copysign(0, -1)})},
		{Op: TDAdd, Key: k, Field: TDArgValNotFinite},
		{Op: TDMerge, Key: k, Keys: [][]byte{k}, Count: tdigest.MaxCompression + 1, Flag: true},
		{Op: TDMerge, Key: k, Field: TDArgMergeArity},
		{Op: TDQuantile, Key: k, Data: Floats([]float64{0, 1})}, {Op: TDCDF, Key: k, Data: Floats([]float64{math.Inf(-1)})},
		{Op: TDRank, Key: k, Data: Floats([]float64{1}), Flag: true}, {Op: TDByRank, Key: k, Data: Int64s([]int64{0, math.MaxInt64})},
		{Op: TDTrimmedMean, Key: k, Data: Floats([]float64{0, 1})}, {Op: TDMin, Key: k}, {Op: TDInfo, Key: k},
		{Op: TDTrimmedMean, Key: k, Field: TDArgCutOrder},
	} {
		if err := Validate(c); err != nil {
			t.Errorf("%v: %v", c.Op, err)
		}
	}
	for name, c := range map[string]*Cmd{
		"compression 0":          {Op: TDCreate, Key: k},
		"compression past max":   {Op: TDCreate, Key: k, Count: tdigest.MaxCompression + 1},
		"add nothing":            {Op: TDAdd, Key: k},
		"add nan":                {Op: TDAdd, Key: k, Data: Floats([]float64{1, math.NaN()})},
		"add inf":                {Op: TDAdd, Key: k, Data: Floats([]float64{math.Inf(1)})},
		"add 7 bytes":            {Op: TDAdd, Key: k, Data: make([]byte, 7)},
		"merge no sources":       {Op: TDMerge, Key: k},
		"merge compression < 0":  {Op: TDMerge, Key: k, Keys: [][]byte{k}, Count: -1},
		"quantile 1.5":           {Op: TDQuantile, Key: k, Data: Floats([]float64{1.5})},
		"quantile none":          {Op: TDQuantile, Key: k},
		"cdf nan":                {Op: TDCDF, Key: k, Data: Floats([]float64{math.NaN()})},
		"rank negative":          {Op: TDByRank, Key: k, Data: Int64s([]int64{-1})},
		"cuts reversed":          {Op: TDTrimmedMean, Key: k, Data: Floats([]float64{0.9, 0.1})},
		"one cut":                {Op: TDTrimmedMean, Key: k, Data: Floats([]float64{0.1})},
		"another op's error":     {Op: TDAdd, Key: k, Field: TDArgParseRank},
		"a CMS error":            {Op: TDCreate, Key: k, Field: CMSArgWidth},
		"no such code":           {Op: TDCreate, Key: k, Field: 250},
		"past the last code":     {Op: TDCreate, Key: k, Field: TDArgLast + 1},
		"a t-digest code on CMS": {Op: CMSInit, Key: k, Field: TDArgParseVal},
		"reset with an error":    {Op: TDReset, Key: k, Field: TDArgParseVal},
	} {
		var inv *InvalidError
		if err := Validate(c); !errors.As(err, &inv) {
			t.Errorf("%s: %v, want an InvalidError", name, err)
		}
	}
	// The codes are in the log: each keeps its number.
	if TDArgFirst != 18 || TDArgMergeArity != 26 || TDArgLast != 36 {
		t.Errorf("t-digest codes moved: first %d, merge arity %d, last %d", TDArgFirst, TDArgMergeArity, TDArgLast)
	}
	for op, codes := range tdArgOps {
		for _, code := range codes {
			if code < TDArgFirst || code > TDArgLast {
				t.Errorf("%v: code %d is no t-digest error", op, code)
			}
		}
	}
}
