package keyspace

import (
	"math/rand/v2"
	"strconv"
	"testing"
	"unsafe"
)

// TestKeyTable runs random sets, deletes and lookups against a Go map,
// with the hash narrowed so that most keys collide and live in spill.
func TestKeyTable(t *testing.T) {
	for _, mask := range []uint64{^uint64(0), 7, 1, 0} {
		t.Run(strconv.FormatUint(mask, 16), func(t *testing.T) {
			tbl := newKeyTable()
			tbl.mask = mask
			model := map[string]*Value{}
			r := rand.New(rand.NewPCG(1, mask))
			check := func(step int) {
				t.Helper()
				if tbl.len() != len(model) {
					t.Fatalf("step %d: len %d, want %d", step, tbl.len(), len(model))
				}
				seen := map[string]bool{}
				for key, v := range tbl.all() {
					if seen[key] || model[key] != v {
						t.Fatalf("step %d: all yields %q (again: %v) with %p, want %p", step, key, seen[key], v, model[key])
					}
					seen[key] = true
				}
				if len(seen) != len(model) {
					t.Fatalf("step %d: all yields %d keys, want %d", step, len(seen), len(model))
				}
			}
			for step := range 20000 {
				key := "k" + strconv.Itoa(r.IntN(64))
				switch r.IntN(4) {
				case 0, 1:
					v := &Value{}
					tbl.set(key, v)
					model[key] = v
				case 2:
					_, want := model[key]
					if got := tbl.del(key); got != want {
						t.Fatalf("step %d: del %q = %v, want %v", step, key, got, want)
					}
					delete(model, key)
				}
				if got := tbl.getBytes([]byte(key)); got != model[key] {
					t.Fatalf("step %d: get %q = %p, want %p", step, key, got, model[key])
				}
				if step%97 == 0 {
					check(step)
				}
			}
			check(-1)
			// Deleting every other key while ranging, as FLUSHDB's walk
			// and a Go map allow, leaves the rest.
			odd := false
			for key := range tbl.all() {
				if odd = !odd; odd {
					tbl.del(key)
					delete(model, key)
				}
			}
			check(-2)
		})
	}
}

// TestKeyTableTakesNewKey: set over a key already filed keeps the new
// key string, which may point into the new value's entry (keyInside), and
// not the old one, which would keep the replaced entry alive.
func TestKeyTableTakesNewKey(t *testing.T) {
	for _, mask := range []uint64{^uint64(0), 0} {
		tbl := newKeyTable()
		tbl.mask = mask
		tbl.set("other", &Value{}) // with mask 0, "key" lands in spill
		first, second := []byte("key"), []byte("key")
		tbl.set(unsafe.String(&first[0], 3), &Value{})
		tbl.set(unsafe.String(&second[0], 3), &Value{})
		for key := range tbl.all() {
			if key == "key" && unsafe.StringData(key) != &second[0] {
				t.Fatalf("mask %x: the slot kept the old key string", mask)
			}
		}
	}
}
