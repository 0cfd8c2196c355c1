package scalable

import (
	"bytes"
	"encoding/hex"
	"fmt"
	"testing"
)

func mustHex(s string) []byte {
	b, err := hex.DecodeString(s)
	if err != nil {
		panic(err)
	}
	return b
}

// FuzzChainHeader: a header is either rejected or decodes to a chain that
// encodes back to the same bytes and finds every add it acknowledges; no
// header allocates past the cap.
func FuzzChainHeader(f *testing.F) {
	f.Add(mustHex("02000000000000000100000005000000020000001000000000000000800000000000000002000000000000007b14ae47e17a743fe9862fb2350e2640080000000a0000000000000000"))
	f.Add(mustHex("0100000000000000010000000d000000020000000800000000000000400000000000000001000000000000007b14ae47e17a843f88168ac58c2b234007000000030000000000000000"))
	f.Add([]byte{})
	// From testdata/oracle/edge.jsonl and headers.jsonl: options 0, growth
	// 2^32−1, entries 0, error NaN, a 2^40-byte claim, bpe 0 with 0 hashes,
	// two links, nfilters 0.
	f.Add(mustHex("01000000000000000100000000000000020000001000000000000000800000000000000001000000000000007b14ae47e17a743fe9862fb2350e2640080000000a0000000000000000"))
	f.Add(mustHex("01000000000000000100000005000000ffffffff1000000000000000800000000000000001000000000000007b14ae47e17a743fe9862fb2350e2640080000000a0000000000000000"))
	f.Add(mustHex("01000000000000000100000005000000020000001000000000000000800000000000000001000000000000007b14ae47e17a743fe9862fb2350e264008000000000000000000000000"))
	f.Add(mustHex("0100000000000000010000000500000002000000100000000000000080000000000000000100000000000000000000000000f87fe9862fb2350e2640080000000a0000000000000000"))
	f.Add(mustHex("01000000000000000100000005000000020000000000000000010000000000000008000001000000000000007b14ae47e17a743fe9862fb2350e2640080000000a0000000000000000"))
	f.Add(mustHex("01000000000000000100000005000000020000001000000000000000800000000000000001000000000000007b14ae47e17a743f0000000000000000000000000a0000000000000000"))
	f.Add(mustHex("05000000000000000200000005000000020000000800000000000000400000000000000002000000000000007b14ae47e17a743fe9862fb2350e2640080000000200000000000000000800000000000000400000000000000003000000000000007b14ae47e17a643f4af7d49edef0284009000000040000000000000000"))
	f.Add(mustHex("0000000000000000000000000500000002000000"))
	// A bits-per-entry of −0, which once came back as 0 (shapes were
	// interned by float value).
	f.Add(mustHex("01000000000000000100000005000000303030301000000000000000800000000000000001000000000000007b14ae47e17a743f0000000000000080000000002b0000000000000000"))
	f.Fuzz(func(t *testing.T, hdr []byte) {
		ch, err := ParseChainHeader(hdr, 1<<20)
		if err != nil {
			return
		}
		if ch.Bytes() > 1<<20 {
			t.Fatalf("allocated %d bytes past the cap", ch.Bytes())
		}
		if got := ch.Header(); !bytes.Equal(got, hdr) {
			t.Fatalf("header round trip:\n got %x\nwant %x", got, hdr)
		}
		checkChainNoLoss(t, ch, 64, fmt.Sprintf("header %x", hdr))
	})
}

// FuzzChainChunk loads arbitrary chunks at arbitrary positions.
func FuzzChainChunk(f *testing.F) {
	f.Add(int64(17), mustHex("08202a02080008000880880808000800"))
	f.Add(int64(-1), []byte("x"))
	f.Add(int64(1), []byte{})
	hdr := mustHex("02000000000000000100000005000000020000001000000000000000800000000000000002000000000000007b14ae47e17a743fe9862fb2350e2640080000000a0000000000000000")
	f.Fuzz(func(t *testing.T, pos int64, data []byte) {
		ch, err := ParseChainHeader(hdr, 1<<20)
		if err != nil {
			t.Fatal(err)
		}
		if ch.LoadChunk(pos, data) == nil {
			next, _ := ch.Chunk(1)
			if next == 0 {
				t.Fatal("chain lost its data")
			}
		}
	})
}

