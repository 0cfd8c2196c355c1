//go:build !amd64

package engine

import "unsafe"

// PrefetchLine is a no-op where no prefetch instruction is wired.
func PrefetchLine(unsafe.Pointer) {}
