// Package atomicfile replaces a file so that its path never holds half of
// it, even across a crash: a temporary file in the same directory (a rename
// across filesystems would fail), written, synced, renamed over the path,
// and the directory synced so that the rename itself is durable.
package atomicfile

import (
	"bufio"
	"crypto/rand"
	"encoding/hex"
	"io"
	"os"
	"path/filepath"
)

// Write replaces path with what fill writes, with permissions perm.
func Write(path string, perm os.FileMode, fill func(w io.Writer) error) error {
	root, err := os.OpenRoot(filepath.Dir(path))
	if err != nil {
		return err
	}
	defer root.Close()
	return WriteIn(root, filepath.Base(path), perm, fill)
}

// WriteIn is Write confined to root: name is resolved inside it, and
// neither "..", an absolute name nor a symbolic link takes the file or its
// temporary one outside it (os.Root). name's directory must exist.
func WriteIn(root *os.Root, name string, perm os.FileMode, fill func(w io.Writer) error) error {
	dir, base := filepath.Split(name)
	if dir == "" {
		dir = "."
	}
	d, err := root.OpenRoot(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	var rnd [8]byte
	rand.Read(rnd[:])
	tmp := "." + base + ".tmp" + hex.EncodeToString(rnd[:])
	f, err := d.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	defer d.Remove(tmp) // a no-op once renamed
	bw := bufio.NewWriterSize(f, 1<<20)
	err = fill(bw)
	if err == nil {
		err = bw.Flush()
	}
	if err == nil {
		err = f.Chmod(perm)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = d.Rename(tmp, base)
	}
	if err != nil {
		return err
	}
	df, err := d.Open(".")
	if err != nil {
		return err
	}
	defer df.Close()
	return df.Sync()
}
