package keyspace

import (
	"math/bits"
	"strconv"
)

// MEMORY USAGE as Redis 8.0-m01 computes it (object.c memoryCommand):
// the value's size (objectComputeSize; for a module value its mem_usage
// callback, which for RedisBloom is BF.INFO/CF.INFO Size), plus the
// allocation of the key's sds string, plus the dict entry. Redis links
// jemalloc 5.3 built with --with-lg-quantum=3, so an allocation takes the
// next size class of 8, 16, 24, 32, 40, 48, 56, 64, then four classes per
// doubling (80, 96, 112, 128, 160, …). Measured on the reference server
// for key lengths 1 to 200,000 and string values of every encoding.
const (
	dictEntrySize = 24 // sizeof(dictEntry): key, value and next pointers
	robjSize      = 16 // sizeof(robj)
	// embstrMax is OBJ_ENCODING_EMBSTR_SIZE_LIMIT: longer strings are raw.
	embstrMax = 44
	// bigArg is PROTO_MBULK_BIG_ARG: an argument this long is read into
	// its own query buffer, with room for the trailing CRLF, and becomes
	// the value as it is.
	bigArg = 32 << 10
)

// jemallocSize is the usable size jemalloc gives a request of n bytes
// (n ≥ 1), with an 8-byte quantum: a multiple of 8 up to 64, then a
// quarter of the power of two below.
func jemallocSize(n uint64) uint64 {
	if n <= 64 {
		return (max(n, 1) + 7) &^ 7
	}
	step := uint64(1) << (bits.Len64(n-1) - 3)
	return (n + step - 1) &^ (step - 1)
}

// sdsHeader is sdsReqType's header size: the header an sds string of n bytes gets, by its
// size in bytes (type 5: 1, type 8: 3, type 16: 5, type 32: 9, type 64: 17).
func sdsHeader(n uint64) uint64 {
	switch {
	case n < 1<<5:
		return 1
	case n <= 1<<8-3-1:
		return 3
	case n <= 1<<16-5-1:
		return 5
	case n <= 1<<32-9-1:
		return 9
	}
	return 17
}

// sdsAlloc is the allocation of an sds string of n bytes made to measure
// (sdsnewlen, as a key is copied into the keyspace): header, bytes, NUL.
func sdsAlloc(n uint64) uint64 { return jemallocSize(sdsHeader(n) + n + 1) }

// intEncoded reports whether Redis stores s as an integer (OBJ_ENCODING_INT):
// at most 20 bytes that string2l reads back exactly, so no sign but '-', no
// leading zeros, no "-0", within int64.
func intEncoded(s string) bool {
	if len(s) == 0 || len(s) > 20 {
		return false
	}
	v, err := strconv.ParseInt(s, 10, 64)
	return err == nil && strconv.FormatInt(v, 10) == s
}

// stringValueUsage is objectComputeSize for a string value that SET stored
// from a multibulk argument: an integer in canonical form is encoded in the
// robj itself; up to 44 bytes the robj and an sds with a type-8 header are
// one allocation (embstr); longer, the robj and a separate sds. An argument
// of 32 KiB or more is read into a buffer sized for it and its CRLF, whose
// header type is chosen for that length; SET trims it only when more than
// a tenth of it is free, keeping the header when a smaller type above 8
// would do (sdsResize). Values RESTOREd or loaded another way may have
// taken other allocations in Redis; this is the SET case.
func stringValueUsage(s string) uint64 {
	n := uint64(len(s))
	if intEncoded(s) {
		return robjSize
	}
	if n <= embstrMax {
		return jemallocSize(robjSize + 3 + n + 1)
	}
	if n < bigArg {
		return robjSize + sdsAlloc(n)
	}
	hdr := sdsHeader(n + 2)
	alloc := jemallocSize(hdr + n + 2 + 1)
	if alloc-hdr-1-n > n/10 {
		// sdsResize reallocates in place under the same header: the type
		// the length alone needs is never smaller than type 16 here.
		alloc = jemallocSize(hdr + n + 1)
	}
	return robjSize + alloc
}

// KeyMemoryUsage is what MEMORY USAGE answers for key holding v on Redis
// 8.0-m01 with RedisBloom: a filter's BF.INFO/CF.INFO Size (RedisBloom's
// mem_usage), or a string's object, plus the key's sds and the dict entry
// (Size + 32 for a one-byte key).
func KeyMemoryUsage(key []byte, v *Value) uint64 {
	var val uint64
	switch v.Kind {
	case KindBloom:
		val = v.Bloom().MemUsage()
	case KindCuckoo:
		val = v.Cuckoo().Info().Size
	case KindWindow:
		val = v.Window().Bytes()
	case KindString:
		val = stringValueUsage(v.Str())
	default:
		val = v.Sketch().MemUsage()
	}
	return val + sdsAlloc(uint64(len(key))) + dictEntrySize
}
