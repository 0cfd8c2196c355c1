//go:build !failpoints

package replication

// failpoint marks a place a test build can stop at (failpoint_on.go):
// nothing in a normal build.
func failpoint(string) {}
