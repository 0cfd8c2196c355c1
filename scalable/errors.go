package scalable

import "errors"

// Errors returned by chains, cuckoo sets and their decoders. The wire text
// for each lives in the server package's error table (server/errors.go).
var (
	// ErrNonScalingFull: a NONSCALING chain reached its capacity.
	ErrNonScalingFull = errors.New("non scaling filter is full")
	// ErrGrow: a new link or sub-filter could not be sized.
	ErrGrow = errors.New("problem inserting into filter")
	// ErrTooLarge: creating or growing would pass the caller's byte cap.
	ErrTooLarge = errors.New("filter would exceed the memory limit")
	// ErrBadHeader: a dump header failed validation.
	ErrBadHeader = errors.New("received bad data")
	// ErrNoLink: a Bloom chunk's offset is outside every link.
	ErrNoLink = errors.New("invalid offset - no link found")
	// ErrChunkTooBig: a Bloom chunk runs past the end of its link.
	ErrChunkTooBig = errors.New("invalid chunk - Too big for current filter")
	// ErrBadChunk: a Bloom chunk is malformed (position before its length).
	ErrBadChunk = errors.New("bad chunk")
	// ErrBadCuckooChunk: a Cuckoo chunk does not fit the filter.
	ErrBadCuckooChunk = errors.New("couldn't load chunk")
)

// Unallocatable is where RedisBloom's own allocations fail on every
// machine: more bytes than the 2^47-byte user address space of x86-64 and
// arm64 (48-bit virtual addresses). RedisBloom callocs a filter lazily, so
// what it can create below that depends on the machine (32 TiB loads on
// the reference host, 64 TiB does not); bfserver's per-filter cap, at most
// command.MaxFilterBytes (1 TiB), refuses those with its own error. Beyond
// this bound bfserver answers as RedisBloom's failed allocation does: a
// dump header is bad data, a Bloom link that cannot be added is a problem
// inserting, a Cuckoo header cannot create the filter.
const Unallocatable = 1 << 47

// MaxChunk is MAX_SCANDUMP_SIZE: no dump chunk is longer, and none crosses
// a link or sub-filter.
const MaxChunk = 16 << 20
