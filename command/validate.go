package command

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/bfserver/bfserver/sketch/window"
)

// RedisBloom's ranges, and the server's hard caps. The RESP parsers, the
// settings (flags, environment, config file, CONFIG SET) and Validate all
// use these, so a value one of them accepts the others accept too.
const (
	// NumDBs is the number of databases, as Redis.
	NumDBs = 16
	// MaxCapacity bounds BF/CF capacities (RedisBloom: 1 << 30).
	MaxCapacity = 1 << 30
	// MaxErrorRate is what a Bloom error rate is clamped to; rates are in
	// (0, MaxErrorRate] once resolved.
	MaxErrorRate = 0.25
	// MaxExpansion bounds BF and CF expansion factors ([0, 32768]).
	MaxExpansion = 32768
	// MaxBucketSize bounds CF BUCKETSIZE ([1, 255]).
	MaxBucketSize = 255
	// MaxIterations bounds CF MAXITERATIONS ([1, 65535]).
	MaxIterations = 65535
	// MaxMaxExpansions bounds cf-max-expansions ([1, 65536]).
	MaxMaxExpansions = 65536
	// MaxItems bounds the items or keys of one command: Redis's
	// proto-max-multibulk-len ceiling.
	MaxItems = 1 << 20
	// MaxArgBytes bounds one key, item or payload: Redis's
	// proto-max-bulk-len default.
	MaxArgBytes = 512 << 20
	// MaxFilterBytes bounds the per-filter byte cap a command may carry.
	MaxFilterBytes = 1 << 40
	// MaxScanCount bounds SCAN's COUNT, so a cursor plus a count never
	// overflows.
	MaxScanCount = 1 << 31
)

// Level is the command set this build knows. Every op belongs to the level
// that introduced it; an entry whose commands need a higher level names it
// in its header, so a node that is too old stops before applying it and
// says what it needs, instead of applying part of it.
const Level = 6

// opLevel is the level of each op; 0: not known to this build. An array,
// not a map: Validate runs for every command, in Apply too.
var opLevel = [256]uint8{
	BFReserve: 1, BFAdd: 1, BFLoadChunk: 1, CFReserve: 1, CFAdd: 1, CFDel: 1, CFCompact: 1,
	CFLoadChunk: 1, Del: 1, Rename: 1, Expire: 1, Persist: 1, FlushDB: 1, FlushAll: 1, Set: 1,
	Restore: 1, ExpireDue: 1, Copy: 1, SetMember: 1, DelMember: 1,
	ACLSetUser: 2, ACLDelUser: 2,
	BFExists: 1, BFInfo: 1, BFCard: 1, BFScanDump: 1, BFDebug: 1, CFExists: 1, CFCount: 1,
	CFInfo: 1, CFScanDump: 1, CFDebug: 1, Exists: 1, Type: 1, TTL: 1, Keys: 1, Scan: 1,
	DBSize: 1, RandomKey: 1, Get: 1, Encoding: 1, MemUsage: 1, Dump: 1, Digest: 1,

	// Level 2.
	Watch: 2,

	// Level 3.
	BFLoadPart: 3, CFLoadPart: 3,

	// Level 4.
	WReserve: 4, WAdd: 4, WLoadChunk: 4, WExists: 4, WInfo: 4, WScanDump: 4,

	// Level 5.
	CMSInit: 5, CMSIncrBy: 5, CMSMerge: 5, CMSQuery: 5, CMSInfo: 5,

	// Level 6.
	TopKReserve: 6, TopKAdd: 6, TopKQuery: 6, TopKCount: 6, TopKList: 6, TopKInfo: 6,
}

// Known reports whether this build knows the op.
func (o Op) Known() bool { return opLevel[o] != 0 }

// LevelOf is the command level that introduced the op (0 if unknown).
func (o Op) LevelOf() uint8 { return opLevel[o] }

// InvalidError says which invariant a command breaks. Validate returns
// it; the state machine answers such a command with an error result and
// changes nothing.
type InvalidError struct {
	Op     Op
	Reason string
}

func (e *InvalidError) Error() string {
	return fmt.Sprintf("invalid command (op %d): %s", e.Op, e.Reason)
}

func invalid(c *Cmd, format string, args ...any) error {
	return &InvalidError{Op: c.Op, Reason: fmt.Sprintf(format, args...)}
}

