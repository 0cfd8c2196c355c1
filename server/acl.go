package server

import (
	"errors"
	"slices"
	"strings"

	"github.com/bfserver/bfserver/acl"
	"github.com/bfserver/bfserver/command"
)

// aclTable is the command table as ACL rules see it (package acl), built
// with it: commands and subcommands numbered in name order, with the
// categories COMMAND INFO gives (Redis's ACL uses those; a subcommand
// Redis does not have takes its container's registered ones).
var aclTable *acl.Table

func initACL() {
	var defs []acl.Def
	def := func(sp *spec, parent *spec) acl.Def {
		cats := sp.meta.Info.Categories
		if cats == nil && parent != nil && !sp.meta.Captured {
			cats = parent.cats
		}
		return acl.Def{Meta: sp.meta, Categories: cats, NoAuth: sp.noAuth || slices.Contains(sp.flags, "no_auth")}
	}
	for _, name := range sortedKeys(commands) {
		sp := commands[name]
		d := def(sp, nil)
		for _, sub := range sortedKeys(sp.subs) {
			d.Subs = append(d.Subs, def(sp.subs[sub], sp))
		}
		defs = append(defs, d)
	}
	aclTable = acl.NewTable(defs)
	for _, sp := range commands {
		sp.acl = aclTable.Lookup(sp.full)
		for _, sub := range sp.subs {
			sub.acl = aclTable.Lookup(sub.full)
		}
	}
}

// ParseUser reads "name rule rule ...", the words of ACL SETUSER (as a
// --user flag gives them): a new user with those rules.
func ParseUser(spec string) (*acl.User, error) {
	commandTable()
	if w := strings.Fields(spec); len(w) > 0 && w[0] == command.DefaultUser {
		return nil, errors.New("the default user is configured by requirepass (or ACL SETUSER default)")
	}
	return acl.ParseUser(aclTable, spec)
}

// parseRules builds a user from the rules the user table stores for it.
func parseRules(name string, rules []string) (*acl.User, error) {
	commandTable()
	return acl.ParseRules(aclTable, name, rules)
}
