//go:build !amd64

package engine

func prefetch(*uint64) {}

func prefetchByte(*byte) {}
