package stream

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"time"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"

	"github.com/dmworker/dm-worker/config"
	"github.com/dmworker/dm-worker/pkg/fsutil"
)

// Stream task states (DESIGN.md §5), as kept in Record.State and shown in
// status.
const (
	StateChecking    = "checking"
	StateFillHistory = "fill-history"
	StateStreaming   = "streaming"
	StatePaused      = "paused"
	StateRestarting  = "restarting"
	StateStopped     = "stopped"
)

// validStates are the values SetState and Put accept.
var validStates = []string{StateChecking, StateFillHistory, StateStreaming, StatePaused, StateRestarting, StateStopped}

// DefaultMetaLockTimeout is how long OpenMeta waits for the file lock
// another process holds before it gives up with ErrMetaLocked.
const DefaultMetaLockTimeout = 5 * time.Second

// metaFormat is the version of the record encoding this code writes;
// records of a higher version are refused as corrupt (written by a newer
// dm-worker).
const metaFormat = 1

// streamsBucket holds the records, keyed by stream name.
var streamsBucket = []byte("streams")

// Sentinel errors of the meta store, matched with errors.Is.
var (
	// ErrMetaCorrupt marks a meta file that cannot be opened or fails
	// bbolt's consistency check (torn write, truncation, garbage).
	ErrMetaCorrupt = errors.New("stream: meta store is corrupt")
	// ErrMetaLocked marks a meta file another process holds open.
	ErrMetaLocked = errors.New("stream: meta store is locked")
	// ErrRecordCorrupt marks one stream's record that does not decode.
	ErrRecordCorrupt = errors.New("stream: meta record is corrupt")
	// ErrNoRecord marks a stream that has no record in the meta store.
	ErrNoRecord = errors.New("stream: no meta record")
)

// Record is what the meta store keeps of one deployed stream task.
type Record struct {
	Name string
	// Config is the deployed config, stored as its JSON; when read back
	// it is decoded like an etcd value (defaults under omitted fields,
	// fields this version does not know listed in Config.Notes.Unknown).
	Config *config.StreamConfig
	// ConfigRev is the etcd revision the config was deployed from.
	ConfigRev int64
	// State is one of the State* constants.
	State      string
	Checkpoint Checkpoint
}

// metaRecord is a Record as stored.
type metaRecord struct {
	Format     int             `json:"format"`
	Name       string          `json:"name"`
	Config     json.RawMessage `json:"config"`
	ConfigRev  int64           `json:"config-rev"`
	State      string          `json:"state"`
	Checkpoint Checkpoint      `json:"checkpoint"`
}

// RecordError is the error of one stream's record.
type RecordError struct {
	Stream string
	Err    error
}

func (e *RecordError) Error() string { return e.Err.Error() }

// Unwrap returns the cause (which matches ErrRecordCorrupt).
func (e *RecordError) Unwrap() error { return e.Err }

// RecordErrors is returned by List, next to every record that decoded,
// when some records do not decode. Callers report each stream's error
// (or Drop the record and redeploy the stream from etcd) and go on:
//
//	recs, err := m.List()
//	var re *stream.RecordErrors
//	if errors.As(err, &re) { for _, e := range re.Errors { ... }; err = nil }
type RecordErrors struct {
	Errors []*RecordError // sorted by stream name
}

func (e *RecordErrors) Error() string {
	parts := make([]string, len(e.Errors))
	for i, re := range e.Errors {
		parts[i] = re.Error()
	}
	return fmt.Sprintf("stream: %d corrupt meta record(s): %s", len(e.Errors), strings.Join(parts, "; "))
}

// Unwrap returns every record's error, so errors.Is sees ErrRecordCorrupt.
func (e *RecordErrors) Unwrap() []error {
	out := make([]error, len(e.Errors))
	for i, re := range e.Errors {
		out[i] = re
	}
	return out
}

// Meta is the local meta store of the stream tasks of a worker. Its
// methods may be called from several goroutines; each is one bbolt
// transaction.
//
// It keeps one record per deployed stream task in a bbolt file
// (the worker's is <data-dir>/stream/meta.db): bucket "streams", key the
// stream name, value the record as JSON (metaRecord). Every write is one
// bbolt transaction, fsynced before it returns. The file belongs to one
// process: bbolt holds an exclusive flock on it while it is open.
//
// Damage is contained at two levels. A file bbolt cannot open or whose
// pages fail bbolt's consistency check makes OpenMeta fail with
// ErrMetaCorrupt, naming the file and what to do (move it aside; every
// stream then starts over from its etcd mirror P/stream/checkpoint). A
// record whose JSON does not decode affects only that stream: Get,
// SaveCheckpoint and SetState of it fail with ErrRecordCorrupt, List
// returns the other records together with a *RecordErrors, and Drop
// removes it.
type Meta struct {
	path string
	db   *bolt.DB
}

