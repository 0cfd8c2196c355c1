package command

import (
	"encoding/binary"
	"math"

	"github.com/bfserver/bfserver/sketch/cms"
	"github.com/bfserver/bfserver/sketch/topk"
)

// Argument errors of the sketch commands, carried in Field. RedisBloom
// opens the key before it looks at the arguments, so the proposer parses
// them and Apply answers the error after the key's own (missing, wrong
// type, already there). 0: the arguments are good.
const (
	CMSArgWidth        = 1 + iota // CMS: invalid width
	CMSArgDepth                   // CMS: invalid depth
	CMSArgOverEst                 // CMS: invalid overestimation value
	CMSArgProb                    // CMS: invalid prob value
	CMSArgInit                    // CMS: invalid init arguments
	CMSArgNoMemory                // CMS: Insufficient memory to create the key
	CMSArgNumber                  // CMS: Cannot parse number
	CMSArgNegative                // CMS: Number cannot be negative
	CMSArgNumKeys                 // CMS: invalid numkeys
	CMSArgKeysPositive            // CMS: Number of keys must be positive
	CMSArgKeys                    // CMS: wrong number of keys
	CMSArgKeysWeights             // CMS: wrong number of keys/weights
	TopKArgK                      // TopK: invalid k
	TopKArgWidth                  // TopK: invalid width
	TopKArgDepth                  // TopK: invalid depth
	TopKArgDecay                  // TopK: invalid decay value. must be '<= 1' & '> 0'
	TopKArgNoMemory               // ERR Insufficient memory to create topk data structure
	sketchArgLast      = TopKArgNoMemory
)

// Int64s packs 64-bit values as the sketch commands carry them in Data.
func Int64s(v []int64) []byte {
	b := make([]byte, 0, 8*len(v))
	for _, x := range v {
		b = binary.LittleEndian.AppendUint64(b, uint64(x))
	}
	return b
}

// Int64At is the i-th value Int64s packed.
func Int64At(b []byte, i int) int64 { return int64(binary.LittleEndian.Uint64(b[8*i:])) }

// sketchParams: an argument error alone, or arguments Apply can use as
// they are.
func sketchParams(c *Cmd) error {
	if top := c.Op == TopKReserve || c.Op == TopKAdd; c.Field > sketchArgLast || c.Field != 0 && top != (c.Field >= TopKArgK) {
		return invalid(c, "argument error %d unknown to op", c.Field)
	}
	if c.Field != 0 {
		return nil
	}
	switch c.Op {
	case CMSInit:
		if c.Count < 1 {
			return invalid(c, "depth %d", c.Count)
		}
		if _, ok := cms.Bytes(c.Capacity, uint64(c.Count)); !ok || c.Capacity > math.MaxInt64 {
			return invalid(c, "sketch of %d by %d", c.Capacity, c.Count)
		}
	case CMSIncrBy:
		if err := atLeastOne(c, c.Items); err != nil {
			return err
		}
		if len(c.Data) != 8*len(c.Items) {
			return invalid(c, "%d increments for %d items", len(c.Data)/8, len(c.Items))
		}
		for i := range c.Items {
			if Int64At(c.Data, i) < 0 {
				return invalid(c, "negative increment")
			}
		}
	case TopKReserve:
		if _, ok := topk.Bytes(uint64(c.Iter), c.Capacity, uint64(c.Count)); !ok || c.Iter < 1 || c.Count < 1 || !(c.ErrorRate > 0 && c.ErrorRate <= 1) {
			return invalid(c, "top-k of %d, %d by %d, decay %v", c.Iter, c.Capacity, c.Count, c.ErrorRate)
		}
	case TopKAdd:
		if err := atLeastOne(c, c.Items); err != nil {
			return err
		}
		if len(c.Data) != 8*len(c.Items) || c.Iter < -1 || c.Iter >= int64(len(c.Items)) || c.Iter >= 0 && c.Iter != int64(len(c.Items))-1 {
			return invalid(c, "%d increments for %d items (bad %d)", len(c.Data)/8, len(c.Items), c.Iter)
		}
		for i := range c.Items {
			if v := Int64At(c.Data, i); v < 0 || v > topk.MaxIncrement {
				return invalid(c, "increment %d", v)
			}
		}
	case CMSMerge:
		if err := atLeastOne(c, c.Keys); err != nil {
			return err
		}
		if len(c.Data) != 8*len(c.Keys) || c.Iter < -1 || c.Iter >= int64(len(c.Keys)) {
			return invalid(c, "%d weights for %d sources (bad weight %d)", len(c.Data)/8, len(c.Keys), c.Iter)
		}
	}
	return nil
}
