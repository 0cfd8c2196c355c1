package scalable

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/bits"
	"sync/atomic"

	"github.com/bfserver/bfserver/engine"
)

// Chain option bits, stored in the dump header.
const (
	OptNoRound    = 1
	OptEntsIsBits = 2
	OptForce64    = 4
	OptNoScaling  = 8
	optAll        = OptNoRound | OptEntsIsBits | OptForce64 | OptNoScaling
)

// Sizes RedisBloom reports for its structs (sizeof SBChain, SBLink on 64-bit).
const (
	chainStructSize = 32
	linkStructSize  = 64
)

// tightening is ERROR_TIGHTENING_RATIO: each link halves the error.
const tightening = 0.5

// Link is one Bloom filter of a chain plus the count of items it took.
type Link struct {
	engine.Bloom
	size atomic.Uint64
}

// Size is the number of items added to this link.
func (l *Link) Size() uint64 { return l.size.Load() }

// Chain is a scalable Bloom filter (RedisBloom's SBChain). One writer and
// many readers may use it at once: the link list is swapped atomically when
// a link is added, and engine.Bloom is safe for concurrent Test and Add.
//
// Memory: most chains never grow, and a server may hold hundreds of
// thousands of small ones (a filter per tenant), so the first link lives in
// the chain itself and a one-link chain is one allocation besides its bits.
type Chain struct {
	// links lists the links once the chain has grown past its first;
	// until then it is nil, and LinksIn lists first in its caller's
	// buffer: a field for that list would cost each small chain 8 bytes,
	// and the keyspace entry that holds it a size class (docs/STORAGE.md).
	links   atomic.Pointer[[]*Link]
	first   Link
	Options uint32
	Growth  uint32
}

func (c *Chain) initIn(p engine.BloomParams, options, growth uint32, buf []uint64) {
	c.Options, c.Growth = options, growth
	c.first.InitIn(p, buf)
}

// ChainBytes is the memory a new chain's first link needs, for checking a cap
// before NewChain allocates.
func ChainBytes(capacity uint64, errRate float64, nonScaling bool) (uint64, bool) {
	if !nonScaling {
		errRate *= tightening
	}
	p, ok := engine.SizeBloom(capacity, errRate)
	return p.Bytes, ok
}

// NewChain creates a chain as BF.RESERVE does. maxBytes caps its first link.
func NewChain(capacity uint64, errRate float64, growth uint32, nonScaling bool, maxBytes uint64) (*Chain, error) {
	c := new(Chain)
	if err := c.Init(capacity, errRate, growth, nonScaling, maxBytes); err != nil {
		return nil, err
	}
	return c, nil
}

// Init is NewChain in place, for a chain embedded in a larger struct (the
// keyspace's entry for a new filter: one allocation instead of two). c
// must be zero, and must not be copied once initialised.
func (c *Chain) Init(capacity uint64, errRate float64, growth uint32, nonScaling bool, maxBytes uint64) error {
	return c.InitIn(capacity, errRate, growth, nonScaling, maxBytes, nil)
}

// InitIn is Init with the first link's bit array in buf when it is long
// enough (engine.Bloom.InitIn).
func (c *Chain) InitIn(capacity uint64, errRate float64, growth uint32, nonScaling bool, maxBytes uint64, buf []uint64) error {
	options := uint32(OptNoRound | OptForce64)
	if nonScaling {
		options |= OptNoScaling
	} else {
		errRate *= tightening
	}
	p, ok := engine.SizeBloom(capacity, errRate)
	if !ok {
		return ErrGrow
	}
	if p.Bytes > maxBytes {
		return ErrTooLarge
	}
	c.initIn(p, options, growth, buf)
	return nil
}

// Links returns the current links, oldest first. The slice is never
// mutated. For a chain of one link it is allocated: what runs per item or
// per filter uses LinksIn.
func (c *Chain) Links() []*Link {
	var one [1]*Link
	return c.LinksIn(&one)
}

