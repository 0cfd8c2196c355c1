package command

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/bfserver/bfserver/internal/wire"
)

// Codec errors.
var (
	// ErrVersion: the entry was written by a newer, unknown format.
	ErrVersion = errors.New("command: unknown encoding version")
	// ErrCorrupt: the entry is truncated or malformed.
	ErrCorrupt = errors.New("command: corrupt entry")
)

// LevelError: the entry holds commands of a level this build does not
// know (see Level). The node must stop before applying it.
type LevelError struct{ Need uint64 }

func (e *LevelError) Error() string {
	return fmt.Sprintf("command: entry needs command level %d, this build knows up to %d", e.Need, Level)
}

// Entry formats. Version 1 wrote every field of every command; version 2
// writes, per command, only the fields that differ from the command before
// it (a batch of BF.ADDs repeats the key, clock, database and defaults),
// about a third of the bytes, so the log's fsynced writes are smaller.
// Version 3 is version 2 with the entry's command level after the version
// byte. An entry of level-1 commands is written as version 2, which every
// earlier build reads; one that needs a later level is written as version
// 3, so that a build that does not know that level says so and stops.
// Entries of every version decode.
const (
	version1 = 1
	version2 = 2
	version3 = 3
)

// Limits on decoded sizes, so that a corrupt entry cannot make the decoder
// allocate without bound: counts are checked against the bytes remaining.
const maxBatch = 1 << 20

// minCmdBytes is the smallest encoding of a command in each version (v1:
// every field empty or zero; v2: the op and an empty field set): a count
// beyond the bytes left divided by it is corrupt.
const (
	minCmdBytesV1 = 26
	minCmdBytesV2 = 2
)

// Version 2 field set: bit i says field i follows, in this order.
const (
	fDB = 1 << iota
	fNow
	fKey
	fDst
	fKeys
	fItems
	fData
	fIter
	fCount
	fFlags
	fErrorRate
	fCapacity
	fExpansion
	fBucketSize
	fMaxIterations
	fMaxExpansions
	fMaxBytes
	fField
	fAll = fField<<1 - 1
)

// EncodeBatch encodes commands that are applied together as one log entry.
func EncodeBatch(cmds []*Cmd) []byte {
	var e Encoder
	for _, c := range cmds {
		e.Add(c)
	}
	return e.Entry()
}

// Encoder builds one entry a command at a time, so that the group commit
// can encode each write as it joins the entry instead of all of them at
// once when the log is ready for the entry. The zero value is ready; the
// commands added must not change until Entry.
//
// The entry is built in place: body starts with room for the longest
// header, Entry writes the header just before the commands and hands
// body over without a copy, and a command with a large payload grows body
// by exactly that much. A 16 MB LOADCHUNK so costs its entry 16 MB, where
// doubling and a final copy cost up to three times that.
type Encoder struct {
	body  []byte
	prev  *Cmd
	n     int
	level uint8 // the highest op level added
	// size is the capacity the next entry starts with: a little more than
	// the last entry without a large payload took, so that steady batches
	// rarely grow and one large entry does not size every later one.
	size int
	grew bool // a large payload grew this entry
}

// headRoom is the longest entry header: the version, the level and the
// command count.
const headRoom = 1 + 2*binary.MaxVarintLen64

// noCmd is what an entry's first command is encoded against; never written.
var noCmd Cmd

// Add appends c to the entry.
func (e *Encoder) Add(c *Cmd) {
	if e.prev == nil {
		e.prev = &noCmd
	}
	if e.body == nil {
		e.body = make([]byte, headRoom, max(e.size, 512))
	}
	if big := len(c.Data) + len(c.Key); big > 64<<10 {
		e.body = slices.Grow(e.body, big+1024)
		e.grew = true
	}
	e.body = appendCmd(e.body, e.prev, c)
	e.prev = c
	e.n++
	e.level = max(e.level, c.Op.LevelOf())
}

// Len is the number of commands added since the last Entry.
func (e *Encoder) Len() int { return e.n }

