// Package redisnum is how Redis reads and writes numbers where clients
// see them: string2ll and string2d over glibc's strtod for arguments, and
// d2string / fpconv_dtoa (Grisu2) for double replies. Commands of every
// kind share it, so a number is read and written one way.
package redisnum

import (
	"math"
	"math/big"
	"math/bits"
	"strconv"
)

// FormatDouble is how Redis (7.2 and later, 8.0-m01 included) writes a
// double reply, RedisModule_ReplyWithDouble's d2string: "nan", "inf",
// "-inf", "0" or "-0"; an integral value within ±2^62 as an integer;
// anything else as fpconv_dtoa writes it: the digits of Grisu2 (shortest
// or nearly so, not always what Go's shortest formatting picks), plain
// when the decimal exponent is small ("0.000001", "123456789012345680")
// and otherwise "d.ddde±x" with no exponent padding ("1e-07" is "1e-7").
func FormatDouble(f float64) string { return string(AppendDouble(nil, f)) }

// AppendDouble appends FormatDouble(f).
func AppendDouble(b []byte, f float64) []byte {
	switch {
	case math.IsNaN(f):
		return append(b, "nan"...)
	case math.IsInf(f, 1):
		return append(b, "inf"...)
	case math.IsInf(f, -1):
		return append(b, "-inf"...)
	case f == 0:
		if math.Signbit(f) {
			return append(b, "-0"...)
		}
		return append(b, '0')
	}
	// double2ll: within ±(LLONG_MAX/2 as a double) and integral.
	if f >= -0x1p62 && f <= 0x1p62 {
		if ll := int64(f); float64(ll) == f {
			return strconv.AppendInt(b, ll, 10)
		}
	}
	neg := math.Signbit(f)
	if neg {
		b = append(b, '-')
	}
	var digits [20]byte
	n, k := grisu2(math.Abs(f), digits[:])
	return emitDigits(b, digits[:n], k, neg)
}

// AppendRESP2Double appends a double reply as RESP2 writes it: a bulk
// string.
func AppendRESP2Double(b []byte, f float64) []byte {
	var tmp [32]byte
	s := AppendDouble(tmp[:0], f)
	b = append(b, '$')
	b = strconv.AppendInt(b, int64(len(s)), 10)
	b = append(b, '\r', '\n')
	b = append(b, s...)
	return append(b, '\r', '\n')
}

// AppendRESP3Double appends a double reply as RESP3 writes it: ",d".
func AppendRESP3Double(b []byte, f float64) []byte {
	b = append(b, ',')
	b = AppendDouble(b, f)
	return append(b, '\r', '\n')
}

// diyFP is f·2^e.
type diyFP struct {
	f uint64
	e int
}

const (
	fracMask  = 1<<52 - 1
	hiddenBit = 1 << 52
)

// cachedPowers[i] is 10^(firstPower + 8i) as a normalised 64-bit
// significand rounded to nearest and its binary exponent: Grisu's cache,
// computed here with math/big.
const (
	firstPower = -348
	stepPowers = 8
	numPowers  = 87
)

var cachedPowers = func() (t [numPowers]diyFP) {
	for i := range t {
		k := firstPower + stepPowers*i
		var x big.Float
		x.SetPrec(2000)
		ten := new(big.Float).SetPrec(2000).SetInt64(10)
		x.SetInt64(1)
		p := k
		if p < 0 {
			p = -p
		}
		for j := 0; j < p; j++ {
			x.Mul(&x, ten)
		}
		if k < 0 {
			x.Quo(new(big.Float).SetPrec(2000).SetInt64(1), &x)
		}
		e := x.MantExp(nil) // x = mant·2^e, mant in [0.5, 1)
		var m big.Float
		m.SetPrec(2000).SetMantExp(&x, 64-e)
		m.SetMode(big.ToNearestEven)
		fi, _ := new(big.Float).SetPrec(64).SetMode(big.ToNearestEven).Set(&m).Int(nil)
		f := fi.Uint64()
		exp := e - 64
		if !fi.IsUint64() { // rounded up to 2^64
			f, exp = 1<<63, exp+1
		}
		t[i] = diyFP{f, exp}
	}
	return
}()

func cachedPow10(exp int) (diyFP, int) {
	const oneLogTen = 0.30102999566398114
	approx := int(float64(-(exp + numPowers)) * oneLogTen)
	idx := (approx - firstPower) / stepPowers
	for {
		cur := exp + cachedPowers[idx].e + 64
		if cur < -60 {
			idx++
			continue
		}
		if cur > -32 {
			idx--
			continue
		}
		return cachedPowers[idx], firstPower + idx*stepPowers
	}
}