// LinksIn is Links without an allocation: a chain of one link is listed in
// buf, which the caller keeps on its stack. (Links itself inlines and
// then allocates nothing in a plain build, but not under -race, where
// resp's TestReadPathAllocations and keyspace's TestSmallFilterLayout
// count it: hence the caller's buffer.)
func (c *Chain) LinksIn(buf *[1]*Link) []*Link {
	if p := c.links.Load(); p != nil {
		return *p
	}
	buf[0] = &c.first
	return buf[:]
}

// Size is the number of items the chain took (BF.CARD).
// It is the sum of the link sizes; a loaded header must agree.
func (c *Chain) Size() uint64 {
	var n uint64
	var one [1]*Link
	for _, l := range c.LinksIn(&one) {
		n += l.Size()
	}
	return n
}

// NonScaling reports whether the chain refuses to grow.
func (c *Chain) NonScaling() bool { return c.Options&OptNoScaling != 0 }

func (c *Chain) hash(item []byte) engine.Hash {
	if c.Options&OptForce64 != 0 {
		return engine.BloomHash64(item)
	}
	return engine.BloomHash32(item)
}

// Prefetch starts loading the bits the item would touch in every link (see
// engine.Bloom.Prefetch): in the newest all of them, which an add sets; in
// the older ones the first two (PrefetchFirstBits), which is what an add's
// test of them reads for an absent item (inAny), and most of what a
// lookup (BF.MEXISTS) reads in all but the one link an item is in. It
// changes nothing.
func (c *Chain) Prefetch(item []byte) { c.prefetchHash(c.hash(item)) }

// prefetchHash is Prefetch of an item already hashed.
func (c *Chain) prefetchHash(h engine.Hash) { c.prefetchFrom(h, 0) }

// prefetchFrom is prefetchHash without the links before from.
func (c *Chain) prefetchFrom(h engine.Hash, from int) {
	var one [1]*Link
	links := c.LinksIn(&one)
	last := len(links) - 1
	prefetchFirstBits(links[min(from, last):last], h)
	links[last].Prefetch(h)
}

// inAny reports whether any of links may hold the item: the test of a
// chain's older links, by an add (where the item is almost always absent)
// and by a lookup the newest link did not answer. Each link's first two
// bits are read, those of up to 64 links before any is looked at
// (engine.Bloom.FirstBits); only the links where both are set, about one
// in four of full links, are tested further. Tested one link after
// another, an absent item cost each link a cache miss waited for alone
// and a mispredicted branch at its first clear bit.
func inAny(links []*Link, h engine.Hash) bool {
	for len(links) > 0 {
		ls := links[:min(len(links), 64)]
		links = links[len(ls):]
		var pass uint64
		for i, l := range ls {
			pass |= l.FirstBits(h) << i
		}
		for pass != 0 {
			i := bits.TrailingZeros64(pass)
			if ls[i].TestAfterFirst(h) {
				return true
			}
			pass &= pass - 1
		}
	}
	return false
}

// Test reports whether the item may be in the chain: in the newest link,
// which holds about half its items, or else in any older one, all tested
// together (inAny). A lookup of an absent item, a cache guard's common
// case, tests every link.
func (c *Chain) Test(item []byte) bool {
	h := c.hash(item)
	var one [1]*Link
	links := c.LinksIn(&one)
	last := len(links) - 1
	return links[last].Test(h) || inAny(links[:last], h)
}

// Add adds the item (SBChain_Add): false if it was already present; a new
// link with capacity×growth and half the error when the newest is full.
// maxBytes caps the chain's total bit-array bytes after growth.
//
// The newest link is tested and set in one pass when it has room: setting
// bits of an item it already holds flips none, which is the same answer as
// testing first, so the result and the bits are RedisBloom's.
func (c *Chain) Add(item []byte, maxBytes uint64) (bool, error) {
	return c.addHashed(c.hash(item), maxBytes)
}

