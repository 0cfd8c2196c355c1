package keyspace

import (
	"bytes"
	"slices"

	"github.com/bfserver/bfserver/command"
	"github.com/bfserver/bfserver/sketch/tdigest"
)

func init() {
	registerSketchOf(KindTDigest, tdigest.TypeName, tdigest.EncodingVer, tdigest.FromRDB, tdigest.FromImage, tdigest.ErrTooLarge)
}

// tdArgErrors are the keyspace errors of command.TDArg* codes.
var tdArgErrors = [...]error{
	command.TDArgWrongKeyword:     ErrTDWrongKeyword,
	command.TDArgParseCompression: ErrTDParseCompression,
	command.TDArgCompressionRange: ErrTDCompressionRange,
	command.TDArgAlloc:            ErrTDAlloc,
	command.TDArgParseVal:         ErrTDParseVal,
	command.TDArgValNotFinite:     ErrTDValNotFinite,
	command.TDArgParseNumkeys:     ErrTDParseNumkeys,
	command.TDArgNumkeysRange:     ErrTDNumkeysRange,
	command.TDArgMergeArity:       ErrTDMergeArity,
	command.TDArgParseQuantile:    ErrTDParseQuantile,
	command.TDArgQuantileRange:    ErrTDQuantileRange,
	command.TDArgParseCDF:         ErrTDParseCDF,
	command.TDArgParseValue:       ErrTDParseValue,
	command.TDArgParseRank:        ErrTDParseRank,
	command.TDArgRankNegative:     ErrTDRankNegative,
	command.TDArgParseLowCut:      ErrTDParseLowCut,
	command.TDArgParseHighCut:     ErrTDParseHighCut,
	command.TDArgCutRange:         ErrTDCutRange,
	command.TDArgCutOrder:         ErrTDCutOrder,
}

// tdArgErr is the keyspace error of a t-digest argument error code
// (Validate let only the op's own through).
func tdArgErr(field uint8) error {
	if int(field) < len(tdArgErrors) && tdArgErrors[field] != nil {
		return tdArgErrors[field]
	}
	return ErrInvalidCommand
}

// tdErr is the keyspace error of one of the digest's own.
func tdErr(err error) error {
	switch err {
	case tdigest.ErrOverflow:
		return ErrTDOverflow
	case tdigest.ErrMergeAlloc:
		return ErrTDMergeAlloc
	}
	return ErrInvalidCommand
}

// tdOf is _TDigest_KeyCheck: the key's digest, or RedisBloom's "key does
// not exist", or WRONGTYPE.
func tdOf(v *Value) (*Sketch, error) {
	if v == nil {
		return nil, ErrTDKeyMissing
	}
	if v.Kind != KindTDigest {
		return nil, ErrWrongType
	}
	return v.Sketch(), nil
}

func (s *Sketch) tdigest() *tdigest.Digest { return s.s.(*tdigest.Digest) }

// tdCreate is TDIGEST.CREATE: any key already there is refused before the
// arguments are looked at. A digest allocates its nodes as values arrive,
// so no compression RedisBloom accepts is refused here for its size (the
// byte cap applies as the digest grows: tdAdd, tdMerge).
func (k *Keyspace) tdCreate(c *command.Cmd) Result {
	if v := k.writeLookup(c.DB, c.Key, c.Now); v != nil {
		if v.Kind == KindTDigest {
			return Result{Err: ErrTDKeyExists}
		}
		return Result{Err: ErrWrongType}
	}
	if c.Field != 0 {
		return Result{Err: tdArgErr(c.Field)}
	}
	d, ok := tdigest.New(c.Count)
	if !ok {
		return Result{Err: ErrTDAlloc}
	}
	k.set(c.DB, string(c.Key), sketchValue(KindTDigest, d))
	return Result{}
}

