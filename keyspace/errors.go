package keyspace

import "errors"

// Errors returned in Result.Err or Result.Tail. Each maps to exactly one wire
// string in the resp package's error table.
var (
	ErrNotFound        = errors.New("not found")         // ERR not found
	ErrWrongType       = errors.New("wrong type")        // WRONGTYPE …
	ErrItemExists      = errors.New("item exists")       // ERR item exists
	ErrNonScalingFull  = errors.New("non scaling full")  // ERR non scaling filter is full
	ErrInsertFailed    = errors.New("insert failed")     // ERR problem inserting into filter
	ErrTooLarge        = errors.New("filter too large")  // over the per-filter byte cap
	ErrIterNotNumeric  = errors.New("iter not numeric")  // Second argument must be numeric
	ErrBadData         = errors.New("bad data")          // ERR received bad data
	ErrNoLink          = errors.New("no link")           // ERR invalid offset - no link found
	ErrChunkTooBig     = errors.New("chunk too big")     // ERR invalid chunk - Too big …
	ErrCFNotFound      = errors.New("cf not found")      // Not found
	ErrMaxExpansions   = errors.New("max expansions")    // Maximum expansions reached
	ErrFilterFull      = errors.New("filter full")       // Filter is full
	ErrNoMemory        = errors.New("no memory")         // ERR Insufficient memory
	ErrCompactNotFound = errors.New("cf compact absent") // Cuckoo filter was not found
	ErrInvalidHeader   = errors.New("invalid header")    // Invalid header
	ErrCantCreate      = errors.New("cannot create")     // Couldn't create filter!
	ErrCantLoad        = errors.New("cannot load")       // Couldn't load chunk!
	ErrNoSuchKey       = errors.New("no such key")       // ERR no such key
	ErrModuleKeyCopy   = errors.New("module key copy")   // ERR not supported for this module key
	ErrBusyKey         = errors.New("busy key")          // BUSYKEY Target key name already exists.
	ErrBadPayload      = errors.New("bad payload")       // ERR DUMP payload version or checksum are wrong
	ErrBadFormat       = errors.New("bad format")        // ERR Bad data format
	ErrUnknownOp       = errors.New("unknown operation") // a log entry this version cannot apply
)