// MetaOption configures OpenMeta.
type MetaOption func(*metaOptions)

type metaOptions struct {
	lockTimeout time.Duration
}

// WithLockTimeout sets how long OpenMeta waits for a file lock another
// process holds (DefaultMetaLockTimeout when d <= 0: it never waits
// forever).
func WithLockTimeout(d time.Duration) MetaOption {
	return func(o *metaOptions) {
		if d > 0 {
			o.lockTimeout = d
		}
	}
}

// OpenMeta opens (creating it and its directory, mode 0750, if needed) the
// meta store at path and checks the file's consistency. It fails with
// ErrMetaLocked when another process holds the file for longer than the
// lock timeout, and with ErrMetaCorrupt when the file cannot be opened as a
// bbolt database or fails its consistency check; both errors name the file
// and what to do. It never panics on a damaged file.
func OpenMeta(path string, opts ...MetaOption) (*Meta, error) {
	o := metaOptions{lockTimeout: DefaultMetaLockTimeout}
	for _, opt := range opts {
		opt(&o)
	}
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return nil, fmt.Errorf("stream: create the meta store's directory %s: %w; check the permissions of --data-dir", dir, err)
	}
	_, statErr := os.Stat(path)
	created := errors.Is(statErr, fs.ErrNotExist)

	var db *bolt.DB
	err := guard(func() error {
		var err error
		db, err = bolt.Open(path, 0o600, &bolt.Options{Timeout: o.lockTimeout})
		return err
	})
	var pathErr *fs.PathError
	switch {
	case err == nil:
	case errors.Is(err, berrors.ErrTimeout):
		return nil, fmt.Errorf("%w: %s is held by another process for more than %v (another dm-worker with the same data-dir?): stop that process or give this worker a data-dir of its own",
			ErrMetaLocked, path, o.lockTimeout)
	case errors.As(err, &pathErr):
		return nil, fmt.Errorf("stream: open meta store %s: %w; check the file's permissions", path, err)
	default:
		return nil, corruptFile(path, err)
	}
	m := &Meta{path: path, db: db}
	if err := m.verify(); err != nil {
		_ = db.Close() // the verify error is what matters
		return nil, corruptFile(path, err)
	}
	if created {
		if err := fsutil.SyncDir(dir); err != nil {
			_ = db.Close()
			return nil, fmt.Errorf("stream: meta store %s: sync directory %s: %w", path, dir, err)
		}
	}
	return m, nil
}

// corruptFile is the error of a meta file that is damaged.
func corruptFile(path string, cause error) error {
	return fmt.Errorf("%w: %s: %w; stop the worker, move the file aside (mv %s %s.corrupt) and start it again: "+
		"every stream task then starts over from its checkpoint in etcd (P/stream/checkpoint/{source}/{stream})",
		ErrMetaCorrupt, path, cause, path, path)
}

// maxCheckErrors is how many of bbolt's consistency errors an open error
// quotes.
const maxCheckErrors = 3

// verify checks that the file holds every page its meta page counts (a
// truncated file would fault on access) and runs bbolt's consistency
// check, then makes sure the streams bucket exists.
func (m *Meta) verify() error {
	return guard(func() error {
		err := m.db.View(func(tx *bolt.Tx) error {
			fi, err := os.Stat(m.path)
			if err != nil {
				return err
			}
			if fi.Size() < tx.Size() {
				return fmt.Errorf("the file is %d bytes but its pages need %d (truncated)", fi.Size(), tx.Size())
			}
			var errs []error
			n := 0
			for err := range tx.Check() { // drain: Check's goroutine ends when the channel closes
				if n++; n <= maxCheckErrors {
					errs = append(errs, err)
				}
			}
			if n > maxCheckErrors {
				errs = append(errs, fmt.Errorf("and %d more consistency errors", n-maxCheckErrors))
			}
			return errors.Join(errs...)
		})
		if err != nil {
			return err
		}
		return m.db.Update(func(tx *bolt.Tx) error {
			_, err := tx.CreateBucketIfNotExists(streamsBucket)
			return err
		})
	})
}

