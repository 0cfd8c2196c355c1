package server

import (
	"strings"
	"testing"

	"github.com/bfserver/bfserver/command"
	"github.com/bfserver/bfserver/keyspace"
)

// TestWireErrors ties the error lists together: every keyspace error and
// every outcome a backend reports has its own wire string in the one
// table, written as Redis writes errors (a word of capitals first, or one
// of RedisBloom's unprefixed texts).
func TestWireErrors(t *testing.T) {
	seen := map[string]error{}
	check := func(err error) {
		s, ok := wireErrors[err]
		if !ok {
			t.Errorf("%v has no wire string", err)
			return
		}
		if strings.ContainsAny(s, "\r\n") {
			t.Errorf("%v: wire string %q breaks the framing", err, s)
		}
		if other, dup := seen[s]; dup {
			t.Errorf("%v and %v share the wire string %q", err, other, s)
		}
		seen[s] = err
	}
	for _, e := range keyspace.Errors() {
		check(e)
	}
	for _, e := range []error{command.ErrNoLeader, command.ErrNotAccepted, command.ErrLeadershipLost,
		command.ErrLogTimeout, command.ErrConnLost, command.ErrReadTimeout} {
		check(e)
		if command.Unknown(e) != strings.HasPrefix(wireErrors[e], "TRYAGAIN the write may or may not") {
			t.Errorf("%v: unknown %v, but its wire string is %q", e, command.Unknown(e), wireErrors[e])
		}
	}
	if got := wireError(&command.StorageError{Cause: "writing the image: No space left on device"}); !strings.HasPrefix(got, "MISCONF ") {
		t.Errorf("a storage error answers %q", got)
	}
	if got := wireError(&command.InvalidError{Op: command.CFAdd, Reason: "bucket size 0"}); !strings.HasPrefix(got, "ERR invalid command") {
		t.Errorf("an invalid command answers %q", got)
	}
}
