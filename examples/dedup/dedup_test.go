package main

import (
	"context"
	"strings"
	"testing"
)

// exact is a Deduper that remembers everything, and the batches it got.
type exact struct {
	seen    map[string]bool
	batches []int
}

func (e *exact) New(_ context.Context, ids []string) ([]bool, error) {
	e.batches = append(e.batches, len(ids))
	out := make([]bool, len(ids))
	for i, id := range ids {
		out[i] = !e.seen[id]
		e.seen[id] = true
	}
	return out, nil
}

func (e *exact) Commands() int { return len(e.batches) }

// TestRun: lines go out in order, whole, keyed by what precedes a tab,
// a repeat inside a batch included; batches hold at most the batch size;
// blank lines and a last line without a newline are handled.
func TestRun(t *testing.T) {
	in := "a\tone\nb\na\tagain\n\nc\r\nb\nd"
	d := &exact{seen: map[string]bool{}}
	var out strings.Builder
	st, err := run(context.Background(), d, strings.NewReader(in), &out, 2)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := out.String(), "a\tone\nb\nc\nd\n"; got != want {
		t.Fatalf("output %q, want %q", got, want)
	}
	if st.events != 6 || st.fresh != 4 {
		t.Fatalf("stats %+v", st)
	}
	for _, n := range d.batches {
		if n < 1 || n > 2 {
			t.Fatalf("batches %v over the size of 2", d.batches)
		}
	}
}
