//go:build !amd64

package engine

func prefetch(*uint64) {}
