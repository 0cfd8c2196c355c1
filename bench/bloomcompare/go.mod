module github.com/bfserver/bfserver/bench/bloomcompare

go 1.26.8

require (
	github.com/bfserver/bfserver v0.0.0
	github.com/bits-and-blooms/bloom/v3 v3.7.1
)

require github.com/bits-and-blooms/bitset v1.24.2 // indirect

replace github.com/bfserver/bfserver => ../..
