package keyspace

import (
	"errors"

	"github.com/bfserver/bfserver/command"
	"github.com/bfserver/bfserver/rdb"
	"github.com/bfserver/bfserver/scalable"
	"github.com/bfserver/bfserver/sketch/window"
)

// rdbTypeString is RDB_TYPE_STRING.
const rdbTypeString = 0

var (
	bloomID  = rdb.ModuleID(scalable.BloomTypeName, scalable.EncodingVer)
	cuckooID = rdb.ModuleID(scalable.CuckooTypeName, scalable.EncodingVer)
	// windowID is bfserver's own module type (KindWindow): one RDB string
	// holding the filter's dump (window.Marshal, checksummed). Only
	// bfserver RESTOREs it.
	windowID = rdb.ModuleID(KindWindow.TypeName(), windowEncVer)
)

// windowEncVer is the version of the window's DUMP encoding.
const windowEncVer = 1

// EncodeDump serialises a value as Redis's DUMP does: the RDB encoding of
// the value (RedisBloom's module format for filters), the RDB version and a
// CRC64. Redis with RedisBloom can RESTORE it, and it RESTOREs here.
func EncodeDump(v *Value) []byte {
	var b []byte
	switch v.Kind {
	case KindBloom:
		b = rdb.AppendLen([]byte{rdb.TypeModule2}, bloomID)
		b = append(v.Bloom().AppendRDB(b), rdb.OpEOF)
	case KindCuckoo:
		b = rdb.AppendLen([]byte{rdb.TypeModule2}, cuckooID)
		b = append(v.Cuckoo().AppendRDB(b), rdb.OpEOF)
	case KindWindow:
		b = rdb.AppendLen([]byte{rdb.TypeModule2}, windowID)
		b = append(rdb.AppendString(b, v.Window().Marshal()), rdb.OpEOF)
	default:
		if sk := v.Sketch(); sk != nil {
			b = rdb.AppendLen([]byte{rdb.TypeModule2}, sketchByKind[v.Kind].id)
			b = append(sk.appendRDB(b), rdb.OpEOF)
			break
		}
		return rdb.Seal(rdb.AppendRawString([]byte{rdbTypeString}, []byte(v.Str())))
	}
	return rdb.Seal(b)
}

// decodeDump parses a DUMP payload into a value.
func decodeDump(p []byte, maxBytes uint64) (*Value, error) {
	body, err := rdb.Open(p)
	if err != nil {
		return nil, ErrBadPayload
	}
	r := rdb.NewReader(body, maxBytes)
	var v *Value
	switch r.Byte() {
	case rdbTypeString:
		v = StringValue(string(r.RawString()))
		if r.Err() != nil || len(r.Rest()) != 0 {
			return nil, ErrBadFormat
		}
		return v, nil
	case rdb.TypeModule2:
	default:
		return nil, ErrBadFormat
	}
	switch id := r.Len(); id {
	case bloomID:
		var ch *scalable.Chain
		ch, err = scalable.ChainFromRDB(r, maxBytes)
		v = BloomValue(ch)
	case cuckooID:
		var cf *scalable.Cuckoo
		cf, err = scalable.CuckooFromRDB(r, maxBytes)
		v = CuckooValue(cf)
	case windowID:
		var f *window.Filter
		if f, err = window.Unmarshal(r.String(), maxBytes); err == nil {
			v = WindowValue(f)
		} else if errors.Is(err, window.ErrTooLarge) {
			err = scalable.ErrTooLarge
		}
	default:
		var ok bool
		if v, ok, err = sketchFromRDB(id, r, maxBytes); !ok {
			return nil, ErrBadFormat
		}
	}
	if errors.Is(err, scalable.ErrTooLarge) || err == ErrTooLarge {
		return nil, ErrTooLarge
	}
	if err != nil || r.Len() != rdb.OpEOF || r.Err() != nil || len(r.Rest()) != 0 {
		return nil, ErrBadFormat
	}
	return v, nil
}

// restore is RESTORE: c.Iter is the absolute expiry (0 = none), c.NX means
// REPLACE.
func (k *Keyspace) restore(c *command.Cmd) Result {
	if !c.NX && k.writeLookup(c.DB, c.Key, c.Now) != nil {
		return Result{Err: ErrBusyKey}
	}
	v, err := decodeDump(c.Data, c.MaxBytes)
	if err != nil {
		return Result{Err: err}
	}
	if c.Iter != 0 && c.Iter <= c.Now {
		// REPLACE with a past expiry deletes what was there; a key
		// whose own expiry passed was gone already.
		if k.writeLookup(c.DB, c.Key, c.Now) != nil && k.remove(c.DB, string(c.Key)) {
			k.touch(c.DB, c.Key, c.Now)
		}
		return Result{}
	}
	v.ExpireAt = c.Iter
	k.set(c.DB, string(c.Key), v)
	k.touch(c.DB, c.Key, c.Now)
	return Result{}
}

// sealForFuzz frames a body as a payload with a valid trailer. Tests only.
func sealForFuzz(body []byte) []byte { return rdb.Seal(append([]byte(nil), body...)) }
