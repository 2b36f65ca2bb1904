package mariadbtest

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// copyDir copies the regular files and directories under src to dst, which must not exist.
func copyDir(src, dst string) error {
	return filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, path)
		if err != nil {
			return err
		}
		target := filepath.Join(dst, rel)
		switch {
		case d.IsDir():
			return os.Mkdir(target, 0o700)
		case d.Type().IsRegular():
			return copyFile(path, target)
		default:
			return fmt.Errorf("copy %s: not a regular file or directory", path)
		}
	})
}

const copyChunk = 64 << 10

// copyFile copies src to dst sparsely: it reads only the data extents of src (SEEK_DATA /
// SEEK_HOLE) and leaves holes in dst where src has holes or blocks of zeros. A fresh redo log is
// almost all zeros, so a sparse template copies in a fraction of the time and disk space.
func copyFile(src, dst string) (err error) {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	info, err := in.Stat()
	if err != nil {
		return err
	}
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_EXCL|os.O_WRONLY, info.Mode().Perm())
	if err != nil {
		return err
	}
	defer func() {
		if cerr := out.Close(); err == nil && cerr != nil {
			err = cerr
		}
	}()
	buf := make([]byte, copyChunk)
	size := info.Size()
	for off := int64(0); off < size; {
		start, err := in.Seek(off, unix.SEEK_DATA)
		if errors.Is(err, syscall.ENXIO) { // only a hole is left
			break
		}
		if err != nil {
			return fmt.Errorf("copy %s: find data: %w", src, err)
		}
		end, err := in.Seek(start, unix.SEEK_HOLE)
		if err != nil {
			return fmt.Errorf("copy %s: find hole: %w", src, err)
		}
		if err := copyRange(in, out, buf, start, end); err != nil {
			return fmt.Errorf("copy %s to %s: %w", src, dst, err)
		}
		off = end
	}
	if err := out.Truncate(size); err != nil { // extends the file over a trailing hole
		return fmt.Errorf("copy %s to %s: %w", src, dst, err)
	}
	return nil
}

// copyRange copies bytes [start, end) of in to the same offsets of out, skipping zero chunks.
func copyRange(in, out *os.File, buf []byte, start, end int64) error {
	for off := start; off < end; {
		n, err := in.ReadAt(buf[:min(int64(len(buf)), end-off)], off)
		if n > 0 && !allZero(buf[:n]) {
			if _, werr := out.WriteAt(buf[:n], off); werr != nil {
				return werr
			}
		}
		off += int64(n)
		if errors.Is(err, io.EOF) { // the file shrank while we copied; Truncate restores its size
			return nil
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// zeros is compared against with bytes.Equal, whose assembly keeps -race builds fast.
var zeros = make([]byte, copyChunk)

func allZero(b []byte) bool { return bytes.Equal(b, zeros[:len(b)]) }

// fileSize returns the size of path, 0 when it does not exist.
func fileSize(path string) int64 {
	info, err := os.Stat(path)
	if err != nil {
		return 0
	}
	return info.Size()
}

// readTail returns the last n lines of the file at path (looking at most at its last 64 KiB).
func readTail(path string, n int) string {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Sprintf("(cannot read %s: %v)", path, err)
	}
	defer f.Close()
	const window = 64 << 10
	if size := fileSize(path); size > window {
		if _, err := f.Seek(size-window, io.SeekStart); err != nil {
			return fmt.Sprintf("(cannot read %s: %v)", path, err)
		}
	}
	data, err := io.ReadAll(f)
	if err != nil {
		return fmt.Sprintf("(cannot read %s: %v)", path, err)
	}
	return tailLines(string(data), n)
}

// tailLines returns the last n lines of s.
func tailLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
