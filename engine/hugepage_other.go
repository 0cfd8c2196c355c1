//go:build !linux

package engine

func adviseHuge[T uint64 | byte]([]T) {}
