package server

import (
	"math"

	"github.com/bfserver/bfserver/command"
	"github.com/bfserver/bfserver/internal/ascii"
	"github.com/bfserver/bfserver/internal/redisnum"
	"github.com/bfserver/bfserver/keyspace"
	"github.com/bfserver/bfserver/resp"
)

var (
	catBloomW   = []string{"@write", "@bloom"}
	catBloomWF  = []string{"@write", "@fast", "@bloom"}
	catBloomR   = []string{"@read", "@bloom"}
	catBloomRF  = []string{"@read", "@fast", "@bloom"}
	catCuckooW  = []string{"@write", "@cuckoo"}
	catCuckooWF = []string{"@write", "@fast", "@cuckoo"}
	catCuckooR  = []string{"@read", "@cuckoo"}
	catCuckooRF = []string{"@read", "@fast", "@cuckoo"}
	kRW         = []string{"RW"}
	kRO         = []string{"RO"}
	kRWAU       = []string{"RW", "access", "update"}
)

func registerFilters() {
	module("bf.reserve", -4, flagsWrite, catBloomWF, kRW, parseBFReserve, renderOK)
	module("bf.add", 3, flagsWrite, catBloomW, kRW, parseBFAdd(false), renderBools)
	module("bf.madd", -3, flagsWrite, catBloomW, kRW, parseBFAdd(true), renderBools)
	module("bf.insert", -4, flagsWrite, catBloomW, kRW, parseBFInsert, renderBools)
	module("bf.exists", 3, flagsRead, catBloomR, kRO, parseItems(command.BFExists, false), renderBools).prefetch = true
	module("bf.mexists", -3, flagsRead, catBloomR, kRO, parseItems(command.BFExists, true), renderBools).prefetch = true
	module("bf.info", -2, flagsRead, catBloomRF, kRO, parseBFInfo, renderBFInfo)
	module("bf.card", 2, flagsRead, catBloomRF, kRO, parseKeyOnly(command.BFCard), renderInt)
	module("bf.scandump", 3, flagsRead, catBloomR, kRW, parseBFScanDump, renderScanDump)
	module("bf.loadchunk", 4, flagsWrite, catBloomW, kRW, parseLoadChunk(command.BFLoadChunk), renderOK)
	module("bf.debug", -1, flagsRead, catBloomR, kRWAU, parseDebug(command.BFDebug), renderList)

	module("cf.reserve", -3, flagsWrite, catCuckooWF, kRW, parseCFReserve, renderOK)
	module("cf.add", 3, flagsWrite, catCuckooW, kRW, parseCFAdd(false), renderBools)
	module("cf.addnx", 3, flagsWrite, catCuckooW, kRW, parseCFAdd(true), renderBools)
	module("cf.insert", -4, flagsWrite, catCuckooW, kRW, parseCFInsert(false), renderCFInsert)
	module("cf.insertnx", -4, flagsWrite, catCuckooW, kRW, parseCFInsert(true), renderCFInsert)
	module("cf.exists", 3, flagsRead, catCuckooR, kRO, parseItems(command.CFExists, false), renderBools).prefetch = true
	module("cf.mexists", -3, flagsRead, catCuckooR, kRO, parseItems(command.CFExists, true), renderBools).prefetch = true
	module("cf.count", 3, flagsRead, catCuckooR, kRO, parseItems(command.CFCount, false), renderCount)
	module("cf.del", 3, flagsWriteFst, catCuckooW, kRW, parseCFDel, renderBools)
	module("cf.info", 2, flagsRead, catCuckooRF, kRO, parseKeyOnly(command.CFInfo), renderCFInfo)
	module("cf.scandump", 3, flagsRead, catCuckooR, kRW, parseCFScanDump, renderScanDump)
	module("cf.loadchunk", 4, flagsWrite, catCuckooW, kRW, parseLoadChunk(command.CFLoadChunk), renderOK)
	module("cf.compact", -1, flagsRead, catCuckooR, kRWAU, parseCFCompact, renderOK)
	module("cf.debug", -1, flagsRead, catCuckooR, kRWAU, parseDebug(command.CFDebug), renderBulk)
}

