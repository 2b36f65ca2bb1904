package e2e

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dmworker/dm-worker/tests/mariadbtest"
	"github.com/dmworker/dm-worker/tests/testutil"
)

// Names of the validator tests' cluster: an incremental task over vdDB and
// crashDB with the validator in mode full.
const (
	vdDB   = "vd"
	vdTask = "vtask"
)

// vdEnv is the replication set-up (source, target, etcd, one worker
// process) running task vdTask with a validator.
type vdEnv struct{ *replication }

// vdOptions shape vdStart's cluster.
type vdOptions struct {
	delay string // the validator's row-error-delay
	// all runs the task in mode all over tables that exist (with rows)
	// before it starts; else it is incremental from the source's position.
	all bool
	// sourceLines are more lines of the source file.
	sourceLines []string
}

// vdStart starts the servers and the worker, creates the source and starts
// vdTask (validator mode full, row-error-delay o.delay) and makes sure
// vdTables and crashTables exist on the source and the target: created
// after the task started (incremental, through replicated DDL) or before
// it with a few rows (mode all, through dump and load).
func vdStart(t *testing.T, o vdOptions) *vdEnv {
	t.Helper()
	r := &replication{t: t, c: newEtcdCluster(t),
		src: mariadbtest.Start(t, mariadbtest.Options{Name: "source", Binlog: true, FastCommit: true}),
		tgt: mariadbtest.Start(t, mariadbtest.Options{Name: "target", FastCommit: true})}
	r.srcDB, r.tgtDB = r.src.DB(t), r.tgt.DB(t)
	r.wopts = workerOptions{name: replWorker, endpoints: r.c.endpoints, prefix: r.c.prefix, dataDir: t.TempDir()}
	r.w = startWorker(t, r.wopts)
	r.c.waitWorkerAlive(replWorker)
	stmts := []string{"CREATE DATABASE " + vdDB,
		"CREATE TABLE vd.t1 (id INT PRIMARY KEY, a INT NOT NULL, b VARCHAR(40) CHARACTER SET utf8mb4, " +
			"c DECIMAL(12,3), d DATETIME(6), f DOUBLE)",
		"CREATE TABLE vd.t2 (k1 INT NOT NULL, k2 VARCHAR(16) NOT NULL, v BIGINT, note TEXT, PRIMARY KEY (k1, k2))",
		"CREATE DATABASE " + crashDB}
	for _, tb := range crashTables {
		stmts = append(stmts, tb.ddl)
	}
	mode, meta := "incremental", ""
	if o.all {
		mode = "all"
		mariadbtest.MustExec(t, r.srcDB, append(stmts,
			"INSERT INTO vd.t1 SELECT seq + 500000, seq, 'loaded', seq / 8, NOW(6), seq / 9 FROM vd.seq_1_to_5000")...)
	} else {
		file, pos, _ := r.src.MasterStatus(t)
		meta = fmt.Sprintf("    meta: {binlog-name: %s, binlog-pos: %d}\n", file, pos)
	}
	r.c.ok("source", "create", writeFile(t, "source.yaml", fmt.Sprintf(`source-id: %s
flavor: mariadb
from: {host: 127.0.0.1, port: %d, user: root, password: ""}
checker: {check-enable: true, backoff-min: 200ms, backoff-max: 1s}
%s`, replSource, r.src.Port(), strings.Join(append(o.sourceLines, ""), "\n"))), "--worker", replWorker)
	r.c.ok("task", "start", writeFile(t, "vtask.yaml", fmt.Sprintf(`name: %s
task-mode: %s
target-database: {host: 127.0.0.1, port: %d, user: root, password: ""}
mysql-instances:
  - source-id: %s
%s    block-allow-list: only-vd
    syncer-config-name: fast
    validator-config-name: check
block-allow-list:
  only-vd: {do-dbs: [%s, %s]}
syncers:
  fast: {worker-count: 8, batch: 200, checkpoint-flush-interval: 1}
validators:
  check: {mode: full, worker-count: 4, row-error-delay: %s}
`, vdTask, mode, r.tgt.Port(), replSource, meta, vdDB, crashDB, o.delay)))
	if !o.all {
		mariadbtest.MustExec(t, r.srcDB, stmts...)
	}
	e := &vdEnv{r}
	e.waitEqual(60*time.Second, 0)
	return e
}

