package server

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"strings"
	"syscall"

	"github.com/bfserver/bfserver/acl"
	"github.com/bfserver/bfserver/command"

	"github.com/bfserver/bfserver/internal/atomicfile"
)

// The ACL file (--aclfile), as Redis's: one "user <name> <rule> ..." line
// per user, words separated by single spaces. ACL LOAD replaces every
// user by the file's (through the log, in one entry, so every node
// changes at once); ACL SAVE writes this node's users to it. At start the
// file's users are written into the user table if it lacks them, as
// --user users are; the table wins after that (see OPERATIONS.md).

// readACLFile parses the file as Redis's ACLLoadFromFile: every error is
// reported, with its line, and then none of the file applies.
func readACLFile(path string) (map[string]*acl.User, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, errors.New("Error loading ACLs, opening file '" + path + "': " + strerror(err))
	}
	commandTable()
	return acl.ParseFile(aclTable, path, data)
}

// strerror is C's text for a system error ("No such file or directory").
func strerror(err error) string {
	var errno syscall.Errno
	var pe *fs.PathError
	if errors.As(err, &pe) {
		err = pe.Err
	}
	if errors.As(err, &errno) {
		s := errno.Error()
		return strings.ToUpper(s[:1]) + s[1:]
	}
	return err.Error()
}

// loadACLFile replaces the users by the file's, as one log entry: each of
// the file's users is set (compare and set on what this node holds), every
// other user deleted; without a default user in the file, the default
// user becomes Redis's (on, nopass, everything).
func (s *session) loadACLFile() string {
	if s.srv.userTable == nil {
		return "ERR this server keeps no ACL user table"
	}
	users, err := readACLFile(s.srv.opts.ACLFile)
	if err != nil {
		return "ERR " + err.Error()
	}
	if users[command.DefaultUser] == nil {
		u, _ := acl.ParseRules(aclTable, command.DefaultUser, []string{"+@all", "~*", "&*", "on", "nopass"})
		users[command.DefaultUser] = u
	}
	for try := 0; try < maxSetUserTries; try++ {
		st := s.srv.acl()
		var cmds []*command.Cmd
		var gone [][]byte
		for _, name := range st.names {
			if users[name] == nil {
				gone = append(gone, []byte(name))
			}
		}
		if len(gone) > 0 {
			cmds = append(cmds, &command.Cmd{Op: command.ACLDelUser, Keys: gone})
		}
		for _, name := range sortedKeys(users) {
			expect, ok := st.stored[name]
			cmds = append(cmds, setUserCmd(name, users[name].StoredRules(), expect, !ok))
		}
		res, msg := s.writeUsers(cmds...)
		if msg != "" {
			return msg
		}
		done := true
		for i, r := range res {
			done = done && (cmds[i].Op != command.ACLSetUser || r.Int == 1)
		}
		if done {
			return ""
		}
	}
	return "ERR the users were changed concurrently too often; try again"
}

// saveACLFile writes this node's users to the file as Redis does: a
// temporary file, synced, renamed over the old one, the directory synced.
func (s *Server) saveACLFile() error {
	st := s.acl()
	var b strings.Builder
	for _, n := range st.names {
		b.WriteString(st.users[n].ListLine())
		b.WriteByte('\n')
	}
	return atomicfile.Write(s.opts.ACLFile, 0o644, func(w io.Writer) error {
		_, err := io.WriteString(w, b.String())
		return err
	})
}

func cmdACLSave(s *session, a [][]byte) {
	if s.srv.opts.ACLFile == "" {
		s.w.Error(msgNoACLFile)
		return
	}
	if err := s.srv.saveACLFile(); err != nil {
		s.srv.opts.Logger.Warn("ACL SAVE", "file", s.srv.opts.ACLFile, "err", err)
		s.w.Error("ERR There was an error trying to save the ACLs. Please check the server logs for more information")
		return
	}
	s.w.Simple("OK")
}

func cmdACLLoad(s *session, a [][]byte) {
	if s.srv.opts.ACLFile == "" {
		s.w.Error(msgNoACLFile)
		return
	}
	if msg := s.loadACLFile(); msg != "" {
		s.w.Error(msg)
		return
	}
	s.w.Simple("OK")
	// This connection's user may be gone.
	if s.srv.acl().users[s.user.Name] == nil {
		s.closing = true
	}
}

// fileUsers are the users of --aclfile in name order, read at start.
func fileUsers(path string) ([]*acl.User, error) {
	users, err := readACLFile(path)
	if err != nil {
		return nil, err
	}
	out := make([]*acl.User, 0, len(users))
	for _, n := range sortedKeys(users) {
		out = append(out, users[n])
	}
	return out, nil
}
