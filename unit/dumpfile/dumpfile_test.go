package dumpfile

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dmworker/dm-worker/pkg/binlog"
)

func TestFieldRoundTrip(t *testing.T) {
	values := [][]byte{
		[]byte(""), []byte("plain"), []byte("tab\there"), []byte("new\nline\r\n"), []byte("back\\slash\\"),
		{0, 1, 2, '\\', 'N'}, []byte(`\N`), bytes.Repeat([]byte{0xff, '\t'}, 40000), []byte("日本語😀"),
	}
	var file []byte
	for _, v := range values {
		file = AppendField(file, v)
		file = append(file, '\t')
	}
	file = append(file, Null...)
	file = append(file, '\n')
	file = append(file, "x\n"...)

	r := NewReader(bytes.NewReader(file))
	row, err := r.Next()
	if err != nil {
		t.Fatal(err)
	}
	if len(row) != len(values)+1 {
		t.Fatalf("got %d fields, want %d", len(row), len(values)+1)
	}
	for i, v := range values {
		if row[i].Null || !bytes.Equal(row[i].Value, v) {
			t.Errorf("field %d: got %q (null %v), want %q", i, row[i].Value, row[i].Null, v)
		}
	}
	if !row[len(values)].Null {
		t.Errorf("last field: want NULL, got %q", row[len(values)].Value)
	}
	if row, err = r.Next(); err != nil || len(row) != 1 || string(row[0].Value) != "x" {
		t.Fatalf("second row: %+v, %v", row, err)
	}
	if _, err := r.Next(); !errors.Is(err, io.EOF) {
		t.Fatalf("after the last row: %v, want EOF", err)
	}
	if _, err := NewReader(strings.NewReader("cut")).Next(); err == nil || errors.Is(err, io.EOF) {
		t.Fatalf("a row without a line end: %v, want an error", err)
	}
}

func TestManifestRoundTrip(t *testing.T) {
	dir := t.TempDir()
	if _, err := ReadManifest(dir); !errors.Is(err, ErrNoManifest) {
		t.Fatalf("empty dir: %v, want ErrNoManifest", err)
	}
	m := &Manifest{DumpID: "d1", Task: "t", Source: "s", Method: MethodFlushLock,
		Start:  binlog.Location{Name: "b.000001", Pos: 4, GTID: "0-1-2"},
		Tables: []Table{{Schema: "db", Name: "a\tb", Chunks: []Chunk{{File: ChunkFile(0, 0), Rows: 3, Bytes: 10}, {File: ChunkFile(0, 1), Rows: 2, Bytes: 5}}}}}
	if err := WriteManifest(dir, m); err != nil {
		t.Fatal(err)
	}
	got, err := ReadManifest(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got.DumpID != "d1" || got.Start != m.Start || got.Rows() != 5 || got.Bytes() != 15 || got.Chunks() != 2 || got.Tables[0].Name != "a\tb" {
		t.Fatalf("read back %+v", got)
	}
	if _, err := os.Stat(filepath.Join(dir, ManifestName+TmpSuffix)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("temporary manifest left behind: %v", err)
	}
	if err := os.WriteFile(filepath.Join(dir, ManifestName), []byte(`{"version":99}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadManifest(dir); err == nil || !strings.Contains(err.Error(), "version 99") {
		t.Fatalf("future version: %v", err)
	}
}

// TestFinishAndSync: Finish renames the temporary file into place, Sync
// fsyncs every named file and the directory, and a file that is not there
// is Sync's error, naming it.
func TestFinishAndSync(t *testing.T) {
	dir := t.TempDir()
	var names []string
	for i := range 5 {
		name := ChunkFile(0, i)
		if err := os.WriteFile(filepath.Join(dir, name+TmpSuffix), []byte("1\tx\n"), 0o640); err != nil {
			t.Fatal(err)
		}
		if err := Finish(dir, name); err != nil {
			t.Fatal(err)
		}
		names = append(names, name)
	}
	for _, name := range names {
		if _, err := os.Stat(filepath.Join(dir, name+TmpSuffix)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s%s is still there after Finish (%v)", name, TmpSuffix, err)
		}
		if b, err := os.ReadFile(filepath.Join(dir, name)); err != nil || string(b) != "1\tx\n" {
			t.Errorf("%s after Finish: %q, %v", name, b, err)
		}
	}
	for _, workers := range []int{0, 1, 3, 16} {
		if err := Sync(dir, names, workers); err != nil {
			t.Errorf("Sync with %d workers: %v", workers, err)
		}
	}
	if err := Sync(dir, nil, 4); err != nil {
		t.Errorf("Sync of no files: %v", err)
	}
	missing := ChunkFile(1, 0)
	err := Sync(dir, append(names, missing), 2)
	if err == nil || !strings.Contains(err.Error(), missing) {
		t.Errorf("Sync with a missing file: %v, want an error naming %s", err, missing)
	}
	if err := Finish(dir, missing); err == nil {
		t.Errorf("Finish of a file never written: no error")
	}
}
