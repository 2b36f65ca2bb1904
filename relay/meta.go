package relay

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/dmworker/dm-worker/pkg/fsutil"
)

// metaFile is the name of the meta file in every relay subdirectory.
const metaFile = "relay.meta"

// Meta is the content of relay.meta: the source location of the last
// transaction boundary written to the subdirectory's files.
type Meta struct {
	BinlogName string `json:"binlog-name"`
	BinlogPos  uint32 `json:"binlog-pos"`
	BinlogGTID string `json:"binlog-gtid"`
}

// readMeta reads dir's meta; ok is false when there is none.
func readMeta(dir string) (m Meta, ok bool, err error) {
	b, err := os.ReadFile(filepath.Join(dir, metaFile))
	if errors.Is(err, fs.ErrNotExist) {
		return Meta{}, false, nil
	}
	if err != nil {
		return Meta{}, false, fmt.Errorf("relay: read meta: %w", err)
	}
	if err := json.Unmarshal(b, &m); err != nil {
		return Meta{}, false, fmt.Errorf("relay: meta %s is not valid JSON (%v); remove it to let recovery rebuild it from the relay files", filepath.Join(dir, metaFile), err)
	}
	return m, true, nil
}

// writeMeta replaces dir's meta atomically: temp file, fsync, rename, fsync
// of the directory.
func writeMeta(dir string, m Meta) error {
	b, err := json.Marshal(m)
	if err != nil {
		return fmt.Errorf("relay: encode meta: %w", err)
	}
	return writeFileAtomic(filepath.Join(dir, metaFile), b)
}

// writeFileAtomic writes path through a temp file renamed over it, with
// fsyncs of the file and of its directory.
func writeFileAtomic(path string, data []byte) error {
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, metaMode)
	if err != nil {
		return fmt.Errorf("relay: write %s: %w", path, err)
	}
	// A temp file left by a crash keeps its old mode through O_TRUNC.
	if err := f.Chmod(metaMode); err != nil {
		_ = f.Close()
		return fmt.Errorf("relay: chmod %s: %w", tmp, err)
	}
	if _, err := f.Write(data); err != nil {
		_ = f.Close()
		return fmt.Errorf("relay: write %s: %w", tmp, err)
	}
	if err := f.Sync(); err != nil {
		_ = f.Close()
		return fmt.Errorf("relay: fsync %s: %w", tmp, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("relay: close %s: %w", tmp, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("relay: rename %s: %w", tmp, err)
	}
	return fsutil.SyncDir(filepath.Dir(path))
}
