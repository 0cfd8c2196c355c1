package cmdinfo

import (
	"slices"
	"testing"
)

// TestSetKeyFlags: SET's key flags depend on its arguments, as Redis's
// setGetKeys reports them.
func TestSetKeyFlags(t *testing.T) {
	set := Describe(Declared{Full: "set"}, nil)
	if !set.Captured {
		t.Fatal("SET has no captured COMMAND INFO")
	}
	b := func(s ...string) [][]byte {
		out := make([][]byte, len(s))
		for i, x := range s {
			out[i] = []byte(x)
		}
		return out
	}
	for _, c := range []struct {
		args []string
		want []string
	}{
		{[]string{"set", "k", "v", "get"}, []string{"RW", "access", "update"}},
		{[]string{"set", "k", "v"}, []string{"OW", "update"}},
	} {
		pos, flags := set.Keys(b(c.args...))
		if !slices.Equal(pos, []int{1}) || len(flags) != 1 || !slices.Equal(flags[0], c.want) {
			t.Errorf("%q: keys %v flags %v, want [1] %v", c.args, pos, flags, c.want)
		}
	}
}

// TestDescribeUncaptured: a command Redis does not have is described from
// its declaration: a key spec over its key range, a summary, a group.
func TestDescribeUncaptured(t *testing.T) {
	c := Describe(Declared{Full: "bfx.nosuch", Arity: -2, First: 1, Last: 1, Step: 1, KeyFlags: []string{"RO"}, Module: true}, nil)
	if c.Captured || c.Info.Arity != -2 || len(c.Info.KeySpecs) != 1 || c.Info.KeySpecs[0].Index != 1 {
		t.Fatalf("info %+v", c.Info)
	}
	if c.Doc.Summary != "BFX.NOSUCH command" || c.Doc.Group != "module" || c.Doc.Module != "bf" {
		t.Fatalf("doc %+v", c.Doc)
	}
	if pos, _ := c.Keys([][]byte{[]byte("bfx.nosuch"), []byte("k")}); !slices.Equal(pos, []int{1}) {
		t.Fatalf("keys %v", pos)
	}
}
