package tdigest_test

import (
	"fmt"

	"github.com/bfserver/bfserver/internal/redisnum"
	"github.com/bfserver/bfserver/sketch/tdigest"
)

// The digest TDIGEST.CREATE k COMPRESSION 50 then ADD k 1 2 3 4 100
// leave, its quantiles 0.5 and 0.9 as RedisBloom's RESP2 replies, and
// its INFO; a compression whose capacity wraps takes no value.
func Example() {
	d, _ := tdigest.New(50)
	if err := d.AddValues([]float64{1, 2, 3, 4, 100}); err != nil {
		panic(err)
	}
	for _, v := range d.Quantiles([]float64{0.5, 0.9}) {
		fmt.Printf("%q\n", redisnum.AppendRESP2Double(nil, v))
	}
	fmt.Println(d.Info().Values())
	wrapped, _ := tdigest.New(357913940)
	fmt.Println(wrapped.AddValues([]float64{1}))
	// Output:
	// "$1\r\n3\r\n"
	// "$3\r\n100\r\n"
	// [50 310 5 0 5 0 5 1 5040]
	// tdigest: overflow
}
