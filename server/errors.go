package server

import (
	"errors"

	"github.com/bfserver/bfserver/command"
	"github.com/bfserver/bfserver/keyspace"
)

// Wire strings that the resp layer itself raises while parsing. RedisBloom
// writes some without an ERR prefix; clients see exactly these bytes.
const (
	msgWrongType        = "WRONGTYPE Operation against a key holding the wrong kind of value"
	msgSyntax           = "ERR syntax error"
	msgNotInteger       = "ERR value is not an integer or out of range"
	msgNotFloat         = "ERR value is not a valid float"
	msgNoAuth           = "NOAUTH Authentication required."
	msgWrongPass        = "WRONGPASS invalid username-password pair or user is disabled."
	msgDenied           = "DENIED Redis is running in protected mode because protected mode is enabled and no password is set for the default user. In this mode connections are only accepted from the loopback interface. If you want to connect from external computers to Redis you may adopt one of the following solutions: 1) Just disable protected mode sending the command 'CONFIG SET protected-mode no' from the loopback interface by connecting to Redis from the same host the server is running, however MAKE SURE Redis is not publicly accessible from internet if you do so. Use CONFIG REWRITE to make this change permanent. 2) Alternatively you can just disable the protected mode by editing the Redis configuration file, and setting the protected mode option to 'no', and then restarting the server. 3) If you started the server manually just for testing, restart it with the '--protected-mode no' option. 4) Set up an authentication password for the default user. NOTE: You only need to do one of the above things in order for the server to start accepting connections from the outside."
	msgExecAbort        = "EXECABORT Transaction discarded because of previous errors."
	msgTooLarge         = "ERR filter would exceed max-filter-bytes"
	msgOOM              = "OOM command not allowed when used memory > 'maxmemory'."
	msgBadErrorRate     = "ERR bad error rate"
	msgErrorRateRange   = "ERR error rate must be in the range (0.000000, 1.000000)"
	msgBadCapacity      = "ERR bad capacity"
	msgCapacityRange    = "ERR capacity must be in the range [1, 1073741824]"
	msgNoExpansion      = "ERR no expansion"
	msgBadExpansion     = "ERR bad expansion"
	msgNonScalingExpand = "Nonscaling filters cannot expand"
	msgExpansionRange   = "ERR expansion must be in the range [0, 32768]"
	msgUnknownArg       = "Unknown argument received"
	msgInsBadErrorRate  = "Bad error rate"
	msgInsBadCapacity   = "Bad capacity"
	msgInsBadExpansion  = "Bad expansion"
	msgInvalidInfo      = "Invalid information value"
	msgIterNotNumeric   = "Second argument must be numeric"
	msgLoadIterNumeric  = "ERR Second argument must be numeric"
	msgInvalidPosition  = "Invalid position"
	msgCFCapacityRange  = "Capacity must be in the range [2 * BUCKETSIZE, 1073741824]"
	msgCFInsCapRange    = "Capacity must be in the range [cf-bucket-size * 2, 1073741824]"
	msgCFMaxIterParse   = "Couldn't parse MAXITERATIONS"
	msgCFMaxIterRange   = "MAXITERATIONS: value must be in the range [1, 65535]"
	msgCFBucketParse    = "Couldn't parse BUCKETSIZE"
	msgCFBucketRange    = "BUCKETSIZE: value must be in the range [1, 255]"
	msgCFExpansionParse = "Couldn't parse EXPANSION"
	msgCFExpansionRange = "EXPANSION: value must be in the range [0, 32768]"
	msgUnknownPrefix    = "TRYAGAIN the write may or may not have been applied: "
)

