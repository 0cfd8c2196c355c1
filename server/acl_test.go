package server_test

import (
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/bfserver/bfserver/acl"
	"github.com/bfserver/bfserver/memstore"
	"github.com/bfserver/bfserver/server"
)

func words(s ...string) [][]byte {
	out := make([][]byte, len(s))
	for i, x := range s {
		out[i] = []byte(x)
	}
	return out
}

func (cl *client) say(t testing.TB, s ...string) string {
	t.Helper()
	return string(cl.do(t, words(s...)))
}

// expect sends each command and checks its reply.
func expect(t *testing.T, cl *client, steps [][2]string) {
	t.Helper()
	for _, st := range steps {
		if got := cl.say(t, strings.Fields(st[0])...); got != st[1] {
			t.Errorf("%s: got %q, want %q", st[0], got, st[1])
		}
	}
}

// TestACLExecRecheck: a command queued while allowed is checked again at
// EXEC, with Redis's texts, and the rest of the transaction runs.
func TestACLExecRecheck(t *testing.T) {
	srv := startServer(t, nil)
	admin, u := dial(t, srv), dial(t, srv)
	expect(t, admin, [][2]string{{"ACL SETUSER t1 on nopass +@all ~k*", "+OK\r\n"}})
	expect(t, u, [][2]string{
		{"AUTH t1 x", "+OK\r\n"},
		{"MULTI", "+OK\r\n"},
		{"BF.ADD k1 x", "+QUEUED\r\n"},
		{"BF.ADD k2 x", "+QUEUED\r\n"},
		{"GET k3", "+QUEUED\r\n"},
	})
	expect(t, admin, [][2]string{{"ACL SETUSER t1 resetkeys ~k1 -get", "+OK\r\n"}})
	expect(t, u, [][2]string{{"EXEC", "*3\r\n:1\r\n" +
		"-NOPERM ACLs rules changed between the moment the transaction was accumulated and the EXEC call. This command is no longer allowed for the following reason: no permission to touch the specified keys\r\n" +
		"-NOPERM ACLs rules changed between the moment the transaction was accumulated and the EXEC call. This command is no longer allowed for the following reason: no permission to execute the command or subcommand\r\n"}})
	log := admin.say(t, "ACL", "LOG", "2")
	for _, want := range []string{"$7\r\ncontext\r\n$5\r\nmulti\r\n$6\r\nobject\r\n$3\r\nget\r\n", "$6\r\nobject\r\n$2\r\nk2\r\n"} {
		if !strings.Contains(log, want) {
			t.Errorf("ACL LOG %q lacks %q", log, want)
		}
	}
}

// TestACLDeletedUserClosed: ACL DELUSER closes the connections of the
// deleted user, idle ones too, and the deleting one after its reply; the
// others stay.
func TestACLDeletedUserClosed(t *testing.T) {
	srv := startServer(t, nil)
	admin, idle, self := dial(t, srv), dial(t, srv), dial(t, srv)
	expect(t, admin, [][2]string{{"ACL SETUSER w1 on nopass +@all ~*", "+OK\r\n"}})
	expect(t, idle, [][2]string{{"AUTH w1 x", "+OK\r\n"}})
	expect(t, self, [][2]string{{"AUTH w1 x", "+OK\r\n"}, {"ACL DELUSER w1", ":1\r\n"}})
	for name, c := range map[string]*client{"idle": idle, "self": self} {
		c.c.SetReadDeadline(time.Now().Add(10 * time.Second))
		if b, err := c.r.ReadByte(); err == nil {
			t.Errorf("%s connection of the deleted user got %q instead of closing", name, b)
		}
	}
	expect(t, admin, [][2]string{{"PING", "+PONG\r\n"}, {"ACL WHOAMI", "$7\r\ndefault\r\n"}})
}

// TestACLConcurrentSetUser: ACL SETUSER changes a user by compare and
// set; changes from many connections at once all take effect, none lost.
func TestACLConcurrentSetUser(t *testing.T) {
	srv := startServer(t, nil)
	var wg sync.WaitGroup
	const n = 16
	for i := 0; i < n; i++ {
		c := dial(t, srv)
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			if got := c.say(t, "ACL", "SETUSER", "race", fmt.Sprintf("~k%d", i)); got != "+OK\r\n" {
				t.Errorf("SETUSER %d: %q", i, got)
			}
		}(i)
	}
	wg.Wait()
	got := dial(t, srv).say(t, "ACL", "GETUSER", "race")
	for i := 0; i < n; i++ {
		if !strings.Contains(got, fmt.Sprintf("~k%d ", i)) && !strings.Contains(got, fmt.Sprintf("~k%d\r", i)) {
			t.Errorf("pattern ~k%d lost: %q", i, got)
		}
	}
}

