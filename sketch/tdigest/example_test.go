package tdigest_test

import (
	"fmt"

	"github.com/bfserver/bfserver/internal/redisnum"
	"github.com/bfserver/bfserver/sketch/tdigest"
)

// TDIGEST.CREATE, ADD and QUANTILE, answered as RedisBloom answers them.
func Example() {
	c, err := tdigest.CreateArgs([][]byte{[]byte("COMPRESSION"), []byte("50")})
	if err != nil {
		panic(err)
	}
	d, _ := tdigest.New(c)
	vals, err := tdigest.AddArgs([][]byte{[]byte("1"), []byte("2"), []byte("3"), []byte("4"), []byte("100")})
	if err != nil {
		panic(err)
	}
	d.AddValues(vals)
	qs, _ := tdigest.QuantileArgs([][]byte{[]byte("0.5"), []byte("0.9")})
	for _, v := range d.Quantiles(qs) {
		fmt.Printf("%q\n", redisnum.AppendRESP2Double(nil, v))
	}
	_, err = tdigest.AddArgs([][]byte{[]byte("inf")})
	fmt.Println(err)
	fmt.Println(d.Info().Values())
	// Output:
	// "$1\r\n3\r\n"
	// "$3\r\n100\r\n"
	// ERR T-Digest: val parameter needs to be a finite number
	// [50 310 5 0 5 0 5 1 5040]
}