// vdValidator is the validator object of the subtask status.
type vdValidator struct {
	Stage   string `json:"stage"`
	Pending int64  `json:"pending"`
	Errors  struct {
		New      int64 `json:"new"`
		Ignored  int64 `json:"ignored"`
		Resolved int64 `json:"resolved"`
	} `json:"errors"`
	Mode        string   `json:"mode"`
	State       string   `json:"state"`
	RowsChecked int64    `json:"rows-checked"`
	Checkpoint  string   `json:"checkpoint"`
	Binlog      string   `json:"binlog"`
	LagSeconds  float64  `json:"lag-seconds"`
	Skipped     []string `json:"skipped-tables"`
	Error       *struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

func (v vdValidator) String() string {
	b, _ := json.Marshal(v)
	return string(b)
}

// vdDoc is the subtask status the validator tests read.
type vdDoc struct {
	Name      string            `json:"name"`
	Stage     string            `json:"stage"`
	Unit      string            `json:"unit"`
	Errors    []json.RawMessage `json:"errors"`
	Validator *vdValidator      `json:"validator"`
}

func (d vdDoc) String() string {
	b, _ := json.Marshal(d)
	return string(b)
}

// wait waits up to d until the subtask has a validator satisfying cond
// and returns it.
func (e *vdEnv) wait(d time.Duration, what string, cond func(v vdValidator) bool) vdValidator {
	e.t.Helper()
	doc := waitSubtask(e.t, e.w, vdTask, d, what, func(doc vdDoc) bool {
		return doc.Validator != nil && cond(*doc.Validator)
	})
	return *doc.Validator
}

// status reads the validator's status once.
func (e *vdEnv) status() vdValidator {
	e.t.Helper()
	doc, err := getSubtask[vdDoc](e.w, vdTask)
	if err != nil || doc.Validator == nil {
		e.t.Fatalf("subtask status without a validator: %v %v", doc, err)
	}
	return *doc.Validator
}

// waitDrained waits until the validator runs, holds no pending row and has
// read the source's binlog up to its current end.
func (e *vdEnv) waitDrained(d time.Duration) vdValidator {
	e.t.Helper()
	file, pos, _ := e.src.MasterStatus(e.t)
	end := fmt.Sprintf("%s:%d", file, pos)
	e.wait(d, "the validator drains (pending 0) and reads up to the source's end "+end, func(v vdValidator) bool {
		return v.Stage == "Running" && v.State == "validating" && v.Pending == 0 && v.Error == nil && vdAtOrAfter(v.Binlog, file, pos)
	})
	// Every change is judged: the saved checkpoint follows (it is saved
	// every second).
	var last vdValidator
	err := testutil.Poll(10*time.Second, func() error {
		last = e.status()
		if !vdAtOrAfter(last.Checkpoint, file, pos) {
			return errors.New("checkpoint behind")
		}
		return nil
	})
	if err != nil {
		e.t.Errorf("validator drained up to %s but its checkpoint stays behind: %+v\nsource binlog from the checkpoint:\n%s",
			end, last, e.binlogEvents(last.Checkpoint, 40))
	}
	return last
}

// binlogEvents lists up to n events of the source's binlog from location
// "file:pos".
func (e *vdEnv) binlogEvents(loc string, n int) string {
	file, pos, _ := strings.Cut(loc, ":")
	rows, err := readRows(e.srcDB, fmt.Sprintf("SHOW BINLOG EVENTS IN '%s' FROM %s LIMIT %d", file, pos, n))
	if err != nil {
		return err.Error()
	}
	return strings.Join(rows, "\n")
}

// vdAtOrAfter reports whether location "file:pos" is at or after file, pos.
func vdAtOrAfter(loc, file string, pos uint32) bool {
	name, p, ok := strings.Cut(loc, ":")
	n, err := strconv.ParseUint(p, 10, 32)
	if !ok || err != nil {
		return false
	}
	return name > file || name == file && uint32(n) >= pos
}

// waitEqual waits until crashTables are equal on both sides by CHECKSUM
// TABLE and the rows of vdTables with keys (t1 id, t2 k1) from on are
// equal by count and CRC sum, then compares them row by row.
func (e *vdEnv) waitEqual(d time.Duration, from int) {
	e.t.Helper()
	f := &fullData{e.replication}
	queries := []fdCompare{
		{"t1", fmt.Sprintf("SELECT * FROM vd.t1 WHERE id >= %d ORDER BY id", from), ""},
		{"t2", fmt.Sprintf("SELECT * FROM vd.t2 WHERE k1 >= %d ORDER BY k1, k2", from), ""},
	}
	sums := []fdCompare{
		{"crash checksums", "", ""},
		{"t1 sum", fmt.Sprintf("SELECT COUNT(*), SUM(CRC32(CONCAT_WS('|', id, a, b, c, d, f))) FROM vd.t1 WHERE id >= %d", from), ""},
		{"t2 sum", fmt.Sprintf("SELECT COUNT(*), SUM(CRC32(CONCAT_WS('|', k1, k2, v, note))) FROM vd.t2 WHERE k1 >= %d", from), ""},
	}
	names := make([]string, len(crashTables))
	for i, tb := range crashTables {
		names[i] = crashDB + "." + tb.name
	}
	sums[0].source = "CHECKSUM TABLE " + strings.Join(names, ", ")
	start := time.Now()
	testutil.Eventually(e.t, d, "the target equals the source", func() error {
		for _, c := range sums {
			if err := f.compare(c.name, c.source, c.source); err != nil {
				if st, serr := e.subtask(); serr == nil && len(st.Errors) > 0 {
					e.t.Fatalf("subtask failed: %v", st)
				}
				return err
			}
		}
		return nil
	})
	e.t.Logf("target equal to the source %s later", time.Since(start).Round(time.Millisecond))
	for _, c := range queries {
		if err := f.compare(c.name, c.source, c.source); err != nil {
			e.t.Fatal(err)
		}
	}
	e.compareRows()
}

// subtask reads vdTask's status (replication.subtask reads replTask).
func (e *vdEnv) subtask() (subtaskDoc, error) { return getSubtask[subtaskDoc](e.w, vdTask) }

// vdRecord is one validation error as listed by the worker.
type vdRecord struct {
	ID          int64              `json:"id"`
	Table       string             `json:"table"`
	TargetTable string             `json:"target-table"`
	Kind        string             `json:"kind"`
	Key         map[string]any     `json:"key"`
	SourceRow   map[string]*string `json:"source-row"`
	TargetRow   map[string]*string `json:"target-row"`
	State       string             `json:"state"`
	Time        time.Time          `json:"time"`
	Binlog      string             `json:"binlog"`
}

// keyText is the record's key as "col=value,..." in column order of
// cols.
func (r vdRecord) keyText(cols ...string) string {
	parts := make([]string, len(cols))
	for i, c := range cols {
		parts[i] = fmt.Sprintf("%s=%v", c, r.Key[c])
	}
	return strings.Join(parts, ",")
}

// errorsHTTP lists the task's validation errors in state through HTTP.
func (e *vdEnv) errorsHTTP(state string) []vdRecord {
	e.t.Helper()
	res := get(e.t, e.w, "/api/v1/subtasks/"+vdTask+"/validation/errors?state="+state)
	if res.code != http.StatusOK {
		e.t.Fatalf("GET validation errors: %d %s", res.code, res.body)
	}
	var doc struct {
		Errors *[]vdRecord `json:"errors"`
	}
	if err := json.Unmarshal([]byte(res.body), &doc); err != nil || doc.Errors == nil {
		e.t.Fatalf("GET validation errors: not {\"errors\":[...]}: %v\n%s", err, res.body)
	}
	return *doc.Errors
}

// operateHTTP posts body to the validation errors endpoint and requires
// {"result":"ok","changed":changed}.
func (e *vdEnv) operateHTTP(body string, changed int64) {
	e.t.Helper()
	res, err := httpDo(http.MethodPost, e.w.url("/api/v1/subtasks/"+vdTask+"/validation/errors"), body)
	if err != nil {
		e.t.Fatal(err)
	}
	var doc struct {
		Result  string `json:"result"`
		Changed *int64 `json:"changed"`
	}
	if res.code != http.StatusOK || json.Unmarshal([]byte(res.body), &doc) != nil || doc.Result != "ok" ||
		doc.Changed == nil || *doc.Changed != changed {
		e.t.Fatalf("POST %s: %d %s, want 200 {\"result\":\"ok\",\"changed\":%d}", body, res.code, res.body, changed)
	}
}

// vdLoad writes row changes to vdTables in transactions of multi-row
// statements until at least n rows changed; keys stay at or above base
// (t1 ids, t2 k1 values), and the keys below base are never touched.
// It returns the number of rows changed.
func vdLoad(ctx context.Context, db *sql.DB, rng *rand.Rand, base, n int) (int, error) {
	next, next2, done := base, base, 0
	for done < n && ctx.Err() == nil {
		stmts := []string{
			fmt.Sprintf("INSERT INTO vd.t1 SELECT seq, seq %% 97, CONCAT('r', seq, 'ü'), seq / 7, NOW(6), seq / 3 FROM vd.seq_%d_to_%d", next, next+1999),
			fmt.Sprintf("INSERT INTO vd.t2 SELECT %d + seq DIV 10, CONCAT('k', seq %% 10), seq * 1000003, REPEAT('ß', seq %% 20) FROM vd.seq_0_to_499", next2),
		}
		next, next2 = next+2000, next2+50
		lo, lo2 := base+rng.IntN(next-base-1500), base+rng.IntN(next2-base-40)
		stmts = append(stmts,
			fmt.Sprintf("UPDATE vd.t1 SET a = a + 1, b = CONCAT(LEFT(b, 30), '+'), c = c + 0.5, d = NOW(6), f = f * 1.5 WHERE id BETWEEN %d AND %d", lo, lo+1499),
			fmt.Sprintf("DELETE FROM vd.t1 WHERE id BETWEEN %d AND %d", lo+700, lo+1199),
			fmt.Sprintf("UPDATE vd.t2 SET v = v * 3 + 1, note = CONCAT(note, 'x') WHERE k1 BETWEEN %d AND %d", lo2, lo2+39),
			// Moves rows to another primary key (each original key once).
			fmt.Sprintf("UPDATE vd.t2 SET k2 = CONCAT(k2, 'm') WHERE k1 = %d AND LENGTH(k2) = 2", lo2+rng.IntN(40)),
			fmt.Sprintf("DELETE FROM vd.t2 WHERE k1 BETWEEN %d AND %d", lo2+20, lo2+29))
		k, err := vdTxn(ctx, db, stmts)
		if err != nil {
			return done, err
		}
		done += k
	}
	return done, nil
}

// vdTxn runs stmts in one transaction and returns the rows they changed.
func vdTxn(ctx context.Context, db *sql.DB, stmts []string) (int, error) {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, q := range stmts {
		res, err := tx.ExecContext(ctx, q)
		if err != nil {
			_ = tx.Rollback()
			return 0, fmt.Errorf("%s: %w", clip(q), err)
		}
		k, _ := res.RowsAffected()
		n += int(k)
	}
	return n, tx.Commit()
}

// vdChanges is how many row changes the clean run writes:
// DM_VALIDATOR_E2E_ROWS, default 200000.
func vdChanges(t *testing.T) int {
	if s := os.Getenv("DM_VALIDATOR_E2E_ROWS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n <= 0 {
			t.Fatalf("DM_VALIDATOR_E2E_ROWS=%q: want a positive number", s)
		}
		return n
	}
	return 200000
}