// TestACLDefaultUser: the default user is changed like any other: a
// password makes new connections authenticate, and AUTH <password> then
// works; off, no connection is authenticated without AUTH.
func TestACLDefaultUser(t *testing.T) {
	srv := startServer(t, nil)
	admin := dial(t, srv)
	expect(t, admin, [][2]string{
		{"AUTH x", "-ERR AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?\r\n"},
		{"ACL SETUSER default resetpass >pw", "+OK\r\n"},
		{"ACL GETUSER default", "*12\r\n$5\r\nflags\r\n*2\r\n$2\r\non\r\n$16\r\nsanitize-payload\r\n$9\r\npasswords\r\n*1\r\n$64\r\n30c952fab122c3f9759f02a6d95c3758b246b4fee239957b2d4fee46e26170c4\r\n$8\r\ncommands\r\n$5\r\n+@all\r\n$4\r\nkeys\r\n$2\r\n~*\r\n$8\r\nchannels\r\n$2\r\n&*\r\n$9\r\nselectors\r\n*0\r\n"},
		{"PING", "+PONG\r\n"}, // this connection stays authenticated
	})
	fresh := dial(t, srv)
	expect(t, fresh, [][2]string{
		{"PING", "-NOAUTH Authentication required.\r\n"},
		{"AUTH wrong", "-WRONGPASS invalid username-password pair or user is disabled.\r\n"},
		{"AUTH pw", "+OK\r\n"},
		{"PING", "+PONG\r\n"},
	})
	expect(t, admin, [][2]string{{"ACL SETUSER default nopass off", "+OK\r\n"}})
	expect(t, dial(t, srv), [][2]string{
		{"PING", "-NOAUTH Authentication required.\r\n"},
		{"AUTH default x", "-WRONGPASS invalid username-password pair or user is disabled.\r\n"},
	})
	expect(t, admin, [][2]string{
		{"ACL SETUSER default on", "+OK\r\n"},
		{"ACL DELUSER default", "-ERR The 'default' user cannot be removed\r\n"},
	})
	expect(t, dial(t, srv), [][2]string{{"PING", "+PONG\r\n"}})
}

// TestACLUserFlags: --user users are written into the user table once;
// from then on ACL SETUSER and DELUSER change them like any other.
func TestACLUserFlags(t *testing.T) {
	app, err := server.ParseUser("app on >secret ~app:* +@bloom -bf.reserve")
	if err != nil {
		t.Fatal(err)
	}
	store := memstore.New()
	srv := newServer(t, server.Options{Addr: "127.0.0.1:0", Users: []*acl.User{app}}, store)
	if err := srv.Listen(); err != nil {
		t.Fatal(err)
	}
	go srv.Serve()
	t.Cleanup(func() { srv.Close() })
	if _, users, _ := store.Users(); strings.Join(users["app"], " ") != "on sanitize-payload #2bb80d537b1da3e38bd30361aa855686bde0eacd7162fef6a25fe97bf527a25b ~app:* resetchannels -@all +@bloom -bf.reserve" {
		t.Fatalf("table %q", users)
	}
	c := dial(t, srv)
	expect(t, c, [][2]string{
		{"AUTH app secret", "+OK\r\n"},
		{"BF.ADD app:1 x", ":1\r\n"},
		{"BF.ADD other x", "-NOPERM No permissions to access a key\r\n"},
		{"BF.RESERVE app:2 0.01 100", "-NOPERM User app has no permissions to run the 'bf.reserve' command\r\n"},
	})
	admin := dial(t, srv)
	expect(t, admin, [][2]string{{"ACL SETUSER app +bf.reserve", "+OK\r\n"}})
	expect(t, c, [][2]string{{"BF.RESERVE app:2 0.01 100", "+OK\r\n"}})
	// A second server over the same table (a restart) leaves the user as
	// the table has it.
	again := newServer(t, server.Options{Addr: "127.0.0.1:0", Users: []*acl.User{app}}, store)
	defer again.Close()
	if _, users, _ := store.Users(); !strings.HasSuffix(strings.Join(users["app"], " "), "+@bloom +bf.reserve") {
		t.Fatalf("the flag's user replaced the table's: %q", users["app"])
	}
}

