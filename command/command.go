// Package command defines the typed command that travels from the RESP layer
// through the replicated log to the state machine, and its binary codec.
//
// Every default (auto-create error rate, capacity, expansion, byte caps) and
// the proposing node's clock are resolved into the command before it is
// proposed, so applying it never consults a node's configuration or time.
package command

// Op identifies a command. Values are append-only: they are written to the
// log, and a node must decode every entry it ever wrote.
type Op uint8

// Write operations (enter the log).
const (
	BFReserve   Op = 1
	BFAdd       Op = 2 // BF.ADD, BF.MADD, BF.INSERT
	BFLoadChunk Op = 3
	CFReserve   Op = 4
	CFAdd       Op = 5 // CF.ADD, ADDNX, INSERT, INSERTNX
	CFDel       Op = 6
	CFCompact   Op = 7
	CFLoadChunk Op = 8
	Del         Op = 9 // DEL, UNLINK, and expiry deletes
	Rename      Op = 10
	Expire      Op = 11
	Persist     Op = 12
	FlushDB     Op = 13
	FlushAll    Op = 14
	Set         Op = 15
	Restore     Op = 16
	ExpireDue   Op = 17 // the leader's active expiry: delete keys whose time passed
	Copy        Op = 18
	// Membership: applied by the replication layer, not the keyspace.
	SetMember Op = 19 // Key: node id, Data: its RESP address
	DelMember Op = 20 // Key: node id
	// Level 2.
	// ACL users: applied by the state machine to its replicated user
	// table (Users), not the keyspace.
	ACLSetUser Op = 21 // ACL SETUSER: Key: name, Items: its new rules, Keys: the rules it must have now (NX: it must not exist)
	ACLDelUser Op = 22 // ACL DELUSER: Keys: names
	// Watch is EXEC's check of its WATCHed keys, first in its transaction:
	// Keys are the keys, Data holds per key its database and the version
	// WATCH saw (WatchEntryBytes each), Count is how many commands follow
	// in the transaction. When a version moved, none of them is applied.
	// A Watch with no keys turns version tracking on (see keyspace).
	Watch Op = 23
	// Level 3.
	// A piece of a LOADCHUNK too large for one log entry (see Pieces):
	// Iter and Data are the piece's own, as a LOADCHUNK of its own would
	// carry them, and Count is the length of what is left of the chunk
	// from this piece's first byte on. Apply refuses a piece whenever
	// LOADCHUNK would refuse that rest, so the first piece is refused
	// exactly when the whole chunk would be.
	BFLoadPart Op = 24
	CFLoadPart Op = 25
	// Level 4: sliding-window filters (BFX.W*, package sketch/window).
	// WReserve and an auto-creating WAdd carry the window: Field its kind
	// (window.Count or window.Time), Iter the window (inserts or ms),
	// Capacity the inserts per window, Flag KEEPRATE, ErrorRate, and Data
	// the shape the proposer sized (EncodeShape), so replicas never size
	// by floating point themselves.
	WReserve   Op = 26
	WAdd       Op = 27 // BFX.WADD, WMADD, WINSERT; Now is the insert time
	WLoadChunk Op = 28 // BFX.WLOADCHUNK: Iter, Data
	// Level 5: Count-Min Sketch (CMS.*, package sketch/cms). RedisBloom
	// checks the key before the arguments, so an argument error travels
	// in the command (Field, a CMSArg code; Iter for a weight) and Apply
	// answers it after the key's own errors (sketch.go).
	CMSInit   Op = 29 // CMS.INITBYDIM, INITBYPROB: Capacity the width, Count the depth (the proposer's)
	CMSIncrBy Op = 30 // Items, and Data their increments (8 bytes each, little-endian)
	CMSMerge  Op = 31 // Key the destination, Keys the sources, Data their weights (8 bytes each); Iter: the first bad weight, or -1
	// Level 6: Top-K (TOPK.*, package sketch/topk), argument errors as CMS.
	TopKReserve Op = 32 // Iter k, Capacity width, Count depth, ErrorRate decay (the proposer's)
	TopKAdd     Op = 33 // TOPK.ADD, INCRBY: Items, Data their increments (8 bytes each); Iter: the item whose increment is bad (the last of Items), or -1
	// Level 7: t-digest (TDIGEST.*, package sketch/tdigest), argument
	// errors as CMS (Field, a TDArg* code). Values travel as float64 bits
	// in Data (Floats), 8 bytes each.
	TDCreate Op = 34 // Count: the compression
	TDReset  Op = 35
	TDAdd    Op = 36 // Data: the values
	TDMerge  Op = 37 // Key the destination, Keys the sources; Count: COMPRESSION (0: none given); Flag: OVERRIDE
)