func multiply(a, b diyFP) diyFP {
	hi, lo := bits.Mul64(a.f, b.f)
	// fpconv rounds the 128-bit product at bit 63 (adding 2^31 to the
	// sum of the middle 32-bit partial products): the same as rounding
	// the exact product half up at bit 63.
	if lo&(1<<63) != 0 {
		hi++
	}
	return diyFP{hi, a.e + b.e + 64}
}

func boundaries(w diyFP) (lower, upper diyFP) {
	upper = diyFP{w.f<<1 + 1, w.e - 1}
	for upper.f&(hiddenBit<<1) == 0 {
		upper.f <<= 1
		upper.e--
	}
	upper.f <<= 64 - 52 - 2
	upper.e -= 64 - 52 - 2
	shift := 1
	if w.f == hiddenBit {
		shift = 2
	}
	lower = diyFP{w.f<<shift - 1, w.e - shift}
	lower.f <<= uint(lower.e - upper.e)
	lower.e = upper.e
	return
}

var tens = [20]uint64{
	1e19, 1e18, 1e17, 1e16, 1e15, 1e14, 1e13, 1e12, 1e11, 1e10,
	1e9, 1e8, 1e7, 1e6, 1e5, 1e4, 1e3, 100, 10, 1,
}

func roundDigit(digits []byte, delta, rem, kappa, frac uint64) {
	for rem < frac && delta-rem >= kappa &&
		(rem+kappa < frac || frac-rem > rem+kappa-frac) {
		digits[len(digits)-1]--
		rem += kappa
	}
}

// grisu2 writes the digits of positive, finite, nonzero d and returns
// their count and the decimal exponent K (d ≈ digits·10^K), as fpconv's
// grisu2 does.
func grisu2(d float64, digits []byte) (int, int) {
	u := math.Float64bits(d)
	w := diyFP{u & fracMask, int(u >> 52)}
	if w.e != 0 {
		w.f += hiddenBit
		w.e -= 1075
	} else {
		w.e = -1074
	}
	lower, upper := boundaries(w)
	for w.f&hiddenBit == 0 {
		w.f <<= 1
		w.e--
	}
	w.f <<= 11
	w.e -= 11
	cp, k := cachedPow10(upper.e)
	w = multiply(w, cp)
	upper = multiply(upper, cp)
	lower = multiply(lower, cp)
	lower.f++
	upper.f--
	K := -k

	wfrac := upper.f - w.f
	delta := upper.f - lower.f
	shift := uint(-upper.e)
	one := uint64(1) << shift
	part1 := upper.f >> shift
	part2 := upper.f & (one - 1)
	n := 0
	kappa := 10
	for i := 10; kappa > 0; i++ {
		div := tens[i]
		digit := part1 / div
		if digit != 0 || n != 0 {
			digits[n] = byte(digit) + '0'
			n++
		}
		part1 -= digit * div
		kappa--
		tmp := part1<<shift + part2
		if tmp <= delta {
			K += kappa
			roundDigit(digits[:n], delta, tmp, div<<shift, wfrac)
			return n, K
		}
	}
	unit := 18
	for {
		part2 *= 10
		delta *= 10
		kappa--
		digit := part2 >> shift
		if digit != 0 || n != 0 {
			digits[n] = byte(digit) + '0'
			n++
		}
		part2 &= one - 1
		if part2 < delta {
			K += kappa
			roundDigit(digits[:n], delta, part2, one, wfrac*tens[unit])
			return n, K
		}
		unit--
	}
}

// emitDigits is fpconv's emit_digits.
func emitDigits(b, digits []byte, K int, neg bool) []byte {
	nd := len(digits)
	exp := K + nd - 1
	if exp < 0 {
		exp = -exp
	}
	if K >= 0 && exp < nd+7 {
		b = append(b, digits...)
		for i := 0; i < K; i++ {
			b = append(b, '0')
		}
		return b
	}
	if K < 0 && (K > -7 || exp < 4) {
		offset := nd + K
		if offset <= 0 {
			b = append(b, '0', '.')
			for i := 0; i < -offset; i++ {
				b = append(b, '0')
			}
			return append(b, digits...)
		}
		b = append(b, digits[:offset]...)
		b = append(b, '.')
		return append(b, digits[offset:]...)
	}
	limit := 18
	if neg {
		limit = 17
	}
	if nd > limit {
		nd = limit
	}
	b = append(b, digits[0])
	if nd > 1 {
		b = append(b, '.')
		b = append(b, digits[1:nd]...)
	}
	b = append(b, 'e')
	if K+nd-1 < 0 {
		b = append(b, '-')
	} else {
		b = append(b, '+')
	}
	cent := 0
	if exp > 99 {
		cent = exp / 100
		b = append(b, byte(cent)+'0')
		exp -= cent * 100
	}
	if exp > 9 {
		dec := exp / 10
		b = append(b, byte(dec)+'0')
		exp -= dec * 10
	} else if cent != 0 {
		b = append(b, '0')
	}
	return append(b, byte(exp%10)+'0')
}
