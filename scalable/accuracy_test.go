package scalable

import (
	"math"
	"strconv"
	"testing"
)

// theoreticalFPR is the chain's false-positive rate from each link's actual
// fill: a lookup is positive if any link answers positive, and a link with
// m bits, k hashes and n items answers positive with (1 − e^(−kn/m))^k.
func theoreticalFPR(c *Chain) float64 {
	pass := 1.0
	for _, l := range c.Links() {
		k, m, n := float64(l.Hashes), float64(l.Bits), float64(l.Size())
		pass *= 1 - math.Pow(1-math.Exp(-k*n/m), k)
	}
	return 1 - pass
}

// TestAccuracy measures the false-positive rate on never-added items at
// 0.5×, 1× and 4× capacity and requires it within a binomial bound of the
// theoretical rate; at or below capacity it must also stay under the
// requested error rate (with the same statistical slack).
func TestAccuracy(t *testing.T) {
	const capacity = 20000
	const probes = 200000
	for _, errRate := range []float64{0.1, 0.01, 0.001} {
		for _, exp := range []uint32{1, 2, 4} {
			for _, fill := range []float64{0.5, 1, 4} {
				ch, err := NewChain(capacity, errRate, exp, false, noCap)
				if err != nil {
					t.Fatal(err)
				}
				n := int(fill * capacity)
				for i := 0; i < n; i++ {
					ch.Add([]byte("in:"+strconv.Itoa(i)), noCap)
				}
				fp := 0
				for i := 0; i < probes; i++ {
					if ch.Test([]byte("out:" + strconv.Itoa(i))) {
						fp++
					}
				}
				measured := float64(fp) / probes
				want := theoreticalFPR(ch)
				sigma := math.Sqrt(want * (1 - want) / probes)
				if math.Abs(measured-want) > 6*sigma+0.05*want {
					t.Errorf("error %g expansion %d fill %g: measured %.5f, theoretical %.5f (σ %.5f)",
						errRate, exp, fill, measured, want, sigma)
				}
				if fill <= 1 && measured > errRate+6*math.Sqrt(errRate/probes) {
					t.Errorf("error %g expansion %d fill %g: measured %.5f above the requested rate",
						errRate, exp, fill, measured)
				}
				t.Logf("error %-6g exp %d fill %-3g links %d: measured %.5f theoretical %.5f",
					errRate, exp, fill, len(ch.Links()), measured, want)
			}
		}
	}
}
