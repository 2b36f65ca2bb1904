package validate

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"github.com/dmworker/dm-worker/config"
	"github.com/dmworker/dm-worker/tests/mariadbtest"
	"github.com/dmworker/dm-worker/tests/testutil"
	"github.com/dmworker/dm-worker/unit"
	"github.com/dmworker/dm-worker/unit/syncer"
	"github.com/dmworker/dm-worker/unit/unittest"
)

// TestValidatorExtendColumns: shards s1.t_1 and s2.t_2 with the same ids
// merged into db.t with extend columns validate clean; a row of one shard
// changed or deleted on the target is one error keyed by id plus the
// extend columns, and the other shard's row of the same id is not.
func TestValidatorExtendColumns(t *testing.T) {
	src := mariadbtest.Start(t, mariadbtest.Options{Name: "source", Binlog: true, FastCommit: true})
	dst := mariadbtest.Start(t, mariadbtest.Options{Name: "target", FastCommit: true})
	srcDB, dstDB := src.PlainDB(t), dst.PlainDB(t)
	file, pos, _ := src.MasterStatus(t)
	e := &vEnv{src: src, dst: dst, srcDB: srcDB, dstDB: dstDB}
	e.cfg = &config.SubTaskConfig{
		Name: "vt", SourceID: "mysql-01", TaskMode: config.ModeIncremental,
		Meta:           config.Meta{BinlogName: file, BinlogPos: pos},
		TargetDatabase: config.DBConfig{Host: dst.Host(), Port: dst.Port(), User: mariadbtest.RootUser},
		MetaSchema:     "dm_meta",
		BAList:         config.BAList{DoDBs: []string{"s*"}},
		RouteRules: []config.RouteRule{{SchemaPattern: "s*", TablePattern: "t_*", TargetSchema: "db", TargetTable: "t",
			TableExtractor:  &config.TableExtractor{TargetColumn: "c_table", TableRegexp: "t_(.*)"},
			SchemaExtractor: &config.SchemaExtractor{TargetColumn: "c_schema", SchemaRegexp: "(.*)"},
			SourceExtractor: &config.SourceExtractor{TargetColumn: "c_source", SourceRegexp: "mysql-(.*)"}}},
		Syncer:    config.SyncerConfig{WorkerCount: 4, Batch: 50, CheckpointFlushInterval: 1},
		Validator: config.ValidatorConfig{Mode: config.ValidationFull, WorkerCount: 2, RowErrorDelay: config.Duration{Duration: time.Second}},
	}
	e.srcCfg = &config.SourceConfig{SourceID: "mysql-01", From: config.DBConfig{
		Host: src.Host(), Port: src.Port(), User: mariadbtest.SourceUser, Password: mariadbtest.SourcePassword}}
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
	v := e.validator(t)

	var qs []string
	for _, sh := range []string{"s1.t_1", "s2.t_2"} {
		qs = append(qs, "CREATE DATABASE "+strings.Split(sh, ".")[0],
			"CREATE TABLE "+sh+" (id INT PRIMARY KEY, v VARCHAR(20))",
			"INSERT INTO "+sh+" SELECT seq, CONCAT('"+sh+"-', seq) FROM seq_1_to_100",
			"UPDATE "+sh+" SET v = CONCAT(v, '-u') WHERE id % 3 = 0",
			"DELETE FROM "+sh+" WHERE id % 7 = 0")
	}
	mariadbtest.MustExec(t, srcDB, append([]string{"USE mysql"}, qs...)...)
	testutil.Eventually(t, vTimeout, "db.t holds both shards", func() error {
		want, err := mariadbtest.QueryRows(ctx, srcDB, "SELECT id, v, '1', 's1', '01' FROM s1.t_1 UNION ALL SELECT id, v, '2', 's2', '01' FROM s2.t_2 ORDER BY 3, 1")
		if err != nil {
			return err
		}
		got, err := mariadbtest.QueryRows(ctx, dstDB, "SELECT id, v, c_table, c_schema, c_source FROM db.t ORDER BY 3, 1")
		if err != nil {
			return err
		}
		if fmt.Sprint(want) != fmt.Sprint(got) {
			return fmt.Errorf("db.t has %d rows, want %d", len(got), len(want))
		}
		return nil
	})
	// Every key of both shards (deleted ones too) is checked.
	if st := waitDrained(t, v, 200); st.Errors != (unit.ValidationErrorCounts{}) {
		t.Fatalf("status after a clean run = %+v, want no errors", st)
	}

	// With the validator stopped, both shards change ids 5 and 8; once
	// the target has the changes, one shard's row of each id is tampered
	// with there. The validator, started again from its checkpoint,
	// validates the changes against the tampered target.
	v.Stop()
	mariadbtest.MustExec(t, srcDB, "UPDATE s1.t_1 SET v = 'again' WHERE id IN (5, 8)", "UPDATE s2.t_2 SET v = 'again' WHERE id IN (5, 8)")
	testutil.Eventually(t, vTimeout, "the changes reach the target", func() error {
		var n int
		if err := dstDB.QueryRow("SELECT COUNT(*) FROM db.t WHERE v = 'again'").Scan(&n); err != nil || n != 4 {
			return fmt.Errorf("%d rows changed, want 4 (%v)", n, err)
		}
		return nil
	})
	mariadbtest.MustExec(t, dstDB, "UPDATE db.t SET v = 'tampered' WHERE id = 5 AND c_table = '1'",
		"DELETE FROM db.t WHERE id = 8 AND c_table = '2'")
	v = e.validator(t)
	testutil.Eventually(t, vTimeout, "2 errors reported", func() error {
		if st := v.Status(); st.Errors.New != 2 || st.Pending != 0 {
			return fmt.Errorf("status %+v", st)
		}
		return nil
	})
	kinds, _ := vKinds(t, v, StateNew)
	want := []string{
		`different {"id":"5","c_table":"1","c_schema":"s1","c_source":"01"}`,
		`missing {"id":"8","c_table":"2","c_schema":"s2","c_source":"01"}`,
	}
	if strings.Join(kinds, "\n") != strings.Join(want, "\n") {
		t.Fatalf("errors:\n%s\nwant:\n%s", strings.Join(kinds, "\n"), strings.Join(want, "\n"))
	}
}
