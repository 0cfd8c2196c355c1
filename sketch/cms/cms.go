// Package cms is RedisBloom's Count-Min Sketch (CMS.*), bit for bit: depth
// rows of width 32-bit counters, row i hashing an item with the 32-bit
// MurmurHash2 seeded by i, counters that saturate at 2^32-1, a total that
// wraps as RedisBloom's size_t does, and the dimensions CMS.INITBYPROB
// derives in single precision as its C code does. It does no I/O and reads
// no clock or randomness: replicas that apply the same operations hold the
// same bytes.
package cms

import (
	"errors"
	"math"
	"math/bits"

	"github.com/bfserver/bfserver/engine"
)

// StructBytes is sizeof(CMSketch) in RedisBloom 8.8 (width, depth, array,
// counter): MEMORY USAGE counts it beside the counters.
const StructBytes = 32

// CellMax is the largest count a counter holds; a count that reaches it
// is RedisBloom's overflow (CMS.INCRBY answers "CMS: INCRBY overflow").
const CellMax = math.MaxUint32

// ErrOverflow: a MERGE whose weighted sums leave [0, 2^32-1] or whose
// total leaves int64 (RedisBloom's "CMS: MERGE overflow"); nothing changed.
var ErrOverflow = errors.New("cms: merge overflow")

// Sketch is one Count-Min Sketch. Cells holds Depth rows of Width counters.
type Sketch struct {
	Width, Depth uint64
	// Count is the sum of every increment, modulo 2^64 (RedisBloom keeps
	// it in a size_t and answers it as a signed 64-bit integer).
	Count uint64
	Cells []uint32
	// dirty records which 64 KiB chunks of Cells, as the image lays them
	// out (Array), changed since the image last took them; every change
	// marks the counter (4 bytes, inside one 64-byte line) before it
	// writes it, so that an image write holding the array (engine.Freeze)
	// can copy the line first.
	dirty engine.Dirty
}

// Bytes is the memory of a sketch of these dimensions as RedisBloom counts
// it (CMSMemUsage), and false when it does not fit in 64 bits.
func Bytes(width, depth uint64) (uint64, bool) {
	if width == 0 || depth == 0 || width > math.MaxUint64/depth || width*depth > (math.MaxUint64-StructBytes)/4 {
		return 0, false
	}
	return StructBytes + width*depth*4, true
}

// New is an empty sketch; the caller checked Bytes against its cap.
func New(width, depth uint64) *Sketch { return newSketch(width, depth, 0) }

func newSketch(width, depth, count uint64) *Sketch {
	return &Sketch{Width: width, Depth: depth, Count: count, Cells: make([]uint32, width*depth),
		dirty: engine.NewDirty(4 * width * depth)}
}

// loc is the counter of item in row i.
func (s *Sketch) loc(item []byte, i uint64) uint64 {
	return uint64(engine.MurmurHash2(item, uint32(i)))%s.Width + i*s.Width
}

// IncrBy adds v to item's counter in every row and returns the least of
// them afterwards. A counter that would pass 2^32-1 (or any increment of
// 2^32 or more, as RedisBloom compares the wrapped counter with v) stays
// at 2^32-1; a result of CellMax is RedisBloom's overflow reply, though
// the counters and the total changed.
func (s *Sketch) IncrBy(item []byte, v uint64) uint64 {
	least := uint64(math.MaxUint64)
	for i := uint64(0); i < s.Depth; i++ {
		l := s.loc(item, i)
		c := s.Cells[l] + uint32(v)
		if uint64(c) < v {
			c = CellMax
		}
		s.dirty.Mark(4 * l)
		s.Cells[l] = c
		least = min(least, uint64(c))
	}
	s.Count += v
	return least
}

// Query is the least of item's counters: its count or more.
func (s *Sketch) Query(item []byte) uint64 {
	least := uint64(math.MaxUint64)
	for i := uint64(0); i < s.Depth; i++ {
		least = min(least, uint64(s.Cells[s.loc(item, i)]))
	}
	return least
}

// Merge sets dst to the weighted sum of srcs, which have dst's dimensions
// (dst may be one of them). Every weighted counter sum must lie in
// [0, 2^32-1] and the weighted total in [0, 2^63-1] with no intermediate
// 64-bit overflow, as RedisBloom checks before it writes; otherwise
// ErrOverflow and dst is unchanged.
func Merge(dst *Sketch, srcs []*Sketch, weights []int64) error {
	n := dst.Width * dst.Depth
	for j := uint64(0); j < n; j++ {
		var sum int64
		for k, s := range srcs {
			m, ok := mulInt64(int64(s.Cells[j]), weights[k])
			if !ok {
				return ErrOverflow
			}
			if sum, ok = addInt64(sum, m); !ok {
				return ErrOverflow
			}
		}
		if sum < 0 || sum > CellMax {
			return ErrOverflow
		}
	}
	var total int64
	for k, s := range srcs {
		m, ok := mulUint64Int64(s.Count, weights[k])
		if !ok {
			return ErrOverflow
		}
		if total, ok = addInt64(total, m); !ok {
			return ErrOverflow
		}
	}
	if total < 0 {
		return ErrOverflow
	}
	for j := uint64(0); j < n; j++ {
		var sum int64
		for k, s := range srcs {
			sum += int64(s.Cells[j]) * weights[k]
		}
		if dst.Cells[j] != uint32(sum) {
			dst.dirty.Mark(4 * j) // only what changes: a merge that keeps most counters writes few chunks
			dst.Cells[j] = uint32(sum)
		}
	}
	dst.Count = uint64(total)
	return nil
}

func addInt64(a, b int64) (int64, bool) {
	s := a + b
	return s, (a >= 0) != (b >= 0) || (s >= 0) == (a >= 0)
}

func mulInt64(a, b int64) (int64, bool) {
	if a == 0 || b == 0 {
		return 0, true
	}
	p := a * b
	if (a == -1 && b == math.MinInt64) || (b == -1 && a == math.MinInt64) || p/b != a {
		return 0, false
	}
	return p, true
}

// mulUint64Int64 is the exact product of an unsigned and a signed 64-bit
// number when it fits in int64 (__builtin_mul_overflow's check).
func mulUint64Int64(a uint64, b int64) (int64, bool) {
	if a == 0 || b == 0 {
		return 0, true
	}
	mag := uint64(b)
	if b < 0 {
		mag = -mag
	}
	hi, lo := bits.Mul64(a, mag)
	if hi != 0 {
		return 0, false
	}
	if b > 0 {
		if lo > math.MaxInt64 {
			return 0, false
		}
		return int64(lo), true
	}
	if lo > 1<<63 {
		return 0, false
	}
	return -int64(lo-1) - 1, true
}

// MemUsage is the sketch's memory as RedisBloom's CMSMemUsage counts it
// (MEMORY USAGE adds the key's own).
func (s *Sketch) MemUsage() uint64 { return StructBytes + 4*uint64(len(s.Cells)) }