// addHashed is Add of an item already hashed.
func (c *Chain) addHashed(h engine.Hash, maxBytes uint64) (bool, error) {
	var one [1]*Link
	links := c.LinksIn(&one)
	if inAny(links[:len(links)-1], h) {
		return false, nil
	}
	return c.addNewest(links, h, maxBytes)
}

// addNewest is addHashed of an item found in none of the older links.
func (c *Chain) addNewest(links []*Link, h engine.Hash, maxBytes uint64) (bool, error) {
	cur := links[len(links)-1]
	if cur.Size() < cur.Entries {
		if !cur.Add(h) {
			return false, nil
		}
		cur.size.Add(1)
		return true, nil
	}
	// The newest link is full: the item goes to a new link unless present.
	if cur.Test(h) {
		return false, nil
	}
	if c.NonScaling() {
		return false, ErrNonScalingFull
	}
	p, ok := engine.SizeBloom(cur.Entries*uint64(c.Growth), cur.Error*tightening)
	if !ok || p.Bytes >= Unallocatable || c.Bytes() >= Unallocatable-p.Bytes {
		return false, ErrGrow // RedisBloom's bloom_init fails, or its calloc would
	}
	if p.Bytes > maxBytes || c.Bytes() > maxBytes-p.Bytes {
		return false, ErrTooLarge
	}
	l := new(Link)
	l.Init(p)
	next := append(append(make([]*Link, 0, len(links)+1), links...), l)
	c.links.Store(&next)
	cur = next[len(next)-1]
	if cur.Add(h) {
		cur.size.Add(1)
		return true, nil
	}
	return false, nil
}

// Capacity is the sum of link capacities (BF.INFO Capacity).
func (c *Chain) Capacity() uint64 {
	var n uint64
	var one [1]*Link
	for _, l := range c.LinksIn(&one) {
		n += l.Entries
	}
	return n
}

// Bytes is the total size of the bit arrays.
func (c *Chain) Bytes() uint64 {
	var n uint64
	var one [1]*Link
	for _, l := range c.LinksIn(&one) {
		n += l.BloomParams.Bytes
	}
	return n
}

// MemUsage is BF.INFO's Size: RedisBloom's BFMemUsage on 64-bit.
func (c *Chain) MemUsage() uint64 {
	var one [1]*Link
	links := c.LinksIn(&one)
	return chainStructSize + linkStructSize*uint64(len(links)) + c.Bytes()
}

// Debug renders BF.DEBUG's lines.
func (c *Chain) Debug() []string {
	var one [1]*Link
	links := c.LinksIn(&one)
	out := make([]string, 0, len(links)+1)
	out = append(out, fmt.Sprintf("size:%d", c.Size()))
	width := 32
	if c.Options&OptForce64 != 0 {
		width = 64
	}
	for _, l := range links {
		bits := l.Bits
		if bits == 0 {
			bits = 1 << l.N2
		}
		out = append(out, fmt.Sprintf("bytes:%d bits:%d hashes:%d hashwidth:%d capacity:%d size:%d ratio:%s",
			l.BloomParams.Bytes, bits, l.Hashes, width, l.Entries, l.Size(), FormatG(l.Error)))
	}
	return out
}

// FormatG formats like C's printf %g (Go's %.6g matches it, exponent digits
// included; glibc spells NaN and infinity "nan", "-nan", "inf", "-inf").
func FormatG(f float64) string {
	switch {
	case math.IsNaN(f) && math.Signbit(f):
		return "-nan"
	case math.IsNaN(f):
		return "nan"
	case math.IsInf(f, 1):
		return "inf"
	case math.IsInf(f, -1):
		return "-inf"
	}
	return fmt.Sprintf("%.6g", f)
}

const (
	chainHeaderSize = 20
	linkHeaderSize  = 53
)

