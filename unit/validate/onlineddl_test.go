package validate

import (
	"encoding/json"
	"fmt"
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

// TestValidatorOnlineDDLCutOver runs gh-ost's statement sequence on the
// source under a validator with online-ddl on: the rows of the shadow
// (`_t_gho`) and changelog (`_t_ghc`) are never tracked (the target has
// empty tables of those names, where each would be missing), the changes
// of t still unjudged at the cut-over (`RENAME TABLE t TO _t_del, _t_gho
// TO t`) are judged after it, and the rows of t written after it, with
// the shadow's new column, are compared column by column: exactly the two
// rows made wrong on the target are errors.
func TestValidatorOnlineDDLCutOver(t *testing.T) {
	src := mariadbtest.Start(t, mariadbtest.Options{Name: "source", Binlog: true, FastCommit: true})
	dst := mariadbtest.Start(t, mariadbtest.Options{Name: "target", FastCommit: true})
	srcDB, dstDB := src.PlainDB(t), dst.PlainDB(t)
	ghc := "CREATE TABLE app._t_ghc (id BIGINT AUTO_INCREMENT, last_update TIMESTAMP DEFAULT CURRENT_TIMESTAMP, " +
		"hint VARCHAR(64) NOT NULL, value TEXT NOT NULL, PRIMARY KEY (id), UNIQUE KEY hint_uidx (hint))"
	for _, db := range []*mariadbtest.Instance{src, dst} {
		mariadbtest.MustExec(t, db.PlainDB(t), "CREATE DATABASE app", "CREATE TABLE app.t (id INT PRIMARY KEY, v INT)")
	}
	// Tables of the tools' names on the target, without their rows.
	mariadbtest.MustExec(t, dstDB, ghc, "CREATE TABLE app._t_gho (id INT PRIMARY KEY, v INT, c2 INT NOT NULL DEFAULT 7)")
	fake := &fakeSync{}
	fake.reach(t, src)

	cfg := &config.SubTaskConfig{
		Name: "vo", SourceID: "mysql-01", TaskMode: config.ModeIncremental, MetaSchema: "dm_meta",
		TargetDatabase: config.DBConfig{Host: dst.Host(), Port: dst.Port(), User: mariadbtest.RootUser},
		BAList:         config.BAList{DoDBs: []string{"app"}},
		OnlineDDL:      true,
		Validator:      config.ValidatorConfig{Mode: config.ValidationFull, WorkerCount: 2, RowErrorDelay: config.Duration{Duration: time.Second}},
	}
	srcCfg := &config.SourceConfig{SourceID: "mysql-01", From: config.DBConfig{
		Host: src.Host(), Port: src.Port(), User: mariadbtest.SourceUser, Password: mariadbtest.SourcePassword}}
	core, logs := observer.New(zap.InfoLevel)
	v, err := New(cfg, srcCfg, nil, fake, NewMetrics(prometheus.NewRegistry()),
		zap.New(zapcore.NewTee(core, zaptest.NewLogger(t).Core())))
	if err != nil {
		t.Fatal(err)
	}
	if err := v.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(v.Stop)
	testutil.WaitFor(t, vTimeout, "the validator starts validating", func() bool { return v.Status().State == StateValidating })

	both := []string{"INSERT INTO app.t SELECT seq, seq FROM app.seq_1_to_100"}
	mariadbtest.MustExec(t, srcDB, both...)
	mariadbtest.MustExec(t, dstDB, both...)
	fake.reach(t, src)
	waitDrained(t, v, 100)

	// gh-ost: changelog, shadow, ALTER, row copy in chunks while t
	// changes and gh-ost applies the changes to the shadow.
	mariadbtest.MustExec(t, srcDB, ghc,
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
	mariadbtest.MustExec(t, dstDB, "UPDATE app.t SET v = v + 1000 WHERE id IN (10, 60)", "INSERT INTO app.t VALUES (101, 101)",
		"DELETE FROM app.t WHERE id = 5", "UPDATE app.t SET v = 999 WHERE id = 60")
	// The cut-over, read by the validator while the sync unit has not
	// applied t's last four changes: they must still be pending after it,
	// and nothing of the shadow's.
	mariadbtest.MustExec(t, srcDB, "RENAME TABLE app.t TO app._t_del, app._t_gho TO app.t")
	file, pos, _ := src.MasterStatus(t)
	cutOver := binlog.Location{Name: file, Pos: pos}
	var st unit.ValidatorStatus
	testutil.Eventually(t, vTimeout, "the validator reads past the cut-over", func() error {
		st = v.Status()
		read, err := binlog.ParseLocation(st.Binlog)
		if err != nil || read.Compare(cutOver) < 0 {
			return fmt.Errorf("status %+v (%v), want binlog at %s or later", st, err, cutOver)
		}
		return nil
	})
	if st.Pending != 4 {
		t.Fatalf("pending after the cut-over: %d, want the 4 unapplied changes of t (10, 60, 101, 5): status %+v", st.Pending, st)
	}

	// After the cut-over: t has c2 on the source; the sync unit applied
	// the shadow's ALTER to the target's t; 102 goes wrong there.
	mariadbtest.MustExec(t, srcDB, "UPDATE app.t SET c2 = 8 WHERE id = 20", "INSERT INTO app.t VALUES (102, 102, 9)",
		"DROP TABLE IF EXISTS app._t_del", "DROP TABLE IF EXISTS app._t_ghc")
	mariadbtest.MustExec(t, dstDB, "ALTER TABLE app.t ADD COLUMN c2 INT NOT NULL DEFAULT 7",
		"UPDATE app.t SET c2 = 8 WHERE id = 20", "INSERT INTO app.t VALUES (102, 102, 9)", "UPDATE app.t SET c2 = 5 WHERE id = 102")
	fake.reach(t, src)
	testutil.Eventually(t, vTimeout, "2 errors reported", func() error {
		if st = v.Status(); st.Errors.New != 2 || st.Pending != 0 {
			return fmt.Errorf("status %+v", st)
		}
		return nil
	})
	if st.RowsChecked < 106 || st.Stage != stage.Running {
		t.Errorf("status %+v: want at least 106 rows checked, running", st)
	}
	kinds, recs := vKinds(t, v, StateNew)
	if want := []string{`different {"id":"102"}`, `different {"id":"60"}`}; !slices.Equal(kinds, want) {
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
	for id, parts := range map[string][]string{"60": {`"v":"1060"`, `"v":"999"`}, "102": {`"c2":"9"`, `"c2":"5"`}} {
		for _, p := range parts {
			if !strings.Contains(rows[id], p) {
				t.Errorf("error of id %s: rows %s, want %s", id, rows[id], p)
			}
		}
	}
	for _, tbl := range []string{"`app`.`_t_gho` (shadow of `t`)", "`app`.`_t_ghc` (trash of `t`)"} {
		if n := logs.FilterMessageSnippet("skips the rows of gh-ost/pt-osc table " + tbl).Len(); n != 1 {
			t.Errorf("%d logs of skipping %s, want 1", n, tbl)
		}
	}
}
