package replication

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// backupName resolves a BFBACKUP path to a name inside the backup
// directory, as the operator allowed (Options.BackupDir; Redis likewise
// keeps CONFIG SET dir behind enable-protected-configs): a relative path
// is taken inside it, an absolute one must lie inside it, ".." is refused
// outright, and a symbolic link cannot lead out (os.Root, when written).
// The file's directory must exist and must not be in the data directory,
// whatever links lead there: a backup never replaces the node's own files.
func (n *Node) backupName(path string) (string, error) {
	dir := n.opts.BackupDir
	if dir == "" {
		return "", ErrNoBackupDir
	}
	if path == "" || strings.ContainsRune(path, 0) {
		return "", fmt.Errorf("%w: %q", ErrBackupPath, path)
	}
	for _, el := range strings.Split(filepath.ToSlash(path), "/") {
		if el == ".." {
			return "", fmt.Errorf("%w: %q has a '..'", ErrBackupPath, path)
		}
	}
	name := filepath.Clean(path)
	if filepath.IsAbs(name) {
		rel, err := filepath.Rel(dir, name)
		if err != nil || !filepath.IsLocal(rel) {
			return "", fmt.Errorf("%w: %s is outside %s", ErrBackupPath, path, dir)
		}
		name = rel
	}
	if !filepath.IsLocal(name) || name == "." {
		return "", fmt.Errorf("%w: %q", ErrBackupPath, path)
	}
	parent, err := filepath.EvalSymlinks(filepath.Join(dir, filepath.Dir(name)))
	if err != nil {
		return "", fmt.Errorf("%w: %v", ErrBackupPath, err)
	}
	realDir, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return "", fmt.Errorf("%w: %v", ErrBackupPath, err)
	}
	if !within(realDir, parent) {
		return "", fmt.Errorf("%w: %s leads outside %s", ErrBackupPath, path, dir)
	}
	if data, err := filepath.EvalSymlinks(n.opts.DataDir); err == nil && within(data, parent) {
		return "", fmt.Errorf("%w: %s is in the data directory %s", ErrBackupPath, path, n.opts.DataDir)
	}
	return name, nil
}

// within reports whether path is dir or inside it (both cleaned, real).
func within(dir, path string) bool {
	rel, err := filepath.Rel(dir, path)
	return err == nil && filepath.IsLocal(rel) || rel == "."
}

// checkBackupDir refuses a backup directory in the data directory, at
// start; Options.Validate has made both absolute.
func checkBackupDir(o *Options) error {
	if o.BackupDir == "" {
		return nil
	}
	st, err := os.Stat(o.BackupDir)
	if err != nil {
		return fmt.Errorf("replication: backup directory: %w", err)
	}
	if !st.IsDir() {
		return fmt.Errorf("replication: backup directory %s is not a directory", o.BackupDir)
	}
	real, err := filepath.EvalSymlinks(o.BackupDir)
	if err != nil {
		return fmt.Errorf("replication: backup directory: %w", err)
	}
	data, err := filepath.EvalSymlinks(o.DataDir)
	if err != nil { // not made yet
		data, _ = filepath.Abs(o.DataDir)
	}
	if within(data, real) {
		return fmt.Errorf("replication: the backup directory %s is in the data directory %s", o.BackupDir, o.DataDir)
	}
	return nil
}