// argIndex is RMUtil_ArgIndex: the first of args equal to word (ASCII
// case folded, as strcasecmp), or -1. Given a whole command, args[0] is
// its name, which equals no option.
func argIndex(args [][]byte, word string) int {
	for i, a := range args {
		if ascii.EqualFold(a, word) {
			return i
		}
	}
	return -1
}

// lower is b[i] lowered as C's tolower, or 0 past the end.
func lower(b []byte, i int) byte {
	if i >= len(b) {
		return 0
	}
	return ascii.Lower(b[i])
}

func parseBFReserve(s *session, args [][]byte) (command.Cmd, string) {
	if len(args) > 7 {
		return command.Cmd{}, arityError("bf.reserve")
	}
	cfg := s.srv.module.snapshot()
	er, ok := redisnum.ParseDouble(args[2])
	if !ok {
		return command.Cmd{}, msgBadErrorRate
	}
	if er >= 1 || er <= 0 {
		return command.Cmd{}, msgErrorRateRange
	}
	capa, ok := redisnum.ParseLL(args[3])
	if !ok {
		return command.Cmd{}, msgBadCapacity
	}
	if capa < 1 || capa > maxCapacity {
		return command.Cmd{}, msgCapacityRange
	}
	expansion := cfg.BFExpansion
	nonScaling := argIndex(args, "NONSCALING") >= 0 || expansion == 0
	if ex := argIndex(args, "EXPANSION"); ex >= 0 {
		if ex+1 == len(args) {
			return command.Cmd{}, msgNoExpansion
		}
		v, ok := redisnum.ParseLL(args[ex+1])
		if !ok {
			return command.Cmd{}, msgBadExpansion
		}
		if nonScaling && v != 0 {
			return command.Cmd{}, msgNonScalingExpand
		}
		if v < 0 || v > 32768 {
			return command.Cmd{}, msgExpansionRange
		}
		expansion = v
	}
	return command.Cmd{Op: command.BFReserve, Key: args[1], ErrorRate: math.Min(er, 0.25),
		Capacity: uint64(capa), Expansion: uint32(expansion), NonScaling: nonScaling || expansion == 0}, ""
}

func bfDefaults(s *session, key []byte) command.Cmd {
	cfg := s.srv.module.snapshot()
	return command.Cmd{Op: command.BFAdd, Key: key, ErrorRate: cfg.BFErrorRate,
		Capacity: uint64(cfg.BFInitialSize), Expansion: uint32(cfg.BFExpansion), NonScaling: cfg.BFExpansion == 0}
}

func parseBFAdd(multi bool) func(*session, [][]byte) (command.Cmd, string) {
	return func(s *session, args [][]byte) (command.Cmd, string) {
		c := bfDefaults(s, args[1])
		c.Items, c.Multi = args[2:], multi
		return c, ""
	}
}

