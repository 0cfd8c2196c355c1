package integration

import (
	"bufio"
	"net"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// TestGoRedis drives the BF/CF API of go-redis v9 in both protocols.
func TestGoRedis(t *testing.T) {
	n := start(t)
	for _, proto := range []int{2, 3} {
		c := n.client(proto)
		cx := ctx(t)
		key := "gr" + string(rune('0'+proto))
		if err := c.BFReserve(cx, key, 0.01, 1000).Err(); err != nil {
			t.Fatalf("RESP%d BF.RESERVE: %v", proto, err)
		}
		added, err := c.BFMAdd(cx, key, "a", "b", "a").Result()
		if err != nil || len(added) != 3 || !added[0] || !added[1] || added[2] {
			t.Fatalf("RESP%d BF.MADD = %v, %v", proto, added, err)
		}
		ex, err := c.BFExists(cx, key, "a").Result()
		if err != nil || !ex {
			t.Fatalf("RESP%d BF.EXISTS a = %v, %v", proto, ex, err)
		}
		info, err := c.BFInfo(cx, key).Result()
		if err != nil || info.Capacity != 1000 || info.ItemsInserted != 2 || info.Filters != 1 {
			t.Fatalf("RESP%d BF.INFO = %+v, %v", proto, info, err)
		}
		ckey := "c" + key
		if ok, err := c.CFAdd(cx, ckey, "x").Result(); err != nil || !ok {
			t.Fatalf("RESP%d CF.ADD = %v, %v", proto, ok, err)
		}
		if n, err := c.CFCount(cx, ckey, "x").Result(); err != nil || n != 1 {
			t.Fatalf("RESP%d CF.COUNT = %v, %v", proto, n, err)
		}
		cinfo, err := c.CFInfo(cx, ckey).Result()
		if err != nil || cinfo.NumItemsInserted != 1 || cinfo.BucketSize != 2 {
			t.Fatalf("RESP%d CF.INFO = %+v, %v", proto, cinfo, err)
		}
		if ok, err := c.CFDel(cx, ckey, "x").Result(); err != nil || !ok {
			t.Fatalf("RESP%d CF.DEL = %v, %v", proto, ok, err)
		}
		if typ, err := c.Type(cx, key).Result(); err != nil || typ != "MBbloom--" {
			t.Fatalf("RESP%d TYPE = %q, %v", proto, typ, err)
		}
	}
}

// TestRedisCLI uses redis-cli, including the COMMAND DOCS it sends for help.
func TestRedisCLI(t *testing.T) {
	cli := needTool(t, "redis-cli", "redis-tools")
	n := start(t)
	host, port, _ := net.SplitHostPort(n.addr)
	run := func(args ...string) string {
		out, err := exec.Command(cli, append([]string{"-h", host, "-p", port}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("redis-cli %v: %v\n%s", args, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	if got := run("BF.ADD", "k", "hello"); got != "1" {
		t.Fatalf("BF.ADD = %q", got)
	}
	if got := run("BF.EXISTS", "k", "hello"); got != "1" {
		t.Fatalf("BF.EXISTS = %q", got)
	}
	if got := run("-3", "BF.EXISTS", "k", "nope"); got != "(false)" && got != "0" {
		t.Fatalf("RESP3 BF.EXISTS = %q", got)
	}
	if got := run("COMMAND", "DOCS", "bf.add"); !strings.Contains(got, "summary") {
		t.Fatalf("COMMAND DOCS = %q", got)
	}
}

// TestHostileFraming sends framings that crash or stall naive readers and
// checks each gets a protocol error, and that other clients are still served.
func TestHostileFraming(t *testing.T) {
	n := start(t)
	cases := map[string]string{
		"*99999999999999999999\r\n":      "-ERR Protocol error: invalid multibulk length",
		"*2000000\r\n":                   "-ERR Protocol error: invalid multibulk length",
		"*1\r\n$-5\r\n":                  "-ERR Protocol error: invalid bulk length",
		"*1\r\n$9999999999999\r\n":       "-ERR Protocol error: invalid bulk length",
		"*1\r\n$3\r\nabcXY":              "-ERR Protocol error: invalid bulk length",
		"*1\r\nx3\r\n":                   "-ERR Protocol error: expected '$', got 'x'",
		"*" + strings.Repeat("1", 70000): "-ERR Protocol error: too big mbulk count string",
		strings.Repeat("a", 70000):       "-ERR Protocol error: too big inline request",
		"PING \"unterminated\r\n":        "-ERR Protocol error: unbalanced quotes in request",
	}
	for in, want := range cases {
		c, err := net.Dial("tcp", n.addr)
		if err != nil {
			t.Fatal(err)
		}
		c.SetDeadline(time.Now().Add(10 * time.Second))
		c.Write([]byte(in))
		line, err := bufio.NewReader(c).ReadString('\n')
		if err != nil || strings.TrimSpace(line) != want {
			t.Errorf("%.30q: got %q (%v), want %q", in, line, err, want)
		}
		c.Close()
	}
	// The server still answers.
	if err := n.client(2).Ping(ctx(t)).Err(); err != nil {
		t.Fatalf("PING after hostile input: %v", err)
	}
}

// TestNodeRedis runs node-redis 6 (default RESP3) through bfcheck.mjs.
func TestNodeRedis(t *testing.T) {
	node := needTool(t, "node", "nodejs")
	if _, err := os.Stat("node/node_modules/redis"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("node-redis not installed (cd integration/node && npm ci)")
		}
		t.Skip("node-redis not installed (cd integration/node && npm ci)")
	}
	n := start(t)
	out, err := exec.Command(node, "node/bfcheck.mjs", "redis://"+n.addr).CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "ok" {
		t.Fatalf("node-redis: %v\n%s", err, out)
	}
}

// TestRedisPy runs Debian's python3-redis through its BF/CF API.
func TestRedisPy(t *testing.T) {
	py := "/usr/bin/python3"
	if out, err := exec.Command(py, "-c", "import redis").CombinedOutput(); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("python3-redis not installed (apt-get install python3-redis): %s", out)
		}
		t.Skip("python3-redis not installed (apt-get install python3-redis)")
	}
	n := start(t)
	host, port, _ := net.SplitHostPort(n.addr)
	script := `
import sys, redis
r = redis.Redis(host=sys.argv[1], port=int(sys.argv[2]))
assert r.ping()
assert r.bf().create("pb", 0.01, 1000)
assert r.bf().madd("pb", "a", "b", "a") == [1, 1, 0], r.bf().madd("pb", "a")
assert r.bf().exists("pb", "a") == 1
assert r.bf().exists("pb", "zz") == 0
info = r.bf().info("pb")
assert info.capacity == 1000 and info.insertedNum == 2, vars(info)
assert r.cf().add("pc", "x") == 1
assert r.cf().count("pc", "x") == 1
cinfo = r.cf().info("pc")
assert cinfo.insertedNum == 1 and cinfo.bucketSize == 2, vars(cinfo)
assert r.cf().delete("pc", "x") == 1
assert r.type("pb") == b"MBbloom--"
print("ok")
`
	out, err := exec.Command(py, "-c", script, host, port).CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "ok" {
		t.Fatalf("redis-py: %v\n%s", err, out)
	}
}

// TestConfiguredLimits: a lowered bulk limit refuses longer arguments with
// Redis's protocol error, and CONFIG GET reports it.
func TestConfiguredLimits(t *testing.T) {
	n := start(t, "--proto-max-bulk-len", "1024", "--proto-max-multibulk-len", "8")
	c := n.client(2)
	if v, err := c.ConfigGet(ctx(t), "proto-max-bulk-len").Result(); err != nil || v["proto-max-bulk-len"] != "1024" {
		t.Fatalf("CONFIG GET = %v, %v", v, err)
	}
	for in, want := range map[string]string{
		"*3\r\n$6\r\nBF.ADD\r\n$1\r\nk\r\n$1025\r\n": "-ERR Protocol error: invalid bulk length",
		"*9\r\n": "-ERR Protocol error: invalid multibulk length",
	} {
		conn, err := net.Dial("tcp", n.addr)
		if err != nil {
			t.Fatal(err)
		}
		conn.SetDeadline(time.Now().Add(10 * time.Second))
		conn.Write([]byte(in))
		line, _ := bufio.NewReader(conn).ReadString('\n')
		conn.Close()
		if strings.TrimSpace(line) != want {
			t.Errorf("%q: got %q want %q", in, line, want)
		}
	}
	if err := c.BFAdd(ctx(t), "k", strings.Repeat("x", 1000)).Err(); err != nil {
		t.Fatalf("argument under the limit: %v", err)
	}
}
