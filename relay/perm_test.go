package relay

import (
	"io/fs"
	"os"
	"path/filepath"
	"testing"
)

// TestFileModes: relay directories are created 0750 and meta and index
// files 0600 (at most: the umask may only take bits away), also when a
// crashed write left a temp file with a wider mode.
func TestFileModes(t *testing.T) {
	root := filepath.Join(t.TempDir(), "relay")
	if err := os.MkdirAll(root, dirMode); err != nil {
		t.Fatal(err)
	}
	sd, err := addSubdir(root, nil, "3f2c1d7a-0000-11ee-8000-000000000001")
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(root, sd.Name)
	// A leftover temp meta file from before, world-readable.
	if err := os.WriteFile(filepath.Join(dir, metaFile+".tmp"), []byte("{}"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Join(dir, metaFile+".tmp"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := writeMeta(dir, Meta{}); err != nil {
		t.Fatal(err)
	}
	for path, most := range map[string]fs.FileMode{
		root:                           0o750,
		dir:                            0o750,
		filepath.Join(root, indexFile): 0o600,
		filepath.Join(dir, metaFile):   0o600,
	} {
		st, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if perm := st.Mode().Perm(); perm&^most != 0 {
			t.Errorf("%s has mode %04o, want at most %04o", path, perm, most)
		}
	}
	if dirMode != 0o750 || metaMode != 0o600 || binlogMode != 0o640 {
		t.Fatalf("modes changed: dir %04o meta %04o binlog %04o", dirMode, metaMode, binlogMode)
	}
}

// checkModes checks every directory and file a relay left under root (not
// root itself): at
// most 0750 for directories, 0640 for binlog files, 0600 for meta, index
// and other state files.
func checkModes(t *testing.T, root string) {
	t.Helper()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if path == root {
			return nil // made by the caller (here t.TempDir)
		}
		st, err := d.Info()
		if err != nil {
			return err
		}
		most := metaMode
		switch {
		case d.IsDir():
			most = dirMode
		case isBinlogName(d.Name()):
			most = binlogMode
		}
		if perm := st.Mode().Perm(); perm&^most != 0 {
			t.Errorf("%s has mode %04o, want at most %04o", path, perm, most)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// isBinlogName: name.NNNNNN, as relay files are named.
func isBinlogName(name string) bool {
	ext := filepath.Ext(name)
	if len(ext) < 2 {
		return false
	}
	for _, c := range ext[1:] {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}
