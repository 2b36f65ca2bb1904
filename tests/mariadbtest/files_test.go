package mariadbtest

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

func TestCopyDirAndManifest(t *testing.T) {
	src := t.TempDir()
	files := map[string][]byte{
		"empty":         {},
		"small":         []byte("hello"),
		"sub/zeros":     make([]byte, 3*copyChunk),                                                  // all hole
		"sub/mixed":     append(append(make([]byte, copyChunk+7), 'x'), make([]byte, copyChunk)...), // data between holes
		"sub/deep/tail": append(bytes.Repeat([]byte("y"), copyChunk), make([]byte, 10)...),
	}
	for name, data := range files {
		p := filepath.Join(src, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, data, 0o640); err != nil {
			t.Fatal(err)
		}
	}
	dst := filepath.Join(t.TempDir(), "copy")
	if err := copyDir(src, dst); err != nil {
		t.Fatalf("copyDir: %v", err)
	}
	for name, want := range files {
		got, err := os.ReadFile(filepath.Join(dst, name))
		if err != nil {
			t.Fatalf("read copy of %s: %v", name, err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("copy of %s: %d bytes differ from the %d original bytes", name, len(got), len(want))
		}
	}
	srcManifest, err := dirManifest(src)
	if err != nil {
		t.Fatal(err)
	}
	dstManifest, err := dirManifest(dst)
	if err != nil {
		t.Fatal(err)
	}
	if srcManifest != dstManifest {
		t.Errorf("manifests differ:\n%s\n%s", srcManifest, dstManifest)
	}
	if err := copyDir(src, dst); err == nil {
		t.Error("copyDir onto an existing directory succeeded")
	}
}

func TestVerifyTemplate(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(dataDir(dir), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dataDir(dir), "ibdata1"), []byte("data"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := verifyTemplate(dir); err == nil {
		t.Fatal("a template without READY verified")
	}
	manifest, err := dirManifest(dataDir(dir))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, readyFile), []byte(manifest), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := verifyTemplate(dir); err != nil {
		t.Fatalf("complete template: %v", err)
	}
	if err := os.Remove(filepath.Join(dataDir(dir), "ibdata1")); err != nil {
		t.Fatal(err)
	}
	if err := verifyTemplate(dir); err == nil {
		t.Fatal("a template that lost a file verified")
	}
}

func TestTailLines(t *testing.T) {
	tests := []struct {
		in   string
		n    int
		want string
	}{
		{"a\nb\nc\n", 2, "b\nc"},
		{"a\nb", 5, "a\nb"},
		{"", 3, ""},
	}
	for _, tt := range tests {
		if got := tailLines(tt.in, tt.n); got != tt.want {
			t.Errorf("tailLines(%q, %d) = %q, want %q", tt.in, tt.n, got, tt.want)
		}
	}
}
