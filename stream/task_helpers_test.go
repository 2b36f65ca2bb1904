package stream

import (
	"bufio"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"github.com/dmworker/dm-worker/config"
	"github.com/dmworker/dm-worker/pkg/binlog"
	"github.com/dmworker/dm-worker/pkg/sqlschema"
	"github.com/dmworker/dm-worker/relay"
	"github.com/dmworker/dm-worker/tests/cdctest"
	"github.com/dmworker/dm-worker/tests/mariadbtest"
	"github.com/dmworker/dm-worker/tests/testutil"
)

// taskTimeout bounds every wait for a task to catch up.
const taskTimeout = 60 * time.Second

// taskEnv is a source MariaDB with binlog, a root pool for changes and the
// source user's pool the task reads schemas and snapshots with.
type taskEnv struct {
	src  *mariadbtest.Instance
	root *sql.DB // root, parseTime off, UTC
	db   *sql.DB // the source user's, as the task's DB
}

func newTaskEnv(t *testing.T) *taskEnv {
	t.Helper()
	src := mariadbtest.Start(t, mariadbtest.Options{Name: "source", Binlog: true, FastCommit: true})
	return &taskEnv{src: src, root: encSourceDB(t, src, mariadbtest.RootUser, ""),
		db: encSourceDB(t, src, mariadbtest.SourceUser, mariadbtest.SourcePassword)}
}

// runRelay runs a relay of src (e's source) in a temporary directory until
// the test ends, and waits until it has written up to the source's current
// position.
func (e *taskEnv) runRelay(t *testing.T, src *config.SourceConfig) *relay.Relay {
	t.Helper()
	rl, err := relay.New(relay.Config{Dir: t.TempDir(), Source: src, Worker: "w1", Logger: zaptest.NewLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	relayDone := make(chan error, 1)
	go func() { relayDone <- rl.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		<-relayDone
		if err := rl.Close(); err != nil {
			t.Error(err)
		}
	})
	file, pos, _ := e.src.MasterStatus(t)
	testutil.WaitFor(t, taskTimeout, "relay written up to the source's position", func() bool {
		return rl.Written().Compare(binlog.Location{Name: file, Pos: pos}) >= 0
	})
	return rl
}

func (e *taskEnv) source() *config.SourceConfig {
	return &config.SourceConfig{SourceID: "mysql-01", From: config.DBConfig{
		Host: e.src.Host(), Port: e.src.Port(), User: mariadbtest.SourceUser, Password: mariadbtest.SourcePassword}}
}

// streamConfig is a stream of the app schema.
func taskStream(name string, snapshot bool) *config.StreamConfig {
	return &config.StreamConfig{Name: name, SourceID: "mysql-01", Snapshot: snapshot, EventFormat: FormatDebezium,
		BAList: config.BAList{DoDBs: []string{"app"}}}
}

// saves records every checkpoint a task saves.
type saves struct {
	mu  sync.Mutex
	all []Checkpoint
}

func (s *saves) save(_ context.Context, cp Checkpoint) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.all = append(s.all, cp)
	return nil
}

// last is the newest checkpoint saved (zero when none).
func (s *saves) last() Checkpoint {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.all) == 0 {
		return Checkpoint{}
	}
	return s.all[len(s.all)-1]
}

// memSink keeps the events it acknowledged in order; failAfter > 0 makes
// the write after that many more writes fail (and every later one).
type memSink struct {
	mu        sync.Mutex
	events    []Event
	writes    int
	failAfter int // writes still allowed; -1 = no limit
	closed    bool
}

func newMemSink() *memSink { return &memSink{failAfter: -1} }

func (s *memSink) Probe(context.Context) error { return nil }

func (s *memSink) Write(_ context.Context, batch []Event) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.failAfter == 0 {
		return errors.New("memSink: broker unreachable")
	}
	if s.failAfter > 0 {
		s.failAfter--
	}
	s.writes++
	s.events = append(s.events, batch...)
	return nil
}

func (s *memSink) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	return nil
}

func (s *memSink) failAfterWrites(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failAfter = n
}

func (s *memSink) all() []Event {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Event(nil), s.events...)
}

// runningTask is a task's Run in a goroutine.
type runningTask struct {
	task   *Task
	cancel context.CancelFunc
	done   chan error
}

