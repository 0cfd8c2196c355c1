package scalable

import "errors"

// Errors returned by chains, cuckoo sets and their decoders. The wire text
// for each lives in the resp package's error table.
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

// MaxChunk is MAX_SCANDUMP_SIZE: no dump chunk is longer, and none crosses
// a link or sub-filter.
const MaxChunk = 16 << 20
