package tdigest

import "errors"

// The digest's failures. They name what went wrong with the structure,
// not what a client is told: the server maps each to RedisBloom's reply.
var (
	// ErrOverflow: a node could not be added: the digest has no room
	// (its capacity, a C int, wrapped negative from compression
	// 357913940 on) or its total weight would leave int64. AddValues
	// keeps the values before it, as RedisBloom does; Merge gives no
	// result.
	ErrOverflow = errors.New("tdigest: overflow")
	// ErrMergeAlloc: Merge's destination cannot be created, its
	// compression being outside what New accepts (past MaxCompression).
	ErrMergeAlloc = errors.New("tdigest: merged digest cannot be allocated")
	// ErrBadFormat: a dump or RDB value that is malformed or describes a
	// state RedisBloom never writes.
	ErrBadFormat = errors.New("tdigest: bad dump format")
	// ErrTooLarge: the value would hold more node bytes than allowed.
	ErrTooLarge = errors.New("tdigest: value too large")
)