// wireErrors maps every error a command's result or a backend can carry
// to the bytes the client gets: the keyspace's (exactly Redis 8's), then
// the outcomes of submitting to a replicated log. TestWireErrors checks
// that every keyspace.Errors() entry is here.
var wireErrors = map[error]string{
	keyspace.ErrNotFound:           "ERR not found",
	keyspace.ErrWrongType:          msgWrongType,
	keyspace.ErrItemExists:         "ERR item exists",
	keyspace.ErrNonScalingFull:     "ERR non scaling filter is full",
	keyspace.ErrInsertFailed:       "ERR problem inserting into filter",
	keyspace.ErrBFCreate:           "ERR could not create filter",
	keyspace.ErrTooLarge:           msgTooLarge,
	keyspace.ErrIterNotNumeric:     msgIterNotNumeric,
	keyspace.ErrBadData:            "ERR received bad data",
	keyspace.ErrNoLink:             "ERR invalid offset - no link found",
	keyspace.ErrChunkTooBig:        "ERR invalid chunk - Too big for current filter",
	keyspace.ErrCFNotFound:         "Not found",
	keyspace.ErrMaxExpansions:      "Maximum expansions reached",
	keyspace.ErrFilterFull:         "Filter is full",
	keyspace.ErrNoMemory:           "ERR Insufficient memory",
	keyspace.ErrCompactNotFound:    "Cuckoo filter was not found",
	keyspace.ErrInvalidHeader:      "Invalid header",
	keyspace.ErrCantCreate:         "Couldn't create filter!",
	keyspace.ErrCantLoad:           "Couldn't load chunk!",
	keyspace.ErrNoSuchKey:          "ERR no such key",
	keyspace.ErrModuleKeyCopy:      "ERR not supported for this module key",
	keyspace.ErrBusyKey:            "BUSYKEY Target key name already exists.",
	keyspace.ErrBadPayload:         "ERR DUMP payload version or checksum are wrong",
	keyspace.ErrBadFormat:          "ERR Bad data format",
	keyspace.ErrInvalidCommand:     "ERR invalid command in the log: it was not applied",
	keyspace.ErrLoading:            "LOADING Redis is loading the dataset in memory",
	keyspace.ErrCMSExists:          "CMS: key already exists",
	keyspace.ErrCMSNotFound:        "CMS: key does not exist",
	keyspace.ErrCMSWidth:           "CMS: invalid width",
	keyspace.ErrCMSDepth:           "CMS: invalid depth",
	keyspace.ErrCMSOverEst:         "CMS: invalid overestimation value",
	keyspace.ErrCMSProb:            "CMS: invalid prob value",
	keyspace.ErrCMSInitArgs:        "CMS: invalid init arguments",
	keyspace.ErrCMSNoMemory:        "CMS: Insufficient memory to create the key",
	keyspace.ErrCMSNumber:          "CMS: Cannot parse number",
	keyspace.ErrCMSNegative:        "CMS: Number cannot be negative",
	keyspace.ErrCMSNumKeys:         "CMS: invalid numkeys",
	keyspace.ErrCMSKeysPositive:    "CMS: Number of keys must be positive",
	keyspace.ErrCMSKeys:            "CMS: wrong number of keys",
	keyspace.ErrCMSKeysWeights:     "CMS: wrong number of keys/weights",
	keyspace.ErrCMSWeight:          "CMS: invalid weight value",
	keyspace.ErrCMSDims:            "CMS: width/depth is not equal",
	keyspace.ErrCMSMergeOverflow:   "CMS: MERGE overflow",
	keyspace.ErrTopKExists:         "TopK: key already exists",
	keyspace.ErrTopKNotFound:       "TopK: key does not exist",
	keyspace.ErrTopKK:              "TopK: invalid k",
	keyspace.ErrTopKWidth:          "TopK: invalid width",
	keyspace.ErrTopKDepth:          "TopK: invalid depth",
	keyspace.ErrTopKDecay:          "TopK: invalid decay value. must be '<= 1' & '> 0'",
	keyspace.ErrTopKNoMemory:       "ERR Insufficient memory to create topk data structure",
	keyspace.ErrTopKIncrement:      msgTopKIncrement,
	keyspace.ErrTDKeyMissing:       "ERR T-Digest: key does not exist",
	keyspace.ErrTDKeyExists:        "ERR T-Digest: key already exists",
	keyspace.ErrTDAlloc:            "ERR T-Digest: allocation failed",
	keyspace.ErrTDMergeAlloc:       "ERR T-Digest: allocation of destination digest failed",
	keyspace.ErrTDOverflow:         "ERR T-Digest: overflow detected",
	keyspace.ErrTDWrongKeyword:     "ERR T-Digest: wrong keyword",
	keyspace.ErrTDParseCompression: "ERR T-Digest: error parsing compression parameter",
	keyspace.ErrTDCompressionRange: "ERR T-Digest: compression parameter needs to be a positive integer",
	keyspace.ErrTDParseVal:         "ERR T-Digest: error parsing val parameter",
	keyspace.ErrTDValNotFinite:     "ERR T-Digest: val parameter needs to be a finite number",
	keyspace.ErrTDParseNumkeys:     "ERR T-Digest: error parsing numkeys",
	keyspace.ErrTDNumkeysRange:     "ERR T-Digest: numkeys needs to be a positive integer",
	keyspace.ErrTDMergeArity:       arityError("tdigest.merge"), // found after the destination's type
	keyspace.ErrTDParseQuantile:    "ERR T-Digest: error parsing quantile",
	keyspace.ErrTDQuantileRange:    "ERR T-Digest: quantile should be in [0,1]",
	keyspace.ErrTDParseCDF:         "ERR T-Digest: error parsing cdf",
	keyspace.ErrTDParseValue:       "ERR T-Digest: error parsing value",
	keyspace.ErrTDParseRank:        "ERR T-Digest: error parsing rank",
	keyspace.ErrTDRankNegative:     "ERR T-Digest: rank needs to be non negative",
	keyspace.ErrTDParseLowCut:      "ERR T-Digest: error parsing low_cut_percentile",
	keyspace.ErrTDParseHighCut:     "ERR T-Digest: error parsing high_cut_percentile",
	keyspace.ErrTDCutRange:         "ERR T-Digest: low_cut_percentile and high_cut_percentile should be in [0,1]",
	keyspace.ErrTDCutOrder:         "ERR T-Digest: low_cut_percentile should be lower than high_cut_percentile",
	// Never a client's: the session sends the command through the log.
	keyspace.ErrNeedsLog: "ERR internal: the command must go through the log",

	command.ErrNoLeader:       "CLUSTERDOWN no leader is known; the cluster cannot serve this command now",
	command.ErrNotAccepted:    "CLUSTERDOWN the log did not accept the write in time; it was not applied",
	command.ErrLeadershipLost: msgUnknownPrefix + command.ErrLeadershipLost.Error(),
	command.ErrLogTimeout:     msgUnknownPrefix + command.ErrLogTimeout.Error(),
	command.ErrConnLost:       msgUnknownPrefix + command.ErrConnLost.Error(),
	command.ErrReadTimeout:    "TRYAGAIN " + command.ErrReadTimeout.Error(),
}

func wireError(err error) string {
	if s, ok := wireErrors[err]; ok {
		return s
	}
	var st *command.StorageError
	var inv *command.InvalidError
	switch {
	case errors.As(err, &st):
		// Redis: "MISCONF Errors writing to the AOF file: <strerror>".
		return "MISCONF Errors writing to disk: " + sanitize(st.Cause, 512) + "; writes are refused until it works again"
	case errors.As(err, &inv):
		return "ERR " + sanitize(inv.Error(), 512)
	}
	for e, s := range wireErrors {
		if errors.Is(err, e) {
			return s
		}
	}
	return "ERR " + sanitize(err.Error(), 512)
}