// Entry returns the entry (what EncodeBatch gives for the same commands)
// and starts the next one. The entry is the Encoder's buffer, now the
// caller's.
func (e *Encoder) Entry() []byte {
	if e.body == nil {
		e.body = make([]byte, headRoom)
	}
	var h [headRoom]byte
	hb := h[:0]
	if e.level <= 1 {
		hb = append(hb, version2)
	} else {
		hb = append(hb, version3)
		hb = binary.AppendUvarint(hb, uint64(e.level))
	}
	hb = binary.AppendUvarint(hb, uint64(e.n))
	b := e.body[headRoom-len(hb):]
	copy(b, hb)
	if n := len(e.body); !e.grew && n <= 1<<20 {
		e.size = n + n/4 // a rare huge entry (LOADCHUNK, RESTORE) sets no size
	}
	e.body, e.prev, e.n, e.level, e.grew = nil, nil, 0, 0, false
	return b
}

func bit(v bool, n uint) uint64 {
	if v {
		return 1 << n
	}
	return 0
}

func flagsOf(c *Cmd) uint64 {
	return bit(c.Multi, 0) | bit(c.NX, 1) | bit(c.NoCreate, 2) | bit(c.NonScaling, 3) | bit(c.Flag, 4)
}

func equalLists(a, b [][]byte) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !bytes.Equal(a[i], b[i]) {
			return false
		}
	}
	return true
}

// changed is the set of c's fields that differ from p's.
func changed(p, c *Cmd) uint64 {
	var m uint64
	set := func(differs bool, f uint64) {
		if differs {
			m |= f
		}
	}
	set(c.DB != p.DB, fDB)
	set(c.Now != p.Now, fNow)
	set(!bytes.Equal(c.Key, p.Key), fKey)
	set(!bytes.Equal(c.Dst, p.Dst), fDst)
	set(!equalLists(c.Keys, p.Keys), fKeys)
	set(!equalLists(c.Items, p.Items), fItems)
	set(!bytes.Equal(c.Data, p.Data), fData)
	set(c.Iter != p.Iter, fIter)
	set(c.Count != p.Count, fCount)
	set(flagsOf(c) != flagsOf(p), fFlags)
	set(math.Float64bits(c.ErrorRate) != math.Float64bits(p.ErrorRate), fErrorRate)
	set(c.Capacity != p.Capacity, fCapacity)
	set(c.Expansion != p.Expansion, fExpansion)
	set(c.BucketSize != p.BucketSize, fBucketSize)
	set(c.MaxIterations != p.MaxIterations, fMaxIterations)
	set(c.MaxExpansions != p.MaxExpansions, fMaxExpansions)
	set(c.MaxBytes != p.MaxBytes, fMaxBytes)
	set(c.Field != p.Field, fField)
	return m
}

// appendCmd writes c as version 2: its op, the set of fields that differ
// from p, and those fields.
func appendCmd(b []byte, p, c *Cmd) []byte {
	m := changed(p, c)
	b = append(b, byte(c.Op))
	b = binary.AppendUvarint(b, m)
	return appendFields(b, c, m)
}

// appendFields writes the fields in m, in field order. With every field,
// after the op and without the set, it is version 1's layout.
func appendFields(b []byte, c *Cmd, m uint64) []byte {
	if m&fDB != 0 {
		b = append(b, c.DB)
	}
	if m&fNow != 0 {
		b = binary.AppendVarint(b, c.Now)
	}
	if m&fKey != 0 {
		b = wire.AppendBytes(b, c.Key)
	}
	if m&fDst != 0 {
		b = wire.AppendBytes(b, c.Dst)
	}
	if m&fKeys != 0 {
		b = wire.AppendList(b, c.Keys)
	}
	if m&fItems != 0 {
		b = wire.AppendList(b, c.Items)
	}
	if m&fData != 0 {
		b = wire.AppendBytes(b, c.Data)
	}
	if m&fIter != 0 {
		b = binary.AppendVarint(b, c.Iter)
	}
	if m&fCount != 0 {
		b = binary.AppendVarint(b, c.Count)
	}
	if m&fFlags != 0 {
		b = binary.AppendUvarint(b, flagsOf(c))
	}
	if m&fErrorRate != 0 {
		b = binary.LittleEndian.AppendUint64(b, math.Float64bits(c.ErrorRate))
	}
	if m&fCapacity != 0 {
		b = binary.AppendUvarint(b, c.Capacity)
	}
	if m&fExpansion != 0 {
		b = binary.AppendUvarint(b, uint64(c.Expansion))
	}
	if m&fBucketSize != 0 {
		b = binary.AppendUvarint(b, uint64(c.BucketSize))
	}
	if m&fMaxIterations != 0 {
		b = binary.AppendUvarint(b, uint64(c.MaxIterations))
	}
	if m&fMaxExpansions != 0 {
		b = binary.AppendUvarint(b, uint64(c.MaxExpansions))
	}
	if m&fMaxBytes != 0 {
		b = binary.AppendUvarint(b, c.MaxBytes)
	}
	if m&fField != 0 {
		b = append(b, c.Field)
	}
	return b
}