// FuzzCuckooHeader: rejected, or decoded within the cap, re-encoded with
// the same fields (numFilters truncated to 16 bits, as RedisBloom does),
// and finding every add it acknowledges.
func FuzzCuckooHeader(f *testing.F) {
	f.Add(mustHex("0300000000000000040000000000000000000000000000000100000000000000020014000100"))
	f.Add(make([]byte, 38))
	// From testdata/oracle/edge.jsonl and headers.jsonl: one bucket,
	// numFilters 2^64−1 and 65537, 2^40 buckets × 3, expansion 32769,
	// expansion 3 with two sub-filters.
	f.Add(mustHex("0100000000000000010000000000000000000000000000000100000000000000020014000100"))
	f.Add(mustHex("010000000000000004000000000000000000000000000000ffffffffffffffff020014000100"))
	f.Add(mustHex("0100000000000000040000000000000000000000000000000100010000000000020014000100"))
	f.Add(mustHex("0100000000000000000000000001000000000000000000000300000000000000020014000100"))
	f.Add(mustHex("0100000000000000040000000000000000000000000000000100000000000000020014000180"))
	f.Add(mustHex("0100000000000000040000000000000000000000000000000200000000000000020014000300"))
	// Issue #24: buckets 2, bucket size 1, max iterations 500, expansion 3.
	f.Add(cfHeader(0, 2, 0, 1, 1, 500, 3))
	f.Fuzz(func(t *testing.T, hdr []byte) {
		cf, err := ParseCuckooHeader(hdr, 1<<20)
		if err != nil {
			return
		}
		got := cf.Header()
		if !bytes.Equal(got[:24], hdr[:24]) || !bytes.Equal(got[32:], hdr[32:]) || got[24] != hdr[24] || got[25] != hdr[25] {
			t.Fatalf("header round trip:\n got %x\nwant %x", got, hdr)
		}
		// An insert may fail on a full table; one acknowledged is found,
		// after more adds, deletes and compaction too.
		checkCuckooNoLoss(t, cf, 64, fmt.Sprintf("header %x", hdr))
	})
}

// FuzzCuckooChunk loads arbitrary chunks at arbitrary positions.
func FuzzCuckooChunk(f *testing.F) {
	f.Add(int64(9), mustHex("0000d9d914000000"))
	f.Add(int64(-3), []byte("junk"))
	hdr := mustHex("0300000000000000040000000000000000000000000000000100000000000000020014000100")
	f.Fuzz(func(t *testing.T, pos int64, data []byte) {
		cf, err := ParseCuckooHeader(hdr, 1<<20)
		if err != nil {
			t.Fatal(err)
		}
		cf.LoadChunk(pos, data)
		cf.Exists([]byte("foo"))
	})
}

// TestManyTinyLinksRefused: a header declaring a million 8-byte links is
// refused by a 16 MiB cap: 8 MiB of bits, but each link costs bookkeeping.
func TestManyTinyLinksRefused(t *testing.T) {
	link := mustHex("0800000000000000400000000000000000000000000000007b14ae47e17a843f88168ac58c2b234007000000030000000000000000")
	const n = 1 << 20
	hdr := make([]byte, 20, 20+len(link)*n)
	hdr[8], hdr[9], hdr[10] = 0, 0, 0x10 // nfilters = 1<<20
	hdr[12] = 13
	hdr[16] = 2
	for i := 0; i < n; i++ {
		hdr = append(hdr, link...)
	}
	if _, err := ParseChainHeader(hdr, 16<<20); err != ErrTooLarge {
		t.Fatalf("err = %v, want ErrTooLarge", err)
	}
}
