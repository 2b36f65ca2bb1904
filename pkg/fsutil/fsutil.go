// Package fsutil holds the file-system steps that make writes durable and
// that every package writing files (the relay, the stream meta store, the
// file sink) needs the same way.
package fsutil

import (
	"errors"
	"fmt"
	"os"
)

// SyncDir fsyncs a directory, so that names just created, renamed or
// removed in it survive a crash. The error names the directory.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("open directory %s to fsync it: %w", dir, err)
	}
	if err := errors.Join(d.Sync(), d.Close()); err != nil {
		return fmt.Errorf("fsync directory %s: %w", dir, err)
	}
	return nil
}