// Validate states every invariant Apply relies on: a known op, a database
// in range, every numeric parameter in RedisBloom's range, and list sizes
// and byte lengths within the server's caps. It runs where a command is
// prepared (local, pipelined, EXEC'd), on the leader for forwarded ones,
// and again in Apply, so an entry that is somehow invalid in the log (an
// older build's, a damaged one) is refused the same way on every replica.
// It is a pure function of the command.
func Validate(c *Cmd) error {
	if !c.Op.Known() {
		return invalid(c, "unknown op")
	}
	if c.DB >= NumDBs {
		return invalid(c, "db %d out of range [0, %d]", c.DB, NumDBs-1)
	}
	if len(c.Key) > MaxArgBytes || len(c.Dst) > MaxArgBytes || len(c.Data) > MaxArgBytes {
		return invalid(c, "argument longer than %d bytes", MaxArgBytes)
	}
	if len(c.Items) > MaxItems || len(c.Keys) > MaxItems {
		return invalid(c, "more than %d items", MaxItems)
	}
	for _, l := range [2][][]byte{c.Items, c.Keys} {
		for _, b := range l {
			if len(b) > MaxArgBytes {
				return invalid(c, "item longer than %d bytes", MaxArgBytes)
			}
		}
	}
	if c.MaxBytes > MaxFilterBytes {
		return invalid(c, "filter byte cap %d over %d", c.MaxBytes, uint64(MaxFilterBytes))
	}
	switch c.Op {
	case BFReserve:
		return bloomParams(c)
	case BFAdd:
		if err := atLeastOne(c, c.Items); err != nil {
			return err
		}
		return bloomParams(c)
	case CFReserve:
		return cuckooParams(c)
	case CFAdd:
		if err := atLeastOne(c, c.Items); err != nil {
			return err
		}
		if err := cuckooParams(c); err != nil {
			return err
		}
		if c.MaxExpansions < 1 || c.MaxExpansions > MaxMaxExpansions {
			return invalid(c, "max expansions %d out of range [1, %d]", c.MaxExpansions, MaxMaxExpansions)
		}
	case CFDel, CFCount:
		if len(c.Items) != 1 {
			return invalid(c, "needs exactly one item, has %d", len(c.Items))
		}
	case WReserve:
		return windowParams(c)
	case WAdd:
		if err := atLeastOne(c, c.Items); err != nil {
			return err
		}
		if c.NoCreate && len(c.Data) == 0 {
			return nil // never creates: no window to check
		}
		return windowParams(c)
	case WExists:
		if err := atLeastOne(c, c.Items); err != nil {
			return err
		}
	case CMSInit, CMSIncrBy, CMSMerge, TopKReserve, TopKAdd:
		return sketchParams(c)
	case CMSQuery, TopKQuery, TopKCount:
		return atLeastOne(c, c.Items)
	case BFExists, CFExists:
		return atLeastOne(c, c.Items)
	case Del, Exists:
		return atLeastOne(c, c.Keys)
	case Watch:
		return watchParams(c)
	case CFScanDump:
		if c.Iter < 0 {
			return invalid(c, "negative iterator")
		}
	case Expire:
		if c.Field > CondLT {
			return invalid(c, "expire condition %d unknown", c.Field)
		}
	case BFLoadPart, CFLoadPart:
		if len(c.Data) == 0 || c.Count < int64(len(c.Data)) || c.Count > MaxArgBytes {
			return invalid(c, "a piece of %d bytes of a rest of %d", len(c.Data), c.Count)
		}
		if c.Iter < 1 || c.Iter > math.MaxInt64-c.Count {
			return invalid(c, "piece iterator %d out of range", c.Iter)
		}
	case Restore:
		if c.Iter < 0 {
			return invalid(c, "negative expiry")
		}
	case Scan:
		if c.Iter < 0 || c.Count < 0 || c.Count > MaxScanCount {
			return invalid(c, "cursor %d or count %d out of range", c.Iter, c.Count)
		}
	case BFInfo:
		if c.Field > 5 && c.Field != 0xff {
			return invalid(c, "info field %d unknown", c.Field)
		}
	case ACLSetUser:
		return setUserParams(c)
	case ACLDelUser:
		if err := atLeastOne(c, c.Keys); err != nil {
			return err
		}
		for _, name := range c.Keys {
			if err := userName(c, name); err != nil {
				return err
			}
			if string(name) == DefaultUser {
				return invalid(c, "the default user cannot be removed")
			}
		}
	}
	return nil
}

// DefaultUser is the ACL user every connection starts as; it cannot be
// deleted.
const DefaultUser = "default"

// MaxRuleBytes bounds one user's rules together (ACL SETUSER's words after
// the name, as ACL LIST shows them).
const MaxRuleBytes = 1 << 20

// setUserParams: a user name Redis accepts, and the user's complete new
// rules (Items) with, to compare against, the rules expected now (Keys;
// NX: the user must not exist yet).
func setUserParams(c *Cmd) error {
	if err := userName(c, c.Key); err != nil {
		return err
	}
	if len(c.Items) == 0 {
		return invalid(c, "a user without rules")
	}
	if c.NX && len(c.Keys) > 0 {
		return invalid(c, "expects a new user and existing rules at once")
	}
	for _, l := range [2][][]byte{c.Items, c.Keys} {
		n := 0
		for _, r := range l {
			if len(r) == 0 {
				return invalid(c, "an empty rule")
			}
			n += len(r)
		}
		if n > MaxRuleBytes {
			return invalid(c, "rules longer than %d bytes", MaxRuleBytes)
		}
	}
	return nil
}

// userName: Redis refuses names with spaces (isspace) or NUL bytes.
func userName(c *Cmd, name []byte) error {
	for _, b := range name {
		switch b {
		case ' ', '\t', '\n', '\v', '\f', '\r', 0:
			return invalid(c, "user name with a space or NUL byte")
		}
	}
	return nil
}

