package server

import (
	"os"
	"slices"
	"testing"

	"github.com/bfserver/bfserver/acl"
)

// TestACLCategoriesOfSubcommands: a subcommand is matched by its own
// categories (COMMAND INFO's), not its container's.
func TestACLCategoriesOfSubcommands(t *testing.T) {
	commandTable()
	for full, want := range map[string][]string{
		"config":      {"slow"},
		"config|get":  {"admin", "slow", "dangerous"},
		"acl|whoami":  {"slow"},
		"acl|setuser": {"admin", "slow", "dangerous"},
		"client|id":   {"slow", "connection"},
		"bf.add":      {"write", "bloom"},
		"bf.reserve":  {"write", "fast", "bloom"},
	} {
		ac := aclTable.Lookup(full)
		if ac == nil {
			t.Fatalf("%s not in the ACL table", full)
		}
		var got []string
		for _, c := range acl.Categories() {
			if ac.Categories&acl.CategoryBit(c) != 0 {
				got = append(got, c)
			}
		}
		slices.Sort(got)
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Errorf("%s: categories %v, want %v", full, got, want)
		}
	}
}

// TestACLFileMissing: an ACL file that cannot be read is reported in
// Redis's words; one that can is parsed against this server's commands.
func TestACLFileMissing(t *testing.T) {
	dir := t.TempDir()
	if _, err := readACLFile(dir + "/nosuch"); err == nil || err.Error() != "Error loading ACLs, opening file '"+dir+"/nosuch': No such file or directory" {
		t.Errorf("missing file: %v", err)
	}
	path := dir + "/users.acl"
	os.WriteFile(path, []byte("user w on >pw +bfx.wadd ~*\n"), 0o600)
	users, err := readACLFile(path)
	if err != nil || users["w"] == nil {
		t.Fatalf("%v %v", users, err)
	}
}