// tdWrite is TDIGEST.RESET and ADD. ADD's values go in whole or, past
// the byte cap, not at all; an overflow keeps the values before it, as
// RedisBloom does.
func (k *Keyspace) tdWrite(c *command.Cmd) Result {
	sk, err := tdOf(k.writeLookup(c.DB, c.Key, c.Now))
	if err != nil {
		return Result{Err: err}
	}
	if c.Field != 0 {
		return Result{Err: tdArgErr(c.Field)}
	}
	d := sk.tdigest()
	chunks := sk.chunks()
	if c.Op == command.TDReset {
		sk.mu.Lock()
		d.Reset()
		sk.mu.Unlock()
		k.sketchChanged(c.DB, c.Key, sk, chunks)
		return Result{}
	}
	vals := command.FloatsOf(c.Data)
	if d.FootprintAfterAdd(len(vals)) > max(c.MaxBytes, d.Footprint()) {
		return Result{Err: ErrTooLarge}
	}
	sk.mu.Lock()
	err = d.AddValues(vals)
	sk.mu.Unlock()
	k.sketchChanged(c.DB, c.Key, sk, chunks)
	if err != nil {
		return Result{Err: tdErr(err)}
	}
	return Result{}
}

// tdMerge is TDIGEST.MERGE in RedisBloom's order: the destination's type,
// the arguments, each source (a source named as the destination is the
// destination, which must exist), then the merge. The destination gets a
// new value (its TTL goes) and is touched; the sources are compressed on
// the way, as RedisBloom's are, and not touched; a merge that fails
// touches nothing but may have compressed sources.
func (k *Keyspace) tdMerge(c *command.Cmd) Result {
	var dst *Sketch
	if v := k.writeLookup(c.DB, c.Key, c.Now); v != nil {
		if v.Kind != KindTDigest {
			return Result{Err: ErrWrongType}
		}
		dst = v.Sketch()
	}
	if c.Field != 0 {
		return Result{Err: tdArgErr(c.Field)}
	}
	srcs := make([]*Sketch, len(c.Keys))
	for i, key := range c.Keys {
		if bytes.Equal(key, c.Key) {
			if dst == nil {
				return Result{Err: ErrTDKeyMissing}
			}
			srcs[i] = dst
			continue
		}
		sk, err := tdOf(k.writeLookup(c.DB, key, c.Now))
		if err != nil {
			return Result{Err: err}
		}
		srcs[i] = sk
	}
	opts := tdigest.MergeOptions{Compression: c.Count, HasCompression: c.Count > 0, Override: c.Flag}
	var dd *tdigest.Digest
	if dst != nil {
		dd = dst.tdigest()
	}
	ds := make([]*tdigest.Digest, len(srcs))
	for i, s := range srcs {
		ds[i] = s.tdigest()
	}
	if tdigest.MergeFootprint(dd, ds, opts) > c.MaxBytes {
		return Result{Err: ErrTooLarge}
	}
	// Merge compresses the destination and the sources: each is locked
	// once against readers (Apply, here, is their only writer, so the
	// order cannot deadlock).
	locked := make([]*Sketch, 0, len(srcs)+1)
	lock := func(s *Sketch) {
		for _, l := range locked {
			if l == s {
				return
			}
		}
		s.mu.Lock()
		locked = append(locked, s)
	}
	if dst != nil {
		lock(dst)
	}
	for _, s := range srcs {
		lock(s)
	}
	// Each is recorded as sketchChanged records it: a merge that fails
	// leaves the destination and the sources compressed, their nodes
	// perhaps shrunk.
	chunks := make([]uint64, len(locked))
	for i, s := range locked {
		chunks[i] = s.chunks()
	}
	to, err := tdigest.Merge(dd, ds, opts)
	for _, l := range locked {
		l.mu.Unlock()
	}
	for i, s := range locked {
		key := c.Key
		if s != dst {
			key = c.Keys[slices.Index(srcs, s)]
		}
		k.sketchChanged(c.DB, key, s, chunks[i])
	}
	if err != nil {
		return Result{Err: tdErr(err)}
	}
	k.set(c.DB, string(c.Key), sketchValue(KindTDigest, to))
	k.touch(c.DB, c.Key, c.Now)
	return Result{}
}

