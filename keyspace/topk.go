package keyspace

import (
	"encoding/binary"
	"math"

	"github.com/bfserver/bfserver/command"
	"github.com/bfserver/bfserver/sketch/topk"
)

func init() {
	registerSketchOf(KindTopK, topk.TypeName, topk.EncodingVer, topk.FromRDB, topk.FromImage, topk.ErrTooLarge)
}

var topkArgErrors = map[uint8]error{
	command.TopKArgK:        ErrTopKK,
	command.TopKArgWidth:    ErrTopKWidth,
	command.TopKArgDepth:    ErrTopKDepth,
	command.TopKArgDecay:    ErrTopKDecay,
	command.TopKArgNoMemory: ErrTopKNoMemory,
}

func topkOf(v *Value) (*Sketch, error) {
	if v == nil {
		return nil, ErrTopKNotFound
	}
	if v.Kind != KindTopK {
		return nil, ErrWrongType
	}
	return v.Sketch(), nil
}

func (s *Sketch) topk() *topk.TopK { return s.s.(*topk.TopK) }

// topkReserve is TOPK.RESERVE: any key already there is refused before the
// arguments are looked at.
func (k *Keyspace) topkReserve(c *command.Cmd) Result {
	if k.writeLookup(c.DB, c.Key, c.Now) != nil {
		return Result{Err: ErrTopKExists}
	}
	if c.Field != 0 {
		if err := topkArgErrors[c.Field]; err != nil {
			return Result{Err: err}
		}
		return Result{Err: ErrInvalidCommand}
	}
	// Over the per-key cap, RedisBloom's own answer to a sketch it cannot
	// allocate.
	if size, _ := topk.Bytes(uint64(c.Iter), c.Capacity, uint64(c.Count)); size > c.MaxBytes {
		return Result{Err: ErrTopKNoMemory}
	}
	t := topk.New(uint32(c.Iter), uint32(c.Capacity), uint32(c.Count), c.ErrorRate)
	k.set(c.DB, string(c.Key), sketchValue(KindTopK, t))
	return Result{}
}

// topkAdd is TOPK.ADD and INCRBY: per item the item it expelled from the
// heap (Ints[i] 1, List[i] the item as RedisBloom replies it) or none; a
// bad increment (Iter) ends the reply with its error, the items before it
// added.
func (k *Keyspace) topkAdd(c *command.Cmd) Result {
	sk, err := topkOf(k.writeLookup(c.DB, c.Key, c.Now))
	if err != nil {
		return Result{Err: err}
	}
	n := len(c.Items)
	if c.Iter >= 0 {
		n = int(c.Iter)
	}
	r := Result{Ints: make([]int64, n), More: &More{List: make([][]byte, n)}}
	t := sk.topk()
	sk.mu.Lock()
	for i := range n {
		if out, _ := t.Add(c.Items[i], uint32(command.Int64At(c.Data, i))); out != nil {
			r.Ints[i], r.More.List[i] = 1, topk.CString(out)
		}
	}
	sk.mu.Unlock()
	if c.Iter >= 0 {
		r.More.Tail = ErrTopKIncrement
	}
	k.changed(c.DB, c.Key)
	return r
}

// readTopK answers TOPK.QUERY, COUNT, LIST and INFO beside Apply. LIST
// puts the items in List and, in Ints, per item its count and 1 when the
// item is a null (a RESTOREd empty item); INFO puts k, width and depth in
// Ints and the decay's bits in Bytes.
func (k *Keyspace) readTopK(c *command.Cmd) Result {
	sk, err := topkOf(k.Lookup(c.DB, c.Key, c.Now))
	if err != nil {
		return Result{Err: err}
	}
	t := sk.topk()
	sk.mu.RLock()
	defer sk.mu.RUnlock()
	switch c.Op {
	case command.TopKInfo:
		return Result{Ints: []int64{int64(t.K), int64(t.Width), int64(t.Depth)},
			More: &More{Bytes: binary.LittleEndian.AppendUint64(nil, math.Float64bits(t.Decay))}}
	case command.TopKList:
		l := t.List()
		r := Result{Ints: make([]int64, 2*len(l)), More: &More{List: make([][]byte, len(l))}}
		for i, h := range l {
			r.Ints[2*i], r.More.List[i] = int64(h.Count), append([]byte{}, topk.CString(h.Item)...)
			if h.Item == nil {
				r.Ints[2*i+1] = 1
			}
		}
		return r
	}
	r := Result{Ints: make([]int64, len(c.Items))}
	for i, it := range c.Items {
		if c.Op == command.TopKQuery {
			r.Ints[i] = b2i(t.Query(it))
		} else {
			r.Ints[i] = int64(t.Count(it))
		}
	}
	return r
}
