package server

import (
	"crypto/rand"
	"encoding/hex"
	"sync"

	"github.com/bfserver/bfserver/acl"
	"github.com/bfserver/bfserver/command"
	"github.com/bfserver/bfserver/internal/ascii"
	"github.com/bfserver/bfserver/internal/redisnum"
	"github.com/bfserver/bfserver/keyspace"
	"github.com/bfserver/bfserver/resp"
)

// The ACL command, as Redis 8's: every subcommand, with COMMAND INFO's
// arities. SETUSER and DELUSER go through the log (Backend.Write), so
// every node has the same users; LOG is this node's own, as in Redis.
func registerACLCommands() {
	sub := func(name string, arity int, run func(*session, [][]byte)) *spec {
		return &spec{name: name, arity: arity, run: run}
	}
	conn("acl", -2, nil, []string{"@slow"}, nil).subs = map[string]*spec{
		"cat":     sub("cat", -2, cmdACLCat),
		"deluser": sub("deluser", -3, cmdACLDelUser),
		"dryrun":  sub("dryrun", -4, cmdACLDryRun),
		"genpass": sub("genpass", -2, cmdACLGenPass),
		"getuser": sub("getuser", 3, cmdACLGetUser),
		"help":    sub("help", 2, func(s *session, _ [][]byte) { writeHelp(&s.w, aclHelp) }),
		"list":    sub("list", 2, cmdACLList),
		"load":    sub("load", 2, cmdACLLoad),
		"log":     sub("log", -2, cmdACLLog),
		"save":    sub("save", 2, cmdACLSave),
		"setuser": sub("setuser", -3, cmdACLSetUser),
		"users":   sub("users", 2, cmdACLUsers),
		"whoami":  sub("whoami", 2, func(s *session, a [][]byte) { s.w.BulkString(s.user.Name) }),
	}
}

// aclSyntaxError is Redis's addReplySubcommandSyntaxError for ACL.
func aclSyntaxError(s *session, a [][]byte) {
	s.w.Error("ERR unknown subcommand or wrong number of arguments for '" + sanitize(string(a[1]), 128) + "'. Try ACL HELP.")
}

func cmdACLCat(s *session, a [][]byte) {
	switch len(a) {
	case 2:
		cats := acl.Categories()
		s.w.Array(len(cats))
		for _, c := range cats {
			s.w.BulkString(c)
		}
	case 3:
		bit := acl.CategoryBit(acl.CString(string(a[2])))
		if bit == 0 {
			s.w.Error("ERR Unknown category '" + sanitize(acl.CString(string(a[2])), 128) + "'")
			return
		}
		var names []string
		for _, ac := range aclTable.List {
			if ac.Categories&bit != 0 {
				names = append(names, ac.Full)
			}
		}
		s.w.Array(len(names))
		for _, n := range names {
			s.w.BulkString(n)
		}
	default:
		aclSyntaxError(s, a)
	}
}

// maxSetUserTries bounds how often ACL SETUSER computes a user again when
// another change to the same user was applied first.
const maxSetUserTries = 16

// cmdACLSetUser computes the user's new rules from the rules this node
// holds, and proposes them with those it computed them from: the state
// machine stores them only if the user still has those (compare and set),
// so concurrent changes on different nodes apply one after the other, as
// in Redis, instead of one losing the other's.
func cmdACLSetUser(s *session, a [][]byte) {
	name := string(a[2])
	if acl.BadName(name) {
		s.w.Error("ERR Usernames can't contain spaces or null characters")
		return
	}
	if s.srv.userTable == nil {
		s.w.Error("ERR this server keeps no ACL user table")
		return
	}
	ops := make([]string, len(a)-3)
	for i, op := range a[3:] {
		ops[i] = string(op)
	}
	for try := 0; try < maxSetUserTries; try++ {
		st := s.srv.acl()
		base := st.users[name]
		expect, inTable := st.stored[name]
		if base == nil {
			base = acl.NewUser(aclTable, name)
		}
		u, err := base.Apply(ops, false)
		if err != nil {
			s.w.Error(err.Error())
			return
		}
		res, msg := s.writeUsers(setUserCmd(name, u.StoredRules(), expect, !inTable))
		if msg != "" {
			s.w.Error(msg)
			return
		}
		if res[0].Int == 1 {
			s.w.Simple("OK")
			return
		}
	}
	s.w.Error("ERR the user was changed concurrently too often; try again")
}

// writeUsers proposes user table changes as one write, after the log's
// contract (command.Validate), and returns their results, or the error to
// answer: the first invalid command, the write's, or the first result's.
func (s *session) writeUsers(cmds ...*command.Cmd) ([]keyspace.Result, string) {
	for _, c := range cmds {
		if err := command.Validate(c); err != nil {
			return nil, wireError(err)
		}
	}
	res, err := s.write(cmds)
	if err != nil {
		return nil, wireError(err)
	}
	for _, r := range res {
		if r.Err != nil {
			return nil, wireError(r.Err)
		}
	}
	return res, ""
}

