package e2e

import (
	"bufio"
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dmworker/dm-worker/ha"
	"github.com/dmworker/dm-worker/tests/mariadbtest"
	"github.com/dmworker/dm-worker/tests/testutil"
)

// foSource is a source MariaDB of the failover tests with an incremental
// task replicating crashDB into the schema crash_<id> of a target (a route
// rule, so that several sources share one target MariaDB).
type foSource struct {
	t                *testing.T
	id, task, schema string
	src              *mariadbtest.Instance
	srcDB, tgtDB     *sql.DB
	tgtPort          int
	wl               *workload // the current workload, if any
}

// foNewSource starts a source MariaDB and writes its config into etcd
// (unbound: binding it is the scheduler's job).
func foNewSource(t *testing.T, f *foFleet, id string, tgt *mariadbtest.Instance, tgtDB *sql.DB) *foSource {
	t.Helper()
	src := mariadbtest.Start(t, mariadbtest.Options{Name: "fo-" + id, Binlog: true, FastCommit: true, MaxBinlogSize: 256 << 10})
	s := &foSource{t: t, id: id, task: "fo-" + id, schema: crashDB + "_" + id, src: src, srcDB: src.DB(t), tgtDB: tgtDB, tgtPort: tgt.Port()}
	f.putSource(foSourceYAML(id, src.Port()))
	return s
}

// foSourceYAML is a source config of a MariaDB on port, relay off.
func foSourceYAML(id string, port int) string {
	return fmt.Sprintf(`source-id: %s
flavor: mariadb
from: {host: 127.0.0.1, port: %d, user: root, password: ""}
checker: {check-enable: true, backoff-min: 200ms, backoff-max: 1s}
`, id, port)
}

// startTask starts the source's task with dmctl from the source's current
// position, creates crashTables on the source and waits until they exist
// on the target.
func (s *foSource) startTask(f *foFleet) {
	s.t.Helper()
	file, pos, _ := s.src.MasterStatus(s.t)
	f.c.ok("task", "start", writeFile(s.t, s.task+".yaml", fmt.Sprintf(`name: %s
task-mode: incremental
target-database: {host: 127.0.0.1, port: %d, user: root, password: ""}
mysql-instances:
  - source-id: %s
    meta: {binlog-name: %s, binlog-pos: %d}
    block-allow-list: only-crash
    route-rules: [own-schema]
    syncer-config-name: small
block-allow-list:
  only-crash: {do-dbs: [%s]}
routes:
  own-schema: {schema-pattern: %s, target-schema: %s}
syncers:
  small: {worker-count: 4, batch: 20, checkpoint-flush-interval: 1}
`, s.task, s.tgtPort, s.id, file, pos, crashDB, crashDB, s.schema)))
	s.src.Exec(s.t, "CREATE DATABASE "+crashDB)
	for _, tb := range crashTables {
		s.src.Exec(s.t, tb.ddl)
	}
	testutil.Eventually(s.t, 30*time.Second, s.task+" runs and created every table on the target", func() error {
		var n int
		if err := s.tgtDB.QueryRow("SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA = ?", s.schema).Scan(&n); err != nil {
			return err
		}
		if n != len(crashTables) {
			return fmt.Errorf("%d of %d tables in %s on the target", n, len(crashTables), s.schema)
		}
		return nil
	})
}

// startWorkload starts a workload of writers on the source.
func (s *foSource) startWorkload(writers int) { s.wl = startWorkload(s.t, s.srcDB, writers) }

// stopWorkload stops the current workload and requires it ran clean.
func (s *foSource) stopWorkload() {
	s.t.Helper()
	if err := s.wl.stop(); err != nil {
		s.t.Fatalf("workload on %s: %v", s.id, err)
	}
	s.t.Logf("workload on %s stopped: %s", s.id, s.wl)
}

