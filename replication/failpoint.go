//go:build !failpoints

package replication

import "github.com/hashicorp/raft"

// failpoint marks a place a test build can stop at (failpoint_on.go):
// nothing in a normal build.
func failpoint(string) {}

// failpointCorrupt marks bytes a test build can damage: nothing in a
// normal build.
func failpointCorrupt(string, []byte) {}

// failpointTransport is Raft's transport; a test build wraps it to damage
// the snapshots it sends.
func failpointTransport(t *raft.NetworkTransport) raft.Transport { return t }
