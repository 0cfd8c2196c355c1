package resp

import (
	"crypto/sha256"
	"crypto/subtle"
	"fmt"
	"strings"
)

// User is an ACL user: a name, passwords and the commands it may run.
// The rules follow Redis's ACL SETUSER words: on, off, >password, nopass,
// +@category, -@category, +command, -command, allcommands, nocommands;
// key patterns (~pattern, allkeys) are accepted and grant every key.
type User struct {
	Name      string
	Enabled   bool
	NoPass    bool
	passwords [][32]byte // SHA-256, so the clear text is not kept
	allowCats map[string]bool
	denyCats  map[string]bool
	allowCmds map[string]bool
	denyCmds  map[string]bool
	// everything: may run any command (allcommands and no denials), the
	// common case, answered without looking anything up.
	everything bool
}

// ParseUser reads "name rule rule ...".
func ParseUser(spec string) (*User, error) {
	words := strings.Fields(spec)
	if len(words) == 0 {
		return nil, fmt.Errorf("empty ACL user")
	}
	u := &User{Name: words[0], allowCats: map[string]bool{}, denyCats: map[string]bool{},
		allowCmds: map[string]bool{}, denyCmds: map[string]bool{}}
	for _, w := range words[1:] {
		lw := strings.ToLower(w)
		switch {
		case lw == "on":
			u.Enabled = true
		case lw == "off":
			u.Enabled = false
		case lw == "nopass":
			u.NoPass = true
		case strings.HasPrefix(w, ">"):
			u.passwords = append(u.passwords, sha256.Sum256([]byte(w[1:])))
		case lw == "allcommands" || lw == "+@all":
			u.allowCats["@all"] = true
		case lw == "nocommands" || lw == "-@all":
			clear(u.allowCats)
			clear(u.allowCmds)
		case strings.HasPrefix(lw, "+@"):
			u.allowCats[lw[1:]] = true
			delete(u.denyCats, lw[1:])
		case strings.HasPrefix(lw, "-@"):
			u.denyCats[lw[1:]] = true
			delete(u.allowCats, lw[1:])
		case strings.HasPrefix(lw, "+"):
			u.allowCmds[lw[1:]] = true
			delete(u.denyCmds, lw[1:])
		case strings.HasPrefix(lw, "-"):
			u.denyCmds[lw[1:]] = true
			delete(u.allowCmds, lw[1:])
		case strings.HasPrefix(w, "~") || lw == "allkeys" || strings.HasPrefix(w, "%") || lw == "resetkeys":
		default:
			return nil, fmt.Errorf("ACL user %s: unknown rule %q", u.Name, w)
		}
	}
	u.everything = u.allowCats["@all"] && len(u.denyCats) == 0 && len(u.denyCmds) == 0
	return u, nil
}

// checkPassword compares in constant time.
func (u *User) checkPassword(pass []byte) bool {
	if !u.Enabled {
		return false
	}
	if u.NoPass {
		return true
	}
	sum := sha256.Sum256(pass)
	ok := false
	for _, p := range u.passwords {
		if subtle.ConstantTimeCompare(p[:], sum[:]) == 1 {
			ok = true
		}
	}
	return ok
}

// may reports whether the user may run a command (full name, e.g.
// "client|setname") whose categories are cats.
func (u *User) may(name string, cats []string) bool {
	if u.everything {
		return true
	}
	if u.denyCmds[name] {
		return false
	}
	if parent, _, ok := strings.Cut(name, "|"); ok && u.denyCmds[parent] {
		return false
	}
	for _, c := range cats { // command categories are lower case
		if u.denyCats[c] {
			return false
		}
	}
	if u.allowCats["@all"] || u.allowCmds[name] {
		return true
	}
	if parent, _, ok := strings.Cut(name, "|"); ok && u.allowCmds[parent] {
		return true
	}
	for _, c := range cats {
		if u.allowCats[c] {
			return true
		}
	}
	return false
}

// defaultUser is Redis's "default": all commands; with requirepass its
// password, otherwise nopass.
func defaultUser(requirePass string) *User {
	u, _ := ParseUser("default on allcommands allkeys")
	if requirePass == "" {
		u.NoPass = true
	} else {
		u.passwords = [][32]byte{sha256.Sum256([]byte(requirePass))}
	}
	return u
}

func noPermission(user, cmd string) string {
	return "NOPERM User " + user + " has no permissions to run the '" + cmd + "' command"
}
