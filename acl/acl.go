// Package acl is Redis's ACL users as Redis 7/8 has them (acl.c): a user has flags, passwords
// (SHA-256, shown as lower-case hex) and selectors; the root selector and
// any added with "(...)" each hold key patterns, channel patterns and
// command permissions, and a command is allowed when one selector allows
// it and every key it names. Rules are applied as ACL SETUSER applies them,
// all or none, and a user is described as ACL GETUSER and ACL LIST show it.
// Users are replicated: the log carries each user's described rules
// (StoredRules), which parse back to the same user (ParseRules).
package acl

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"slices"
	"strings"

	"github.com/bfserver/bfserver/cmdinfo"
	"github.com/bfserver/bfserver/internal/ascii"
	"github.com/bfserver/bfserver/internal/glob"
	"github.com/bfserver/bfserver/resp"
)

// Result is a check's outcome: allowed, or the denial, ordered as Redis picks the one to report: the highest
// across selectors.
type Result int

const (
	OK Result = iota
	DeniedCmd
	DeniedKey
	DeniedAuth
	DeniedChannel
)

// Key permissions of a pattern (%R~, %W~, ~).
const (
	permRead  = 1
	permWrite = 2
	permAll   = permRead | permWrite
)

// categories are Redis's ACL categories in ACL CAT's order, with the
// ones RedisBloom registers (bloom, cuckoo, cms, topk, tdigest).
var categories = []string{"keyspace", "read", "write", "set", "sortedset", "list", "hash", "string",
	"bitmap", "hyperloglog", "geo", "stream", "pubsub", "admin", "fast", "slow", "blocking", "dangerous",
	"connection", "transaction", "scripting", "bloom", "cuckoo", "cms", "topk", "tdigest"}

// CategoryBit is a category's bit, by name without '@', any case; 0 when
// there is no such category.
func CategoryBit(name string) uint32 {
	for i, c := range categories {
		if ascii.EqualFold(c, name) {
			return 1 << i
		}
	}
	return 0
}

// Command is a command or subcommand as ACL rules see it: an id for the
// permission bits, its categories, where its keys are.
type Command struct {
	ID     int
	Full   string
	Parent *Command
	Subs   map[string]*Command
	// Categories are the command's category bits (CategoryBit).
	Categories uint32
	// NoAuth: allowed before authentication, whatever the rules say.
	NoAuth bool
	// Meta is what COMMAND INFO says of it (its key specs).
	Meta *cmdinfo.Command
}

// Def describes a command for a Table.
type Def struct {
	Meta       *cmdinfo.Command
	Categories []string // with or without '@'
	NoAuth     bool
	Subs       []Def
}

// Table is every command and subcommand a server has, numbered in the
// order given; users are parsed against one.
type Table struct {
	List   []*Command
	byName map[string]*Command
}

// NewTable numbers the commands and their subcommands in the order given.
func NewTable(defs []Def) *Table {
	t := &Table{byName: map[string]*Command{}}
	var add func(d Def, parent *Command) *Command
	add = func(d Def, parent *Command) *Command {
		c := &Command{ID: len(t.List), Full: d.Meta.Full, Parent: parent, NoAuth: d.NoAuth, Meta: d.Meta}
		for _, cat := range d.Categories {
			c.Categories |= CategoryBit(strings.TrimPrefix(cat, "@"))
		}
		t.List = append(t.List, c)
		t.byName[c.Full] = c
		if len(d.Subs) > 0 {
			c.Subs = map[string]*Command{}
			for _, sd := range d.Subs {
				sc := add(sd, c)
				_, name, _ := strings.Cut(sc.Full, "|")
				c.Subs[name] = sc
			}
		}
		return c
	}
	for _, d := range defs {
		add(d, nil)
	}
	return t
}

// Lookup finds a command by its name in a rule ("bf.add",
// "CONFIG|GET"), as Redis's ACLLookupCommand: any case, at most one '|'.
func (t *Table) Lookup(name string) *Command {
	base, sub, pipe := strings.Cut(ascii.ToLower(name), "|")
	c := t.byName[base]
	if c == nil || !pipe {
		return c
	}
	if strings.Contains(sub, "|") {
		return nil
	}
	return c.Subs[sub]
}

type keyPattern struct {
	pat  string
	perm uint8
}

