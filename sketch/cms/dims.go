package cms

import "math"

// DimFromProb is CMS.INITBYPROB's width and depth for an over-count of at
// most eps·N with probability 1-delta, computed as RedisBloom 8.8 computes
// them on x86-64 with glibc: width = ceil(2/eps) in double precision,
// depth = ceil(log10f(delta) / log10f(0.5)) in single precision (delta is
// rounded to a float first), each converted to an unsigned 64-bit integer
// as the C conversion does there (a value past 2^64, or infinite, becomes
// 0). The caller refuses a width or depth below 1 or past 2^63-1
// ("CMS: invalid init arguments"). eps and delta are in (0, 1).
func DimFromProb(eps, delta float64) (width, depth uint64) {
	width = toSizeT(math.Ceil(2 / eps))
	d := log10f(float32(delta)) / log10f(0.5)
	return width, toSizeT(math.Ceil(float64(d)))
}

// toSizeT is gcc's double to size_t conversion on x86-64: cvttsd2si for
// values below 2^63, and cvttsd2si(x-2^63) with the top bit flipped above;
// cvttsd2si answers 2^63 for what it cannot convert (NaN, infinities, too
// large), so those end as 0 or 2^63.
func toSizeT(x float64) uint64 {
	const two63 = 1 << 63
	cvt := func(x float64) uint64 {
		if x != x || x >= two63 || x < -two63 {
			return 1 << 63
		}
		return uint64(int64(x))
	}
	if x < two63 {
		return cvt(x)
	}
	return cvt(x-two63) ^ 1<<63
}

// log10f is glibc 2.36's log10f (sysdeps/ieee754/flt-32/e_log10f.c, from
// FreeBSD's msun): x = 2^k·m, log10(x) = k·log10(2) + log10(e)·logf(m)
// split so that k·log10(2) is added last, every step in single precision.
// logf is correctly rounded for the reduced m here (TestLogfReduced checks
// that against glibc's logf over every m it can be).
func log10f(x float32) float32 {
	const (
		two25    = float32(3.3554432000e+07)
		ivln10   = float32(4.3429449201e-01)
		log102hi = float32(3.0102920532e-01)
		log102lo = float32(7.9034151668e-07)
	)
	hx := int32(math.Float32bits(x))
	k := int32(0)
	if hx < 0x00800000 {
		if hx&0x7fffffff == 0 {
			return float32(math.Inf(-1))
		}
		if hx < 0 {
			return float32(math.NaN())
		}
		k -= 25
		x *= two25
		hx = int32(math.Float32bits(x))
	}
	if hx >= 0x7f800000 {
		return x + x
	}
	k += hx>>23 - 127
	i := int32(uint32(k) & 0x80000000 >> 31)
	hx = hx&0x007fffff | (0x7f-i)<<23
	y := float32(k + i)
	if k == 0 && hx == 0x3f800000 {
		return 0
	}
	m := math.Float32frombits(uint32(hx))
	z := float32(y*log102lo) + float32(ivln10*logf(m))
	return z + float32(y*log102hi)
}

// logf is the natural logarithm rounded to single precision.
func logf(x float32) float32 { return float32(math.Log(float64(x))) }
