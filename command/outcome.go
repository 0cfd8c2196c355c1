package command

import "errors"

// Outcomes of submitting commands that a backend reports instead of
// results. The RESP layer maps each to a Redis-style error. The first
// group means nothing was applied, so the client may retry as it likes;
// the second that the commands may or may not have been applied.
var (
	// ErrNoLeader: nothing was proposed; no leader can take it now.
	ErrNoLeader = errors.New("no leader is known")
	// ErrNotAccepted: nothing was proposed; the log did not take the write
	// within the write timeout (overloaded).
	ErrNotAccepted = errors.New("the log did not accept the write in time")

	// ErrLeadershipLost: the outcome is unknown; leadership changed after
	// the write was handed to the log and before it was confirmed.
	ErrLeadershipLost = errors.New("leadership changed before it was confirmed")
	// ErrLogTimeout: the outcome is unknown; the log made no progress for
	// the whole write timeout while the write waited.
	ErrLogTimeout = errors.New("timed out waiting for the log")
	// ErrConnLost: the outcome is unknown; the connection to the leader
	// broke after the write was sent and before the leader answered.
	ErrConnLost = errors.New("the connection to the leader broke before it answered")

	// ErrReadTimeout: a read could not be made consistent in time (no
	// read index, or this node did not catch up). Nothing changed.
	ErrReadTimeout = errors.New("timed out waiting for the cluster")
)

// StorageError: nothing was proposed; the node that would log the write
// cannot write to its disk now (Cause says why). It refuses writes until
// its disk works again, as Redis refuses them with MISCONF while its AOF
// cannot be written.
type StorageError struct{ Cause string }

func (e *StorageError) Error() string { return "cannot write to disk: " + e.Cause }

// Unknown reports whether err leaves the outcome of a write unknown.
func Unknown(err error) bool {
	return errors.Is(err, ErrLeadershipLost) || errors.Is(err, ErrLogTimeout) || errors.Is(err, ErrConnLost)
}