// selector is Redis's aclSelector.
type selector struct {
	allKeys, allChannels bool
	// allCommands: every command is allowed (set by +@all, cleared once
	// any command is denied); future: the rules start from +@all, not
	// -@all (Redis's reserved command bit).
	allCommands, future bool
	patterns            []keyPattern
	channels            []string
	rules               []string // command rules in order, lower case: "+bf.add", "-@write", "+select|0"
	allowed             []uint64 // a bit per Command id
	firstArgs           map[int][]string
	t                   *Table
}

func newSelector(t *Table) *selector {
	return &selector{allowed: make([]uint64, (len(t.List)+63)/64), t: t}
}

func (sel *selector) clone() *selector {
	c := *sel
	c.patterns = slices.Clone(sel.patterns)
	c.channels = slices.Clone(sel.channels)
	c.rules = slices.Clone(sel.rules)
	c.allowed = slices.Clone(sel.allowed)
	if sel.firstArgs != nil {
		c.firstArgs = make(map[int][]string, len(sel.firstArgs))
		for k, v := range sel.firstArgs {
			c.firstArgs[k] = slices.Clone(v)
		}
	}
	return &c
}

func (sel *selector) bit(id int) bool { return sel.allowed[id/64]&(1<<(id%64)) != 0 }

func (sel *selector) setBit(id int, on bool) {
	if on {
		sel.allowed[id/64] |= 1 << (id % 64)
	} else {
		sel.allowed[id/64] &^= 1 << (id % 64)
		sel.allCommands = false
	}
}

// changePerm allows or denies a command, and a container's subcommands.
func (sel *selector) changePerm(ac *Command, allow bool) {
	sel.setBit(ac.ID, allow)
	delete(sel.firstArgs, ac.ID)
	for _, sub := range ac.Subs {
		sel.setBit(sub.ID, allow)
	}
}

// updateRules records a command or category rule as Redis's
// ACLUpdateCommandRules does: an earlier rule for the same name (or for
// one of its subcommands, "config|get" for "config") goes, and the new
// one is appended.
func (sel *selector) updateRules(name string, allow bool) {
	name = ascii.ToLower(name)
	sel.rules = slices.DeleteFunc(sel.rules, func(r string) bool {
		r = r[1:]
		return r == name || len(r) > len(name) && r[len(name)] == '|' && r[:len(name)] == name
	})
	if allow {
		sel.rules = append(sel.rules, "+"+name)
	} else {
		sel.rules = append(sel.rules, "-"+name)
	}
}

// ruleError is an ACL SETUSER failure, with Redis's text (ACLSetUserStringError).
type ruleError string

func (e ruleError) Error() string { return string(e) }

const (
	errUnknownName  ruleError = "Unknown command or category name in ACL"
	errRuleSyntax   ruleError = "Syntax error"
	errAfterAllKeys ruleError = "Adding a pattern after the * pattern (or the 'allkeys' flag) is not valid and does not have any effect. Try 'resetkeys' to start with an empty list of patterns"
	errAfterAllChan ruleError = "Adding a pattern after the * pattern (or the 'allchannels' flag) is not valid and does not have any effect. Try 'resetchannels' to start with an empty list of channels"
	errNoSuchPass   ruleError = "The password you are trying to remove from the user does not exist"
	errBadHash      ruleError = "The password hash must be exactly 64 characters and contain only lowercase hexadecimal characters"
	errSubFirstArg  ruleError = "Allowing first-arg of a subcommand is not supported"
)

// cstr is what C string functions see of op: the bytes before a NUL.
func cstr(op string) string {
	if i := strings.IndexByte(op, 0); i >= 0 {
		return op[:i]
	}
	return op
}