// waitEqual waits up to d until CHECKSUM TABLE of every table of the
// target's schema equals the source's, then compares every row.
func (s *foSource) waitEqual(d time.Duration) {
	s.t.Helper()
	want, err := schemaChecksums(s.srcDB, crashDB)
	if err != nil {
		s.t.Fatalf("%s: source checksums: %v", s.id, err)
	}
	start := time.Now()
	var got map[string]string
	err = testutil.Poll(d, func() error {
		if got, err = schemaChecksums(s.tgtDB, s.schema); err != nil {
			return err
		}
		if !equalMaps(got, want) {
			return errors.New("checksums differ")
		}
		return nil
	})
	if err != nil {
		s.t.Errorf("%s: target %s did not catch up within %s: checksums source %v, target %v (%v)", s.id, s.schema, d, want, got, err)
		s.compareRows()
		s.t.FailNow()
	}
	s.t.Logf("%s: target %s equal %s after the workload stopped", s.id, s.schema, time.Since(start).Round(time.Millisecond))
	s.compareRows()
}

// schemaChecksums returns CHECKSUM TABLE of each of crashTables in schema, by
// table name.
func schemaChecksums(db *sql.DB, schema string) (map[string]string, error) {
	names := make([]string, len(crashTables))
	for i, tb := range crashTables {
		names[i] = schema + "." + tb.name
	}
	sums, err := checksumTables(db, names, 10*time.Second)
	if err != nil {
		return nil, err
	}
	out := make(map[string]string, len(sums))
	for name, sum := range sums {
		if !sum.Valid {
			return nil, fmt.Errorf("CHECKSUM TABLE %s: NULL (no such table)", name)
		}
		out[strings.TrimPrefix(name, schema+".")] = sum.String
	}
	return out, nil
}

// checksumTables runs one CHECKSUM TABLE of names (schema.table) within
// timeout and returns each checksum by the name the server gives (NULL for
// a table that does not exist).
func checksumTables(db *sql.DB, names []string, timeout time.Duration) (map[string]sql.NullString, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	rows, err := db.QueryContext(ctx, "CHECKSUM TABLE "+strings.Join(names, ", "))
	if err != nil {
		return nil, err
	}
	out := map[string]sql.NullString{}
	for rows.Next() {
		var name string
		var sum sql.NullString
		if err := rows.Scan(&name, &sum); err != nil {
			return nil, errors.Join(err, rows.Close())
		}
		out[name] = sum
	}
	return out, errors.Join(rows.Err(), rows.Close())
}

// compareRows compares every table row by row and reports differences.
func (s *foSource) compareRows() {
	s.t.Helper()
	for _, tb := range crashTables {
		q := func(schema string) string {
			return "SELECT * FROM " + schema + "." + tb.name + " ORDER BY " + tb.orderBy
		}
		want, err := readRows(s.srcDB, q(crashDB))
		if err != nil {
			s.t.Fatalf("source %s: %v", s.id, err)
		}
		got, err := readRows(s.tgtDB, q(s.schema))
		if err != nil {
			s.t.Fatalf("target %s: %v", s.schema, err)
		}
		if diff := diffRows(want, got, 5); diff != "" {
			s.t.Errorf("%s.%s differs from %s's %s.%s (%d rows on the source, %d on the target):\n%s",
				s.schema, tb.name, s.id, crashDB, tb.name, len(want), len(got), diff)
		}
	}
}

// checkpoint is the task's row of dm_meta.syncer_checkpoint on the
// target: "binlog_name:binlog_pos @ updated_at".
func (s *foSource) checkpoint() (string, error) {
	var name, at string
	var pos uint32
	err := s.tgtDB.QueryRow("SELECT binlog_name, binlog_pos, CAST(updated_at AS CHAR) FROM dm_meta.syncer_checkpoint WHERE task = ? AND source = ?",
		s.task, s.id).Scan(&name, &pos, &at)
	return fmt.Sprintf("%s:%d @ %s", name, pos, at), err
}

// foConnWatch reads, every 50 ms, how many TCP connections each worker
// process holds to a target port.
type foConnWatch struct {
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu      sync.Mutex
	samples []foConnSample
	errs    []error
}

// foConnSample is one read: worker → connections to the port.
type foConnSample struct {
	at    time.Time
	conns map[string]int
}