func atLeastOne(c *Cmd, l [][]byte) error {
	if len(l) == 0 {
		return invalid(c, "no items")
	}
	return nil
}

// bloomParams checks what creating a Bloom chain uses.
func bloomParams(c *Cmd) error {
	if !(c.ErrorRate > 0 && c.ErrorRate <= MaxErrorRate) || math.IsNaN(c.ErrorRate) {
		return invalid(c, "error rate %v out of range (0, %v]", c.ErrorRate, MaxErrorRate)
	}
	if c.Capacity < 1 || c.Capacity > MaxCapacity {
		return invalid(c, "capacity %d out of range [1, %d]", c.Capacity, MaxCapacity)
	}
	if c.Expansion > MaxExpansion {
		return invalid(c, "expansion %d out of range [0, %d]", c.Expansion, MaxExpansion)
	}
	return nil
}

// cuckooParams checks what creating a Cuckoo filter uses.
func cuckooParams(c *Cmd) error {
	if c.BucketSize < 1 || c.BucketSize > MaxBucketSize {
		return invalid(c, "bucket size %d out of range [1, %d]", c.BucketSize, MaxBucketSize)
	}
	if c.Capacity < 2*uint64(c.BucketSize) || c.Capacity > MaxCapacity {
		return invalid(c, "capacity %d out of range [2 * bucket size, %d]", c.Capacity, MaxCapacity)
	}
	if c.MaxIterations < 1 {
		return invalid(c, "max iterations %d out of range [1, %d]", c.MaxIterations, MaxIterations)
	}
	if c.Expansion > MaxExpansion {
		return invalid(c, "expansion %d out of range [0, %d]", c.Expansion, MaxExpansion)
	}
	return nil
}

// WatchEntryBytes is the size of one watched key's entry in a Watch
// command's Data: its database (one byte), then the version WATCH saw
// (uint64, little endian).
const WatchEntryBytes = 9

// watchParams checks EXEC's Watch: one Data entry per watched key, each in
// a database in range, and a transaction length the entry can hold.
func watchParams(c *Cmd) error {
	if len(c.Data) != WatchEntryBytes*len(c.Keys) {
		return invalid(c, "%d bytes of versions for %d keys", len(c.Data), len(c.Keys))
	}
	for i := 0; i < len(c.Data); i += WatchEntryBytes {
		if c.Data[i] >= NumDBs {
			return invalid(c, "watched key in db %d", c.Data[i])
		}
	}
	if c.Count < 0 || c.Count > MaxItems {
		return invalid(c, "transaction of %d commands out of range [0, %d]", c.Count, MaxItems)
	}
	return nil
}

// windowParams checks a window's creation parameters: those window.New
// checks too, so that a command in the log that it would refuse is
// refused before the proposal as well.
func windowParams(c *Cmd) error {
	if !(c.ErrorRate >= window.MinErrorRate && c.ErrorRate <= window.MaxErrorRate) {
		return invalid(c, "window error rate %v out of range", c.ErrorRate)
	}
	switch window.Kind(c.Field) {
	case window.Count:
		if c.Iter < 1 || uint64(c.Iter) > window.MaxItems || c.Flag {
			return invalid(c, "count window %d out of range (or KEEPRATE)", c.Iter)
		}
	case window.Time:
		if c.Iter < 1 || c.Iter > window.MaxWindowMs || c.Capacity < 1 || c.Capacity > window.MaxItems {
			return invalid(c, "time window %d ms, capacity %d out of range", c.Iter, c.Capacity)
		}
	default:
		return invalid(c, "unknown window kind %d", c.Field)
	}
	if _, err := DecodeShape(c.Data); err != nil {
		return invalid(c, "%v", err)
	}
	return nil
}

// shapeBytes is an encoded window shape: k and l (2 bytes each), words
// per slice and inserts per generation (8 bytes each), little-endian.
const shapeBytes = 20

// EncodeShape is a window shape as a WReserve or WAdd carries it.
func EncodeShape(s window.Shape) []byte {
	b := binary.LittleEndian.AppendUint16(nil, uint16(s.K))
	b = binary.LittleEndian.AppendUint16(b, uint16(s.L))
	b = binary.LittleEndian.AppendUint64(b, s.Words)
	return binary.LittleEndian.AppendUint64(b, s.Gen)
}

// DecodeShape reads EncodeShape's bytes; window.New checks the shape
// against the window.
func DecodeShape(b []byte) (window.Shape, error) {
	if len(b) != shapeBytes {
		return window.Shape{}, fmt.Errorf("window shape of %d bytes, want %d", len(b), shapeBytes)
	}
	s := window.Shape{K: int(binary.LittleEndian.Uint16(b)), L: int(binary.LittleEndian.Uint16(b[2:])),
		Words: binary.LittleEndian.Uint64(b[4:]), Gen: binary.LittleEndian.Uint64(b[12:])}
	if s.K < 1 || s.K > window.MaxK || s.L < 1 || s.L > window.MaxL || s.Words < 1 || s.Words > window.MaxItems || s.Gen < 1 {
		return window.Shape{}, fmt.Errorf("window shape %+v out of range", s)
	}
	return s, nil
}
