package server

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"
	"syscall"

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
func readACLFile(path string) (map[string]*User, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, errors.New("Error loading ACLs, opening file '" + path + "': " + strerror(err))
	}
	var errs strings.Builder
	users := map[string]*User{}
	for i, line := range strings.Split(string(data), "\n") {
		n := i + 1
		line = strings.Trim(line, " \t\r\n")
		if line == "" {
			continue
		}
		argv := strings.Split(line, " ")
		if argv[0] != "user" || len(argv) < 2 {
			fmt.Fprintf(&errs, "%s:%d should start with user keyword followed by the username. ", path, n)
			continue
		}
		name := argv[1]
		if badUserName(name) {
			fmt.Fprintf(&errs, "'%s:%d: username '%s' contains invalid characters. ", path, n, name)
			continue
		}
		if users[name] != nil {
			fmt.Fprintf(&errs, "WARNING: Duplicate user '%s' found on line %d. ", name, n)
			continue
		}
		u := newUser(name)
		users[name] = u
		ops, open := mergeSelectorArgs(argv[2:])
		if open >= 0 {
			// Redis 8.0-m01 crashes here; later versions report it so.
			fmt.Fprintf(&errs, "%s:%d: Unmatched parenthesis in selector definition.", path, n)
			continue
		}
		syntax := false
		for _, op := range ops {
			op = strings.Trim(op, "\t\r\n")
			if err := u.set(op, false); err != nil {
				if err == errUnknownName {
					fmt.Fprintf(&errs, "%s:%d: Error in applying operation '%s': %s. ", path, n, cstr(op), err)
				} else if !syntax {
					fmt.Fprintf(&errs, "%s:%d: %s. ", path, n, err)
					syntax = true
				}
			}
		}
		u.finish()
	}
	if errs.Len() > 0 {
		return nil, errors.New(errs.String() + "WARNING: ACL errors detected, no change to the previously active ACL rules was performed")
	}
	return users, nil
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
		u, _ := ParseRules(command.DefaultUser, []string{"+@all", "~*", "&*", "on", "nopass"})
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
			cmds = append(cmds, setUserCmd(name, users[name].storedRules(), expect, !ok))
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
		b.WriteString(st.users[n].aclListLine())
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
func fileUsers(path string) ([]*User, error) {
	users, err := readACLFile(path)
	if err != nil {
		return nil, err
	}
	out := make([]*User, 0, len(users))
	for _, n := range sortedKeys(users) {
		out = append(out, users[n])
	}
	return out, nil
}
