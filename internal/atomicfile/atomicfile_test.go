package atomicfile

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"
)

// TestWrite: a bare name lands in the working directory with its
// permissions, and a failed fill leaves the old file and no temporary one.
func TestWrite(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	if err := Write("f", 0o640, func(w io.Writer) error { _, err := io.WriteString(w, "one"); return err }); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "f")); err != nil || string(b) != "one" {
		t.Fatalf("read %q, %v", b, err)
	}
	if st, _ := os.Stat("f"); st.Mode().Perm() != 0o640 {
		t.Fatalf("mode %v", st.Mode())
	}
	bad := errors.New("bad")
	if err := Write("f", 0o640, func(w io.Writer) error { io.WriteString(w, "two"); return bad }); !errors.Is(err, bad) {
		t.Fatalf("got %v", err)
	}
	if b, _ := os.ReadFile("f"); string(b) != "one" {
		t.Fatalf("after a failed write: %q", b)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Fatalf("left %d entries", len(ents))
	}
}

// TestWriteIn: a name inside the root is written; "..", an absolute name
// and a symbolic link out of the root are refused, and nothing is written
// outside it.
func TestWriteIn(t *testing.T) {
	outside := t.TempDir()
	dir := t.TempDir()
	os.Mkdir(filepath.Join(dir, "sub"), 0o700)
	os.Symlink(outside, filepath.Join(dir, "out"))
	root, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	fill := func(w io.Writer) error { _, err := io.WriteString(w, "x"); return err }
	for _, name := range []string{"f", "sub/f"} {
		if err := WriteIn(root, name, 0o600, fill); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if b, _ := os.ReadFile(filepath.Join(dir, name)); string(b) != "x" {
			t.Fatalf("%s holds %q", name, b)
		}
	}
	for _, name := range []string{"../f", filepath.Join(outside, "f"), "out/f", "sub/../../f"} {
		if err := WriteIn(root, name, 0o600, fill); err == nil {
			t.Fatalf("%s: written", name)
		}
	}
	if ents, _ := os.ReadDir(outside); len(ents) != 0 {
		t.Fatalf("%d entries written outside the root", len(ents))
	}
}
