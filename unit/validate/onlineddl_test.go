package validate

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest"
	"go.uber.org/zap/zaptest/observer"

	"github.com/dmworker/dm-worker/config"
	"github.com/dmworker/dm-worker/pkg/binlog"
	"github.com/dmworker/dm-worker/pkg/onlineddl"
	"github.com/dmworker/dm-worker/pkg/stage"
	"github.com/dmworker/dm-worker/tests/mariadbtest"
	"github.com/dmworker/dm-worker/tests/testutil"
	"github.com/dmworker/dm-worker/unit"
)

// TestRowsRemovedByOnlineDDL: with online-ddl on, the cut-over renames of
// gh-ost and pt-osc (one statement or two) do not remove the real table's
// rows; every other rename still does, and with online-ddl off so does the
// cut-over.
func TestRowsRemovedByOnlineDDL(t *testing.T) {
	osc, err := onlineddl.NewRules(nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		query    string
		osc, off string // removed tables with online-ddl on and off
	}{
		{"RENAME TABLE t TO _t_del, _t_gho TO t", "app._t_gho", "app.t,app._t_gho"},
		{"RENAME TABLE `app`.`t` TO `app`.`_t_old`, `app`.`_t_new` TO `app`.`t`", "app._t_new", "app.t,app._t_new"},
		{"RENAME TABLE t TO _t_del", "", "app.t"},
		{"RENAME TABLE _t_gho TO t", "app._t_gho", "app._t_gho"},
		{"RENAME TABLE t TO u", "app.t", "app.t"},
		{"RENAME TABLE t TO _t_other", "app.t", "app.t"},
		{"DROP TABLE IF EXISTS `_t_del`, _t_ghc", "app._t_del,app._t_ghc", "app._t_del,app._t_ghc"},
	} {
		for _, rules := range []*onlineddl.Rules{osc, nil} {
			tables, _ := rowsRemovedBy("app", c.query, rules)
			var got []string
			for _, tn := range tables {
				got = append(got, tn.Schema+"."+tn.Table)
			}
			want := c.off
			if rules != nil {
				want = c.osc
			}
			if s := strings.Join(got, ","); s != want {
				t.Errorf("%s (online-ddl %t): removes %q, want %q", c.query, rules != nil, s, want)
			}
		}
	}
}

// fakeSync stands for the sync unit of a task with online-ddl on: the test
// writes the target as that sync unit leaves it (the real table's changes
// only, the shadow's ALTER on the real table at the cut-over), then moves
// the applied and read location to the source's end.
type fakeSync struct {
	mu sync.Mutex
	at binlog.Location
}

func (f *fakeSync) SyncProgress() (applied, read binlog.Location, ok bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.at, f.at, !f.at.IsZero()
}

func (f *fakeSync) SyncBehind() bool { return false }

// reach marks every change of src so far applied.
func (f *fakeSync) reach(t *testing.T, src *mariadbtest.Instance) binlog.Location {
	t.Helper()
	file, pos, gtid := src.MasterStatus(t)
	f.mu.Lock()
	defer f.mu.Unlock()
	f.at = binlog.Location{Name: file, Pos: pos, GTID: gtid}
	return f.at
}

// oscEnv is a source and a target with app.t (id, v; pt-osc's test adds
// k) and a running validator of a task with online-ddl on whose sync unit
// is fake.
type oscEnv struct {
	src, dst     *mariadbtest.Instance
	srcDB, dstDB *sql.DB
	fake         *fakeSync
	v            *Validator
	logs         *observer.ObservedLogs
}

