package scalable

import (
	"encoding/binary"
	"testing"
)

// BenchmarkScalingLoad is the state machine's share of the harness's bulk
// load: a million distinct items into an auto-created chain (capacity
// 100, 1%, expansion 2; 14 links at the end), one op a million adds.
// Every add tests each older link first (SBChain_Add), and those links
// together outgrow the L2 cache: most of the time is those tests' misses.
func BenchmarkScalingLoad(b *testing.B) {
	var buf [8]byte
	for b.Loop() {
		c, err := NewChain(100, 0.01, 2, false, noCap)
		if err != nil {
			b.Fatal(err)
		}
		for i := range 1_000_000 {
			binary.LittleEndian.PutUint64(buf[:], uint64(i)*0x9E3779B97F4A7C15)
			if _, err := c.Add(buf[:], noCap); err != nil {
				b.Fatal(err)
			}
		}
	}
}
