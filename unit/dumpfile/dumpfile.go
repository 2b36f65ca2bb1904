// Package dumpfile is the on-disk format the dump unit writes and the load
// unit reads (DESIGN.md §5): one directory per subtask (loader.dir, default
// <data-dir>/dump/<task>) holding one chunk file per range of a table's rows
// and a manifest that says what the snapshot was.
//
// A chunk file is written as <name>.tmp and renamed to <name> (Finish): the
// rename is its completion marker, so after a crash of the process a file
// without the suffix is whole. Chunk files are made durable together (Sync)
// once every one is written, and the manifest is written after that,
// through a temporary file, fsync and rename (WriteManifest): a directory
// whose manifest is missing holds an unfinished dump, which is never loaded
// (after a crash of the machine its chunk files may be cut short), and a
// manifest names only chunk files that are on disk whole.
//
// Chunk files are in the text form LOAD DATA reads with its defaults: one
// row per line, fields separated by a tab, NULL as \N, and backslash
// escapes for backslash, tab, newline, carriage return and NUL. The bytes
// of a field are the column's stored bytes (the dump reads with SET NAMES
// binary), except for the columns whose Column.Load says otherwise.
//
// The package owns only the format: names, the manifest, field escaping. It
// opens no connections.
package dumpfile

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dmworker/dm-worker/pkg/binlog"
	"github.com/dmworker/dm-worker/pkg/collation"
	"github.com/dmworker/dm-worker/pkg/fsutil"
)

// Version is the manifest format this build writes and reads.
const Version = 1

// ManifestName is the manifest's file name in the dump directory.
const ManifestName = "manifest.json"

// TmpSuffix marks a file that is still being written.
const TmpSuffix = ".tmp"

// Snapshot methods (Manifest.Method).
const (
	// MethodFlushLock: FLUSH TABLES WITH READ LOCK, every reader starts its
	// consistent snapshot, the location is read, UNLOCK TABLES.
	MethodFlushLock = "flush-tables-with-read-lock"
	// MethodBinlogSnapshot: one connection's START TRANSACTION WITH
	// CONSISTENT SNAPSHOT and MariaDB's binlog_snapshot_file/position
	// status, for users without RELOAD or where FTWRL is refused.
	MethodBinlogSnapshot = "binlog-snapshot"
)

// Column loaders (Column.Load): how a field's text goes into the column.
const (
	// LoadRaw: the field is the column's value as it is.
	LoadRaw = ""
	// LoadBit: the field is the BIT value as an unsigned decimal integer;
	// the loader sets the column from CAST(field AS UNSIGNED).
	LoadBit = "bit"
)

// Manifest describes one finished dump.
type Manifest struct {
	Version int `json:"version"`
	// DumpID is new for every snapshot taken; the load unit's records in
	// the target name it, so chunks of two different dumps never mix.
	DumpID string `json:"dump-id"`
	Task   string `json:"task"`
	Source string `json:"source"`
	// Fingerprint sums the config that decides what the dump holds
	// (block-allow list, case sensitivity, the source's endpoint, chunk
	// size); a dump whose fingerprint differs from the current config's is
	// not used.
	Fingerprint string `json:"fingerprint"`
	Method      string `json:"method"`
	// LockHeld is how long FLUSH TABLES WITH READ LOCK was held (0 for
	// MethodBinlogSnapshot).
	LockHeld time.Duration `json:"lock-held"`
	// Start is the binlog location of the snapshot: every transaction
	// committed before it is in the dump, none after it.
	Start binlog.Location `json:"start"`
	// End is the source's binlog end when the dump finished; in all mode
	// the sync unit runs in safe mode until it has passed it.
	End        binlog.Location `json:"end"`
	StartedAt  time.Time       `json:"started-at"`
	FinishedAt time.Time       `json:"finished-at"`
	// Collations are the source's default collations at the snapshot
	// (collation_server, each character set's default), which the load
	// writes into the CREATE statements with collation_compatible strict;
	// nil in a dump of a build that did not record them.
	Collations *collation.Defaults `json:"collations,omitempty"`
	Schemas    []Schema            `json:"schemas"`
	Tables     []Table             `json:"tables"`
}

// Schema is one source database the dump selected.
type Schema struct {
	Name string `json:"name"`
	// CreateSQL is SHOW CREATE DATABASE on the source.
	CreateSQL string `json:"create-sql"`
}

// Table is one source table and its chunks.
type Table struct {
	Schema string `json:"schema"`
	Name   string `json:"name"`
	// CreateSQL is SHOW CREATE TABLE on the source.
	CreateSQL string `json:"create-sql"`
	// Columns are the columns a chunk's fields fill, in field order
	// (generated columns are left out: the target computes them).
	Columns []Column `json:"columns"`
	// KeyColumns are the primary (or first unique) key the rows were split
	// on; empty when the table has none (then it is one chunk).
	KeyColumns []string `json:"key-columns,omitempty"`
	Chunks     []Chunk  `json:"chunks"`
}

// Column is one dumped column.
type Column struct {
	Name string `json:"name"`
	// Type is COLUMN_TYPE as information_schema reports it ("int(10) unsigned").
	Type string `json:"type"`
	// Load is LoadRaw or LoadBit.
	Load string `json:"load,omitempty"`
}