// set applies one selector rule (Redis's ACLSetSelector). lenient lets
// a rule that names a command this build does not have stand, doing
// nothing: stored rules may come from a newer build.
func (sel *selector) set(op string, lenient bool) error {
	w := cstr(op)
	switch {
	case ascii.EqualFold(w, "allkeys") || w == "~*":
		sel.allKeys, sel.patterns = true, nil
	case ascii.EqualFold(w, "resetkeys"):
		sel.allKeys, sel.patterns = false, nil
	case ascii.EqualFold(w, "allchannels") || w == "&*":
		sel.allChannels, sel.channels = true, nil
	case ascii.EqualFold(w, "resetchannels"):
		sel.allChannels, sel.channels = false, nil
	case ascii.EqualFold(w, "allcommands") || ascii.EqualFold(w, "+@all"):
		for i := range sel.allowed {
			sel.allowed[i] = ^uint64(0)
		}
		sel.allCommands, sel.future, sel.rules, sel.firstArgs = true, true, nil, nil
	case ascii.EqualFold(w, "nocommands") || ascii.EqualFold(w, "-@all"):
		clear(sel.allowed)
		sel.allCommands, sel.future, sel.rules, sel.firstArgs = false, false, nil, nil
	case op[0] == '~' || op[0] == '%':
		return sel.addKeyPattern(op)
	case op[0] == '&':
		if sel.allChannels {
			return errAfterAllChan
		}
		if ch := op[1:]; !slices.Contains(sel.channels, ch) {
			sel.channels = append(sel.channels, ch)
		}
	case op[0] == '+' && !strings.HasPrefix(w, "+@"):
		return sel.allow(w[1:], lenient)
	case op[0] == '-' && !strings.HasPrefix(w, "-@"):
		ac := sel.t.Lookup(w[1:])
		if ac == nil {
			if lenient && w[1:] != "" {
				sel.updateRules(w[1:], false)
				return nil
			}
			return errUnknownName
		}
		sel.changePerm(ac, false)
		sel.updateRules(ac.Full, false)
	case strings.HasPrefix(w, "+@") || strings.HasPrefix(w, "-@"):
		bit := CategoryBit(w[2:])
		if bit == 0 {
			if lenient && w[2:] != "" {
				sel.updateRules(w[1:], w[0] == '+')
				return nil
			}
			return errUnknownName
		}
		sel.updateRules(w[1:], w[0] == '+')
		for _, ac := range sel.t.List {
			if ac.Categories&bit != 0 {
				sel.changePerm(ac, w[0] == '+')
			}
		}
	default:
		return errRuleSyntax
	}
	return nil
}

// addKeyPattern is ~pattern, %R~pattern, %W~pattern, %RW~pattern. A '%'
// rule needs at least one of R and W and then '~': Redis 8.0-m01 takes
// "%~x" and "%R" and then crashes describing them, so they are refused
// here with the syntax error later Redis versions give.
func (sel *selector) addKeyPattern(op string) error {
	if sel.allKeys {
		return errAfterAllKeys
	}
	perm, off := uint8(permAll), 1
	if op[0] == '%' {
		perm = 0
		tilde := false
	flags:
		for ; off < len(op); off++ {
			switch {
			case (op[off] == 'R' || op[off] == 'r') && perm&permRead == 0:
				perm |= permRead
			case (op[off] == 'W' || op[off] == 'w') && perm&permWrite == 0:
				perm |= permWrite
			case op[off] == '~':
				off++
				tilde = true
				break flags
			default:
				return errRuleSyntax
			}
		}
		if perm == 0 || !tilde {
			return errRuleSyntax
		}
	}
	pat := op[off:]
	for i := range sel.patterns {
		if sel.patterns[i].pat == pat {
			sel.patterns[i].perm |= perm
			return nil
		}
	}
	sel.patterns = append(sel.patterns, keyPattern{pat, perm})
	return nil
}

// allow is "+command", "+container|sub" or "+command|first-arg".
func (sel *selector) allow(name string, lenient bool) error {
	i := strings.LastIndexByte(name, '|')
	if i < 0 {
		ac := sel.t.Lookup(name)
		if ac == nil {
			if lenient && name != "" {
				sel.updateRules(name, true)
				return nil
			}
			return errUnknownName
		}
		sel.changePerm(ac, true)
		sel.updateRules(ac.Full, true)
		return nil
	}
	base, sub := name[:i], name[i+1:]
	ac := sel.t.Lookup(base)
	if ac == nil {
		if lenient && base != "" && sub != "" {
			sel.updateRules(name, true)
			return nil
		}
		return errUnknownName
	}
	if ac.Parent != nil {
		return errSubFirstArg
	}
	if sub == "" {
		return errRuleSyntax
	}
	if ac.Subs != nil {
		sc := sel.t.Lookup(name)
		if sc == nil {
			return errUnknownName
		}
		sel.changePerm(sc, true)
	} else {
		// SELECT|0, DEBUG|OBJECT: the command with that first argument only
		// (Redis warns that this is deprecated, and allows it).
		if sel.firstArgs == nil {
			sel.firstArgs = map[int][]string{}
		}
		if sub = ascii.ToLower(sub); !slices.Contains(sel.firstArgs[ac.ID], sub) {
			sel.firstArgs[ac.ID] = append(sel.firstArgs[ac.ID], sub)
		}
	}
	sel.updateRules(name, true)
	return nil
}