// oscStart creates app.t with columns on both servers and 100 rows (ids 1
// to 100, v = id), and a validator that has checked them.
func oscStart(t *testing.T, columns string, targetSetup ...string) *oscEnv {
	t.Helper()
	e := &oscEnv{
		src: mariadbtest.Start(t, mariadbtest.Options{Name: "source", Binlog: true, FastCommit: true}),
		dst: mariadbtest.Start(t, mariadbtest.Options{Name: "target", FastCommit: true}),
	}
	e.srcDB, e.dstDB = e.src.PlainDB(t), e.dst.PlainDB(t)
	for _, db := range []*sql.DB{e.srcDB, e.dstDB} {
		mariadbtest.MustExec(t, db, "CREATE DATABASE app", "CREATE TABLE app.t ("+columns+")")
	}
	mariadbtest.MustExec(t, e.dstDB, targetSetup...)
	e.fake = &fakeSync{}
	e.fake.reach(t, e.src)
	cfg := &config.SubTaskConfig{
		Name: "vo", SourceID: "mysql-01", TaskMode: config.ModeIncremental, MetaSchema: "dm_meta",
		TargetDatabase: config.DBConfig{Host: e.dst.Host(), Port: e.dst.Port(), User: mariadbtest.RootUser},
		BAList:         config.BAList{DoDBs: []string{"app"}},
		OnlineDDL:      true,
		Validator:      config.ValidatorConfig{Mode: config.ValidationFull, WorkerCount: 2, RowErrorDelay: config.Duration{Duration: time.Second}},
	}
	srcCfg := &config.SourceConfig{SourceID: "mysql-01", From: config.DBConfig{
		Host: e.src.Host(), Port: e.src.Port(), User: mariadbtest.SourceUser, Password: mariadbtest.SourcePassword}}
	core, logs := observer.New(zap.InfoLevel)
	v, err := New(cfg, srcCfg, nil, e.fake, NewMetrics(prometheus.NewRegistry()),
		zap.New(zapcore.NewTee(core, zaptest.NewLogger(t).Core())))
	if err != nil {
		t.Fatal(err)
	}
	if err := v.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(v.Stop)
	e.v, e.logs = v, logs
	testutil.WaitFor(t, vTimeout, "the validator starts validating", func() bool { return v.Status().State == StateValidating })
	both := "INSERT INTO app.t (id, v) SELECT seq, seq FROM app.seq_1_to_100"
	mariadbtest.MustExec(t, e.srcDB, both)
	mariadbtest.MustExec(t, e.dstDB, both)
	e.fake.reach(t, e.src)
	waitDrained(t, v, 100)
	return e
}

// waitRead waits until the validator has read the source's binlog to its
// current end and returns its status.
func (e *oscEnv) waitRead(t *testing.T) unit.ValidatorStatus {
	t.Helper()
	file, pos, _ := e.src.MasterStatus(t)
	end := binlog.Location{Name: file, Pos: pos}
	var st unit.ValidatorStatus
	testutil.Eventually(t, vTimeout, "the validator reads to the source's end", func() error {
		st = e.v.Status()
		read, err := binlog.ParseLocation(st.Binlog)
		if err != nil || read.Compare(end) < 0 {
			return fmt.Errorf("status %+v (%v), want binlog at %s or later", st, err, end)
		}
		return nil
	})
	return st
}

// waitErrors waits until the sync unit (fake) has applied everything and
// the validator has judged every row, then requires exactly the errors
// want ("different {"id":"60"}", sorted), all of app.t, and returns their
// rows by id ("<source row> <target row>").
func (e *oscEnv) waitErrors(t *testing.T, minChecked int64, want ...string) map[string]string {
	t.Helper()
	e.fake.reach(t, e.src)
	var st unit.ValidatorStatus
	testutil.Eventually(t, vTimeout, fmt.Sprintf("%d errors reported", len(want)), func() error {
		if st = e.v.Status(); st.Errors.New != int64(len(want)) || st.Pending != 0 {
			return fmt.Errorf("status %+v", st)
		}
		return nil
	})
	if st.RowsChecked < minChecked || st.Stage != stage.Running {
		t.Errorf("status %+v: want at least %d rows checked, running", st, minChecked)
	}
	kinds, recs := vKinds(t, e.v, StateNew)
	if !slices.Equal(kinds, want) {
		t.Fatalf("errors %q, want %q", kinds, want)
	}
	rows := map[string]string{}
	for _, r := range recs {
		if r.Table != "app.t" || r.TargetTable != "app.t" {
			t.Errorf("error on %s -> %s, want app.t", r.Table, r.TargetTable)
		}
		var key map[string]string
		if err := json.Unmarshal(r.Key, &key); err != nil {
			t.Fatal(err)
		}
		rows[key["id"]] = string(r.SourceRow) + " " + string(r.TargetRow)
	}
	return rows
}

// wantRows requires each error row of an id to contain the parts.
func wantRows(t *testing.T, rows map[string]string, want map[string][]string) {
	t.Helper()
	for id, parts := range want {
		for _, p := range parts {
			if !strings.Contains(rows[id], p) {
				t.Errorf("error of id %s: rows %q, want %s", id, rows[id], p)
			}
		}
	}
}

// wantSkipLogs requires one log of skipping each table ("`app`.`_t_gho`
// (shadow of `t`)").
func (e *oscEnv) wantSkipLogs(t *testing.T, tables ...string) {
	t.Helper()
	for _, tbl := range tables {
		if n := e.logs.FilterMessageSnippet("skips the rows of gh-ost/pt-osc table " + tbl).Len(); n != 1 {
			t.Errorf("%d logs of skipping %s, want 1", n, tbl)
		}
	}
}

