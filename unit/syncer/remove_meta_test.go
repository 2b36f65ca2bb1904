package syncer

import (
	"context"
	"slices"
	"testing"

	"github.com/dmworker/dm-worker/pkg/binlog"
	"github.com/dmworker/dm-worker/tests/mariadbtest"
	"github.com/dmworker/dm-worker/unit/syncer/syncmeta"
)

// TestRemoveTaskMeta writes checkpoints and safe points of two tasks with
// the unit's own store and checks that syncmeta.RemoveTask deletes exactly
// one task's rows, on every source.
func TestRemoveTaskMeta(t *testing.T) {
	dst := mariadbtest.Start(t, mariadbtest.Options{Name: "target", FastCommit: true})
	db := dst.PlainDB(t)
	ctx := context.Background()
	const schema = "dm_meta_x"

	// No tables yet: nothing to remove, no error.
	if got, err := syncmeta.RemoveTask(ctx, db, schema, "t1"); err != nil || len(got) != 0 {
		t.Fatalf("RemoveTask before any table: %v, %v", got, err)
	}
	for _, k := range []struct{ task, source string }{{"t1", "s1"}, {"t1", "s2"}, {"t2", "s1"}, {"t10", "s1"}} {
		cs := &checkpointStore{db: db, schema: schema, task: k.task, source: k.source}
		if err := cs.prepare(ctx); err != nil {
			t.Fatal(err)
		}
		if err := cs.save(ctx, savedCheckpoint{loc: binlog.Location{Name: "mariadb-bin.000001", Pos: 1234}}); err != nil {
			t.Fatal(err)
		}
		sp := cs.safePointStmt(0, binlog.Location{Name: "mariadb-bin.000001", Pos: 2000})
		if _, err := db.ExecContext(ctx, sp.sql, sp.args...); err != nil {
			t.Fatal(err)
		}
	}

	got, err := syncmeta.RemoveTask(ctx, db, schema, "t1")
	if err != nil {
		t.Fatal(err)
	}
	want := []syncmeta.Removed{
		{Table: "`dm_meta_x`.`syncer_checkpoint`", Rows: 2, Sources: []string{"s1", "s2"}},
		{Table: "`dm_meta_x`.`syncer_safe_point`", Rows: 2, Sources: []string{"s1", "s2"}},
	}
	if !slices.EqualFunc(got, want, func(a, b syncmeta.Removed) bool {
		return a.Table == b.Table && a.Rows == b.Rows && slices.Equal(a.Sources, b.Sources)
	}) {
		t.Errorf("RemoveTask(t1) = %+v, want %+v", got, want)
	}
	for _, k := range []struct {
		task, source string
		want         bool
	}{{"t1", "s1", false}, {"t1", "s2", false}, {"t2", "s1", true}, {"t10", "s1", true}} {
		cs := &checkpointStore{db: db, schema: schema, task: k.task, source: k.source}
		if ok, err := cs.exists(ctx); err != nil || ok != k.want {
			t.Errorf("checkpoint of %s/%s exists = %v (%v), want %v", k.task, k.source, ok, err, k.want)
		}
		sp, err := cs.maxSafePoint(ctx)
		if err != nil || sp.IsZero() == k.want {
			t.Errorf("safe point of %s/%s = %v (%v), want present=%v", k.task, k.source, sp, err, k.want)
		}
	}
	// Again: nothing left of t1.
	if got, err := syncmeta.RemoveTask(ctx, db, schema, "t1"); err != nil || len(got) != 0 {
		t.Errorf("second RemoveTask(t1) = %+v, %v", got, err)
	}
}
