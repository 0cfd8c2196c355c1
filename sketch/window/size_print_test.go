package window

import (
	"testing"
	"time"
)

func TestPrintSizes(t *testing.T) {
	for _, e := range []float64{0.1, 0.01, 0.001, 1e-4, 1e-6, 1e-9, 1e-12} {
		for _, n := range []uint64{1, 10, 1000, 1_000_000} {
			t0 := time.Now()
			s, err := Size(e, n)
			d := time.Since(t0)
			p, _ := PaperSize(e, n)
			t.Logf("e=%g n=%d: k=%d l=%d m=%d g=%d bytes=%d fp=%.3g (%v) | paper k=%d l=%d m=%d bytes=%d fp=%.3g  bits/item ours=%.2f paper=%.2f", e, n, s.K, s.L, s.SliceBits(), s.Gen, s.Bytes(), s.MaxFP(), d, p.K, p.L, p.SliceBits(), p.Bytes(), p.MaxFP(), float64(s.Bytes()*8)/float64(n), float64(p.Bytes()*8)/float64(n))
			_ = err
		}
	}
}