// reader adds the command fields to wire.Reader. With lists set, the
// lists it reads are appended there instead of allocated one by one.
type reader struct {
	wire.Reader
	lists *[][]byte
}

// list reads a list of items or keys: an empty element is present, not nil.
// A count beyond a command's limit (MaxItems) is corrupt, and memory grows
// with the elements that decode, never with the count an entry claims: a
// damaged or hostile entry costs at most the element headers of its own
// bytes (24 bytes an element, in slabs each at most twice the one before:
// under 100 bytes per byte at worst, for empty elements).
func (r *reader) list() [][]byte {
	n := r.Count()
	if n == 0 {
		return nil
	}
	if n > MaxItems {
		r.Bad = true
		return nil
	}
	var l [][]byte
	if r.lists != nil {
		l = *r.lists
	}
	from := len(l)
	if need := min(n, listStep); cap(l)-len(l) < need {
		// A new slab, not a grown one: the lists before keep the old one
		// and nothing is copied. Growing copied every list of the entry
		// so far at each step (growslice and memmove were 8% of a bulk
		// load's CPU, BF.MADD of 1,000).
		l = make([][]byte, 0, max(need, 2*cap(l)))
		from = 0
	}
	for i := 0; i < n && !r.Bad; i++ {
		v := r.Bytes()
		if v == nil {
			v = []byte{}
		}
		l = append(l, v)
	}
	if r.lists != nil {
		*r.lists = l
	}
	return l[from:len(l):len(l)]
}

// listStep is the most list elements decoded ahead of their bytes.
const listStep = 4096

func (r *reader) small(max uint64) uint64 {
	v := r.Uvarint()
	if v > max {
		r.Bad = true
	}
	return v
}

// DecodeBatch decodes an entry written by EncodeBatch, in either version.
// The commands alias b, and in version 2 each other's unchanged fields.
func DecodeBatch(b []byte) ([]*Cmd, error) { return decode(b, nil, nil, nil) }

// Decoder decodes entries into memory it reuses from one entry to the
// next: the state machine decodes every entry on the write path, and
// allocating each entry's commands and lists anew was a fifth of its work.
// What Decode returns is valid until the next call. The zero value is
// ready.
type Decoder struct {
	cmds  []*Cmd
	slab  []Cmd
	lists [][]byte
}

// keepSlab bounds the commands (and list elements) a Decoder keeps
// between entries: a rare huge entry does not pin its memory.
const keepSlab = 8192

// Decode is DecodeBatch into the decoder's memory.
func (d *Decoder) Decode(b []byte) ([]*Cmd, error) {
	if cap(d.lists) > keepSlab {
		d.lists = nil
	}
	if cap(d.cmds) > keepSlab {
		d.cmds = nil
	}
	d.lists = d.lists[:0]
	cmds, err := decode(b, d.cmds[:0], d.slab, &d.lists)
	if err != nil {
		return nil, err
	}
	d.cmds = cmds
	if len(cmds) > len(d.slab) && len(cmds) <= keepSlab {
		d.slab = make([]Cmd, len(cmds)) // for the next entry of this size
	}
	return cmds, nil
}