func cmdACLDelUser(s *session, a [][]byte) {
	for _, name := range a[2:] {
		if string(name) == command.DefaultUser {
			s.w.Error("ERR The 'default' user cannot be removed")
			return
		}
	}
	if s.srv.userTable == nil {
		s.w.Error("ERR this server keeps no ACL user table")
		return
	}
	// A connection of a deleted user is closed (aclLoop), this one after
	// its reply: aclLoop, woken by the change, leaves it to close itself
	// (it stays marked until then: its reply is sent after this returns).
	s.adm.deleting.Store(true)
	res, msg := s.writeUsers(&command.Cmd{Op: command.ACLDelUser, Keys: a[2:]})
	if msg != "" {
		s.adm.deleting.Store(false)
		s.w.Error(msg)
		return
	}
	s.w.Int(res[0].Int)
	if s.srv.acl().users[s.user.Name] == nil {
		s.closing = true
		return
	}
	s.adm.deleting.Store(false)
}

func cmdACLGetUser(s *session, a [][]byte) {
	u := s.srv.acl().users[string(a[2])]
	if u == nil {
		s.w.Null()
		return
	}
	s.w.Map(6)
	s.w.BulkString("flags")
	f := u.Flags()
	s.w.Set(len(f))
	for _, x := range f {
		s.w.BulkString(x)
	}
	s.w.BulkString("passwords")
	pw := u.Passwords()
	s.w.Array(len(pw))
	for _, p := range pw {
		s.w.BulkString(p)
	}
	sels := u.Selectors()
	writeSelector(&s.w, sels[0])
	s.w.BulkString("selectors")
	s.w.Array(len(sels) - 1)
	for _, sel := range sels[1:] {
		s.w.Map(3)
		writeSelector(&s.w, sel)
	}
}

func writeSelector(w *resp.Writer, sel acl.SelectorText) {
	w.BulkString("commands")
	w.BulkString(sel.Commands)
	w.BulkString("keys")
	w.BulkString(sel.Keys)
	w.BulkString("channels")
	w.BulkString(sel.Channels)
}

func cmdACLList(s *session, a [][]byte) {
	st := s.srv.acl()
	s.w.Array(len(st.names))
	for _, n := range st.names {
		s.w.BulkString(st.users[n].ListLine())
	}
}

func cmdACLUsers(s *session, a [][]byte) {
	st := s.srv.acl()
	s.w.Array(len(st.names))
	for _, n := range st.names {
		s.w.BulkString(n)
	}
}

// cmdACLDryRun: ACL DRYRUN user command [arg ...], checked as the command
// would be, with the key or channel named.
func cmdACLDryRun(s *session, a [][]byte) {
	u := s.srv.acl().users[string(a[2])]
	if u == nil {
		s.w.Error("ERR User '" + sanitize(acl.CString(string(a[2])), 1<<20) + "' not found")
		return
	}
	args := a[3:]
	sp := lookupSpec(args[0])
	if sp != nil && sp.subs != nil && len(args) > 1 {
		sp = sp.subs[ascii.ToLower(args[1])]
	}
	if sp == nil {
		s.w.Error("ERR Command '" + sanitize(acl.CString(string(args[0])), 1<<20) + "' not found")
		return
	}
	if !sp.checkArity(len(args)) {
		s.w.Error(arityError(sp.acl.Full))
		return
	}
	if r, pos := u.Check(sp.acl, args); r != acl.OK {
		s.w.BulkString(acl.Denial(r, u, sp.acl, args[pos], true))
		return
	}
	s.w.Simple("OK")
}

// genPassMaxBits is ACL GENPASS's limit.
const genPassMaxBits = 4096

func cmdACLGenPass(s *session, a [][]byte) {
	bits := int64(256)
	switch len(a) {
	case 2:
	case 3:
		v, ok := redisnum.ParseLL(a[2])
		if !ok {
			s.w.Error(msgNotInteger)
			return
		}
		bits = v
	default:
		aclSyntaxError(s, a)
		return
	}
	if bits <= 0 || bits > genPassMaxBits {
		s.w.Error("ERR ACL GENPASS argument must be the number of bits for the output password, a positive number up to 4096")
		return
	}
	chars := (bits + 3) / 4
	buf := make([]byte, (chars+1)/2)
	rand.Read(buf)
	s.w.BulkString(hex.EncodeToString(buf)[:chars])
}

const msgNoACLFile = "ERR This Redis instance is not configured to use an ACL file. You may want to specify users via the ACL SETUSER command and then issue a CONFIG REWRITE (assuming you have a Redis configuration file set) in order to store users in the Redis configuration."

