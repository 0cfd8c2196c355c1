package scalable

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/bfserver/bfserver/engine"
	"github.com/bfserver/bfserver/rdb"
)

// craftedCap bounds what one crafted filter may take in these tests.
const craftedCap = 1 << 20

func pick[T any](r *rand.Rand, vs ...T) T { return vs[r.IntN(len(vs))] }

// randCuckooFields draws the seven fields of a Cuckoo header: mostly in
// the ranges a decoder takes, one in five times anywhere near them.
func randCuckooFields(r *rand.Rand) (items, nb, dels, nf uint64, bs, mi, exp uint16) {
	items = pick(r, 0, 1, 7, uint64(r.IntN(1000)), math.MaxUint64)
	dels = pick(r, 0, 0, 1, uint64(r.IntN(100)), math.MaxUint64)
	exp = pick(r, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 12, 16, 17, uint16(r.IntN(40)), 255, 1000, 32767, 32768)
	nb = pick(r, uint64(1)<<r.IntN(9), uint64(1)<<r.IntN(4))
	nf = pick(r, 1, 1, 1, 2, 3, uint64(1+r.IntN(6)))
	if exp == 0 {
		nf = 1
	}
	bs = pick(r, 1, 2, 3, 4, uint16(1+r.IntN(10)), 255)
	mi = pick(r, 1, 2, 20, 500, uint16(1+r.IntN(50)), 65535)
	if r.IntN(5) == 0 {
		nb = pick(r, nb, 3, 6, 0, 1<<20)
		nf = pick(r, nf, 0, 65537, math.MaxUint64)
		bs = pick(r, bs, 0, 256)
		mi = pick(r, mi, 0)
		exp = pick(r, exp, 32769, 65535, uint16(r.Uint32()))
	}
	return
}

// cuckooRDBOf is the CFRdbSave encoding of the same fields, with
// sub-filters of numBuckets × expansion^i buckets filled by fill (junk
// fingerprints are no acknowledged add: they may be anything).
func cuckooRDBOf(items, nb, dels, nf uint64, bs, mi, exp uint16, fill func([]byte)) []byte {
	var b []byte
	for _, v := range []uint64{nf, nb, items, dels, uint64(bs), uint64(mi), uint64(exp)} {
		b = rdb.AppendUInt(b, v)
	}
	n := nb
	for i := uint64(0); i < min(nf, 8); i++ {
		if n*uint64(bs) > craftedCap {
			break
		}
		b = rdb.AppendUInt(b, n)
		data := make([]byte, n*uint64(bs))
		fill(data)
		b = rdb.AppendString(b, data)
		n *= max(uint64(exp), 1)
	}
	return b
}

// checkCuckooNoLoss adds n items to a decoded filter; every insert it
// acknowledged must be found, after the adds, after deleting items whose
// fingerprint no other item has (a delete that may take another item's
// fingerprint is RedisBloom's documented exception) and after CF.COMPACT.
func checkCuckooNoLoss(t *testing.T, cf *Cuckoo, n int, what string) {
	t.Helper()
	acked := map[string]bool{}
	fps := map[uint8]int{}
	for i := range n {
		it := fmt.Sprintf("item%d", i)
		fps[engine.NewLookup(engine.CuckooHash([]byte(it))).FP]++
		if cf.Insert([]byte(it), i%3 == 0, craftedCap) == Inserted {
			acked[it] = true
		}
	}
	check := func(stage string) {
		t.Helper()
		missing := 0
		for it := range acked {
			if !cf.Exists([]byte(it)) {
				missing++
			}
		}
		if missing > 0 {
			t.Fatalf("%s: %s: %d of %d acknowledged adds missing (%s)", what, stage, missing, len(acked), cf.Debug())
		}
	}
	check("after the adds")
	deleted := 0
	for it := range acked {
		if deleted < len(acked)/4 && fps[engine.NewLookup(engine.CuckooHash([]byte(it))).FP] == 1 {
			if cf.Delete([]byte(it)) {
				delete(acked, it)
				deleted++
			}
		}
	}
	check("after deletes (and their compactions)")
	cf.Compact()
	check("after CF.COMPACT")
}