// Header encodes the SCANDUMP header (SBChain_GetEncodedHeader).
func (c *Chain) Header() []byte {
	var one [1]*Link
	links := c.LinksIn(&one)
	buf := make([]byte, chainHeaderSize+linkHeaderSize*len(links))
	binary.LittleEndian.PutUint64(buf[0:], c.Size())
	binary.LittleEndian.PutUint32(buf[8:], uint32(len(links)))
	binary.LittleEndian.PutUint32(buf[12:], c.Options)
	binary.LittleEndian.PutUint32(buf[16:], c.Growth)
	for i, l := range links {
		b := buf[chainHeaderSize+linkHeaderSize*i:]
		binary.LittleEndian.PutUint64(b[0:], l.BloomParams.Bytes)
		binary.LittleEndian.PutUint64(b[8:], l.Bits)
		binary.LittleEndian.PutUint64(b[16:], l.Size())
		binary.LittleEndian.PutUint64(b[24:], math.Float64bits(l.Error))
		binary.LittleEndian.PutUint64(b[32:], math.Float64bits(l.BPE))
		binary.LittleEndian.PutUint32(b[40:], l.Hashes)
		binary.LittleEndian.PutUint64(b[44:], l.Entries)
		b[52] = l.N2
	}
	return buf
}

// linkAt finds the link holding 1-based byte position pos (getLinkPos).
func (c *Chain) linkAt(pos int64) (*Link, uint64) {
	if pos < 1 {
		return nil, 0
	}
	off := uint64(pos - 1)
	var one [1]*Link
	for _, l := range c.LinksIn(&one) {
		if off < l.BloomParams.Bytes {
			return l, off
		}
		off -= l.BloomParams.Bytes
	}
	return nil, 0
}

// Chunk returns the dump chunk at 1-based position pos and the next position;
// next is 0 and data empty past the end (SBChain_GetEncodedChunk).
func (c *Chain) Chunk(pos int64) (next int64, data []byte) {
	l, off := c.linkAt(pos)
	if l == nil {
		return 0, nil
	}
	n := l.BloomParams.Bytes - off
	if n > MaxChunk {
		n = MaxChunk
	}
	data = make([]byte, n)
	l.ReadBytes(data, off)
	return pos + int64(n), data
}

// decodeLink reads link i of a dump header whose length was checked: its
// parameters and the count of items it took.
func decodeLink(buf []byte, i int) (engine.BloomParams, uint64) {
	b := buf[chainHeaderSize+linkHeaderSize*i:]
	return engine.BloomParams{
		Bytes:   binary.LittleEndian.Uint64(b[0:]),
		Bits:    binary.LittleEndian.Uint64(b[8:]),
		Error:   math.Float64frombits(binary.LittleEndian.Uint64(b[24:])),
		BPE:     math.Float64frombits(binary.LittleEndian.Uint64(b[32:])),
		Hashes:  binary.LittleEndian.Uint32(b[40:]),
		Entries: binary.LittleEndian.Uint64(b[44:]),
		N2:      b[52],
	}, binary.LittleEndian.Uint64(b[16:])
}

// ChainHeaderBytes applies every check SB_NewChainFromHeader makes to a
// dump header (its length against the link count, each link's
// bloom_validate_integrity, then the chain's options and that the links'
// counts sum to the chain's; bit arrays of Unallocatable bytes or more,
// whose calloc fails there, are bad data too) and returns the memory the
// chain would take: its bit arrays plus each link's bookkeeping, so that a
// header of millions of tiny links cannot pass a cap either. It allocates
// nothing: a header is judged by RedisBloom's rules first, and only a
// valid one meets the caller's cap.
func ChainHeaderBytes(buf []byte) (uint64, error) {
	if len(buf) < chainHeaderSize {
		return 0, ErrBadHeader
	}
	size := binary.LittleEndian.Uint64(buf[0:])
	n := binary.LittleEndian.Uint32(buf[8:])
	options := binary.LittleEndian.Uint32(buf[12:])
	if n == 0 || uint64(len(buf)) != chainHeaderSize+linkHeaderSize*uint64(n) {
		return 0, ErrBadHeader
	}
	var total, bits uint64
	for i := 0; i < int(n); i++ {
		p, items := decodeLink(buf, i)
		if !p.Validate() || items > math.MaxUint64-total {
			return 0, ErrBadHeader
		}
		total += items
		// Validate bounds Bytes by MaxUint64/8: the sum stays below 2^62.
		bits = min(bits+p.Bytes, Unallocatable)
	}
	if options&^optAll != 0 || total != size || bits >= Unallocatable {
		return 0, ErrBadHeader
	}
	return bits + linkStructSize*uint64(n), nil
}

