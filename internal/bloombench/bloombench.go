// Package bloombench is the one benchmark body that measures any Bloom
// filter the same way: Add of fresh items, Test of added items (positive)
// and of never-added items (negative), at a given item count. bfserver's
// chain and bits-and-blooms (in bench/bloomcompare) both run through it.
package bloombench

import (
	"encoding/binary"
	"testing"
)

// Filter is what a benchmarked Bloom filter offers.
type Filter interface {
	Add(item []byte)
	Test(item []byte) bool
}

// item writes the i-th item (16 bytes: a prefix and i) into buf; negatives
// use another prefix so they are never added.
func item(buf *[16]byte, prefix uint64, i uint64) []byte {
	binary.LittleEndian.PutUint64(buf[:8], prefix)
	binary.LittleEndian.PutUint64(buf[8:], i)
	return buf[:]
}

const (
	added = 0x6164646564 // "added"
	never = 0x6e65766572 // "never"
)

// Fill adds items 0..n-1.
func Fill(f Filter, n int) {
	var buf [16]byte
	for i := 0; i < n; i++ {
		f.Add(item(&buf, added, uint64(i)))
	}
}

// Run benchmarks Add, TestPositive and TestNegative on filters sized for n
// items at error rate 0.01. The Test benchmarks share one filter filled
// with n items.
func Run(b *testing.B, n int, newFilter func(n int) Filter) {
	b.Run("Add", func(b *testing.B) {
		f := newFilter(n)
		var buf [16]byte
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			f.Add(item(&buf, added, uint64(i%n)))
		}
	})
	full := newFilter(n)
	Fill(full, n)
	b.Run("TestPositive", func(b *testing.B) {
		var buf [16]byte
		for i := 0; i < b.N; i++ {
			if !full.Test(item(&buf, added, uint64(i%n))) {
				b.Fatal("false negative")
			}
		}
	})
	b.Run("TestNegative", func(b *testing.B) {
		var buf [16]byte
		for i := 0; i < b.N; i++ {
			full.Test(item(&buf, never, uint64(i)))
		}
	})
}
