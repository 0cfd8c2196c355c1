package integration

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// postgres is one PostgreSQL server the test started (initdb in a temp
// dir, on a free loopback port); it is stopped by PID when the test ends.
type postgres struct {
	cmd *exec.Cmd
	dir string
	dsn string
}

// pgBin finds the directory of initdb and postgres: on PATH, or Debian's
// /usr/lib/postgresql/<version>/bin (not on PATH), the newest version.
func pgBin(t *testing.T) string {
	t.Helper()
	if p, err := exec.LookPath("initdb"); err == nil {
		return filepath.Dir(p)
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin/initdb")
	sort.Slice(dirs, func(i, j int) bool {
		vi, _ := strconv.Atoi(filepath.Base(filepath.Dir(filepath.Dir(dirs[i]))))
		vj, _ := strconv.Atoi(filepath.Base(filepath.Dir(filepath.Dir(dirs[j]))))
		return vi > vj
	})
	if len(dirs) > 0 {
		return filepath.Dir(dirs[0])
	}
	needTool(t, "initdb", "postgresql") // skips (fails under CI), naming the package
	return ""
}

// startPostgres runs initdb and postgres. PostgreSQL refuses to run as
// root, so as root both run as the `postgres` OS user (the setuid is done
// in the child, like runuser, so the PID we hold is postgres's own).
// pg_stat_statements is preloaded, so tests can count statements.
func startPostgres(t *testing.T) *postgres {
	t.Helper()
	bin := pgBin(t)
	dir, err := os.MkdirTemp("", "bfserver-pg-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	var cred *syscall.Credential
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			needTool(t, "postgres (the OS user postgres is missing)", "postgresql")
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
		if err := os.Chown(dir, uid, gid); err != nil {
			t.Fatal(err)
		}
	}
	data := filepath.Join(dir, "data")
	run := func(name string, args ...string) *exec.Cmd {
		c := exec.Command(filepath.Join(bin, name), args...)
		c.Dir = dir
		c.Env = append(os.Environ(), "LC_ALL=C")
		if cred != nil {
			c.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
		}
		return c
	}
	if out, err := run("initdb", "-D", data, "-U", "postgres", "--auth=trust", "-E", "UTF8",
		"--locale=C", "--no-sync").CombinedOutput(); err != nil {
		t.Fatalf("initdb: %v\n%s", err, out)
	}
	addr := freeAddr(t)
	_, port, _ := net.SplitHostPort(addr)
	logf, err := os.Create(filepath.Join(dir, "postgres.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	cmd := run("postgres", "-D", data, "-p", port, "-c", "listen_addresses=127.0.0.1",
		"-c", "unix_socket_directories="+dir, "-c", "shared_preload_libraries=pg_stat_statements",
		"-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off",
		"-c", "max_connections=50")
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatalf("postgres: %v", err)
	}
	pg := &postgres{cmd: cmd, dir: dir, dsn: fmt.Sprintf("postgres://postgres@127.0.0.1:%s/postgres?sslmode=disable", port)}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		// Fast shutdown (SIGINT) by PID; SIGKILL if it takes too long.
		syscall.Kill(cmd.Process.Pid, syscall.SIGINT)
		select {
		case <-exited:
		case <-time.After(15 * time.Second):
			syscall.Kill(cmd.Process.Pid, syscall.SIGKILL)
			<-exited
		}
	})
	deadline := time.Now().Add(30 * time.Second)
	for {
		c, err := pgx.Connect(context.Background(), pg.dsn)
		if err == nil {
			_, err = c.Exec(context.Background(), "CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
			c.Close(context.Background())
			if err != nil {
				t.Fatalf("pg_stat_statements: %v", err)
			}
			return pg
		}
		select {
		case <-exited:
			log, _ := os.ReadFile(filepath.Join(dir, "postgres.log"))
			t.Fatalf("postgres exited: %s", log)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("postgres did not accept connections: %v", err)
		}
		time.Sleep(50 * time.Millisecond) // polling for the listener
	}
}

// conn opens a connection closed when the test ends.
func (pg *postgres) conn(t *testing.T) *pgx.Conn {
	t.Helper()
	c, err := pgx.Connect(ctx(t), pg.dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close(context.Background()) })
	return c
}

func (pg *postgres) exec(t *testing.T, c *pgx.Conn, sql string, args ...any) {
	t.Helper()
	if _, err := c.Exec(ctx(t), sql, args...); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}