// decode appends b's commands to cmds, taking them from slab while it
// lasts and from new slabs after, and their lists from lists if not nil.
func decode(b []byte, cmds []*Cmd, slab []Cmd, lists *[][]byte) ([]*Cmd, error) {
	if len(b) == 0 {
		return nil, ErrCorrupt
	}
	least := uint64(minCmdBytesV2)
	r := &reader{Reader: wire.Reader{B: b[1:]}, lists: lists}
	switch b[0] {
	case version1:
		least = minCmdBytesV1
	case version2:
	case version3:
		if lv := r.Uvarint(); r.Bad {
			return nil, ErrCorrupt
		} else if lv > Level {
			return nil, &LevelError{Need: lv}
		}
	default:
		return nil, ErrVersion
	}
	n := r.Uvarint()
	if r.Bad || n > maxBatch || n > uint64(len(r.B))/least {
		return nil, ErrCorrupt
	}
	cmds = slices.Grow(cmds, int(min(n, 1024)))
	// New slabs grow with what decoded, so a corrupt count costs little.
	prev := Cmd{}
	for i := uint64(0); i < n && !r.Bad; i++ {
		if len(slab) == 0 {
			slab = make([]Cmd, min(n-i, 1024))
		}
		c := &slab[0]
		slab = slab[1:]
		if b[0] == version1 {
			*c = Cmd{}
			r.cmdV1(c)
		} else {
			*c = prev
			r.cmdV2(c)
			prev = *c
		}
		cmds = append(cmds, c)
	}
	if r.Bad || len(r.B) != 0 {
		return nil, ErrCorrupt
	}
	return cmds, nil
}

func (r *reader) flags(c *Cmd) {
	f := r.Uvarint()
	c.Multi, c.NX, c.NoCreate, c.NonScaling, c.Flag = f&1 != 0, f&2 != 0, f&4 != 0, f&8 != 0, f&16 != 0
}

// cmdV1 reads a command written by version 1: every field, in field
// order.
func (r *reader) cmdV1(c *Cmd) {
	c.Op = Op(r.Byte())
	r.fields(c, fAll)
}

// cmdV2 reads a command over a copy of the one before it.
func (r *reader) cmdV2(c *Cmd) {
	c.Op = Op(r.Byte())
	m := r.Uvarint()
	if m&^fAll != 0 {
		r.Bad = true
		return
	}
	r.fields(c, m)
}

// fields reads the fields in m, in field order.
func (r *reader) fields(c *Cmd, m uint64) {
	if m&fDB != 0 {
		c.DB = r.Byte()
	}
	if m&fNow != 0 {
		c.Now = r.Varint()
	}
	if m&fKey != 0 {
		c.Key = r.Bytes()
	}
	if m&fDst != 0 {
		c.Dst = r.Bytes()
	}
	if m&fKeys != 0 {
		c.Keys = r.list()
	}
	if m&fItems != 0 {
		c.Items = r.list()
	}
	if m&fData != 0 {
		c.Data = r.Bytes()
	}
	if m&fIter != 0 {
		c.Iter = r.Varint()
	}
	if m&fCount != 0 {
		c.Count = r.Varint()
	}
	if m&fFlags != 0 {
		r.flags(c)
	}
	if m&fErrorRate != 0 {
		c.ErrorRate = math.Float64frombits(r.U64())
	}
	if m&fCapacity != 0 {
		c.Capacity = r.Uvarint()
	}
	if m&fExpansion != 0 {
		c.Expansion = uint32(r.small(math.MaxUint32))
	}
	if m&fBucketSize != 0 {
		c.BucketSize = uint16(r.small(math.MaxUint16))
	}
	if m&fMaxIterations != 0 {
		c.MaxIterations = uint16(r.small(math.MaxUint16))
	}
	if m&fMaxExpansions != 0 {
		c.MaxExpansions = uint32(r.small(math.MaxUint32))
	}
	if m&fMaxBytes != 0 {
		c.MaxBytes = r.Uvarint()
	}
	if m&fField != 0 {
		c.Field = r.Byte()
	}
}