// checkChainNoLoss adds n items to a decoded chain: every add answered
// without an error (1, or 0 for "may exist") must be found.
func checkChainNoLoss(t *testing.T, ch *Chain, n int, what string) {
	t.Helper()
	var acked []string
	for i := range n {
		it := fmt.Sprintf("item%d", i)
		if _, err := ch.Add([]byte(it), craftedCap); err == nil {
			acked = append(acked, it)
		}
	}
	for _, it := range acked {
		if !ch.Test([]byte(it)) {
			t.Fatalf("%s: acknowledged add %q missing (%v)", what, it, ch.Debug())
		}
	}
}

// TestCraftedCuckooHeadersLoseNothing: for any Cuckoo header the decoders
// accept, by LOADCHUNK or by RESTORE, every add the filter acknowledges is
// found. Expansions that are not powers of two (3: sub-filters of 3·2^k
// buckets) lost most of them, as they do in RedisBloom.
func TestCraftedCuckooHeadersLoseNothing(t *testing.T) {
	r := rand.New(rand.NewPCG(24, 2))
	accepted := map[string]int{}
	for i := range 250 {
		items, nb, dels, nf, bs, mi, exp := randCuckooFields(r)
		what := fmt.Sprintf("#%d items %d buckets %d deletes %d filters %d bucket size %d max iterations %d expansion %d",
			i, items, nb, dels, nf, bs, mi, exp)
		if cf, err := ParseCuckooHeader(cfHeader(items, nb, dels, nf, bs, mi, exp), craftedCap); err == nil {
			accepted["LOADCHUNK"]++
			checkCuckooNoLoss(t, cf, 100+r.IntN(100), "LOADCHUNK "+what)
		}
		junk := func(b []byte) {
			for j := range b {
				if r.IntN(4) == 0 {
					b[j] = byte(r.Uint32())
				}
			}
		}
		body := cuckooRDBOf(items, nb, dels, nf, bs, mi, exp, junk)
		if cf, err := CuckooFromRDB(rdb.NewReader(body, craftedCap), craftedCap); err == nil {
			accepted["RESTORE"]++
			checkCuckooNoLoss(t, cf, 100+r.IntN(100), "RESTORE "+what)
		}
	}
	// The reported header, both ways: 2,000 adds.
	h := cfHeader(0, 2, 0, 1, 1, 500, 3)
	cf, err := ParseCuckooHeader(h, craftedCap)
	if err != nil {
		t.Fatal(err)
	}
	checkCuckooNoLoss(t, cf, 2000, "LOADCHUNK expansion 3")
	cf, err = CuckooFromRDB(rdb.NewReader(cuckooRDBOf(0, 2, 0, 1, 1, 500, 3, func([]byte) {}), craftedCap), craftedCap)
	if err != nil {
		t.Fatal(err)
	}
	checkCuckooNoLoss(t, cf, 2000, "RESTORE expansion 3")
	if accepted["LOADCHUNK"] < 120 || accepted["RESTORE"] < 120 {
		t.Fatalf("too few headers accepted to say much: %v", accepted)
	}
	t.Logf("accepted: %v", accepted)
}

// randLink draws one link's fields: a consistent sizing, then some fields
// changed or replaced.
func randLink(r *rand.Rand) (p engine.BloomParams, size uint64) {
	entries := pick(r, 1, 10, uint64(1+r.IntN(300)), 0, 1<<40)
	errRate := pick(r, 0.01, 0.5, 0.9, 1e-9, r.Float64(), math.NaN(), 0, 1)
	p, ok := engine.SizeBloom(max(entries, 1), errRate)
	if !ok || p.Bytes > 4096 {
		p, _ = engine.SizeBloom(10, 0.01)
	}
	p.Entries = entries
	switch r.IntN(8) {
	case 0:
		p.Hashes += uint32(r.IntN(3)) - 1
	case 1:
		p.BPE, p.Hashes = 0, 0
	case 2:
		p.N2 = uint8(r.IntN(12))
	case 3:
		p.Bytes = 8 * uint64(1+r.IntN(16))
		p.Bits = 8 * p.Bytes
	case 4:
		p.Error = pick(r, math.NaN(), math.Inf(1), -0.5, 2)
	}
	size = pick(r, 0, 1, uint64(r.IntN(20)), p.Entries, p.Entries+1)
	return p, size
}

// chainFields is a drawn chain: options, growth and links.
type chainFields struct {
	opts, growth uint32
	links        []engine.BloomParams
	sizes        []uint64
}

