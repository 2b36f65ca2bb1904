package syncer

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"github.com/dmworker/dm-worker/config"
	"github.com/dmworker/dm-worker/pkg/sqlschema"
	"github.com/dmworker/dm-worker/tests/mariadbtest"
	"github.com/dmworker/dm-worker/tests/testutil"
	"github.com/dmworker/dm-worker/unit"
	"github.com/dmworker/dm-worker/unit/unittest"
)

// syncTimeout bounds every wait for the target to catch up.
const syncTimeout = 90 * time.Second

// env is a source and a target MariaDB with plain (parseTime off, UTC)
// pools for comparing them.
type env struct {
	src, dst     *mariadbtest.Instance
	srcDB, dstDB *sql.DB
}

func newEnv(t *testing.T, srcOpts mariadbtest.Options) *env {
	t.Helper()
	srcOpts.Name, srcOpts.Binlog = "source", true
	e := &env{
		src: mariadbtest.Start(t, srcOpts),
		dst: mariadbtest.Start(t, mariadbtest.Options{Name: "target", FastCommit: true}),
	}
	e.srcDB = e.src.PlainDB(t)
	e.dstDB = e.dst.PlainDB(t)
	return e
}

func (e *env) dbConfig(i *mariadbtest.Instance) config.DBConfig {
	return config.DBConfig{Host: i.Host(), Port: i.Port(), User: mariadbtest.RootUser}
}

// configs returns an incremental subtask starting at the source's current
// position, and the source config (flavor detected).
func (e *env) configs(t *testing.T, name string) (*config.SubTaskConfig, *config.SourceConfig) {
	t.Helper()
	file, pos, _ := e.src.MasterStatus(t)
	cfg := &config.SubTaskConfig{
		Name: name, SourceID: "mysql-01", TaskMode: config.ModeIncremental,
		Meta:           config.Meta{BinlogName: file, BinlogPos: pos},
		TargetDatabase: e.dbConfig(e.dst),
		MetaSchema:     "dm_meta",
		Syncer:         config.SyncerConfig{WorkerCount: 4, Batch: 50, CheckpointFlushInterval: 1},
	}
	src := &config.SourceConfig{SourceID: "mysql-01", From: config.DBConfig{
		Host: e.src.Host(), Port: e.src.Port(), User: mariadbtest.SourceUser, Password: mariadbtest.SourcePassword}}
	return cfg, src
}

// newUnit creates and initialises a sync unit.
func newUnit(t *testing.T, cfg *config.SubTaskConfig, src *config.SourceConfig) *Syncer {
	t.Helper()
	u, err := New(cfg, src, nil, NewMetrics(), zaptest.NewLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := u.Init(ctx); err != nil {
		u.Kill()
		t.Fatal(err)
	}
	return u
}

// tableRows reads a whole table as text rows ordered by every column.
func tableRows(ctx context.Context, db *sql.DB, table string) ([]string, error) {
	cols, err := columnsOf(ctx, db, table)
	if err != nil {
		return nil, err
	}
	order := make([]string, len(cols))
	for i, c := range cols {
		order[i] = sqlschema.QuoteName(c)
	}
	return mariadbtest.QueryRows(ctx, db, "SELECT * FROM "+table+" ORDER BY "+strings.Join(order, ","))
}

func columnsOf(ctx context.Context, db *sql.DB, table string) ([]string, error) {
	rows, err := db.QueryContext(ctx, "SELECT * FROM "+table+" LIMIT 0")
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	return rows.Columns()
}

func checksum(ctx context.Context, db *sql.DB, table string) (string, error) {
	var name string
	var sum sql.NullString
	if err := db.QueryRowContext(ctx, "CHECKSUM TABLE "+table).Scan(&name, &sum); err != nil {
		return "", err
	}
	if !sum.Valid {
		return "", fmt.Errorf("table %s does not exist", table)
	}
	return sum.String, nil
}

// diffTable compares one table of the source with a table of the target;
// "" when equal.
func diffTable(ctx context.Context, src, dst *sql.DB, srcTable, dstTable string) (string, error) {
	a, err := checksum(ctx, src, srcTable)
	if err != nil {
		return "", fmt.Errorf("source %s: %w", srcTable, err)
	}
	b, err := checksum(ctx, dst, dstTable)
	if err != nil {
		return "source checksum " + a + ", target: " + err.Error(), nil
	}
	ra, err := tableRows(ctx, src, srcTable)
	if err != nil {
		return "", err
	}
	rb, err := tableRows(ctx, dst, dstTable)
	if err != nil {
		return "target rows: " + err.Error(), nil
	}
	if a == b && len(ra) == len(rb) {
		same := true
		for i := range ra {
			if ra[i] != rb[i] {
				same = false
				break
			}
		}
		if same {
			return "", nil
		}
	}
	msg := fmt.Sprintf("%s -> %s: checksum %s vs %s, %d vs %d rows", srcTable, dstTable, a, b, len(ra), len(rb))
	for i := 0; i < len(ra) && i < len(rb); i++ {
		if ra[i] != rb[i] {
			msg += fmt.Sprintf("\nfirst difference at row %d:\n source %s\n target %s", i, ra[i], rb[i])
			break
		}
	}
	return msg, nil
}

// waitEqual waits until every table (source name -> target name) is equal
// on both sides, or fails with the differences at the deadline. It fails at
// once when the unit stops first.
func (e *env) waitEqual(t *testing.T, tables map[string]string, r *unittest.Run) {
	t.Helper()
	ctx := context.Background()
	testutil.Eventually(t, syncTimeout, "the target catches up with the source", func() error {
		var diffs []string
		for s, d := range tables {
			diff, err := diffTable(ctx, e.srcDB, e.dstDB, s, d)
			if err != nil {
				t.Fatal(err)
			}
			if diff != "" {
				diffs = append(diffs, diff)
			}
		}
		if len(diffs) == 0 {
			return nil
		}
		if r != nil {
			select {
			case res := <-r.Done:
				r.Done <- res
				t.Fatalf("the unit stopped before the target caught up: %+v\n%s", res, strings.Join(diffs, "\n"))
			default:
			}
		}
		return errors.New(strings.Join(diffs, "\n"))
	})
}

// same maps each table to itself.
func same(tables ...string) map[string]string {
	m := map[string]string{}
	for _, t := range tables {
		m[t] = t
	}
	return m
}

func resultErr(res unit.Result) error {
	if len(res.Errors) == 0 {
		return nil
	}
	var list []error
	for _, e := range res.Errors {
		list = append(list, fmt.Errorf("%s (resumable %v): %s", e.Code, e.Resumable, e.Message))
	}
	return errors.Join(list...)
}
