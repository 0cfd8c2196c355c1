package command

import (
	"slices"
	"sync/atomic"
)

// Users is the replicated ACL user table: each user's name and rules, the
// words ACL LIST shows after the name ("on", "#<sha256>", "~k*", "-@all",
// "+bf.add", "(~s* -@all +get)"…). The RESP layer computes a user's new
// rules and proposes them with the rules it computed them from; the state
// machine (and memstore) only compares and stores, so applying never
// depends on a build's command table.
type Users map[string][]string

// Apply applies an ACLSetUser or ACLDelUser command, already validated, and
// returns its result: for ACLSetUser 1 when stored, 0 when the user's rules
// were no longer those the command was computed from (another change came
// first: the proposer computes again); for ACLDelUser the number of users
// removed.
func (u Users) Apply(c *Cmd) int64 {
	switch c.Op {
	case ACLSetUser:
		have, ok := u[string(c.Key)]
		if c.NX && ok || !c.NX && (!ok || !sameRules(have, c.Keys)) {
			return 0
		}
		rules := make([]string, len(c.Items))
		for i, r := range c.Items {
			rules[i] = string(r)
		}
		u[string(c.Key)] = rules
		return 1
	case ACLDelUser:
		var n int64
		for _, name := range c.Keys {
			if _, ok := u[string(name)]; ok {
				delete(u, string(name))
				n++
			}
		}
		return n
	}
	return 0
}

func sameRules(have []string, want [][]byte) bool {
	return slices.EqualFunc(have, want, func(a string, b []byte) bool { return a == string(b) })
}

// Clone copies the table.
func (u Users) Clone() Users {
	out := make(Users, len(u))
	for k, v := range u {
		out[k] = slices.Clone(v)
	}
	return out
}

// UserTable holds the current user table at a version, for the state
// machine and memstore alike. Versions count changes and loads in this
// process; they are not replicated. The zero value holds no table: Set
// one before Load.
type UserTable struct {
	p atomic.Pointer[usersAt]
}

// usersAt is the table at one version, and a channel closed when the
// next version replaces it.
type usersAt struct {
	version uint64
	users   Users
	changed chan struct{}
}

// Set makes u (not to be modified afterwards) the current table. One
// caller at a time.
func (t *UserTable) Set(u Users) {
	old := t.p.Load()
	next := &usersAt{version: 1, users: u, changed: make(chan struct{})}
	if old != nil {
		next.version = old.version + 1
	}
	t.p.Store(next)
	if old != nil {
		close(old.changed)
	}
}

// Load returns the table (not to be modified), its version and a channel
// closed when it next changes.
func (t *UserTable) Load() (version uint64, users Users, changed <-chan struct{}) {
	u := t.p.Load()
	return u.version, u.users, u.changed
}

// Users is the current table (not to be modified).
func (t *UserTable) Users() Users { return t.p.Load().users }

// Version is the current table's version.
func (t *UserTable) Version() uint64 { return t.p.Load().version }