func startTask(t *testing.T, cfg TaskConfig) *runningTask {
	t.Helper()
	if cfg.Logger == nil {
		cfg.Logger = zaptest.NewLogger(t)
	}
	task, err := NewTask(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &runningTask{task: task, cancel: cancel, done: make(chan error, 1)}
	go func() { r.done <- task.Run(ctx) }()
	t.Cleanup(func() { r.stop(t) })
	return r
}

// stop cancels the run and returns what Run returned.
func (r *runningTask) stop(t *testing.T) error {
	t.Helper()
	r.cancel()
	select {
	case err, ok := <-r.done:
		if ok {
			close(r.done)
		}
		return err
	case <-time.After(taskTimeout):
		t.Fatal("stream task did not stop within its timeout")
		return nil
	}
}

// wait returns what Run returned once it returns by itself.
func (r *runningTask) wait(t *testing.T) error {
	t.Helper()
	select {
	case err := <-r.done:
		close(r.done)
		return err
	case <-time.After(taskTimeout):
		t.Fatalf("stream task still runs after %s (status %+v)", taskTimeout, r.task.Status())
		return nil
	}
}

// waitCaughtUp waits until the task acknowledged everything up to the
// source's current position.
func (r *runningTask) waitCaughtUp(t *testing.T, e *taskEnv) {
	t.Helper()
	file, pos, _ := e.src.MasterStatus(t)
	want := binlog.Location{Name: file, Pos: pos}
	testutil.Eventually(t, taskTimeout, "stream checkpoint reaches "+want.String(), func() error {
		st := r.task.Status()
		if st.Checkpoint.Compare(want) < 0 {
			return fmt.Errorf("state %s, checkpoint %s, events %d, err %v", st.State, st.Checkpoint, st.Events, st.Err)
		}
		return nil
	})
}

// record is one event as a sink carries it.
type record struct {
	Key   json.RawMessage `json:"key"`
	Value json.RawMessage `json:"value"`
}

// fileRecords reads every line of a file sink's files in order.
func fileRecords(t *testing.T, dir string) []record {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(dir, "*.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(paths)
	var out []record
	for _, p := range paths {
		f, err := os.Open(p)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 1<<20), 64<<20)
		for sc.Scan() {
			var r record
			if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
				t.Fatalf("%s: line %q: %v", p, sc.Text(), err)
			}
			out = append(out, r)
		}
		_ = f.Close()
		if err := sc.Err(); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

func memRecords(events []Event) []record {
	out := make([]record, len(events))
	for i, ev := range events {
		out[i] = record{Key: ev.Key, Value: ev.Value}
	}
	return out
}

// debeziumValue is the part of a debezium event value the tests apply.
type debeziumValue struct {
	Before map[string]json.RawMessage `json:"before"`
	After  map[string]json.RawMessage `json:"after"`
	Op     string                     `json:"op"`
	DDL    string                     `json:"ddl"`
	Source struct {
		DB    string `json:"db"`
		Table string `json:"table"`
	} `json:"source"`
}

func decodeValue(t *testing.T, r record) debeziumValue {
	t.Helper()
	var v debeziumValue
	d := json.NewDecoder(strings.NewReader(string(r.Value)))
	if err := d.Decode(&v); err != nil {
		t.Fatalf("event value %s: %v", r.Value, err)
	}
	return v
}

// checksum is CHECKSUM TABLE of db.table.
func checksum(t *testing.T, db *sql.DB, db2, table string) int64 {
	t.Helper()
	var name string
	var sum sql.NullInt64
	if err := db.QueryRow("CHECKSUM TABLE `"+db2+"`.`"+table+"`").Scan(&name, &sum); err != nil {
		t.Fatal(err)
	}
	return sum.Int64
}

// applyRecords applies each batch of records in order to empty copies of
// app's tables in schema copy (made anew, tests/cdctest).
func (e *taskEnv) applyRecords(t *testing.T, tables []string, batches ...[]record) {
	t.Helper()
	names := make([]string, len(tables))
	for i, tb := range tables {
		names[i] = "app." + tb
	}
	a, err := cdctest.NewApplier(t.Context(), e.root, e.root, "copy", names)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = a.Close() }() // a test pool; the result is checked by sameTables
	for _, records := range batches {
		events := make([]cdctest.Event, len(records))
		for i, r := range records {
			line, err := json.Marshal(r)
			if err == nil {
				events[i], err = cdctest.Decode(line)
			}
			if err != nil {
				t.Fatalf("record %d: %v", i, err)
			}
		}
		if _, err := a.Apply(t.Context(), events); err != nil {
			t.Fatal(err)
		}
	}
}

// sameTables checks that each copy has the source table's checksum and
// row count.
func (e *taskEnv) sameTables(t *testing.T, tables ...string) {
	t.Helper()
	for _, tb := range tables {
		src, dst := checksum(t, e.root, "app", tb), checksum(t, e.root, "copy", tb)
		if src != dst {
			var n1, n2 int
			_ = e.root.QueryRow("SELECT COUNT(*) FROM app." + tb).Scan(&n1)
			_ = e.root.QueryRow("SELECT COUNT(*) FROM copy." + tb).Scan(&n2)
			t.Errorf("table %s: checksum %d (%d rows) on the source, %d (%d rows) from the events; columns that differ: %s",
				tb, src, n1, dst, n2, e.columnDiff(t, tb))
		}
	}
}

// columnDiff names the columns of app.table whose values (as a sorted
// list) differ in copy.table, with both lists clipped.
func (e *taskEnv) columnDiff(t *testing.T, table string) string {
	t.Helper()
	model, err := sqlschema.ReadTable(t.Context(), e.root, "app", table)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, c := range model.Columns {
		col := sqlschema.QuoteName(c.Name)
		q := "SELECT IFNULL(GROUP_CONCAT(IFNULL(CONCAT(HEX(" + col + "), '/', " + col + ", '/', IFNULL(" + col + " + 0e0, '')), 'NULL') ORDER BY 1 SEPARATOR ' '), '') FROM `%s`.`" + table + "`"
		var a, b string
		if err := e.root.QueryRow(fmt.Sprintf(q, "app")).Scan(&a); err != nil {
			t.Fatal(err)
		}
		if err := e.root.QueryRow(fmt.Sprintf(q, "copy")).Scan(&b); err != nil {
			t.Fatal(err)
		}
		if a != b {
			out = append(out, fmt.Sprintf("%s: source %.200s, events %.200s", c.Name, a, b))
		}
	}
	return strings.Join(out, "; ")
}