func randChain(r *rand.Rand) chainFields {
	c := chainFields{
		opts:   pick[uint32](r, 5, 13, 1, 0, 15, uint32(r.IntN(16)), 16),
		growth: pick[uint32](r, 2, 1, 0, 3, 4, 7, 1000, math.MaxUint32),
	}
	for range pick(r, 1, 1, 1, 2, 3, 5) {
		p, s := randLink(r)
		c.links = append(c.links, p)
		c.sizes = append(c.sizes, s)
	}
	return c
}

func (c chainFields) header() []byte {
	var total uint64
	for _, s := range c.sizes {
		total += s
	}
	b := make([]byte, chainHeaderSize, chainHeaderSize+linkHeaderSize*len(c.links))
	binary.LittleEndian.PutUint64(b[0:], total)
	binary.LittleEndian.PutUint32(b[8:], uint32(len(c.links)))
	binary.LittleEndian.PutUint32(b[12:], c.opts)
	binary.LittleEndian.PutUint32(b[16:], c.growth)
	for i, p := range c.links {
		var l [linkHeaderSize]byte
		binary.LittleEndian.PutUint64(l[0:], p.Bytes)
		binary.LittleEndian.PutUint64(l[8:], p.Bits)
		binary.LittleEndian.PutUint64(l[16:], c.sizes[i])
		binary.LittleEndian.PutUint64(l[24:], math.Float64bits(p.Error))
		binary.LittleEndian.PutUint64(l[32:], math.Float64bits(p.BPE))
		binary.LittleEndian.PutUint32(l[40:], p.Hashes)
		binary.LittleEndian.PutUint64(l[44:], p.Entries)
		l[52] = p.N2
		b = append(b, l[:]...)
	}
	return b
}

// rdbBody is BFRdbSave's encoding of the same chain, bits filled by fill.
func (c chainFields) rdbBody(fill func([]byte)) []byte {
	var total uint64
	for _, s := range c.sizes {
		total += s
	}
	b := rdb.AppendUInt(nil, total)
	b = rdb.AppendUInt(b, uint64(len(c.links)))
	b = rdb.AppendUInt(b, uint64(c.opts))
	b = rdb.AppendUInt(b, uint64(c.growth))
	for i, p := range c.links {
		b = rdb.AppendUInt(b, p.Entries)
		b = rdb.AppendDouble(b, p.Error)
		b = rdb.AppendUInt(b, uint64(p.Hashes))
		b = rdb.AppendDouble(b, p.BPE)
		b = rdb.AppendUInt(b, p.Bits)
		b = rdb.AppendUInt(b, uint64(p.N2))
		data := make([]byte, min(p.Bytes, 1<<16))
		fill(data)
		b = rdb.AppendString(b, data)
		b = rdb.AppendUInt(b, c.sizes[i])
	}
	return b
}

// TestCraftedChainHeadersLoseNothing: for any Bloom chain header the
// decoders accept, by LOADCHUNK or by RESTORE, every add answered without
// an error is found afterwards, whatever the links' error rates, hash
// counts, bit counts, legacy n2, sizes, the options and the growth.
func TestCraftedChainHeadersLoseNothing(t *testing.T) {
	r := rand.New(rand.NewPCG(24, 1))
	accepted := map[string]int{}
	for i := range 1500 {
		c := randChain(r)
		what := fmt.Sprintf("#%d options %d growth %d links %+v sizes %v", i, c.opts, c.growth, c.links, c.sizes)
		if ch, err := ParseChainHeader(c.header(), craftedCap); err == nil {
			accepted["LOADCHUNK"]++
			checkChainNoLoss(t, ch, 100+r.IntN(300), "LOADCHUNK "+what)
		}
		body := c.rdbBody(func(b []byte) {
			for j := range b {
				if r.IntN(8) == 0 {
					b[j] = byte(r.Uint32())
				}
			}
		})
		if ch, err := ChainFromRDB(rdb.NewReader(body, craftedCap), craftedCap); err == nil {
			accepted["RESTORE"]++
			checkChainNoLoss(t, ch, 100+r.IntN(300), "RESTORE "+what)
		}
	}
	if accepted["LOADCHUNK"] < 200 || accepted["RESTORE"] < 200 {
		t.Fatalf("too few headers accepted to say much: %v", accepted)
	}
	t.Logf("accepted: %v", accepted)
}