// Chunk is one finished chunk file of a table.
type Chunk struct {
	// File is the file name in the dump directory; it is also the chunk's
	// identity in the load unit's records.
	File  string `json:"file"`
	Rows  int64  `json:"rows"`
	Bytes int64  `json:"bytes"`
}

// Rows is the number of rows of every chunk of every table.
func (m *Manifest) Rows() (n int64) {
	for _, t := range m.Tables {
		for _, c := range t.Chunks {
			n += c.Rows
		}
	}
	return n
}

// Bytes is the size of every chunk file.
func (m *Manifest) Bytes() (n int64) {
	for _, t := range m.Tables {
		for _, c := range t.Chunks {
			n += c.Bytes
		}
	}
	return n
}

// Chunks is the number of chunk files.
func (m *Manifest) Chunks() (n int) {
	for _, t := range m.Tables {
		n += len(t.Chunks)
	}
	return n
}

// ChunkFile is the file name of chunk seq (from 0) of the table at index
// table of the manifest's Tables. Names carry no table name: table names may
// hold any character, the manifest maps files to tables.
func ChunkFile(table, seq int) string { return fmt.Sprintf("t%05d.%06d.tsv", table, seq) }

// ErrNoManifest means the directory holds no finished dump.
var ErrNoManifest = errors.New("dumpfile: no finished dump (manifest missing)")

// ReadManifest reads dir's manifest; ErrNoManifest (wrapped) when there is
// none.
func ReadManifest(dir string) (*Manifest, error) {
	path := filepath.Join(dir, ManifestName)
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%w in %s", ErrNoManifest, dir)
	}
	if err != nil {
		return nil, fmt.Errorf("dumpfile: read %s: %w", path, err)
	}
	var m Manifest
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("dumpfile: %s is not a dump manifest: %w", path, err)
	}
	if m.Version != Version {
		return nil, fmt.Errorf("dumpfile: %s has format version %d; this build reads version %d", path, m.Version, Version)
	}
	return &m, nil
}

// WriteManifest writes m into dir atomically and durably (temporary file,
// fsync, rename, fsync of dir).
func WriteManifest(dir string, m *Manifest) error {
	m.Version = Version
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return fmt.Errorf("dumpfile: encode manifest: %w", err)
	}
	return WriteFileAtomic(dir, ManifestName, b)
}

// WriteFileAtomic writes name in dir through name+TmpSuffix, fsync and
// rename, then fsyncs dir.
func WriteFileAtomic(dir, name string, data []byte) error {
	tmp := filepath.Join(dir, name+TmpSuffix)
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o640)
	if err != nil {
		return fmt.Errorf("dumpfile: %w", err)
	}
	_, werr := f.Write(data)
	serr := f.Sync()
	cerr := f.Close()
	if err := errors.Join(werr, serr, cerr); err != nil {
		return fmt.Errorf("dumpfile: write %s: %w", tmp, err)
	}
	return Commit(dir, name)
}

// Finish renames dir/name+TmpSuffix to dir/name without making either
// durable: the file is whole as far as this machine's page cache goes, and
// Sync makes it durable later, before a manifest names it. One fsync per
// chunk file and one of the directory per rename, in the dump's critical
// path, cost more than one pass over all of them at the end.
func Finish(dir, name string) error {
	final := filepath.Join(dir, name)
	if err := os.Rename(final+TmpSuffix, final); err != nil {
		return fmt.Errorf("dumpfile: %w", err)
	}
	return nil
}

// Sync fsyncs the named files of dir with up to workers goroutines, then
// dir itself; it returns the first error.
func Sync(dir string, names []string, workers int) error {
	var (
		next  atomic.Int64
		wg    sync.WaitGroup
		mu    sync.Mutex
		first error
	)
	for range max(1, min(workers, len(names))) {
		wg.Go(func() {
			for i := int(next.Add(1) - 1); i < len(names); i = int(next.Add(1) - 1) {
				if err := syncFile(filepath.Join(dir, names[i])); err != nil {
					mu.Lock()
					if first == nil {
						first = err
					}
					mu.Unlock()
					return
				}
			}
		})
	}
	wg.Wait()
	if first != nil {
		return first
	}
	if err := fsutil.SyncDir(dir); err != nil {
		return fmt.Errorf("dumpfile: %w", err)
	}
	return nil
}

func syncFile(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("dumpfile: %w", err)
	}
	serr := f.Sync()
	cerr := f.Close()
	if err := errors.Join(serr, cerr); err != nil {
		return fmt.Errorf("dumpfile: sync %s: %w", path, err)
	}
	return nil
}

// Commit renames dir/name+TmpSuffix (already fsynced by the writer) to
// dir/name and fsyncs dir: the file is then finished.
func Commit(dir, name string) error {
	final := filepath.Join(dir, name)
	if err := os.Rename(final+TmpSuffix, final); err != nil {
		return fmt.Errorf("dumpfile: %w", err)
	}
	if err := fsutil.SyncDir(dir); err != nil {
		return fmt.Errorf("dumpfile: %w", err)
	}
	return nil
}
