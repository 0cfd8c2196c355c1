package persistence

import (
	"math/rand/v2"
	"slices"
	"strconv"
	"testing"

	"github.com/bfserver/bfserver/keyspace"
)

// walkedKeys returns n distinct keys over a few databases and lengths,
// in the walk's order (database, key length, key).
func walkedKeys(r *rand.Rand, n int) []keyspace.Walked {
	seen := map[[2]string]bool{}
	var keys []keyspace.Walked
	for len(keys) < n {
		db := uint8(r.IntN(3))
		k := "tenant:" + strconv.Itoa(r.IntN(n*10))
		if r.IntN(8) == 0 {
			k = string(rune('a' + r.IntN(26)))
		}
		if seen[[2]string{string(rune(db)), k}] {
			continue
		}
		seen[[2]string{string(rune(db)), k}] = true
		keys = append(keys, keyspace.Walked{Key: k, DB: db})
	}
	slices.SortFunc(keys, func(a, b keyspace.Walked) int {
		if a.DB != b.DB {
			return int(a.DB) - int(b.DB)
		}
		if len(a.Key) != len(b.Key) {
			return len(a.Key) - len(b.Key)
		}
		return compareStrings(a.Key, b.Key)
	})
	return keys
}

// sortByKey sorts keys in metadata order, as one sort would.
func sortByKey(keys []keyspace.Walked) {
	slices.SortFunc(keys, func(a, b keyspace.Walked) int { return byKey(&a, &b) })
}

// collect returns the keys inKeyOrder gives, as "db:key", up to stop.
func collect(keys []keyspace.Walked, stop int) []string {
	var out []string
	inKeyOrder(keyspace.WalkedKeysOf(keys...), func(w *keyspace.Walked) bool {
		if len(out) == stop {
			return false
		}
		out = append(out, names(*w)...)
		return true
	})
	return out
}

func names(keys ...keyspace.Walked) []string {
	out := make([]string, len(keys))
	for i, w := range keys {
		out[i] = strconv.Itoa(int(w.DB)) + ":" + w.Key
	}
	return out
}

// TestInKeyOrder: the merge of the walk's runs gives the keys in the
// order a sort by (database, key) gives, for keys in the walk's order and,
// sorted first, in any other; it stops where fn says.
func TestInKeyOrder(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, n := range []int{0, 1, 2, 3, 10, 1000, 20000} {
		keys := walkedKeys(r, n)
		sorted := slices.Clone(keys)
		sortByKey(sorted)
		want := names(sorted...)
		if got := collect(slices.Clone(keys), -1); !slices.Equal(got, want) {
			t.Fatalf("n=%d: merged order differs from the sort's", n)
		}
		shuffled := slices.Clone(keys)
		r.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
		if got := collect(shuffled, -1); !slices.Equal(got, want) {
			t.Fatalf("n=%d: keys out of the walk's order come out of order", n)
		}
		if n > 2 {
			if got := collect(slices.Clone(keys), n/2); !slices.Equal(got, want[:n/2]) {
				t.Fatalf("n=%d: stopping after %d gave %d keys, or others", n, n/2, len(got))
			}
			if got := collect(shuffled, n/2); !slices.Equal(got, want[:n/2]) {
				t.Fatalf("n=%d, out of the walk's order: stopping after %d gave %d keys, or others", n, n/2, len(got))
			}
		}
	}
}

// BenchmarkKeyOrder: a snapshot's million keys, merged against sorted.
func BenchmarkKeyOrder(b *testing.B) {
	keys := walkedKeys(rand.New(rand.NewPCG(1, 2)), 1_000_000)
	b.Run("merge", func(b *testing.B) {
		walked := keyspace.WalkedKeysOf(keys...)
		for b.Loop() {
			n := 0
			inKeyOrder(walked, func(*keyspace.Walked) bool { n++; return true })
		}
	})
	b.Run("sort", func(b *testing.B) {
		for b.Loop() {
			sortByKey(slices.Clone(keys))
		}
	})
}