// TestValidatorOnlineDDLCutOver runs gh-ost's statement sequence on the
// source under a validator with online-ddl on: the rows of the shadow
// (`_t_gho`) and changelog (`_t_ghc`) are never tracked (the target has
// empty tables of those names, where each would be missing), the changes
// of t still unjudged at the cut-over (`RENAME TABLE t TO _t_del, _t_gho
// TO t`) are judged after it, and the rows of t written after it, with
// the shadow's new column, are compared column by column: exactly the two
// rows made wrong on the target are errors.
func TestValidatorOnlineDDLCutOver(t *testing.T) {
	ghc := "CREATE TABLE app._t_ghc (id BIGINT AUTO_INCREMENT, last_update TIMESTAMP DEFAULT CURRENT_TIMESTAMP, " +
		"hint VARCHAR(64) NOT NULL, value TEXT NOT NULL, PRIMARY KEY (id), UNIQUE KEY hint_uidx (hint))"
	// Tables of the tools' names on the target, without their rows.
	e := oscStart(t, "id INT PRIMARY KEY, v INT", ghc, "CREATE TABLE app._t_gho (id INT PRIMARY KEY, v INT, c2 INT NOT NULL DEFAULT 7)")

	// gh-ost: changelog, shadow, ALTER, row copy in chunks while t
	// changes and gh-ost applies the changes to the shadow.
	mariadbtest.MustExec(t, e.srcDB, ghc,
		"INSERT INTO app._t_ghc (id, hint, value) VALUES (2, 'state', 'GhostTableMigrated') ON DUPLICATE KEY UPDATE value = VALUES(value)",
		"CREATE TABLE app._t_gho LIKE app.t",
		"ALTER TABLE app._t_gho ADD COLUMN c2 INT NOT NULL DEFAULT 7",
		"INSERT IGNORE INTO app._t_gho (id, v) SELECT id, v FROM app.t FORCE INDEX (PRIMARY) WHERE id BETWEEN 1 AND 50 LOCK IN SHARE MODE",
		"UPDATE app.t SET v = v + 1000 WHERE id IN (10, 60)",
		"REPLACE INTO app._t_gho (id, v) VALUES (10, 1010)",
		"INSERT IGNORE INTO app._t_gho (id, v) SELECT id, v FROM app.t FORCE INDEX (PRIMARY) WHERE id BETWEEN 51 AND 100 LOCK IN SHARE MODE",
		"INSERT INTO app.t VALUES (101, 101)", "REPLACE INTO app._t_gho (id, v) VALUES (101, 101)",
		"DELETE FROM app.t WHERE id = 5", "DELETE FROM app._t_gho WHERE id = 5",
		"INSERT INTO app._t_ghc (id, hint, value) VALUES (1, 'heartbeat', NOW()) ON DUPLICATE KEY UPDATE value = VALUES(value)")
	// The sync unit: t's changes only, and 60 goes wrong on the target.
	mariadbtest.MustExec(t, e.dstDB, "UPDATE app.t SET v = v + 1000 WHERE id IN (10, 60)", "INSERT INTO app.t VALUES (101, 101)",
		"DELETE FROM app.t WHERE id = 5", "UPDATE app.t SET v = 999 WHERE id = 60")
	// The cut-over, read by the validator while the sync unit has not
	// applied t's last four changes: they must still be pending after it,
	// and nothing of the shadow's.
	mariadbtest.MustExec(t, e.srcDB, "RENAME TABLE app.t TO app._t_del, app._t_gho TO app.t")
	if st := e.waitRead(t); st.Pending != 4 {
		t.Fatalf("pending after the cut-over: %d, want the 4 unapplied changes of t (10, 60, 101, 5): status %+v", st.Pending, st)
	}

	// After the cut-over: t has c2 on the source; the sync unit applied
	// the shadow's ALTER to the target's t; 102 goes wrong there.
	mariadbtest.MustExec(t, e.srcDB, "UPDATE app.t SET c2 = 8 WHERE id = 20", "INSERT INTO app.t VALUES (102, 102, 9)",
		"DROP TABLE IF EXISTS app._t_del", "DROP TABLE IF EXISTS app._t_ghc")
	mariadbtest.MustExec(t, e.dstDB, "ALTER TABLE app.t ADD COLUMN c2 INT NOT NULL DEFAULT 7",
		"UPDATE app.t SET c2 = 8 WHERE id = 20", "INSERT INTO app.t VALUES (102, 102, 9)", "UPDATE app.t SET c2 = 5 WHERE id = 102")
	rows := e.waitErrors(t, 106, `different {"id":"102"}`, `different {"id":"60"}`)
	wantRows(t, rows, map[string][]string{"60": {`"v":"1060"`, `"v":"999"`}, "102": {`"c2":"9"`, `"c2":"5"`}})
	e.wantSkipLogs(t, "`app`.`_t_gho` (shadow of `t`)", "`app`.`_t_ghc` (trash of `t`)")
}

