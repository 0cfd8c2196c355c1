package keyspace

import (
	"math"

	"github.com/bfserver/bfserver/command"
	"github.com/bfserver/bfserver/sketch/cms"
)

func init() {
	registerSketchOf(KindCMS, cms.TypeName, cms.EncodingVer, cms.FromRDB, cms.FromImage, cms.ErrTooLarge)
}

// cmsArgErrors are the keyspace errors of command.CMSArg* codes.
var cmsArgErrors = [...]error{
	command.CMSArgWidth:        ErrCMSWidth,
	command.CMSArgDepth:        ErrCMSDepth,
	command.CMSArgOverEst:      ErrCMSOverEst,
	command.CMSArgProb:         ErrCMSProb,
	command.CMSArgInit:         ErrCMSInitArgs,
	command.CMSArgNoMemory:     ErrCMSNoMemory,
	command.CMSArgNumber:       ErrCMSNumber,
	command.CMSArgNegative:     ErrCMSNegative,
	command.CMSArgNumKeys:      ErrCMSNumKeys,
	command.CMSArgKeysPositive: ErrCMSKeysPositive,
	command.CMSArgKeys:         ErrCMSKeys,
	command.CMSArgKeysWeights:  ErrCMSKeysWeights,
}

// cmsOf is key's sketch for a write or a read: RedisBloom's
// "CMS: key does not exist", or WRONGTYPE.
func cmsOf(v *Value) (*Sketch, error) {
	if v == nil {
		return nil, ErrCMSNotFound
	}
	if v.Kind != KindCMS {
		return nil, ErrWrongType
	}
	return v.Sketch(), nil
}

func (s *Sketch) cms() *cms.Sketch { return s.s.(*cms.Sketch) }

// cmsInit is CMS.INITBYDIM/INITBYPROB: any key already there is refused
// before the arguments are looked at.
func (k *Keyspace) cmsInit(c *command.Cmd) Result {
	if k.writeLookup(c.DB, c.Key, c.Now) != nil {
		return Result{Err: ErrCMSExists}
	}
	if c.Field != 0 {
		return Result{Err: cmsArgErrors[c.Field]}
	}
	// Over the per-key cap, RedisBloom's own answer to a sketch it cannot
	// allocate.
	if size, _ := cms.Bytes(c.Capacity, uint64(c.Count)); size > c.MaxBytes {
		return Result{Err: ErrCMSNoMemory}
	}
	k.set(c.DB, string(c.Key), sketchValue(KindCMS, cms.New(c.Capacity, uint64(c.Count))))
	return Result{}
}

// cmsIncrBy answers each item's count; math.MaxUint32 is RedisBloom's
// overflow, rendered as an error element.
func (k *Keyspace) cmsIncrBy(c *command.Cmd) Result {
	sk, err := cmsOf(k.writeLookup(c.DB, c.Key, c.Now))
	if err != nil {
		return Result{Err: err}
	}
	if c.Field != 0 {
		return Result{Err: cmsArgErrors[c.Field]}
	}
	r := Result{Ints: make([]int64, len(c.Items))}
	s := sk.cms()
	sk.mu.Lock()
	for i, it := range c.Items {
		r.Ints[i] = int64(min(s.IncrBy(it, uint64(command.Int64At(c.Data, i))), math.MaxUint32))
	}
	sk.mu.Unlock()
	k.changed(c.DB, c.Key)
	return r
}

// cmsMerge checks as RedisBloom does, in its order: the destination, the
// argument counts, then per source its weight, its key and its
// dimensions; then the sums.
func (k *Keyspace) cmsMerge(c *command.Cmd) Result {
	dst, err := cmsOf(k.writeLookup(c.DB, c.Key, c.Now))
	if err != nil {
		return Result{Err: err}
	}
	if c.Field != 0 {
		return Result{Err: cmsArgErrors[c.Field]}
	}
	d := dst.cms()
	srcs := make([]*cms.Sketch, len(c.Keys))
	weights := make([]int64, len(c.Keys))
	for i, key := range c.Keys {
		if int64(i) == c.Iter {
			return Result{Err: ErrCMSWeight}
		}
		weights[i] = command.Int64At(c.Data, i)
		sk, err := cmsOf(k.writeLookup(c.DB, key, c.Now))
		if err != nil {
			return Result{Err: err}
		}
		srcs[i] = sk.cms()
		if srcs[i].Width != d.Width || srcs[i].Depth != d.Depth {
			return Result{Err: ErrCMSDims}
		}
	}
	// Sources are read under their own locks; Apply is their only writer,
	// and it is here, so reading them while holding dst's is safe.
	dst.mu.Lock()
	err = cms.Merge(d, srcs, weights)
	dst.mu.Unlock()
	if err != nil {
		return Result{Err: ErrCMSMergeOverflow}
	}
	k.changed(c.DB, c.Key)
	return Result{}
}

// readCMS answers CMS.QUERY and CMS.INFO beside Apply. INFO's fields go in
// Ints: width, depth, and the total as RedisBloom answers it (signed).
func (k *Keyspace) readCMS(c *command.Cmd) Result {
	sk, err := cmsOf(k.Lookup(c.DB, c.Key, c.Now))
	if err != nil {
		return Result{Err: err}
	}
	s := sk.cms()
	sk.mu.RLock()
	defer sk.mu.RUnlock()
	if c.Op == command.CMSInfo {
		return Result{Ints: []int64{int64(s.Width), int64(s.Depth), int64(s.Count)}}
	}
	r := Result{Ints: make([]int64, len(c.Items))}
	for i, it := range c.Items {
		r.Ints[i] = int64(s.Query(it))
	}
	return r
}
