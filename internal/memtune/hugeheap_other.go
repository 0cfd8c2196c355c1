//go:build !linux

package memtune

import (
	"context"
	"time"
)

// hugeHeap has nothing to advise where the kernel is not Linux's.
func hugeHeap(context.Context, time.Duration) {}
