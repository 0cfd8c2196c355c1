package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestConfigPrecedence: defaults < config file < environment < flags.
func TestConfigPrecedence(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "bf.conf")
	os.WriteFile(file, []byte("# comment\nmaxclients 50\nbf-error-rate 0.05\nrequirepass \"from file\"\nfsync everysec\nraft-log-store bolt\n"), 0o600)
	t.Setenv("BFSERVER_MAXCLIENTS", "60")
	c, err := parseFlags([]string{"--config", file, "--fsync", "no"})
	if err != nil {
		t.Fatal(err)
	}
	if c.maxClients != 60 || c.module.BFErrorRate != 0.05 || c.requirePass != "from file" || c.fsync != "no" || c.logStore != "bolt" {
		t.Fatalf("got maxclients %d, error rate %v, requirepass %q, fsync %q, raft-log-store %q", c.maxClients, c.module.BFErrorRate, c.requirePass, c.fsync, c.logStore)
	}
	t.Setenv("BFSERVER_RAFT_LOG_STORE", "wal")
	if c, err = parseFlags([]string{"--config", file}); err != nil || c.logStore != "wal" {
		t.Fatalf("raft-log-store from the environment: %v %v", c, err)
	}
	t.Setenv("BFSERVER_RAFT_LOG_STORE", "sqlite")
	if _, err := parseFlags(nil); err == nil || !strings.Contains(err.Error(), "BFSERVER_RAFT_LOG_STORE") {
		t.Fatalf("a log store that does not exist: %v", err)
	}
	t.Setenv("BFSERVER_RAFT_LOG_STORE", "wal")
	if c.raftAddr != "127.0.0.1:16379" {
		t.Fatalf("default raft address %q", c.raftAddr)
	}
	os.WriteFile(file, []byte("nosuchsetting 1\n"), 0o600)
	if _, err := parseFlags([]string{"--config=" + file}); err == nil {
		t.Fatal("unknown setting accepted")
	}
}

// TestHelp: --help lists every flag with its default, and nothing the
// flag package had to recover from (it calls String on a zero value of
// each flag's type to tell a default from zero).
func TestHelp(t *testing.T) {
	var out, errs strings.Builder
	if code := run([]string{"--help"}, &out, &errs); code != 0 {
		t.Fatalf("--help exited %d: %s", code, errs.String())
	}
	help := out.String() + errs.String()
	if strings.Contains(help, "panic") {
		i := strings.Index(help, "panic")
		t.Fatalf("--help says: %s", help[i:min(len(help), i+200)])
	}
	for _, want := range []string{"-image-base", "-trailing-log-bytes", "(default 10s)", "-fsync", "-raft-log-store"} {
		if !strings.Contains(help, want) {
			t.Fatalf("--help does not mention %q:\n%s", want, help)
		}
	}
}
