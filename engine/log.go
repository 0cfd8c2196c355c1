package engine

import (
	"math"
	"math/big"
	"sync"
)

// Log is the natural logarithm rounded correctly to the nearest float64.
// RedisBloom sizes filters with glibc's log, which is correctly rounded for
// the inputs that matter here; Go's math.Log is sometimes one ulp off, which
// changes bits-per-entry in a dump header. Log runs only when a filter or a
// link is sized, never per item, so the slow exact series is affordable;
// but it costs about 150 allocations, and a server auto-creating 100,000
// small filters sizes the same error rate 100,000 times: the garbage
// fragmented the heap the filters live in. Results are kept (logs).
func Log(x float64) float64 {
	if !(x > 0) || math.IsInf(x, 1) {
		return math.Log(x)
	}
	k := math.Float64bits(x)
	logs.mu.RLock()
	r, ok := logs.m[k]
	logs.mu.RUnlock()
	if ok {
		return r
	}
	r = exactLog(x)
	logs.mu.Lock()
	if logs.m == nil || len(logs.m) >= maxLogs {
		logs.m = make(map[uint64]float64, 16)
	}
	logs.m[k] = r
	logs.mu.Unlock()
	return r
}

// logs holds Log's results by their argument's bits, up to maxLogs of
// them: error rates are few (each filter's, tightened once per link). Full,
// it starts again empty, so that hostile rates cost memory only within the
// bound and cannot keep the common ones out for good.
var logs struct {
	mu sync.RWMutex
	m  map[uint64]float64
}

const maxLogs = 1024

// exactLog is Log without the cache.
func exactLog(x float64) float64 {
	frac, exp := math.Frexp(x) // x = frac × 2^exp, frac in [0.5, 1)
	m := new(big.Float).SetPrec(logPrec).SetFloat64(frac * 2)
	e := exp - 1
	r := atanhLog(m)
	if e != 0 {
		t := new(big.Float).SetPrec(logPrec).SetInt64(int64(e))
		t.Mul(t, ln2Big())
		r.Add(r, t)
	}
	f, _ := r.Float64()
	return f
}

const logPrec = 256

var ln2Once = sync.OnceValue(func() *big.Float {
	return atanhLog(new(big.Float).SetPrec(logPrec).SetInt64(2))
})

func ln2Big() *big.Float { return ln2Once() }

// atanhLog computes ln(m) = 2·atanh((m−1)/(m+1)) for m in [1, 2].
func atanhLog(m *big.Float) *big.Float {
	one := new(big.Float).SetPrec(logPrec).SetInt64(1)
	num := new(big.Float).SetPrec(logPrec).Sub(m, one)
	den := new(big.Float).SetPrec(logPrec).Add(m, one)
	z := new(big.Float).SetPrec(logPrec).Quo(num, den)
	z2 := new(big.Float).SetPrec(logPrec).Mul(z, z)
	sum := new(big.Float).SetPrec(logPrec).Set(z)
	term := new(big.Float).SetPrec(logPrec).Set(z)
	tmp := new(big.Float).SetPrec(logPrec)
	for k := int64(3); k < 400; k += 2 {
		term.Mul(term, z2)
		tmp.Quo(term, tmp.SetInt64(k))
		if tmp.Sign() == 0 || tmp.MantExp(nil)-sum.MantExp(nil) < -logPrec {
			break
		}
		sum.Add(sum, tmp)
	}
	return sum.Add(sum, sum)
}