// User is an ACL user.
type User struct {
	Name         string
	enabled      bool
	nopass       bool
	skipSanitize bool
	passwords    []string   // lower-case hex SHA-256, in the order added
	hashes       [][32]byte // the same, decoded
	sels         []*selector
	t            *Table
	// all: one selector allowing every command and key, the common case,
	// answered without looking anything up.
	all bool
}

// newUser is a user as Redis creates one: off, no password, no commands,
// keys or channels.
func newUser(t *Table, name string) *User {
	return &User{Name: name, sels: []*selector{newSelector(t)}, t: t}
}

func (u *User) clone() *User {
	c := *u
	c.passwords = slices.Clone(u.passwords)
	c.hashes = slices.Clone(u.hashes)
	c.sels = make([]*selector, len(u.sels))
	for i, s := range u.sels {
		c.sels[i] = s.clone()
	}
	return &c
}

// finish settles what checks use: whether each selector allows every
// command (Redis keeps a flag set by +@all and cleared by any denial; the
// bits say the same for every command this server has), and the user's
// fast path.
func (u *User) finish() {
	n := len(u.t.List)
	for _, sel := range u.sels {
		all := true
		for id := 0; id < n && all; id++ {
			all = sel.bit(id)
		}
		sel.allCommands = all
	}
	r := u.sels[0]
	u.all = len(u.sels) == 1 && r.allCommands && r.allKeys
}

func hashHex(pass string) string {
	sum := sha256.Sum256([]byte(pass))
	return hex.EncodeToString(sum[:])
}