// parseBFInsert follows BFInsert_RedisCommand: options are told apart by
// their first letters, and ITEMS ends them.
func parseBFInsert(s *session, args [][]byte) (command.Cmd, string) {
	c := bfDefaults(s, args[1])
	c.Multi = true
	errRate, capa, exp := c.ErrorRate, int64(c.Capacity), int64(c.Expansion)
	items := -1
	for pos := 2; pos < len(args) && items < 0; {
		a := args[pos]
		switch lower(a, 0) {
		case 'i':
			pos++
			items = pos
		case 'e':
			pos++
			if pos == len(args) {
				return command.Cmd{}, arityError("bf.insert")
			}
			if lower(a, 1) == 'r' {
				v, ok := redisnum.ParseDouble(args[pos])
				if !ok || v <= 0 || v >= 1 {
					return command.Cmd{}, msgInsBadErrorRate
				}
				errRate = v
			} else {
				v, ok := redisnum.ParseLL(args[pos])
				if !ok || v < 0 || v > 32768 {
					return command.Cmd{}, msgInsBadExpansion
				}
				exp = v
			}
			pos++
		case 'c':
			pos++
			if pos == len(args) {
				return command.Cmd{}, arityError("bf.insert")
			}
			v, ok := redisnum.ParseLL(args[pos])
			if !ok || v < 1 || v > maxCapacity {
				return command.Cmd{}, msgInsBadCapacity
			}
			capa = v
			pos++
		case 'n':
			if lower(a, 2) == 'c' {
				c.NoCreate = true
			} else {
				c.NonScaling = true
			}
			pos++
		default:
			return command.Cmd{}, msgUnknownArg
		}
	}
	if items < 0 || items == len(args) {
		return command.Cmd{}, arityError("bf.insert")
	}
	c.ErrorRate, c.Capacity, c.Expansion = math.Min(errRate, 0.25), uint64(capa), uint32(exp)
	c.NonScaling = c.NonScaling || exp == 0
	c.Items = args[items:]
	return c, ""
}

func parseItems(op command.Op, multi bool) func(*session, [][]byte) (command.Cmd, string) {
	return func(s *session, args [][]byte) (command.Cmd, string) {
		return command.Cmd{Op: op, Key: args[1], Items: args[2:], Multi: multi}, ""
	}
}

func parseKeyOnly(op command.Op) func(*session, [][]byte) (command.Cmd, string) {
	return func(s *session, args [][]byte) (command.Cmd, string) {
		return command.Cmd{Op: op, Key: args[1]}, ""
	}
}

func parseDebug(op command.Op) func(*session, [][]byte) (command.Cmd, string) {
	name := "bf.debug"
	if op == command.CFDebug {
		name = "cf.debug"
	}
	return func(s *session, args [][]byte) (command.Cmd, string) {
		if len(args) != 2 {
			return command.Cmd{}, arityError(name)
		}
		return command.Cmd{Op: op, Key: args[1]}, ""
	}
}

var bfInfoFields = map[string]uint8{
	"capacity": keyspace.InfoCapacity, "size": keyspace.InfoSize, "filters": keyspace.InfoFilters,
	"items": keyspace.InfoItems, "expansion": keyspace.InfoExpansion,
}

func parseBFInfo(s *session, args [][]byte) (command.Cmd, string) {
	if len(args) > 3 {
		return command.Cmd{}, arityError("bf.info")
	}
	c := command.Cmd{Op: command.BFInfo, Key: args[1]}
	if len(args) == 3 {
		f, ok := bfInfoFields[ascii.ToLower(args[2])]
		if !ok {
			f = 0xff // rejected after the key is checked, as RedisBloom does
		}
		c.Field = f
	}
	return c, ""
}

func parseBFScanDump(s *session, args [][]byte) (command.Cmd, string) {
	it, ok := redisnum.ParseLL(args[2])
	return command.Cmd{Op: command.BFScanDump, Key: args[1], Iter: it, Flag: !ok}, ""
}

func parseCFScanDump(s *session, args [][]byte) (command.Cmd, string) {
	it, ok := redisnum.ParseLL(args[2])
	if !ok || it < 0 {
		return command.Cmd{}, msgInvalidPosition
	}
	return command.Cmd{Op: command.CFScanDump, Key: args[1], Iter: it}, ""
}

func parseLoadChunk(op command.Op) func(*session, [][]byte) (command.Cmd, string) {
	return func(s *session, args [][]byte) (command.Cmd, string) {
		it, ok := redisnum.ParseLL(args[2])
		if op == command.BFLoadChunk && !ok {
			return command.Cmd{}, msgLoadIterNumeric
		}
		if op == command.CFLoadChunk && (!ok || it == 0) {
			return command.Cmd{}, msgInvalidPosition
		}
		return command.Cmd{Op: op, Key: args[1], Iter: it, Data: args[3]}, ""
	}
}

