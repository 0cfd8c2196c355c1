package replication

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// TestBackupName: BFBACKUP's path is taken inside the backup directory;
// none, "..", an absolute path elsewhere, a link out of it and the data
// directory are refused.
func TestBackupName(t *testing.T) {
	base := t.TempDir()
	dir, data, outside := filepath.Join(base, "backups"), filepath.Join(base, "data"), t.TempDir()
	for _, d := range []string{dir, data, filepath.Join(dir, "sub")} {
		os.MkdirAll(d, 0o700)
	}
	os.Symlink(outside, filepath.Join(dir, "out"))
	os.Symlink(data, filepath.Join(dir, "data"))
	n := &Node{opts: Options{DataDir: data}}
	if _, err := n.backupName("f"); !errors.Is(err, ErrNoBackupDir) {
		t.Fatalf("no backup directory: %v", err)
	}
	n.opts.BackupDir = dir
	for path, want := range map[string]string{"f": "f", "sub/f": "sub/f", filepath.Join(dir, "sub", "f"): "sub/f", "./f": "f"} {
		if got, err := n.backupName(path); err != nil || got != want {
			t.Errorf("%s: %q, %v; want %q", path, got, err, want)
		}
	}
	for _, path := range []string{"", ".", dir, "../f", "sub/../f", filepath.Join(outside, "f"), filepath.Join(data, "raft.db"),
		"out/f", "data/raft.db", "nosuchdir/f", "/etc/passwd"} {
		if got, err := n.backupName(path); !errors.Is(err, ErrBackupPath) {
			t.Errorf("%q: %q, %v; want ErrBackupPath", path, got, err)
		}
	}
	// A backup directory in the data directory is refused at start.
	o := &Options{DataDir: data, BackupDir: filepath.Join(data, "b")}
	os.Mkdir(o.BackupDir, 0o700)
	if err := checkBackupDir(o); err == nil {
		t.Fatal("a backup directory in the data directory was accepted")
	}
	o.BackupDir = data
	if err := checkBackupDir(o); err == nil {
		t.Fatal("the data directory as backup directory was accepted")
	}
}