// guard runs f, turning a panic (bbolt panics on some damaged pages) or a
// memory fault (a page past the end of a truncated file) into a
// *panicError.
func guard(f func() error) (err error) {
	old := debug.SetPanicOnFault(true)
	defer func() {
		debug.SetPanicOnFault(old)
		if r := recover(); r != nil {
			err = &panicError{value: r}
		}
	}()
	return f()
}

// panicError is a panic of bbolt, recovered.
type panicError struct{ value any }

func (e *panicError) Error() string { return fmt.Sprintf("bbolt failed reading the file: %v", e.value) }

// Path returns the file of the store.
func (m *Meta) Path() string { return m.path }

// Put inserts or replaces the record of r.Name; it is on disk when Put
// returns. r.Config must be set and name the same stream; r.State must be
// one of the State* constants.
func (m *Meta) Put(r Record) error {
	if err := checkRecord(r); err != nil {
		return fmt.Errorf("stream: meta store %s: put %q: %w", m.path, r.Name, err)
	}
	value, err := encodeRecord(r)
	if err != nil {
		return fmt.Errorf("stream: meta store %s: put %q: %w", m.path, r.Name, err)
	}
	return m.update("put "+r.Name, func(b *bolt.Bucket) error {
		return b.Put([]byte(r.Name), value)
	})
}

// checkRecord validates what Put stores.
func checkRecord(r Record) error {
	if err := config.ValidateName("stream", r.Name); err != nil {
		return err
	}
	if r.Config == nil {
		return errors.New("the record has no config")
	}
	if r.Config.Name != r.Name {
		return fmt.Errorf("the config is of stream %q", r.Config.Name)
	}
	return checkState(r.State)
}

func checkState(state string) error {
	for _, s := range validStates {
		if s == state {
			return nil
		}
	}
	return fmt.Errorf("state %q is not one of %s", state, strings.Join(validStates, ", "))
}

// Get returns the record of name; found is false when there is none. A
// record that does not decode is found, with an error matching
// ErrRecordCorrupt.
func (m *Meta) Get(name string) (Record, bool, error) {
	var value []byte
	err := m.view("get "+name, func(b *bolt.Bucket) error {
		if v := b.Get([]byte(name)); v != nil {
			value = append([]byte{}, v...) // v is valid only inside the transaction
		}
		return nil
	})
	if err != nil || value == nil {
		return Record{}, false, err
	}
	r, rerr := m.decodeRecord(name, value)
	if rerr != nil {
		return Record{}, true, rerr
	}
	return r, true, nil
}

// List returns every record, sorted by name. Records that do not decode
// are left out and reported in a *RecordErrors returned next to the
// others; any other error comes with no records.
func (m *Meta) List() ([]Record, error) {
	type kv struct {
		name  string
		value []byte
	}
	var all []kv
	err := m.view("list", func(b *bolt.Bucket) error {
		return b.ForEach(func(k, v []byte) error {
			all = append(all, kv{string(k), append([]byte{}, v...)})
			return nil
		})
	})
	if err != nil {
		return nil, err
	}
	out := make([]Record, 0, len(all))
	var bad []*RecordError
	for _, e := range all {
		r, err := m.decodeRecord(e.name, e.value)
		if err != nil {
			bad = append(bad, err)
			continue
		}
		out = append(out, r)
	}
	// bbolt iterates keys in byte order: out and bad are sorted by name.
	if len(bad) > 0 {
		return out, &RecordErrors{Errors: bad}
	}
	return out, nil
}

// SaveCheckpoint replaces the checkpoint of the record of name (an error
// matching ErrNoRecord when there is none); it is on disk when
// SaveCheckpoint returns.
func (m *Meta) SaveCheckpoint(name string, cp Checkpoint) error {
	return m.modify("save checkpoint of "+name, name, func(r *metaRecord) error {
		r.Checkpoint = cp
		return nil
	})
}

// SetState sets the state of the record of name (an error matching
// ErrNoRecord when there is none); state must be one of the State*
// constants.
func (m *Meta) SetState(name, state string) error {
	return m.modify("set state of "+name, name, func(r *metaRecord) error {
		if err := checkState(state); err != nil {
			return err
		}
		r.State = state
		return nil
	})
}

// Drop removes the record of name, fill-history progress with it. Dropping
// a stream without a record succeeds; a corrupt record can be dropped.
func (m *Meta) Drop(name string) error {
	return m.update("drop "+name, func(b *bolt.Bucket) error {
		return b.Delete([]byte(name))
	})
}

