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
