//go:build !linux

package engine

import "sync/atomic"

func adviseHuge[T uint64 | byte]([]T) {}

func prefault[T uint64 | byte]([]T, *atomic.Bool) {}
