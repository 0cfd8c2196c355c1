package server

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/bfserver/bfserver/internal/ascii"
)

// ParseMemory reads a memory value as Redis's config does: a byte count,
// or one with a unit (k, kb, m, mb, g, gb; k is 1000 and kb 1024), in any
// case.
func ParseMemory(v string) (uint64, error) {
	lv := ascii.ToLower(v)
	mul := uint64(1)
	for _, u := range []struct {
		suffix string
		mul    uint64
	}{{"kb", 1 << 10}, {"mb", 1 << 20}, {"gb", 1 << 30}, {"k", 1e3}, {"m", 1e6}, {"g", 1e9}, {"b", 1}} {
		if strings.HasSuffix(lv, u.suffix) {
			lv, mul = strings.TrimSuffix(lv, u.suffix), u.mul
			break
		}
	}
	n, err := strconv.ParseUint(lv, 10, 64)
	if err != nil || lv == "" || n > math.MaxUint64/mul {
		return 0, fmt.Errorf("%q is not a memory value", v)
	}
	return n * mul, nil
}