// ptOSC is the path of pt-online-schema-change; the test is skipped
// without it, or fails when CI=true (scripts/install-deps.sh installs it).
func ptOSC(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("pt-online-schema-change")
	if err == nil {
		return p
	}
	if os.Getenv("CI") == "true" {
		t.Fatalf("pt-online-schema-change is not installed but CI=true: %v (run scripts/install-deps.sh)", err)
	}
	t.Skipf("pt-online-schema-change is not installed (%v); run scripts/install-deps.sh", err)
	return ""
}

// TestValidatorPTOSC runs the real pt-online-schema-change on the source
// while a workload changes t on the source and, as the sync unit would,
// on the target: the rows its triggers and copy write to `_t_new` are not
// tracked, every change of t made before and during the run stays pending
// across its cut-over (RENAME TABLE t TO _t_old, _t_new TO t) and is
// judged after it against the target's t, which the sync unit altered:
// exactly the row made wrong on the target is an error.
func TestValidatorPTOSC(t *testing.T) {
	tool := ptOSC(t)
	e := oscStart(t, "id INT PRIMARY KEY, k INT, v INT")
	// Before the run, not applied yet: 60 goes wrong on the target.
	mariadbtest.MustExec(t, e.srcDB, "UPDATE app.t SET v = v + 1000 WHERE id IN (10, 60)", "DELETE FROM app.t WHERE id = 5")
	mariadbtest.MustExec(t, e.dstDB, "UPDATE app.t SET v = v + 1000 WHERE id IN (10, 60)", "DELETE FROM app.t WHERE id = 5",
		"UPDATE app.t SET v = 999 WHERE id = 60")

	ctx, cancel := context.WithTimeout(t.Context(), vTimeout)
	defer cancel()
	stop := make(chan struct{})
	done := make(chan error, 1)
	var changed int
	go func() {
		// The workload: each change on the source, then on the target
		// (which has no c2 yet, as the sync unit leaves it until the
		// cut-over), keys 200 and up inserted, then updated.
		for i := 200; ; i++ {
			select {
			case <-stop:
				done <- nil
				return
			default:
			}
			for _, q := range []string{
				fmt.Sprintf("INSERT INTO app.t (id, k, v) VALUES (%d, %d, %d)", i, i%10, i),
				fmt.Sprintf("UPDATE app.t SET v = v + 1 WHERE id = %d", i-100),
			} {
				for _, db := range []*sql.DB{e.srcDB, e.dstDB} {
					if _, err := db.ExecContext(ctx, q); err != nil {
						done <- fmt.Errorf("%s: %w", q, err)
						return
					}
				}
			}
			changed = i - 199
		}
	}()
	out, err := exec.CommandContext(ctx, tool, "--alter", "ADD COLUMN c2 INT NOT NULL DEFAULT 7, ADD INDEX (k)",
		"--execute", "--recursion-method=none",
		fmt.Sprintf("h=%s,P=%d,u=%s,D=app,t=t", e.src.Host(), e.src.Port(), mariadbtest.RootUser)).CombinedOutput()
	close(stop)
	if werr := <-done; werr != nil {
		t.Fatalf("workload: %v", werr)
	}
	if err != nil {
		t.Fatalf("pt-online-schema-change: %v\n%s", err, out)
	}
	t.Logf("pt-online-schema-change, with %d workload rounds beside it:\n%s", changed, out)
	if n := e.src.QueryString(t, "SELECT COUNT(*) FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = 'app' AND TABLE_NAME = 't' AND COLUMN_NAME = 'c2'"); n != "1" {
		t.Fatalf("the source's t has no c2 after pt-online-schema-change")
	}
	if st := e.waitRead(t); st.Pending < 3 || st.Errors.New != 0 {
		t.Fatalf("status after the cut-over %+v: want the changes of t before and during the run pending (3 or more), no error", st)
	}

	// The sync unit at the cut-over: the recorded ALTER on t; then 102, a
	// row of the new shape, goes wrong on the target.
	mariadbtest.MustExec(t, e.dstDB, "ALTER TABLE app.t ADD COLUMN c2 INT NOT NULL DEFAULT 7, ADD INDEX (k)")
	mariadbtest.MustExec(t, e.srcDB, "INSERT INTO app.t VALUES (102, 2, 102, 9)")
	mariadbtest.MustExec(t, e.dstDB, "INSERT INTO app.t VALUES (102, 2, 102, 5)")
	rows := e.waitErrors(t, int64(103+changed), `different {"id":"102"}`, `different {"id":"60"}`)
	wantRows(t, rows, map[string][]string{"60": {`"v":"1060"`, `"v":"999"`}, "102": {`"c2":"9"`, `"c2":"5"`}})
	e.wantSkipLogs(t, "`app`.`_t_new` (shadow of `t`)")
}