// TestACLFile: --aclfile's users are there at start; ACL SAVE writes the
// users as ACL LIST shows them; ACL LOAD replaces every user by the
// file's (the removed users' connections close), or with a bad file
// changes nothing; without a file both answer Redis's error.
func TestACLFile(t *testing.T) {
	path := t.TempDir() + "/users.acl"
	os.WriteFile(path, []byte("user alice on >apw ~bf:* +@bloom\nuser bob on nopass ~* +@all\n"), 0o600)
	srv := newServer(t, server.Options{Addr: "127.0.0.1:0", ACLFile: path}, memstore.New())
	if err := srv.Listen(); err != nil {
		t.Fatal(err)
	}
	go srv.Serve()
	t.Cleanup(func() { srv.Close() })
	admin, bob := dial(t, srv), dial(t, srv)
	expect(t, bob, [][2]string{{"AUTH bob x", "+OK\r\n"}})
	expect(t, admin, [][2]string{
		{"AUTH alice apw", "+OK\r\n"},
		{"AUTH default x", "+OK\r\n"},
		{"ACL SETUSER carol on >c (~x +get)", "+OK\r\n"},
		{"ACL SAVE", "+OK\r\n"},
	})
	list := parseReply(t, admin.do(t, words("ACL", "LIST")))
	var lines []string
	for _, k := range list.kids {
		lines = append(lines, k.s+"\n")
	}
	if got, _ := os.ReadFile(path); string(got) != strings.Join(lines, "") {
		t.Fatalf("ACL SAVE wrote %q, ACL LIST says %q", got, lines)
	}
	before := admin.say(t, "ACL", "LIST")
	os.WriteFile(path, []byte("user alice on >apw\nuser bob bogus\n"), 0o600)
	expect(t, admin, [][2]string{{"ACL LOAD", "-ERR " + path + ":2: Syntax error. WARNING: ACL errors detected, no change to the previously active ACL rules was performed\r\n"}})
	if after := admin.say(t, "ACL", "LIST"); after != before {
		t.Fatalf("a bad file changed the users: %q", after)
	}
	os.WriteFile(path, []byte("user alice off\nuser dave on >d +ping\n"), 0o600)
	expect(t, admin, [][2]string{
		{"ACL LOAD", "+OK\r\n"},
		{"ACL LIST", "*3\r\n$51\r\nuser alice off sanitize-payload resetchannels -@all\r\n" +
			"$121\r\nuser dave on sanitize-payload #18ac3e7343f016890c510e93f935261169d9e3f565436429830faf0934f4f8e4 resetchannels -@all +ping\r\n" +
			"$51\r\nuser default on nopass sanitize-payload ~* &* +@all\r\n"},
	})
	bob.c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if b, err := bob.r.ReadByte(); err == nil {
		t.Errorf("bob, gone from the file, kept his connection (read %q)", b)
	}
	os.Remove(path)
	expect(t, admin, [][2]string{{"ACL LOAD", "-ERR Error loading ACLs, opening file '" + path + "': No such file or directory\r\n"}})

	plain := startServer(t, nil)
	const noFile = "-ERR This Redis instance is not configured to use an ACL file. You may want to specify users via the ACL SETUSER command and then issue a CONFIG REWRITE (assuming you have a Redis configuration file set) in order to store users in the Redis configuration.\r\n"
	expect(t, dial(t, plain), [][2]string{{"ACL SAVE", noFile}, {"ACL LOAD", noFile}})
	if _, err := server.New(server.Options{ACLFile: path}, memstore.New()); err == nil {
		t.Error("a missing --aclfile did not stop the server")
	}
}

// TestACLRefusedExec: an EXEC the user may not run discards the
// transaction with Redis's EXECABORT reason (captured from 8.0-m01).
func TestACLRefusedExec(t *testing.T) {
	srv := startServer(t, nil)
	expect(t, dial(t, srv), [][2]string{{"ACL SETUSER e1 on nopass +@all -exec ~*", "+OK\r\n"}})
	expect(t, dial(t, srv), [][2]string{
		{"AUTH e1 x", "+OK\r\n"},
		{"EXEC", "-EXECABORT Transaction discarded because of: NOPERM User e1 has no permissions to run the 'exec' command\r\n"},
		{"MULTI", "+OK\r\n"},
		{"PING", "+QUEUED\r\n"},
		{"EXEC", "-EXECABORT Transaction discarded because of: NOPERM User e1 has no permissions to run the 'exec' command\r\n"},
		{"PING", "+PONG\r\n"},
		{"DISCARD", "-ERR DISCARD without MULTI\r\n"},
	})
	expect(t, dial(t, srv), [][2]string{
		{"MULTI", "+OK\r\n"},
		{"EXEC x", "-EXECABORT Transaction discarded because of: wrong number of arguments for 'exec' command\r\n"},
		{"PING", "+PONG\r\n"},
		{"EXEC", "-ERR EXEC without MULTI\r\n"},
		{"EXEC x", "-EXECABORT Transaction discarded because of: wrong number of arguments for 'exec' command\r\n"},
	})
}
