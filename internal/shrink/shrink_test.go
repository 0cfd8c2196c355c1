package shrink

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// TestFile: a large file with one name is emptied step by step before it
// goes; a file with another name (a table ingested by a hard link to its
// build) keeps every byte through the other name; a small one just goes.
func TestFile(t *testing.T) {
	dir := t.TempDir()
	fs := vfs.Default
	write := func(name string, size int) []byte {
		b := bytes.Repeat([]byte{0xA5}, size)
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o600); err != nil {
			t.Fatal(err)
		}
		return b
	}
	size := func(name string) int64 {
		fi, err := os.Stat(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		return fi.Size()
	}

	write("big", Min+Step+12345)
	File(fs, filepath.Join(dir, "big"))
	if n := size("big"); n != 0 {
		t.Fatalf("a large file with one name shrank to %d bytes, want 0", n)
	}
	if err := (FS{fs}).Remove(filepath.Join(dir, "big")); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "big")); !os.IsNotExist(err) {
		t.Fatalf("removed: %v", err)
	}

	want := write("build", Min+1)
	if err := os.Link(filepath.Join(dir, "build"), filepath.Join(dir, "ingested")); err != nil {
		t.Fatal(err)
	}
	if err := (FS{fs}).Remove(filepath.Join(dir, "build")); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join(dir, "ingested"))
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("the other name after a removal: %d bytes (want %d), %v", len(got), len(want), err)
	}

	write("small", 1000)
	File(fs, filepath.Join(dir, "small"))
	if n := size("small"); n != 1000 {
		t.Fatalf("a small file shrank to %d", n)
	}
}
