package rdb

import "encoding/binary"

// Redis writes every string of a payload (rdbSaveRawString): a decimal
// number of at most 11 bytes that fits in 32 bits as an integer encoding,
// a string of more than 20 bytes LZF-compressed when that saves at least 4
// bytes, anything else plain. Writing them the same way makes a DUMP here
// the bytes a DUMP of the same value gives on Redis.

// appendRedisString appends s as rdbSaveRawString writes it.
func appendRedisString(b, s []byte) []byte {
	if len(s) <= 11 {
		if enc, ok := intEncoding(s); ok {
			return append(b, enc...)
		}
	}
	if len(s) > 20 {
		if c := lzfCompress(s, len(s)-4); c != nil {
			b = append(b, 0xC3) // RDB_ENCVAL<<6 | RDB_ENC_LZF
			b = AppendLen(b, uint64(len(c)))
			b = AppendLen(b, uint64(len(s)))
			return append(b, c...)
		}
	}
	return append(AppendLen(b, uint64(len(s))), s...)
}

// intEncoding is rdbTryIntegerEncoding: s must be exactly how Redis
// writes the number (string2ll: no sign but '-', no leading zero, no
// space), and the number fit in 32 bits.
func intEncoding(s []byte) ([]byte, bool) {
	v, ok := string2ll(s)
	switch {
	case !ok:
		return nil, false
	case v >= -1<<7 && v < 1<<7:
		return []byte{0xC0, byte(int8(v))}, true
	case v >= -1<<15 && v < 1<<15:
		return binary.LittleEndian.AppendUint16([]byte{0xC1}, uint16(int16(v))), true
	case v >= -1<<31 && v < 1<<31:
		return binary.LittleEndian.AppendUint32([]byte{0xC2}, uint32(int32(v))), true
	}
	return nil, false
}

// string2ll is Redis's strict decimal parse.
func string2ll(s []byte) (int64, bool) {
	if len(s) == 0 || len(s) > 20 {
		return 0, false
	}
	if len(s) == 1 && s[0] == '0' {
		return 0, true
	}
	neg := s[0] == '-'
	if neg {
		s = s[1:]
	}
	if len(s) == 0 || s[0] < '1' || s[0] > '9' {
		return 0, false
	}
	var v uint64
	for _, c := range s {
		if c < '0' || c > '9' {
			return 0, false
		}
		d := uint64(c - '0')
		if v > (1<<64-1-d)/10 {
			return 0, false
		}
		v = v*10 + d
	}
	if neg {
		if v > 1<<63 {
			return 0, false
		}
		return -int64(v-1) - 1, true
	}
	if v > 1<<63-1 {
		return 0, false
	}
	return int64(v), true
}

// LZF as Redis builds liblzf 3.6 (lzfP.h): a 2^16-entry hash table,
// VERY_FAST, unaligned compares. Redis leaves the table uninitialised; an
// entry it has not written this call never matches here (a stale pointer
// into the input could, in principle, give Redis another valid encoding).
const (
	lzfHLog   = 16
	lzfHSize  = 1 << lzfHLog
	lzfMaxLit = 1 << 5
	lzfMaxOff = 1 << 13
	lzfMaxRef = 1<<8 + 1<<3
)

func lzfIdx(h uint32) uint32 { return ((h >> (3*8 - lzfHLog)) - h*5) & (lzfHSize - 1) }

// lzfCompress is lzf_compress into at most outLen bytes; nil when the
// result would not fit.
func lzfCompress(in []byte, outLen int) []byte {
	if len(in) < 3 || outLen <= 0 {
		return nil
	}
	htab := make([]int32, lzfHSize) // 0: never a match (ref > in_data fails)
	out := make([]byte, outLen+8)
	inEnd, outEnd := len(in), outLen
	ip, op, lit := 0, 1, 0 // op 0 is the first run's length
	// literal copies one byte into the current run, closing the run at
	// its longest.
	literal := func() {
		lit++
		out[op] = in[ip]
		op++
		ip++
		if lit == lzfMaxLit {
			out[op-lit-1] = byte(lit - 1)
			lit = 0
			op++
		}
	}
	hval := uint32(in[0])<<8 | uint32(in[1])
	for ip < inEnd-2 {
		hval = hval<<8 | uint32(in[ip+2])
		slot := lzfIdx(hval)
		ref := int(htab[slot])
		htab[slot] = int32(ip)
		off := ip - ref - 1
		if ref < ip && off < lzfMaxOff && ref > 0 &&
			in[ref] == in[ip] && in[ref+1] == in[ip+1] && in[ref+2] == in[ip+2] {
			n := 2
			maxlen := min(inEnd-ip-n, lzfMaxRef)
			out[op-lit-1] = byte(lit - 1) // stop the run
			if lit == 0 {
				op-- // undo an empty run
			}
			if op+3+1 >= outEnd {
				return nil
			}
			matched := false
			if maxlen > 16 {
				matched = true
				for k := 0; k < 16; k++ {
					n++
					if in[ref+n] != in[ip+n] {
						matched = false
						break
					}
				}
			}
			if !(maxlen > 16) || matched {
				for {
					n++
					if !(n < maxlen && in[ref+n] == in[ip+n]) {
						break
					}
				}
			}
			n -= 2 // octets - 1
			ip++
			if n < 7 {
				out[op] = byte(off>>8 + n<<5)
				op++
			} else {
				out[op], out[op+1] = byte(off>>8+7<<5), byte(n-7)
				op += 2
			}
			out[op] = byte(off)
			op++
			lit = 0
			op++ // start a run
			ip += n + 1
			if ip >= inEnd-2 {
				break
			}
			ip -= 2
			hval = uint32(in[ip])<<8 | uint32(in[ip+1])
			hval = hval<<8 | uint32(in[ip+2])
			htab[lzfIdx(hval)] = int32(ip)
			ip++
			hval = hval<<8 | uint32(in[ip+2])
			htab[lzfIdx(hval)] = int32(ip)
			ip++
			continue
		}
		if op >= outEnd {
			return nil
		}
		literal()
	}
	if op+3 > outEnd {
		return nil
	}
	for ip < inEnd {
		literal()
	}
	out[op-lit-1] = byte(lit - 1)
	if lit == 0 {
		op--
	}
	return out[:op]
}
