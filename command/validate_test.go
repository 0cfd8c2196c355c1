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
		{Op: ACLSetUser, Key: []byte("alice"), Items: [][]byte{[]byte("on")}, NX: true},
		{Op: ACLSetUser, Key: []byte(""), Items: [][]byte{[]byte("off")}, Keys: [][]byte{[]byte("on")}},
		{Op: ACLDelUser, Keys: [][]byte{[]byte("alice"), []byte("bob")}},
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
		"user with a space": func(*Cmd) *Cmd {
			return &Cmd{Op: ACLSetUser, Key: []byte("a b"), Items: [][]byte{[]byte("on")}}
		},
		"user with NUL":      func(*Cmd) *Cmd { return &Cmd{Op: ACLSetUser, Key: []byte("a\x00"), Items: [][]byte{[]byte("on")}} },
		"user without rules": func(*Cmd) *Cmd { return &Cmd{Op: ACLSetUser, Key: []byte("a")} },
		"empty rule":         func(*Cmd) *Cmd { return &Cmd{Op: ACLSetUser, Key: []byte("a"), Items: [][]byte{{}}} },
		"new with expected": func(*Cmd) *Cmd {
			return &Cmd{Op: ACLSetUser, Key: []byte("a"), Items: [][]byte{[]byte("on")}, Keys: [][]byte{[]byte("on")}, NX: true}
		},
		"rules too long": func(*Cmd) *Cmd {
			return &Cmd{Op: ACLSetUser, Key: []byte("a"), Items: [][]byte{make([]byte, MaxRuleBytes+1)}}
		},
		"deluser none":    func(*Cmd) *Cmd { return &Cmd{Op: ACLDelUser} },
		"deluser default": func(*Cmd) *Cmd { return &Cmd{Op: ACLDelUser, Keys: [][]byte{[]byte("x"), []byte(DefaultUser)}} },
		"deluser a b":     func(*Cmd) *Cmd { return &Cmd{Op: ACLDelUser, Keys: [][]byte{[]byte("a b")}} },
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

// TestUsersApply: ACL SETUSER stores only over the rules it was computed
// from (or, NX, over no user), DELUSER counts what it removed.
func TestUsersApply(t *testing.T) {
	b := func(s ...string) [][]byte {
		out := make([][]byte, len(s))
		for i, x := range s {
			out[i] = []byte(x)
		}
		return out
	}
	u := Users{}
	steps := []struct {
		c    *Cmd
		want int64
	}{
		{&Cmd{Op: ACLSetUser, Key: []byte("a"), Items: b("on", "+@all"), NX: true}, 1},
		{&Cmd{Op: ACLSetUser, Key: []byte("a"), Items: b("off"), NX: true}, 0},               // exists
		{&Cmd{Op: ACLSetUser, Key: []byte("a"), Items: b("off"), Keys: b("on")}, 0},          // not what it has
		{&Cmd{Op: ACLSetUser, Key: []byte("a"), Items: b("off"), Keys: b("on", "+@all")}, 1}, // compare and set
		{&Cmd{Op: ACLSetUser, Key: []byte("b"), Items: b("on"), Keys: b("on")}, 0},           // no such user
		{&Cmd{Op: ACLDelUser, Keys: b("a", "b", "a")}, 1},
		{&Cmd{Op: ACLDelUser, Keys: b("a")}, 0},
	}
	for i, st := range steps {
		if err := Validate(st.c); err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
		if got := u.Apply(st.c); got != st.want {
			t.Fatalf("step %d: %d, want %d (table %v)", i, got, st.want, u)
		}
	}
	if len(u) != 0 {
		t.Fatalf("table %v, want empty", u)
	}
	u = Users{"x": {"on"}}
	c := u.Clone()
	c["x"][0] = "off"
	if u["x"][0] != "on" {
		t.Fatal("Clone shares rules")
	}
}