var aclHelp = []string{
	"ACL <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
	"CAT [<category>]",
	"    List all commands that belong to <category>, or all command categories",
	"    when no category is specified.",
	"DELUSER <username> [<username> ...]",
	"    Delete a list of users.",
	"DRYRUN <username> <command> [<arg> ...]",
	"    Returns whether the user can execute the given command without executing the command.",
	"GETUSER <username>",
	"    Get the user's details.",
	"GENPASS [<bits>]",
	"    Generate a secure 256-bit user password. The optional `bits` argument can",
	"    be used to specify a different size.",
	"LIST",
	"    Show users details in config file format.",
	"LOAD",
	"    Reload users from the ACL file.",
	"LOG [<count> | RESET]",
	"    Show the ACL log entries.",
	"SAVE",
	"    Save the current config to the ACL file.",
	"SETUSER <username> <attribute> [<attribute> ...]",
	"    Create or modify a user with the specified attributes.",
	"USERS",
	"    List all the registered usernames.",
	"WHOAMI",
	"    Return the current connection username.",
	"HELP",
	"    Print this help.",
}

// ---- ACL LOG ----

// ACL LOG's limits, Redis's defaults: acllog-max-len entries; a denial
// like one of the latest aclLogScan entries within aclLogGroupMS counts
// in that entry.
const (
	aclLogMaxLen   = 128
	aclLogScan     = 10
	aclLogGroupMS  = 60000
	aclCtxTopLevel = "toplevel"
	aclCtxMulti    = "multi"
)

type aclLogEntry struct {
	count                         int64
	reason, context, object, user string
	clientInfo                    string
	id, created, updated          int64 // updated: ms, Redis's ctime
}

// aclLog is this node's ACL LOG, newest first.
type aclLog struct {
	mu      sync.Mutex
	entries []*aclLogEntry
	nextID  int64
}

var aclReasons = [...]string{acl.DeniedCmd: "command", acl.DeniedKey: "key", acl.DeniedAuth: "auth", acl.DeniedChannel: "channel"}

// logDenial records a denial in the ACL LOG: the command's full name, the
// key or channel, or for an authentication failure the command the client
// sent (AUTH, HELLO) with the user it named.
func (s *session) logDenial(reason acl.Result, object, user string) {
	ctx := aclCtxTopLevel
	if s.multi {
		ctx = aclCtxMulti
	}
	s.logDenialIn(reason, ctx, object, user)
}

func (s *session) logDenialIn(reason acl.Result, ctx, object, user string) {
	now := s.srv.opts.Now().UnixMilli()
	s.srv.aclLog.add(&aclLogEntry{count: 1, reason: aclReasons[reason], context: ctx, object: object, user: user,
		clientInfo: s.clientLine(true), created: now, updated: now})
}

// add counts e in an entry like it among the latest, or adds it.
func (l *aclLog) add(e *aclLogEntry) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, m := range l.entries[:min(len(l.entries), aclLogScan)] {
		d := m.updated - e.updated
		if m.reason == e.reason && m.context == e.context && d <= aclLogGroupMS && d >= -aclLogGroupMS &&
			m.object == e.object && m.user == e.user {
			m.clientInfo, m.updated = e.clientInfo, e.updated
			m.count++
			return
		}
	}
	e.id = l.nextID
	l.nextID++
	l.entries = append([]*aclLogEntry{e}, l.entries...)
	if len(l.entries) > aclLogMaxLen {
		l.entries = l.entries[:aclLogMaxLen]
	}
}

func cmdACLLog(s *session, a [][]byte) {
	count := int64(10)
	l := &s.srv.aclLog
	switch len(a) {
	case 2:
	case 3:
		if ascii.EqualFold(a[2], "reset") {
			l.mu.Lock()
			l.entries = nil
			l.mu.Unlock()
			s.w.Simple("OK")
			return
		}
		v, ok := redisnum.ParseLL(a[2])
		if !ok {
			s.w.Error(msgNotInteger)
			return
		}
		count = max(v, 0)
	default:
		aclSyntaxError(s, a)
		return
	}
	now := s.srv.opts.Now().UnixMilli()
	l.mu.Lock()
	entries := l.entries[:min(int64(len(l.entries)), count)]
	copies := make([]aclLogEntry, len(entries))
	for i, e := range entries {
		copies[i] = *e
	}
	l.mu.Unlock()
	s.w.Array(len(copies))
	for _, e := range copies {
		s.w.Map(10)
		s.w.BulkString("count")
		s.w.Int(e.count)
		s.w.BulkString("reason")
		s.w.BulkString(e.reason)
		s.w.BulkString("context")
		s.w.BulkString(e.context)
		s.w.BulkString("object")
		s.w.BulkString(e.object)
		s.w.BulkString("username")
		s.w.BulkString(e.user)
		s.w.BulkString("age-seconds")
		s.w.Double(float64(now-e.updated) / 1000)
		s.w.BulkString("client-info")
		s.w.BulkString(e.clientInfo)
		s.w.BulkString("entry-id")
		s.w.Int(e.id)
		s.w.BulkString("timestamp-created")
		s.w.Int(e.created)
		s.w.BulkString("timestamp-last-updated")
		s.w.Int(e.updated)
	}
}
