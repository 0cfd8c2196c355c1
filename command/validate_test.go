package command

import (
	"errors"
	"math"
	"testing"
)

func bfAdd() *Cmd {
	return &Cmd{Op: BFAdd, Key: []byte("k"), Items: [][]byte{[]byte("a")}, ErrorRate: 0.01, Capacity: 100, Expansion: 2, MaxBytes: 1 << 20}
}

func cfAdd() *Cmd {
	return &Cmd{Op: CFAdd, Key: []byte("c"), Items: [][]byte{[]byte("a")}, Capacity: 1024, BucketSize: 2, MaxIterations: 20, Expansion: 1, MaxExpansions: 32}
}

// TestValidate: each invariant Apply relies on is refused when broken, and
// the commands the RESP layer builds with RedisBloom's defaults pass.
func TestValidate(t *testing.T) {
	for _, c := range []*Cmd{bfAdd(), cfAdd(),
		{Op: BFReserve, ErrorRate: MaxErrorRate, Capacity: MaxCapacity, Expansion: MaxExpansion},
		{Op: CFReserve, Capacity: 2 * MaxBucketSize, BucketSize: MaxBucketSize, MaxIterations: MaxIterations},
		{Op: Del, Keys: [][]byte{{}}}, {Op: FlushAll}, {Op: Expire, Field: CondLT}, {Op: Scan, Count: MaxScanCount},
		{Op: BFInfo, Field: 0xff}, {Op: SetMember, DB: NumDBs - 1},
		{Op: Watch}, {Op: Watch, Keys: [][]byte{[]byte("k"), {}}, Data: append(make([]byte, 9), NumDBs-1, 0, 0, 0, 0, 0, 0, 0, 0), Count: MaxItems},
	} {
		if err := Validate(c); err != nil {
			t.Errorf("%+v: %v", c, err)
		}
	}
	bad := map[string]func(*Cmd) *Cmd{
		"unknown op":          func(*Cmd) *Cmd { return &Cmd{Op: 63} },
		"db 16":               func(c *Cmd) *Cmd { c.DB = NumDBs; return c },
		"error rate 0":        func(c *Cmd) *Cmd { c.ErrorRate = 0; return c },
		"error rate NaN":      func(c *Cmd) *Cmd { c.ErrorRate = math.NaN(); return c },
		"error rate 0.3":      func(c *Cmd) *Cmd { c.ErrorRate = 0.3; return c },
		"capacity 0":          func(c *Cmd) *Cmd { c.Capacity = 0; return c },
		"capacity 2^30+1":     func(c *Cmd) *Cmd { c.Capacity = MaxCapacity + 1; return c },
		"expansion 32769":     func(c *Cmd) *Cmd { c.Expansion = MaxExpansion + 1; return c },
		"no items":            func(c *Cmd) *Cmd { c.Items = nil; return c },
		"too many items":      func(c *Cmd) *Cmd { c.Items = make([][]byte, MaxItems+1); return c },
		"cap over 1 TiB":      func(c *Cmd) *Cmd { c.MaxBytes = MaxFilterBytes + 1; return c },
		"cf bucket 0":         func(*Cmd) *Cmd { c := cfAdd(); c.BucketSize = 0; return c },
		"cf bucket 256":       func(*Cmd) *Cmd { c := cfAdd(); c.BucketSize = 256; c.Capacity = 1024; return c },
		"cf capacity < 2×bs":  func(*Cmd) *Cmd { c := cfAdd(); c.Capacity = 3; return c },
		"cf iterations 0":     func(*Cmd) *Cmd { c := cfAdd(); c.MaxIterations = 0; return c },
		"cf max expansions 0": func(*Cmd) *Cmd { c := cfAdd(); c.MaxExpansions = 0; return c },
		"cf del two items":    func(*Cmd) *Cmd { return &Cmd{Op: CFDel, Items: [][]byte{{}, {}}} },
		"expire condition":    func(*Cmd) *Cmd { return &Cmd{Op: Expire, Field: CondLT + 1} },
		"scan negative":       func(*Cmd) *Cmd { return &Cmd{Op: Scan, Iter: -1} },
		"restore negative":    func(*Cmd) *Cmd { return &Cmd{Op: Restore, Iter: -1} },
		"del no keys":         func(*Cmd) *Cmd { return &Cmd{Op: Del} },
		"watch short data":    func(*Cmd) *Cmd { return &Cmd{Op: Watch, Keys: [][]byte{{}}, Data: make([]byte, 8)} },
		"watch data, no keys": func(*Cmd) *Cmd { return &Cmd{Op: Watch, Data: make([]byte, 9)} },
		"watch db 16": func(*Cmd) *Cmd {
			return &Cmd{Op: Watch, Keys: [][]byte{{}}, Data: append([]byte{NumDBs}, make([]byte, 8)...)}
		},
		"watch count -1":     func(*Cmd) *Cmd { return &Cmd{Op: Watch, Count: -1} },
		"watch count 2^20+1": func(*Cmd) *Cmd { return &Cmd{Op: Watch, Count: MaxItems + 1} },
	}
	for name, mk := range bad {
		err := Validate(mk(bfAdd()))
		var inv *InvalidError
		if !errors.As(err, &inv) {
			t.Errorf("%s: %v, want an InvalidError", name, err)
		}
	}
}

// TestEntryLevel: entries of level-1 commands stay version 2, which every
// earlier build reads; an entry that declares a level this build does not
// know fails with the level it needs, before any command is decoded.
func TestEntryLevel(t *testing.T) {
	if b := EncodeBatch([]*Cmd{bfAdd(), cfAdd()}); b[0] != version2 {
		t.Fatalf("level-1 entry written as version %d", b[0])
	}
	body := EncodeBatch([]*Cmd{bfAdd()})[1:]
	ok := append([]byte{version3, Level}, body...)
	if cmds, err := DecodeBatch(ok); err != nil || len(cmds) != 1 {
		t.Fatalf("version 3 at level %d: %v", Level, err)
	}
	future := append([]byte{version3, Level + 1}, body...)
	_, err := DecodeBatch(future)
	var lv *LevelError
	if !errors.As(err, &lv) || lv.Need != Level+1 {
		t.Fatalf("future level: %v", err)
	}
}