// cfOption finds NAME value anywhere in args (RedisBloom scans all of argv).
func cfOption(args [][]byte, name, parseMsg, rangeMsg string, lo, hi int64, def int64) (int64, string) {
	i := argIndex(args, name)
	if i < 0 {
		return def, ""
	}
	if i+1 >= len(args) {
		return 0, parseMsg
	}
	v, ok := redisnum.ParseLL(args[i+1])
	if !ok {
		return 0, parseMsg
	}
	if v < lo || v > hi {
		return 0, rangeMsg
	}
	return v, ""
}

func parseCFReserve(s *session, args [][]byte) (command.Cmd, string) {
	if len(args)%2 == 0 {
		return command.Cmd{}, arityError("cf.reserve")
	}
	cfg := s.srv.module.snapshot()
	capa, ok := redisnum.ParseLL(args[2])
	if !ok {
		return command.Cmd{}, msgInsBadCapacity
	}
	mi, msg := cfOption(args, "MAXITERATIONS", msgCFMaxIterParse, msgCFMaxIterRange, 1, 65535, cfg.CFMaxIterations)
	if msg != "" {
		return command.Cmd{}, msg
	}
	bs, msg := cfOption(args, "BUCKETSIZE", msgCFBucketParse, msgCFBucketRange, 1, 255, cfg.CFBucketSize)
	if msg != "" {
		return command.Cmd{}, msg
	}
	ex, msg := cfOption(args, "EXPANSION", msgCFExpansionParse, msgCFExpansionRange, 0, 32768, cfg.CFExpansion)
	if msg != "" {
		return command.Cmd{}, msg
	}
	if capa < 2*bs || capa > maxCapacity {
		return command.Cmd{}, msgCFCapacityRange
	}
	return command.Cmd{Op: command.CFReserve, Key: args[1], Capacity: uint64(capa), BucketSize: uint16(bs),
		MaxIterations: uint16(mi), Expansion: uint32(ex)}, ""
}

func cfDefaults(s *session, key []byte, nx bool) command.Cmd {
	cfg := s.srv.module.snapshot()
	return command.Cmd{Op: command.CFAdd, Key: key, NX: nx, Capacity: uint64(cfg.CFInitialSize),
		BucketSize: uint16(cfg.CFBucketSize), MaxIterations: uint16(cfg.CFMaxIterations),
		Expansion: uint32(cfg.CFExpansion), MaxExpansions: uint32(cfg.CFMaxExpansions)}
}

func parseCFAdd(nx bool) func(*session, [][]byte) (command.Cmd, string) {
	return func(s *session, args [][]byte) (command.Cmd, string) {
		c := cfDefaults(s, args[1], nx)
		c.Items = args[2:]
		return c, ""
	}
}

func parseCFInsert(nx bool) func(*session, [][]byte) (command.Cmd, string) {
	name := "cf.insert"
	if nx {
		name = "cf.insertnx"
	}
	return func(s *session, args [][]byte) (command.Cmd, string) {
		c := cfDefaults(s, args[1], nx)
		c.Multi = true
		items := -1
		for pos := 2; pos < len(args) && items < 0; {
			switch lower(args[pos], 0) {
			case 'c':
				pos++
				if pos == len(args) {
					return command.Cmd{}, arityError(name)
				}
				v, ok := redisnum.ParseLL(args[pos])
				if !ok {
					return command.Cmd{}, msgInsBadCapacity
				}
				if v < 2*int64(c.BucketSize) || v > maxCapacity {
					return command.Cmd{}, msgCFInsCapRange
				}
				c.Capacity = uint64(v)
				pos++
			case 'i':
				pos++
				items = pos
			case 'n':
				c.NoCreate = true
				pos++
			default:
				return command.Cmd{}, msgUnknownArg
			}
		}
		if items < 0 || items == len(args) {
			return command.Cmd{}, arityError(name)
		}
		c.Items = args[items:]
		return c, ""
	}
}

func parseCFDel(s *session, args [][]byte) (command.Cmd, string) {
	return command.Cmd{Op: command.CFDel, Key: args[1], Items: args[2:3]}, ""
}

