//go:build !cgo || !linux

package memtune

// trimC has nothing to do where Pebble allocates from the Go heap (a build
// without cgo) or C's malloc is not glibc's.
func trimC() {}
