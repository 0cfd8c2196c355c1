//go:build !linux

package engine

import "unsafe"

func adviseHuge(unsafe.Pointer, int) {}
