package validate

import (
	"context"
	"database/sql"
	"fmt"
	"sort"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap/zaptest"

	"github.com/dmworker/dm-worker/config"
	"github.com/dmworker/dm-worker/pkg/stage"
	"github.com/dmworker/dm-worker/tests/mariadbtest"
	"github.com/dmworker/dm-worker/tests/testutil"
	"github.com/dmworker/dm-worker/unit"
	"github.com/dmworker/dm-worker/unit/syncer"
	"github.com/dmworker/dm-worker/unit/unittest"
)

// vTimeout bounds every wait of the validator tests.
const vTimeout = 90 * time.Second

// vEnv is a source, a target, and a running sync unit replicating app.*.
type vEnv struct {
	src, dst     *mariadbtest.Instance
	srcDB, dstDB *sql.DB
	cfg          *config.SubTaskConfig
	srcCfg       *config.SourceConfig
	sync         *syncer.Syncer
	run          *unittest.Run
}

func vStart(t *testing.T, mode string, delay time.Duration, srcConfig ...string) *vEnv {
	t.Helper()
	return vStartWith(t, mode, delay, nil, srcConfig...)
}

// vStartWith is vStart with adjust applied to the subtask config before
// the sync unit is created.
func vStartWith(t *testing.T, mode string, delay time.Duration, adjust func(*config.SubTaskConfig), srcConfig ...string) *vEnv {
	t.Helper()
	e := &vEnv{
		src: mariadbtest.Start(t, mariadbtest.Options{Name: "source", Binlog: true, FastCommit: true, ExtraConfig: srcConfig}),
		dst: mariadbtest.Start(t, mariadbtest.Options{Name: "target", FastCommit: true}),
	}
	e.srcDB, e.dstDB = e.src.PlainDB(t), e.dst.PlainDB(t)
	file, pos, _ := e.src.MasterStatus(t)
	e.cfg = &config.SubTaskConfig{
		Name: "vt", SourceID: "mysql-01", TaskMode: config.ModeIncremental,
		Meta:           config.Meta{BinlogName: file, BinlogPos: pos},
		TargetDatabase: config.DBConfig{Host: e.dst.Host(), Port: e.dst.Port(), User: mariadbtest.RootUser},
		MetaSchema:     "dm_meta",
		Syncer:         config.SyncerConfig{WorkerCount: 4, Batch: 50, CheckpointFlushInterval: 1},
		Validator:      config.ValidatorConfig{Mode: mode, WorkerCount: 2, RowErrorDelay: config.Duration{Duration: delay}},
	}
	e.srcCfg = &config.SourceConfig{SourceID: "mysql-01", From: config.DBConfig{
		Host: e.src.Host(), Port: e.src.Port(), User: mariadbtest.SourceUser, Password: mariadbtest.SourcePassword}}
	if adjust != nil {
		adjust(e.cfg)
	}
	u, err := syncer.New(e.cfg, e.srcCfg, nil, nil, zaptest.NewLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := u.Init(ctx); err != nil {
		t.Fatal(err)
	}
	e.sync, e.run = u, unittest.Start(u, false, 0)
	t.Cleanup(func() {
		e.run.Stop(t)
		u.Close()
	})
	mariadbtest.MustExec(t, e.srcDB, "CREATE DATABASE app",
		"CREATE TABLE app.t (id INT PRIMARY KEY, v VARCHAR(40), n DECIMAL(10,2), f FLOAT)",
		"CREATE TABLE app.c (a INT, b VARCHAR(10), v INT, PRIMARY KEY (a, b))")
	return e
}

// validator starts a validator of the env's subtask.
func (e *vEnv) validator(t *testing.T) *Validator {
	t.Helper()
	v, err := New(e.cfg, e.srcCfg, nil, e.sync, NewMetrics(prometheus.NewRegistry()), zaptest.NewLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := v.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(v.Stop)
	// Start returns before the validator has chosen where to read from
	// (its checkpoint, else where the sync unit is): changes written
	// before that may never be seen by it, so tests write theirs after.
	testutil.WaitFor(t, vTimeout, "the validator starts validating", func() bool {
		st := v.Status().State
		return st == StateValidating || st == StateYielding
	})
	return v
}

// waitSynced waits until the target's app.t and app.c equal the source's.
func (e *vEnv) waitSynced(t *testing.T) {
	t.Helper()
	testutil.Eventually(t, vTimeout, "target equals source", func() error {
		for _, tb := range []string{"app.t", "app.c"} {
			q := "SELECT * FROM " + tb + " ORDER BY 1, 2"
			a, err := mariadbtest.QueryRows(context.Background(), e.srcDB, q)
			if err != nil {
				return err
			}
			b, err := mariadbtest.QueryRows(context.Background(), e.dstDB, q)
			if err != nil {
				return err
			}
			if fmt.Sprint(a) != fmt.Sprint(b) {
				return fmt.Errorf("%s: source has %d rows, target %d", tb, len(a), len(b))
			}
		}
		return nil
	})
}

// waitDrained waits until the validator has judged everything it read up
// to the source's current end and checked at least min rows.
func waitDrained(t *testing.T, v *Validator, min int64) unit.ValidatorStatus {
	t.Helper()
	var st unit.ValidatorStatus
	testutil.Eventually(t, vTimeout, "validator drained", func() error {
		st = v.Status()
		if st.Stage != stage.Running || st.Pending != 0 || st.RowsChecked < min {
			return fmt.Errorf("validator status %+v", st)
		}
		return nil
	})
	return st
}

// vWorkload writes n mixed row changes on the source.
func vWorkload(t *testing.T, db *sql.DB, from, n int) {
	t.Helper()
	var qs []string
	for i := from; i < from+n; i++ {
		qs = append(qs, fmt.Sprintf("INSERT INTO app.t VALUES (%d, 'r%d', %d.25, %d.5)", i, i, i, i))
		if i%3 == 0 {
			qs = append(qs, fmt.Sprintf("UPDATE app.t SET v = CONCAT(v, '-u'), n = n + 1 WHERE id = %d", i-1))
		}
		if i%7 == 0 {
			qs = append(qs, fmt.Sprintf("DELETE FROM app.t WHERE id = %d", i-2))
		}
		if i%5 == 0 {
			qs = append(qs, fmt.Sprintf("INSERT INTO app.c VALUES (%d, 'k%d', %d)", i, i, i),
				fmt.Sprintf("UPDATE app.c SET b = 'z%d' WHERE a = %d", i, i))
		}
	}
	mariadbtest.MustExec(t, db, qs...)
}

func TestValidatorCleanRun(t *testing.T) {
	e := vStart(t, config.ValidationFull, 2*time.Second)
	v := e.validator(t)
	vWorkload(t, e.srcDB, 1, 3000)
	e.waitSynced(t)
	st := waitDrained(t, v, 3000)
	if st.Errors != (unit.ValidationErrorCounts{}) || st.State != StateValidating || st.Checkpoint == "" {
		t.Fatalf("status after a clean run = %+v, want no errors, validating, a checkpoint", st)
	}
	recs, err := v.ValidationErrors(context.Background(), StateAll)
	if err != nil || len(recs.(ErrorList).Errors) != 0 {
		t.Fatalf("errors = %+v, %v; want none", recs, err)
	}
}

// vKinds lists the stored errors as "kind key" strings, sorted.
func vKinds(t *testing.T, v *Validator, state string) ([]string, []ErrorRecord) {
	t.Helper()
	out, err := v.ValidationErrors(context.Background(), state)
	if err != nil {
		t.Fatal(err)
	}
	recs := out.(ErrorList).Errors
	var kinds []string
	for _, r := range recs {
		kinds = append(kinds, r.Kind+" "+string(r.Key))
	}
	sort.Strings(kinds)
	return kinds, recs
}

// TestValidatorMinimalMetadata: without column names in the binlog the
// table structure comes from the target, which the validator's reader,
// ahead of the sync unit, may see before the sync unit created or altered
// the table; it waits for the sync unit and validates every change.
func TestValidatorMinimalMetadata(t *testing.T) {
	e := vStart(t, config.ValidationFull, 2*time.Second, "binlog_row_metadata=MINIMAL")
	v := e.validator(t)
	vWorkload(t, e.srcDB, 1, 300)
	mariadbtest.MustExec(t, e.srcDB, "CREATE TABLE app.late (id INT PRIMARY KEY, v INT)",
		"INSERT INTO app.late VALUES (1, 1), (2, 2)",
		"ALTER TABLE app.t ADD COLUMN extra INT NOT NULL DEFAULT 7",
		"UPDATE app.t SET extra = 8 WHERE id < 50",
		"INSERT INTO app.t (id, v, n, f) SELECT seq, 'after', 1.5, 2.5 FROM app.seq_1000_to_1099",
		"DELETE FROM app.t WHERE id BETWEEN 60 AND 69")
	e.waitSynced(t)
	st := waitDrained(t, v, 400)
	if st.Errors != (unit.ValidationErrorCounts{}) || len(st.SkippedTables) != 0 {
		t.Fatalf("status = %+v, want no errors and no skipped table", st)
	}
}
