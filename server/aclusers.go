package server

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/bfserver/bfserver/acl"
	"github.com/bfserver/bfserver/command"
)

// UserTable is implemented by backends that keep the replicated ACL user
// table. ACL SETUSER and DELUSER reach it through Backend.Write as
// command.ACLSetUser and command.ACLDelUser, so every node applies the
// same changes in log order; the server reads it here and parses each
// user's rules once per version.
type UserTable interface {
	// Users returns the table's version (it changes whenever the table
	// does), the table (name → rules; not to be modified) and a channel
	// closed when the table next changes.
	Users() (version uint64, users map[string][]string, changed <-chan struct{})
	// UsersVersion is the version alone; it is read for every command.
	UsersVersion() uint64
}

// aclState is the parsed user table at one version. The default user is
// always there: the table's, or while it has none Redis's default with
// requirepass's password.
type aclState struct {
	version uint64
	stored  map[string][]string // the table as read
	users   map[string]*acl.User
	names   []string // sorted
	def     *acl.User
	// open: the default user is on and needs no password, so clients need
	// not authenticate (Redis's authRequired).
	open bool
	// seeding: built while the --user users were not yet in the table.
	seeding bool
}

// aclCache parses the table when its version moves.
type aclCache struct {
	mu    sync.Mutex
	state atomic.Pointer[aclState]
}

// acl returns the current users.
func (s *Server) acl() *aclState {
	st := s.aclCache.state.Load()
	if s.userTable == nil {
		return st
	}
	seeding := s.seeding.Load()
	if v := s.userTable.UsersVersion(); st != nil && st.version == v && st.seeding == seeding {
		return st
	}
	s.aclCache.mu.Lock()
	defer s.aclCache.mu.Unlock()
	v, stored, _ := s.userTable.Users()
	if st = s.aclCache.state.Load(); st != nil && st.version == v && st.seeding == seeding {
		return st
	}
	st = s.buildACL(v, stored)
	st.seeding = seeding
	s.aclCache.state.Store(st)
	return st
}

// buildACL parses every user's stored rules. A user whose rules do not
// parse (they cannot, unless the table was damaged) is kept, off and with
// no permissions, and the failure is logged.
func (s *Server) buildACL(version uint64, stored map[string][]string) *aclState {
	st := &aclState{version: version, stored: stored, users: make(map[string]*acl.User, len(stored)+1)}
	for name, rules := range stored {
		u, err := parseRules(name, rules)
		if err != nil {
			s.opts.Logger.Error("ACL user in the user table does not parse; it is kept off with no permissions", "user", name, "err", err)
			u = acl.NewUser(aclTable, name)
		}
		st.users[name] = u
	}
	static := s.staticUsers
	if s.seeding.Load() {
		// Until the --user (or --aclfile) users are in the table, this
		// node knows them from its flags.
		static = s.seeds
	}
	for _, u := range static {
		if st.users[u.Name] == nil {
			st.users[u.Name] = u
		}
	}
	if st.users[command.DefaultUser] == nil {
		u, _ := parseRules(command.DefaultUser, acl.DefaultRules(s.opts.RequirePass))
		st.users[command.DefaultUser] = u
	}
	st.def = st.users[command.DefaultUser]
	st.open = st.def.Enabled() && st.def.NoPass()
	st.names = sortedKeys(st.users)
	return st
}

// aclLoop keeps the users current for connections that send nothing:
// when the table changes, connections of a user that no longer exists are
// closed, as Redis closes them at ACL DELUSER. (Each connection also
// checks before every command.)
func (s *Server) aclLoop() {
	for {
		_, _, changed := s.userTable.Users()
		st := s.acl()
		for _, c := range s.clientList() {
			if st.users[c.adm.pub.user.Load().Name] == nil && !c.adm.deleting.Load() {
				c.kill()
			}
		}
		select {
		case <-changed:
		case <-s.stop:
			return
		}
	}
}

// seedUsers writes the --user users into the user table, each once: a
// user the table already has keeps the table's rules (changed by ACL
// SETUSER, or seeded by another node), so the table wins. It retries
// while the log cannot take writes (no leader yet); meanwhile the users
// of the flags that the table lacks are known from the flags.
func (s *Server) seedUsers() {
	defer s.seeding.Store(false)
	retry := time.NewTimer(0)
	defer retry.Stop()
	for !s.seedOnce() {
		retry.Reset(time.Second)
		select {
		case <-retry.C:
		case <-s.stop:
			return
		}
	}
}

// seedOnce proposes the --user users the table lacks; it reports whether
// the table has them all now.
func (s *Server) seedOnce() bool {
	_, stored, _ := s.userTable.Users()
	var cmds []*command.Cmd
	for _, u := range s.seeds {
		if _, ok := stored[u.Name]; !ok {
			cmds = append(cmds, setUserCmd(u.Name, u.StoredRules(), nil, true))
		}
	}
	if len(cmds) == 0 {
		return true
	}
	ctx, cancel := context.WithTimeout(s.ctx, s.opts.ReadTimeout)
	defer cancel()
	// Stored, or another node's came first (NX): either way the table has
	// them after a successful write.
	if _, err := s.backend.Write(ctx, cmds); err != nil {
		s.opts.Logger.Debug("seeding ACL users", "err", err)
		return false
	}
	return true
}

func setUserCmd(name string, rules, expect []string, nx bool) *command.Cmd {
	c := &command.Cmd{Op: command.ACLSetUser, Key: []byte(name), NX: nx}
	for _, r := range rules {
		c.Items = append(c.Items, []byte(r))
	}
	for _, r := range expect {
		c.Keys = append(c.Keys, []byte(r))
	}
	return c
}