// Read operations: answered from local state, or inside EXEC.
const (
	BFExists   Op = 64 // BF.EXISTS, BF.MEXISTS
	BFInfo     Op = 65
	BFCard     Op = 66
	BFScanDump Op = 67
	BFDebug    Op = 68
	CFExists   Op = 69 // CF.EXISTS, CF.MEXISTS
	CFCount    Op = 70
	CFInfo     Op = 71
	CFScanDump Op = 72
	CFDebug    Op = 73
	Exists     Op = 74
	Type       Op = 75
	TTL        Op = 76
	Keys       Op = 77
	Scan       Op = 78
	DBSize     Op = 79
	RandomKey  Op = 80
	Get        Op = 81
	Encoding   Op = 82
	MemUsage   Op = 83
	Dump       Op = 84
	Digest     Op = 85
	WExists    Op = 86 // BFX.WEXISTS, WMEXISTS (level 4)
	WInfo      Op = 87
	WScanDump  Op = 88
	CMSQuery   Op = 89 // level 5
	CMSInfo    Op = 90
	TopKQuery  Op = 91 // level 6
	TopKCount  Op = 92
	TopKList   Op = 93 // Flag: WITHCOUNT
	TopKInfo   Op = 94
	// Level 7. The queries that compress a digest's buffer (QUANTILE, CDF,
	// TRIMMED_MEAN, and RANK or BYRANK with an argument inside the data)
	// change it: Read answers them only when they would not
	// (keyspace.ErrNeedsLog otherwise), and the RESP layer then sends them
	// through the log, where Apply compresses and answers on every
	// replica alike. DUMP of a digest with a buffer does the same.
	TDMin         Op = 95
	TDMax         Op = 96
	TDInfo        Op = 97
	TDQuantile    Op = 98  // Data: the fractions
	TDCDF         Op = 99  // Data: the values
	TDTrimmedMean Op = 100 // Data: the low and high cuts
	TDRank        Op = 101 // Data: the values; Flag: REVRANK
	TDByRank      Op = 102 // Data: the ranks (Int64s); Flag: BYREVRANK
)

// IsWrite reports whether the op changes state and so must enter the log.
func (o Op) IsWrite() bool { return o < 64 }

// Expire conditions (EXPIRE … NX|XX|GT|LT).
const (
	CondNone uint8 = iota
	CondNX
	CondXX
	CondGT
	CondLT
)

// Cmd is one command with every argument parsed and every default resolved.
// Fields unused by an op stay zero.
type Cmd struct {
	Op  Op
	DB  uint8
	Now int64 // unix milliseconds on the proposing node

	Key   []byte
	Dst   []byte   // RENAME/COPY destination
	Keys  [][]byte // DEL, EXISTS
	Items [][]byte // filter items
	Data  []byte   // LOADCHUNK data, SET value, RESTORE payload, KEYS/SCAN pattern
	Iter  int64    // SCANDUMP/LOADCHUNK iterator, SCAN cursor, TTL in ms
	Count int64    // SCAN COUNT; the rest of the chunk (BFLoadPart, CFLoadPart)

	Multi      bool // reply is an array (MADD, MEXISTS, INSERT)
	NX         bool // ADDNX/INSERTNX, RENAMENX, RESTORE without REPLACE inverted
	NoCreate   bool
	NonScaling bool
	Flag       bool // op-specific: TTL in ms (PTTL); iterator was not numeric (SCANDUMP)

	ErrorRate     float64
	Capacity      uint64
	Expansion     uint32
	BucketSize    uint16
	MaxIterations uint16
	MaxExpansions uint32
	MaxBytes      uint64 // per-filter byte cap on the proposing node
	Field         uint8  // BF.INFO field, EXPIRE condition, SCAN type
}