// Close closes the file, waiting for transactions under way.
func (m *Meta) Close() error {
	if err := m.db.Close(); err != nil {
		return fmt.Errorf("stream: close meta store %s: %w", m.path, err)
	}
	return nil
}

// modify decodes the record of name, lets f change it and stores it, in
// one transaction. Only the fields f changes are re-encoded from the
// decoded form; the config's JSON is kept as stored.
func (m *Meta) modify(op, name string, f func(*metaRecord) error) error {
	return m.update(op, func(b *bolt.Bucket) error {
		v := b.Get([]byte(name))
		if v == nil {
			return fmt.Errorf("%w: stream %q has none in %s; deploy it (Put) first", ErrNoRecord, name, m.path)
		}
		var r metaRecord
		if rerr := m.unmarshalRecord(name, v, &r); rerr != nil {
			return rerr
		}
		if err := f(&r); err != nil {
			return err
		}
		value, err := json.Marshal(r)
		if err != nil {
			return fmt.Errorf("encode the record: %w", err)
		}
		return b.Put([]byte(name), value)
	})
}

// view runs f on the streams bucket in a read transaction.
func (m *Meta) view(op string, f func(*bolt.Bucket) error) error {
	return m.txErr(op, guard(func() error {
		return m.db.View(func(tx *bolt.Tx) error { return f(tx.Bucket(streamsBucket)) })
	}))
}

// update runs f on the streams bucket in a write transaction, committed
// and fsynced when update returns nil.
func (m *Meta) update(op string, f func(*bolt.Bucket) error) error {
	return m.txErr(op, guard(func() error {
		return m.db.Update(func(tx *bolt.Tx) error { return f(tx.Bucket(streamsBucket)) })
	}))
}

// txErr names the store and the operation in an error of a transaction.
// A panic of bbolt means damaged pages: the file is corrupt. Record errors
// and ErrNoRecord already name the store and the stream.
func (m *Meta) txErr(op string, err error) error {
	var pe *panicError
	var re *RecordError
	switch {
	case err == nil, errors.As(err, &re), errors.Is(err, ErrNoRecord):
		return err
	case errors.As(err, &pe):
		return corruptFile(m.path, err)
	}
	return fmt.Errorf("stream: meta store %s: %s: %w", m.path, op, err)
}

// encodeRecord returns the stored form of r.
func encodeRecord(r Record) ([]byte, error) {
	cfg, err := r.Config.JSON()
	if err != nil {
		return nil, err
	}
	return json.Marshal(metaRecord{
		Format: metaFormat, Name: r.Name, Config: cfg, ConfigRev: r.ConfigRev,
		State: r.State, Checkpoint: r.Checkpoint,
	})
}

// unmarshalRecord decodes the stored form of name's record, without its
// config.
func (m *Meta) unmarshalRecord(name string, value []byte, r *metaRecord) *RecordError {
	if err := json.Unmarshal(value, r); err != nil {
		return m.corruptRecord(name, err)
	}
	switch {
	case r.Format > metaFormat:
		return m.corruptRecord(name, fmt.Errorf("format %d was written by a newer dm-worker (this one reads up to %d)", r.Format, metaFormat))
	case r.Name != name:
		return m.corruptRecord(name, fmt.Errorf("the record names stream %q", r.Name))
	}
	return nil
}

// decodeRecord decodes the stored form of name's record.
func (m *Meta) decodeRecord(name string, value []byte) (Record, *RecordError) {
	var r metaRecord
	if err := m.unmarshalRecord(name, value, &r); err != nil {
		return Record{}, err
	}
	cfg, err := config.DecodeStreamConfig(r.Config, config.Lenient)
	if err != nil {
		return Record{}, m.corruptRecord(name, fmt.Errorf("config: %w", err))
	}
	return Record{
		Name: r.Name, Config: cfg, ConfigRev: r.ConfigRev,
		State: r.State, Checkpoint: r.Checkpoint,
	}, nil
}

// corruptRecord is the error of name's record that does not decode.
func (m *Meta) corruptRecord(name string, cause error) *RecordError {
	return &RecordError{Stream: name, Err: fmt.Errorf("%w: stream %q in %s: %w; drop the record (the stream is then deployed again from etcd and resumes from P/stream/checkpoint) or move the file aside",
		ErrRecordCorrupt, name, m.path, cause)}
}
