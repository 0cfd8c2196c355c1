package command

import "errors"

// Outcomes of submitting commands that a backend reports instead of
// results. The RESP layer maps each to a Redis-style error.
var (
	// ErrNoLeader: nothing was proposed; no leader can take it now.
	ErrNoLeader = errors.New("no leader")
	// ErrUnknownOutcome: the command may or may not have been applied
	// (leadership changed, or the connection to the leader broke).
	ErrUnknownOutcome = errors.New("outcome unknown")
	// ErrTimeout: the cluster did not answer in time.
	ErrTimeout = errors.New("timeout")
)