// ParseChainHeader decodes and validates a dump header
// (SB_NewChainFromHeader) and allocates the chain. A valid header whose
// chain would take more than maxBytes (see ChainHeaderBytes) is refused
// with ErrTooLarge before its bits are allocated.
func ParseChainHeader(buf []byte, maxBytes uint64) (*Chain, error) {
	chain := new(Chain)
	if err := ParseChainHeaderIn(buf, maxBytes, chain, nil); err != nil {
		return nil, err
	}
	return chain, nil
}

// FirstLinkBytes is the size of the first link's bit array that a dump
// header says, or 0 when the header is too short to say: for a caller
// choosing room for it before ParseChainHeaderIn checks the header.
func FirstLinkBytes(buf []byte) uint64 {
	if len(buf) < chainHeaderSize+linkHeaderSize {
		return 0
	}
	p, _ := decodeLink(buf, 0)
	return p.Bytes
}

// ParseChainHeaderIn is ParseChainHeader into chain, a zero Chain the
// caller allocated (a keyspace entry), with the first link's bits in bits
// when it is long enough (InitIn): a small filter loaded from the image
// is then laid out as one created by BF.ADD. Nothing is set on an error.
func ParseChainHeaderIn(buf []byte, maxBytes uint64, chain *Chain, bits []uint64) error {
	need, err := ChainHeaderBytes(buf)
	if err != nil {
		return err
	}
	if need > maxBytes {
		return ErrTooLarge
	}
	n := int(binary.LittleEndian.Uint32(buf[8:]))
	options, growth := binary.LittleEndian.Uint32(buf[12:]), binary.LittleEndian.Uint32(buf[16:])
	p, items := decodeLink(buf, 0)
	chain.initIn(p, options, growth, bits)
	chain.first.size.Store(items)
	if n > 1 {
		links := make([]*Link, n)
		links[0] = &chain.first
		for i := 1; i < n; i++ {
			p, items := decodeLink(buf, i)
			links[i] = new(Link)
			links[i].Init(p)
			links[i].size.Store(items)
		}
		chain.links.Store(&links)
	}
	return nil
}

// LoadChunk writes a dump chunk that SCANDUMP returned with iterator pos
// (SBChain_LoadEncodedChunk): the chunk starts at pos − len(data).
func (c *Chain) LoadChunk(pos int64, data []byte) error {
	return c.LoadPart(pos, data, int64(len(data)))
}

// LoadPart writes data, as LoadChunk(pos, data) would, if LoadChunk would
// accept a chunk of rest bytes (at least len(data)) starting where data
// does: the first piece of a chunk split for the log is refused exactly
// when the chunk would be (command.BFLoadPart).
func (c *Chain) LoadPart(pos int64, data []byte, rest int64) error {
	if pos <= 0 || uint64(pos) < uint64(len(data)) || rest < int64(len(data)) {
		return ErrBadChunk
	}
	l, off := c.linkAt(pos - int64(len(data)))
	if l == nil {
		return ErrNoLink
	}
	if uint64(rest) > l.BloomParams.Bytes-off {
		return ErrChunkTooBig
	}
	l.WriteBytes(data, off)
	return nil
}