// watchConns starts reading the connections of the fleet's current
// processes (their pids now) to port until stop.
func (f *foFleet) watchConns(port int) *foConnWatch {
	pids := map[string]int{}
	for _, w := range f.workers {
		pids[w.name] = w.proc.pid
	}
	ctx, cancel := context.WithCancel(context.Background())
	cw := &foConnWatch{cancel: cancel}
	cw.wg.Add(1)
	go func() {
		defer cw.wg.Done()
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for {
			s := foConnSample{at: time.Now(), conns: map[string]int{}}
			for name, pid := range pids {
				n, err := foConnsTo(pid, port)
				if err != nil {
					cw.mu.Lock()
					cw.errs = append(cw.errs, err)
					cw.mu.Unlock()
				}
				s.conns[name] = n
			}
			cw.mu.Lock()
			cw.samples = append(cw.samples, s)
			cw.mu.Unlock()
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	}()
	f.t.Cleanup(cw.stop)
	return cw
}

func (cw *foConnWatch) stop() {
	cw.cancel()
	cw.wg.Wait()
}

// last returns the latest sample.
func (cw *foConnWatch) last() foConnSample {
	cw.mu.Lock()
	defer cw.mu.Unlock()
	if len(cw.samples) == 0 {
		return foConnSample{conns: map[string]int{}}
	}
	return cw.samples[len(cw.samples)-1]
}

// all returns every sample so far and the read errors.
func (cw *foConnWatch) all() ([]foConnSample, []error) {
	cw.mu.Lock()
	defer cw.mu.Unlock()
	return append([]foConnSample(nil), cw.samples...), append([]error(nil), cw.errs...)
}

// foLogEntry is one line of a worker's JSON log.
type foLogEntry struct {
	at     time.Time
	msg    string
	fields map[string]any
	raw    string
}

// foReadLog reads a worker's JSON log (--log-format json), skipping lines
// that are not JSON.
func foReadLog(t *testing.T, path string) []foLogEntry {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read the worker's log: %v", err)
	}
	var out []foLogEntry
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 1<<20), 16<<20)
	for sc.Scan() {
		var m map[string]any
		if json.Unmarshal(sc.Bytes(), &m) != nil {
			continue
		}
		e := foLogEntry{fields: m, raw: sc.Text()}
		e.msg, _ = m["msg"].(string)
		if ts, ok := m["ts"].(string); ok {
			e.at, _ = time.Parse("2006-01-02T15:04:05.000Z0700", ts)
		}
		out = append(out, e)
	}
	return out
}

// foFindLog returns the first entry of path whose message contains msg
// and whose fields include every key/value of match; ok false when none.
func foFindLog(t *testing.T, path, msg string, match map[string]string) (foLogEntry, bool) {
	t.Helper()
	for _, e := range foReadLog(t, path) {
		if !strings.Contains(e.msg, msg) {
			continue
		}
		ok := true
		for k, v := range match {
			if fmt.Sprint(e.fields[k]) != v {
				ok = false
			}
		}
		if ok {
			return e, true
		}
	}
	return foLogEntry{}, false
}

// foCheckWorkerList requires `dmctl worker list --output json` to mark
// leader, and only it, with a field whose name contains "leader".
func foCheckWorkerList(t *testing.T, f *foFleet, leader string) {
	t.Helper()
	var doc struct {
		Workers []map[string]any `json:"workers"`
	}
	f.c.json(&doc, "worker", "list")
	b, _ := json.Marshal(doc)
	for _, w := range doc.Workers {
		marked := false
		for k, v := range w {
			if slices.Contains([]string{"leader", "is-leader", "scheduler-leader"}, k) && v == true {
				marked = true
			}
		}
		if marked != (w["name"] == leader) {
			t.Errorf("dmctl worker list does not mark exactly the leader %s: %s", leader, b)
			return
		}
	}
}

// foStreamCheckpoint reads P/stream/checkpoint/{replSource}/{stream}.
func foStreamCheckpoint(t *testing.T, f *foFleet, stream string) ha.StreamCheckpoint {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	cp, found, err := ha.NewStore(f.c.direct, f.c.prefix).GetStreamCheckpoint(ctx, replSource, stream)
	if err != nil || !found {
		t.Fatalf("P/stream/checkpoint/%s/%s: found %v, %v", replSource, stream, found, err)
	}
	return cp
}
