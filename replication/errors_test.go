package replication

import (
	"errors"
	"testing"

	"github.com/bfserver/bfserver/command"
)

// TestPeerErrorsRoundTrip: every outcome a peer can answer crosses the
// peer protocol as itself (by code, never by text), and so do the errors
// that carry text of their own.
func TestPeerErrorsRoundTrip(t *testing.T) {
	all := append([]error{&command.StorageError{Cause: "writing the image: EIO"},
		&command.InvalidError{Op: command.CFAdd, Reason: "bucket size 0 out of range"},
		&RemoteError{Msg: "raft: node is not the leader"}}, peerErrors[1:]...)
	for _, want := range all {
		got := decodeErr(encodeErr(want))
		if got.Error() != want.Error() {
			t.Errorf("%v came back as %v", want, got)
		}
		if errors.Is(want, command.ErrNoLeader) && !errors.Is(got, command.ErrNoLeader) || command.Unknown(want) != command.Unknown(got) {
			t.Errorf("%v came back as %v, another outcome", want, got)
		}
	}
	for _, e := range []error{command.ErrNoLeader, command.ErrNotAccepted, command.ErrLeadershipLost, command.ErrLogTimeout, command.ErrConnLost, command.ErrReadTimeout} {
		found := false
		for _, p := range peerErrors {
			found = found || p == e
		}
		if !found {
			t.Errorf("outcome %v has no peer code", e)
		}
	}
}
