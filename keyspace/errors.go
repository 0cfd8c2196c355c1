package keyspace

import "fmt"

// Error is a keyspace error: what Apply or Read answers a command with, in
// Result.Err or Result.Tail. Each has a fixed code, so that a node that
// forwarded a write can decode the leader's results (EncodeResults), and
// maps to exactly one wire string in the server package's error table (server/errors.go).
type Error struct {
	code uint8
	text string
}

func (e *Error) Error() string { return e.text }

// errorsByCode lists every Error by its code; index 0 is no error.
var errorsByCode []*Error

// newError registers an error under code. Codes are written into results
// that cross the network: never reuse or renumber one.
func newError(code uint8, text string) *Error {
	e := &Error{code: code, text: text}
	for int(code) >= len(errorsByCode) {
		errorsByCode = append(errorsByCode, nil)
	}
	if errorsByCode[code] != nil || code == 0 {
		panic(fmt.Sprintf("keyspace: error code %d registered twice", code))
	}
	errorsByCode[code] = e
	return e
}

// Errors lists every keyspace error, by code.
func Errors() []*Error {
	var out []*Error
	for _, e := range errorsByCode {
		if e != nil {
			out = append(out, e)
		}
	}
	return out
}

// The keyspace's errors. Each comment is the wire string Redis 8 sends.
var (
	ErrNotFound        = newError(1, "not found")          // ERR not found
	ErrWrongType       = newError(2, "wrong type")         // WRONGTYPE …
	ErrItemExists      = newError(3, "item exists")        // ERR item exists
	ErrNonScalingFull  = newError(4, "non scaling full")   // ERR non scaling filter is full
	ErrInsertFailed    = newError(5, "insert failed")      // ERR problem inserting into filter
	ErrTooLarge        = newError(6, "filter too large")   // over the per-filter byte cap
	ErrIterNotNumeric  = newError(7, "iter not numeric")   // Second argument must be numeric
	ErrBadData         = newError(8, "bad data")           // ERR received bad data
	ErrNoLink          = newError(9, "no link")            // ERR invalid offset - no link found
	ErrChunkTooBig     = newError(10, "chunk too big")     // ERR invalid chunk - Too big …
	ErrCFNotFound      = newError(11, "cf not found")      // Not found
	ErrMaxExpansions   = newError(12, "max expansions")    // Maximum expansions reached
	ErrFilterFull      = newError(13, "filter full")       // Filter is full
	ErrNoMemory        = newError(14, "no memory")         // ERR Insufficient memory
	ErrCompactNotFound = newError(15, "cf compact absent") // Cuckoo filter was not found
	ErrInvalidHeader   = newError(16, "invalid header")    // Invalid header
	ErrCantCreate      = newError(17, "cannot create")     // Couldn't create filter!
	ErrCantLoad        = newError(18, "cannot load")       // Couldn't load chunk!
	ErrNoSuchKey       = newError(19, "no such key")       // ERR no such key
	ErrModuleKeyCopy   = newError(20, "module key copy")   // ERR not supported for this module key
	ErrBusyKey         = newError(21, "busy key")          // BUSYKEY Target key name already exists.
	ErrBadPayload      = newError(22, "bad payload")       // ERR DUMP payload version or checksum are wrong
	ErrBadFormat       = newError(23, "bad format")        // ERR Bad data format
	// ErrInvalidCommand: a command in the log breaks command.Validate (an
	// older build's entry, a damaged one). It changed nothing, on every
	// replica alike.
	ErrInvalidCommand = newError(24, "invalid command")
	// ErrLoading: the node is replacing its state with a snapshot.
	ErrLoading = newError(25, "loading") // LOADING Redis is loading the dataset in memory

	// Count-Min Sketch (CMS.*), RedisBloom's words.
	ErrCMSExists        = newError(26, "cms exists")         // CMS: key already exists
	ErrCMSNotFound      = newError(27, "cms not found")      // CMS: key does not exist
	ErrCMSWidth         = newError(28, "cms width")          // CMS: invalid width
	ErrCMSDepth         = newError(29, "cms depth")          // CMS: invalid depth
	ErrCMSOverEst       = newError(30, "cms overestimation") // CMS: invalid overestimation value
	ErrCMSProb          = newError(31, "cms prob")           // CMS: invalid prob value
	ErrCMSInitArgs      = newError(32, "cms init arguments") // CMS: invalid init arguments
	ErrCMSNoMemory      = newError(33, "cms no memory")      // CMS: Insufficient memory to create the key
	ErrCMSNumber        = newError(34, "cms number")         // CMS: Cannot parse number
	ErrCMSNegative      = newError(35, "cms negative")       // CMS: Number cannot be negative
	ErrCMSNumKeys       = newError(36, "cms numkeys")        // CMS: invalid numkeys
	ErrCMSKeysPositive  = newError(37, "cms keys positive")  // CMS: Number of keys must be positive
	ErrCMSKeys          = newError(38, "cms keys")           // CMS: wrong number of keys
	ErrCMSKeysWeights   = newError(39, "cms keys weights")   // CMS: wrong number of keys/weights
	ErrCMSWeight        = newError(40, "cms weight")         // CMS: invalid weight value
	ErrCMSDims          = newError(41, "cms dimensions")     // CMS: width/depth is not equal
	ErrCMSMergeOverflow = newError(42, "cms merge overflow") // CMS: MERGE overflow

	// Top-K (TOPK.*), RedisBloom's words.
	ErrTopKExists    = newError(43, "topk exists")    // TopK: key already exists
	ErrTopKNotFound  = newError(44, "topk not found") // TopK: key does not exist
	ErrTopKK         = newError(45, "topk k")         // TopK: invalid k
	ErrTopKWidth     = newError(46, "topk width")     // TopK: invalid width
	ErrTopKDepth     = newError(47, "topk depth")     // TopK: invalid depth
	ErrTopKDecay     = newError(48, "topk decay")     // TopK: invalid decay value. must be '<= 1' & '> 0'
	ErrTopKNoMemory  = newError(49, "topk no memory") // ERR Insufficient memory to create topk data structure
	ErrTopKIncrement = newError(50, "topk increment") // TopK: increment must be an integer greater or equal to 0 … 100,000

	// ErrNeedsLog: Read refuses a t-digest query (or a DUMP of a digest)
	// that would compress the digest's buffer, which changes it: the
	// caller sends the command through the log instead, where Apply
	// answers it on every replica alike. It never reaches a client.
	ErrNeedsLog = newError(51, "needs the log")

	// t-digest (TDIGEST.*), RedisBloom's words.
	ErrTDKeyMissing       = newError(52, "tdigest key missing")       // ERR T-Digest: key does not exist
	ErrTDKeyExists        = newError(53, "tdigest key exists")        // ERR T-Digest: key already exists
	ErrTDAlloc            = newError(54, "tdigest alloc")             // ERR T-Digest: allocation failed
	ErrTDMergeAlloc       = newError(55, "tdigest merge alloc")       // ERR T-Digest: allocation of destination digest failed
	ErrTDOverflow         = newError(56, "tdigest overflow")          // ERR T-Digest: overflow detected
	ErrTDWrongKeyword     = newError(57, "tdigest wrong keyword")     // ERR T-Digest: wrong keyword
	ErrTDParseCompression = newError(58, "tdigest parse compression") // ERR T-Digest: error parsing compression parameter
	ErrTDCompressionRange = newError(59, "tdigest compression range") // ERR T-Digest: compression parameter needs to be a positive integer
	ErrTDParseVal         = newError(60, "tdigest parse val")         // ERR T-Digest: error parsing val parameter
	ErrTDValNotFinite     = newError(61, "tdigest val not finite")    // ERR T-Digest: val parameter needs to be a finite number
	ErrTDParseNumkeys     = newError(62, "tdigest parse numkeys")     // ERR T-Digest: error parsing numkeys
	ErrTDNumkeysRange     = newError(63, "tdigest numkeys range")     // ERR T-Digest: numkeys needs to be a positive integer
	ErrTDMergeArity       = newError(64, "tdigest merge arity")       // ERR wrong number of arguments for 'tdigest.merge' command
	ErrTDParseQuantile    = newError(65, "tdigest parse quantile")    // ERR T-Digest: error parsing quantile
	ErrTDQuantileRange    = newError(66, "tdigest quantile range")    // ERR T-Digest: quantile should be in [0,1]
	ErrTDParseCDF         = newError(67, "tdigest parse cdf")         // ERR T-Digest: error parsing cdf
	ErrTDParseValue       = newError(68, "tdigest parse value")       // ERR T-Digest: error parsing value
	ErrTDParseRank        = newError(69, "tdigest parse rank")        // ERR T-Digest: error parsing rank
	ErrTDRankNegative     = newError(70, "tdigest rank negative")     // ERR T-Digest: rank needs to be non negative
	ErrTDParseLowCut      = newError(71, "tdigest parse low cut")     // ERR T-Digest: error parsing low_cut_percentile
	ErrTDParseHighCut     = newError(72, "tdigest parse high cut")    // ERR T-Digest: error parsing high_cut_percentile
	ErrTDCutRange         = newError(73, "tdigest cut range")         // ERR T-Digest: low_cut_percentile and high_cut_percentile should be in [0,1]
	ErrTDCutOrder         = newError(74, "tdigest cut order")         // ERR T-Digest: low_cut_percentile should be lower than high_cut_percentile

	// ErrBFCreate: a Bloom filter whose first link cannot be sized
	// (RedisBloom's bfCreateChain failing, an error rate so small that
	// its bits per entry overflow).
	ErrBFCreate = newError(120, "bf create") // ERR could not create filter
)