func validHash(h string) bool {
	if len(h) != 64 {
		return false
	}
	for i := 0; i < len(h); i++ {
		if c := h[i]; !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

func (u *User) addPassword(h string) {
	if !slices.Contains(u.passwords, h) {
		var b [32]byte
		hex.Decode(b[:], []byte(h))
		u.passwords = append(u.passwords, h)
		u.hashes = append(u.hashes, b)
	}
	u.nopass = false
}

func (u *User) removePassword(h string) error {
	i := slices.Index(u.passwords, h)
	if i < 0 {
		return errNoSuchPass
	}
	u.passwords = slices.Delete(u.passwords, i, i+1)
	u.hashes = slices.Delete(u.hashes, i, i+1)
	return nil
}

// set applies one ACL SETUSER word (Redis's ACLSetUser).
func (u *User) set(op string, lenient bool) error {
	if op == "" {
		return nil
	}
	w := cstr(op)
	switch {
	case ascii.EqualFold(w, "on"):
		u.enabled = true
	case ascii.EqualFold(w, "off"):
		u.enabled = false
	case ascii.EqualFold(w, "skip-sanitize-payload"):
		u.skipSanitize = true
	case ascii.EqualFold(w, "sanitize-payload"):
		u.skipSanitize = false
	case ascii.EqualFold(w, "nopass"):
		u.nopass, u.passwords, u.hashes = true, nil, nil
	case ascii.EqualFold(w, "resetpass"):
		u.nopass, u.passwords, u.hashes = false, nil, nil
	case op[0] == '>':
		u.addPassword(hashHex(op[1:]))
	case op[0] == '#':
		if !validHash(op[1:]) {
			return errBadHash
		}
		u.addPassword(op[1:])
	case op[0] == '<':
		return u.removePassword(hashHex(op[1:]))
	case op[0] == '!':
		if !validHash(op[1:]) {
			return errBadHash
		}
		return u.removePassword(op[1:])
	case op[0] == '(' && op[len(op)-1] == ')':
		sel := newSelector(u.t)
		for _, a := range splitWords(cstr(op[1 : len(op)-1])) {
			if a == "" {
				return errRuleSyntax // ("") is no rule a selector knows
			}
			if err := sel.set(a, lenient); err != nil {
				return err
			}
		}
		u.sels = append(u.sels, sel)
	case ascii.EqualFold(w, "clearselectors"):
		u.sels = u.sels[:1]
	case ascii.EqualFold(w, "reset"):
		u.nopass, u.passwords, u.hashes = false, nil, nil
		r := u.sels[0]
		r.allKeys, r.patterns, r.allChannels, r.channels = false, nil, false, nil
		u.enabled, u.skipSanitize = false, false
		u.sels = u.sels[:1]
		r.set("-@all", false)
	default:
		return u.sels[0].set(op, lenient)
	}
	return nil
}

// mergeSelectorArgs joins the words of a selector given over several
// arguments ("(~x* +get", "resetkeys)"), as Redis's
// ACLMergeSelectorArguments; on an unmatched '(' it returns the index of
// the word that opened it.
func mergeSelectorArgs(ops []string) ([]string, int) {
	out := make([]string, 0, len(ops))
	open := -1
	var sel string
	for i, op := range ops {
		if open < 0 && len(op) > 0 && op[0] == '(' && op[len(op)-1] != ')' {
			sel, open = op, i
			continue
		}
		if open >= 0 {
			sel += " " + op
			if len(op) > 0 && op[len(op)-1] == ')' {
				out, open = append(out, sel), -1
			}
			continue
		}
		out = append(out, op)
	}
	return out, open
}

// Apply applies ACL SETUSER's words to a copy of u: all of them, or none
// with Redis's error text.
func (u *User) Apply(ops []string, lenient bool) (*User, error) {
	merged, open := mergeSelectorArgs(ops)
	if open >= 0 {
		return nil, errors.New("ERR Unmatched parenthesis in acl selector starting at '" + cstr(ops[open]) + "'.")
	}
	nu := u.clone()
	for _, op := range merged {
		if err := nu.set(op, lenient); err != nil {
			return nil, errors.New("ERR Error in ACL SETUSER modifier '" + cstr(op) + "': " + err.Error())
		}
	}
	nu.finish()
	return nu, nil
}

// BadName: Redis refuses names with spaces or NUL bytes.
func BadName(name string) bool {
	return strings.ContainsAny(name, " \t\n\v\f\r\x00")
}

// ParseUser reads "name rule rule ...", the words of ACL SETUSER (as a
// --user flag gives them): a new user with those rules.
func ParseUser(t *Table, spec string) (*User, error) {
	words := strings.Fields(spec)
	if len(words) == 0 {
		return nil, errors.New("empty ACL user")
	}
	u, err := newUser(t, words[0]).Apply(words[1:], false)
	if err != nil {
		return nil, errors.New("ACL user " + words[0] + ": " + strings.TrimPrefix(err.Error(), "ERR "))
	}
	return u, nil
}

// ParseRules builds a user from the rules the user table stores for it
// (storedRules). Rules naming commands this build lacks are kept and do
// nothing.
func ParseRules(t *Table, name string, rules []string) (*User, error) {
	return newUser(t, name).Apply(rules, true)
}

// CheckPassword compares in constant time, with every password.
func (u *User) CheckPassword(pass []byte) bool {
	if !u.enabled {
		return false
	}
	if u.nopass {
		return true
	}
	sum := sha256.Sum256(pass)
	ok := 0
	for i := range u.hashes {
		ok |= subtle.ConstantTimeCompare(u.hashes[i][:], sum[:])
	}
	return ok == 1
}

// ---- describing ----

func (u *User) flags() []string {
	f := []string{"off"}
	if u.enabled {
		f[0] = "on"
	}
	if u.nopass {
		f = append(f, "nopass")
	}
	if u.skipSanitize {
		f = append(f, "skip-sanitize-payload")
	} else {
		f = append(f, "sanitize-payload")
	}
	return f
}

func patternString(p keyPattern) string {
	switch p.perm {
	case permRead:
		return "%R~" + p.pat
	case permWrite:
		return "%W~" + p.pat
	}
	return "~" + p.pat
}

// keysText is GETUSER's "keys".
func (sel *selector) keysText() string {
	if sel.allKeys {
		return "~*"
	}
	parts := make([]string, len(sel.patterns))
	for i, p := range sel.patterns {
		parts[i] = patternString(p)
	}
	return strings.Join(parts, " ")
}

// channelsText is GETUSER's "channels".
func (sel *selector) channelsText() string {
	if sel.allChannels {
		return "&*"
	}
	parts := make([]string, len(sel.channels))
	for i, c := range sel.channels {
		parts[i] = "&" + c
	}
	return strings.Join(parts, " ")
}

// commandsText is GETUSER's "commands" (ACLDescribeSelectorCommandRules).
func (sel *selector) commandsText() string {
	start := "-@all"
	if sel.future {
		start = "+@all"
	}
	return strings.Join(append([]string{start}, sel.rules...), " ")
}

// words is the selector as ACL LIST describes it (ACLDescribeSelector).
// For storing, a pattern "*" that is not allkeys is written %RW~*, which
// reads back as it was ("~*" would read back as allkeys), and so is one
// that a NUL cuts to "*" ("*\x00…", from %RW~*\x00…: as in Redis, "~*\x00"
// compares as "~*").
func (sel *selector) words(store bool) []string {
	var out []string
	if sel.allKeys {
		out = append(out, "~*")
	} else {
		for _, p := range sel.patterns {
			if store && p.perm == permAll && cstr(p.pat) == "*" {
				out = append(out, "%RW~"+p.pat)
			} else {
				out = append(out, patternString(p))
			}
		}
	}
	if sel.allChannels {
		out = append(out, "&*")
	} else {
		out = append(out, "resetchannels")
		for _, c := range sel.channels {
			out = append(out, "&"+c)
		}
	}
	if sel.future {
		out = append(out, "+@all")
	} else {
		out = append(out, "-@all")
	}
	return append(out, sel.rules...)
}

// describe is the user as ACL LIST shows it after "user <name> ", with
// words as Redis writes them; or, when store, as the user table stores
// them (each word a rule; a selector's words quoted where needed, so that
// they split back as they were).
func (u *User) describe(store bool) []string {
	out := u.flags()
	for _, p := range u.passwords {
		out = append(out, "#"+p)
	}
	out = append(out, u.sels[0].words(store)...)
	for _, sel := range u.sels[1:] {
		ws := sel.words(store)
		if store {
			for i, w := range ws {
				ws[i] = quoteArg(w)
			}
		}
		out = append(out, "("+strings.Join(ws, " ")+")")
	}
	return out
}

// StoredRules are the user's rules as the replicated user table keeps them.
func (u *User) StoredRules() []string { return u.describe(true) }

// ListLine is the user's ACL LIST line.
func (u *User) ListLine() string {
	return "user " + u.Name + " " + strings.Join(u.describe(false), " ")
}

// ---- checking ----

// keyPerm is what a key spec's flags need of a pattern (ACLSelectorCheckKey):
// access needs R; insert, delete and update need W; the rest nothing.
func keyPerm(flags []string) uint8 {
	var p uint8
	for _, f := range flags {
		switch f {
		case "access":
			p |= permRead
		case "insert", "delete", "update":
			p |= permWrite
		}
	}
	return p
}

// keyRefs are a command's keys (their argument positions and the
// permissions they need), found once for every selector.
type keyRefs struct {
	done  bool
	pos   []int
	perms []uint8
}

func (k *keyRefs) find(ac *Command, args [][]byte) {
	if k.done {
		return
	}
	k.done = true
	pos, flags := ac.Meta.Keys(args)
	k.pos = pos
	for _, f := range flags {
		k.perms = append(k.perms, keyPerm(f))
	}
}

func (sel *selector) keyAllowed(key []byte, perm uint8) bool {
	for _, p := range sel.patterns {
		if p.perm&perm == perm && glob.Match([]byte(p.pat), key) {
			return true
		}
	}
	return false
}

// check is ACLSelectorCheckCmd: the command, then each of its keys.
func (sel *selector) check(ac *Command, args [][]byte, keys *keyRefs) (Result, int) {
	if !sel.allCommands && !ac.NoAuth && !sel.bit(ac.ID) {
		first := sel.firstArgs[ac.ID]
		if len(args) < 2 || len(first) == 0 || ac.Parent != nil {
			return DeniedCmd, 0
		}
		if !slices.ContainsFunc(first, func(a string) bool { return ascii.EqualFold(args[1], a) }) {
			return DeniedCmd, 0
		}
	}
	if !sel.allKeys && len(ac.Meta.Info.KeySpecs) > 0 {
		keys.find(ac, args)
		for i, p := range keys.pos {
			if !sel.keyAllowed(args[p], keys.perms[i]) {
				return DeniedKey, p
			}
		}
	}
	return OK, 0
}

// Check is ACLCheckAllUserCommandPerm: allowed when one selector allows
// the command; otherwise the highest denial, and of those the latest
// argument.
func (u *User) Check(ac *Command, args [][]byte) (Result, int) {
	if u.all {
		return OK, 0
	}
	var keys keyRefs
	worst, at := DeniedCmd, 0
	for _, sel := range u.sels {
		r, pos := sel.check(ac, args, &keys)
		if r == OK {
			return OK, 0
		}
		if r > worst || r == worst && pos > at {
			worst, at = r, pos
		}
	}
	return worst, at
}

// Denial is Redis's getAclErrorMessage: verbose names the key or
// channel (ACL DRYRUN).
func Denial(r Result, u *User, ac *Command, arg []byte, verbose bool) string {
	switch r {
	case DeniedCmd:
		return "User " + u.Name + " has no permissions to run the '" + ac.Full + "' command"
	case DeniedKey:
		if verbose {
			return "User " + u.Name + " has no permissions to access the '" + string(arg) + "' key"
		}
		return "No permissions to access a key"
	}
	if verbose {
		return "User " + u.Name + " has no permissions to access the '" + string(arg) + "' channel"
	}
	return "No permissions to access a channel"
}

// DenialAtExec is EXEC's reply for a queued command the user's rules
// no longer allow.
func DenialAtExec(r Result) string {
	reason := "no permission"
	switch r {
	case DeniedCmd:
		reason = "no permission to execute the command or subcommand"
	case DeniedKey:
		reason = "no permission to touch the specified keys"
	case DeniedChannel:
		reason = "no permission to access one of the channels used as arguments"
	}
	return "NOPERM ACLs rules changed between the moment the transaction was accumulated and the EXEC call. This command is no longer allowed for the following reason: " + reason
}

// DefaultRules are the default user's rules while the user table has none
// for it: Redis's default user, with requirepass's password if set.
func DefaultRules(requirePass string) []string {
	pass := "nopass"
	if requirePass != "" {
		pass = "#" + hashHex(requirePass)
	}
	return []string{"on", pass, "sanitize-payload", "~*", "&*", "+@all"}
}

// ---- splitting ----

// splitWords splits a selector's words as Redis's sdssplitargs (resp.SplitArgs);
// on bad quoting there are none, as Redis's selector parsing then has.
func splitWords(line string) []string {
	args, ok := resp.SplitArgs([]byte(line), nil)
	if !ok {
		return nil
	}
	out := make([]string, len(args))
	for i, a := range args {
		out[i] = string(a)
	}
	return out
}

// quoteArg quotes a word so that splitWords gives it back: as it is when
// it needs no quoting, else "..." with escapes.
func quoteArg(w string) string {
	plain := w != ""
	for i := 0; i < len(w) && plain; i++ {
		c := w[i]
		plain = c > ' ' && c < 0x7f && c != '"' && c != '\'' && c != '\\'
	}
	if plain {
		return w
	}
	var b strings.Builder
	b.WriteByte('"')
	for i := 0; i < len(w); i++ {
		switch c := w[i]; {
		case c == '"' || c == '\\':
			b.WriteByte('\\')
			b.WriteByte(c)
		case c < ' ' || c >= 0x7f:
			b.WriteString("\\x")
			b.WriteByte("0123456789abcdef"[c>>4])
			b.WriteByte("0123456789abcdef"[c&15])
		default:
			b.WriteByte(c)
		}
	}
	b.WriteByte('"')
	return b.String()
}

// ---- what the server shows ----

// Categories are Redis's ACL categories, in ACL CAT's order.
func Categories() []string { return slices.Clone(categories) }

// CString is what C string functions see of s: the bytes before a NUL
// (Redis's messages quote names so).
func CString(s string) string { return cstr(s) }

// NewUser is a user as Redis creates one: off, no password, no commands,
// keys or channels.
func NewUser(t *Table, name string) *User {
	u := newUser(t, name)
	u.finish()
	return u
}

// Flags are ACL GETUSER's flags.
func (u *User) Flags() []string { return u.flags() }

// Passwords are the user's password hashes, lower-case hex, in the order
// added.
func (u *User) Passwords() []string { return slices.Clone(u.passwords) }

// SelectorText is a selector as ACL GETUSER shows it.
type SelectorText struct{ Commands, Keys, Channels string }

// Selectors are the user's selectors as ACL GETUSER shows them, the root
// one first.
func (u *User) Selectors() []SelectorText {
	out := make([]SelectorText, len(u.sels))
	for i, sel := range u.sels {
		out[i] = SelectorText{Commands: sel.commandsText(), Keys: sel.keysText(), Channels: sel.channelsText()}
	}
	return out
}

// Enabled: the user is on.
func (u *User) Enabled() bool { return u.enabled }

// NoPass: the user needs no password.
func (u *User) NoPass() bool { return u.nopass }
