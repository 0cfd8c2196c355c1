package acl

import (
	"errors"
	"fmt"
	"strings"
)

// ParseFile reads an ACL file (--aclfile) as Redis's ACLLoadFromFile: one
// "user <name> <rule> ..." line per user, words separated by single
// spaces. Every error is reported, with its line (path names the file in
// them), and then none of the file applies.
func ParseFile(t *Table, path string, data []byte) (map[string]*User, error) {
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
		if BadName(name) {
			fmt.Fprintf(&errs, "'%s:%d: username '%s' contains invalid characters. ", path, n, name)
			continue
		}
		if users[name] != nil {
			fmt.Fprintf(&errs, "WARNING: Duplicate user '%s' found on line %d. ", name, n)
			continue
		}
		u := newUser(t, name)
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