// tdQueryWrites reports whether a query would compress the digest's
// buffer, which changes it.
func tdQueryWrites(d *tdigest.Digest, c *command.Cmd) bool {
	switch c.Op {
	case command.TDQuantile, command.TDCDF, command.TDTrimmedMean:
		return d.NeedsCompress()
	case command.TDRank:
		return d.RanksCompress(command.FloatsOf(c.Data))
	case command.TDByRank:
		return d.ByRanksCompress(command.Int64sOf(c.Data))
	}
	return false // MIN, MAX, INFO
}

// tdQuery answers a t-digest query: key errors, then argument errors,
// then the answer. In Read (apply false) a query that would compress is
// refused with ErrNeedsLog; in Apply it compresses, at the same point of
// the log on every replica. Doubles go in Bytes (command.Floats), ranks
// and INFO's fields in Ints.
func (k *Keyspace) tdQuery(c *command.Cmd, apply bool) Result {
	var v *Value
	if apply {
		v = k.writeLookup(c.DB, c.Key, c.Now)
	} else {
		v = k.Lookup(c.DB, c.Key, c.Now)
	}
	sk, err := tdOf(v)
	if err != nil {
		return Result{Err: err}
	}
	if c.Field != 0 {
		return Result{Err: tdArgErr(c.Field)}
	}
	d := sk.tdigest()
	if !apply {
		sk.mu.RLock()
		defer sk.mu.RUnlock()
		if tdQueryWrites(d, c) {
			return Result{Err: ErrNeedsLog}
		}
		return tdAnswer(d, c)
	}
	// Apply is the digest's only writer: it reads it without the lock,
	// and takes it to change it.
	if !tdQueryWrites(d, c) {
		return tdAnswer(d, c)
	}
	chunks := sk.chunks()
	sk.mu.Lock()
	r := tdAnswer(d, c)
	sk.mu.Unlock()
	k.sketchChanged(c.DB, c.Key, sk, chunks)
	return r
}

func tdAnswer(d *tdigest.Digest, c *command.Cmd) Result {
	switch c.Op {
	case command.TDMin:
		return bytesResult(command.Floats([]float64{d.Min()}))
	case command.TDMax:
		return bytesResult(command.Floats([]float64{d.Max()}))
	case command.TDInfo:
		vals := d.Info().Values()
		return Result{Ints: vals[:]}
	case command.TDQuantile:
		return bytesResult(command.Floats(d.Quantiles(command.FloatsOf(c.Data))))
	case command.TDCDF:
		return bytesResult(command.Floats(d.CDF(command.FloatsOf(c.Data))))
	case command.TDTrimmedMean:
		cuts := command.FloatsOf(c.Data)
		if len(cuts) != 2 {
			// Validate refuses it; a read is not validated again here.
			return Result{Err: ErrInvalidCommand}
		}
		return bytesResult(command.Floats([]float64{d.TrimmedMean(cuts[0], cuts[1])}))
	case command.TDRank:
		return Result{Ints: d.Ranks(command.FloatsOf(c.Data), c.Flag)}
	case command.TDByRank:
		return bytesResult(command.Floats(d.ByRanks(command.Int64sOf(c.Data), c.Flag)))
	}
	return Result{Err: ErrInvalidCommand}
}

// dumpWrites reports whether DUMP would change the value: RedisBloom's
// rdb_save compresses a digest's buffer.
func dumpWrites(v *Value) bool {
	if v == nil || v.Kind != KindTDigest {
		return false
	}
	sk := v.Sketch()
	sk.mu.RLock()
	defer sk.mu.RUnlock()
	return sk.tdigest().NeedsCompress()
}

// applyDump is DUMP in Apply (EXEC, or a DUMP Read refused with
// ErrNeedsLog): a digest is compressed first, as RedisBloom's is.
func (k *Keyspace) applyDump(c *command.Cmd) Result {
	v := k.writeLookup(c.DB, c.Key, c.Now)
	if v == nil {
		return Result{Null: true}
	}
	if v.Kind == KindTDigest && v.Sketch().tdigest().NeedsCompress() {
		sk := v.Sketch()
		chunks := sk.chunks()
		sk.mu.Lock()
		sk.tdigest().Compress()
		sk.mu.Unlock()
		k.sketchChanged(c.DB, c.Key, sk, chunks)
	}
	return bytesResult(EncodeDump(v))
}
