package command

import "slices"

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