func parseCFCompact(s *session, args [][]byte) (command.Cmd, string) {
	if len(args) != 2 {
		return command.Cmd{}, arityError("cf.compact")
	}
	return command.Cmd{Op: command.CFCompact, Key: args[1]}, ""
}

func renderOK(w *resp.Writer, c *command.Cmd, r *keyspace.Result) { w.Simple("OK") }

func renderInt(w *resp.Writer, c *command.Cmd, r *keyspace.Result) { w.Int(r.Int) }

func renderBulk(w *resp.Writer, c *command.Cmd, r *keyspace.Result) {
	if r.Null {
		w.Null()
		return
	}
	w.Bulk(r.Bytes())
}

func renderCount(w *resp.Writer, c *command.Cmd, r *keyspace.Result) { w.Int(r.Ints[0]) }

// renderBools writes per-item booleans, then the error that stopped the
// loop, if any (BF.MADD/BF.INSERT on a full non-scaling filter).
func renderBools(w *resp.Writer, c *command.Cmd, r *keyspace.Result) {
	if !c.Multi {
		w.Bool(r.Ints[0] == 1)
		return
	}
	n := len(r.Ints)
	if r.Tail() != nil {
		n++
	}
	w.Array(n)
	for _, v := range r.Ints {
		w.Bool(v == 1)
	}
	if r.Tail() != nil {
		w.Error(wireError(r.Tail()))
	}
}

// renderCFInsert: INSERTNX always answers integers; INSERT answers
// booleans in RESP3, with -1 (no room) as false.
func renderCFInsert(w *resp.Writer, c *command.Cmd, r *keyspace.Result) {
	w.Array(len(r.Ints))
	for _, v := range r.Ints {
		if c.NX || w.Proto != 3 {
			w.Int(v)
		} else {
			w.Bool(v == 1)
		}
	}
}

var bfInfoNames = [...]string{"", "Capacity", "Size", "Number of filters", "Number of items inserted", "Expansion rate"}

func renderBFInfo(w *resp.Writer, c *command.Cmd, r *keyspace.Result) {
	if c.Field == 0xff {
		w.Error(msgInvalidInfo)
		return
	}
	i := r.BF()
	vals := [...]uint64{0, i.Capacity, i.Size, i.Filters, i.Items, i.Expansion}
	field := func(f uint8) {
		w.Simple(bfInfoNames[f])
		if f == keyspace.InfoExpansion && i.NonScaling {
			w.Null()
		} else {
			w.Int(int64(vals[f]))
		}
	}
	if c.Field != keyspace.InfoAll {
		if w.Proto == 3 {
			w.Map(1)
		} else {
			w.Array(1)
			if c.Field == keyspace.InfoExpansion && i.NonScaling {
				w.Null()
			} else {
				w.Int(int64(vals[c.Field]))
			}
			return
		}
		field(c.Field)
		return
	}
	w.Map(5)
	for f := uint8(1); f <= 5; f++ {
		field(f)
	}
}

func renderCFInfo(w *resp.Writer, c *command.Cmd, r *keyspace.Result) {
	i := r.CF()
	w.Map(8)
	pairs := []struct {
		k string
		v uint64
	}{
		{"Size", i.Size}, {"Number of buckets", i.NumBuckets}, {"Number of filters", i.NumFilters},
		{"Number of items inserted", i.NumItems}, {"Number of items deleted", i.NumDeletes},
		{"Bucket size", uint64(i.BucketSize)}, {"Expansion rate", uint64(i.Expansion)},
		{"Max iterations", uint64(i.MaxIterations)},
	}
	for _, p := range pairs {
		w.Simple(p.k)
		w.Int(int64(p.v))
	}
}

func renderScanDump(w *resp.Writer, c *command.Cmd, r *keyspace.Result) {
	w.Array(2)
	w.Int(r.Int)
	if r.Null {
		w.Null()
		return
	}
	w.Bulk(r.Bytes())
}
