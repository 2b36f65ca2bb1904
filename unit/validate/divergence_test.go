package validate

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/dmworker/dm-worker/config"
	"github.com/dmworker/dm-worker/tests/mariadbtest"
	"github.com/dmworker/dm-worker/tests/testutil"
	"github.com/dmworker/dm-worker/unit"
)

// TestValidatorDivergence changes rows on the target behind the sync unit's
// back: 5 changed, 3 deleted, 2 extra, for keys the source changes again;
// each must become exactly one error of its kind after row-error-delay, a
// row fixed before the delay never, and a replay from an older checkpoint
// (what a kill -9 leads to) must not repeat any.
func TestValidatorDivergence(t *testing.T) {
	e := vStart(t, config.ValidationFull, 2*time.Second)
	v := e.validator(t)
	vWorkload(t, e.srcDB, 1, 200)
	e.waitSynced(t)
	waitDrained(t, v, 200)
	v.Stop()
	before := v.Status().Checkpoint

	// The validator is stopped while the source changes the keys again and
	// the target is tampered with afterwards, so every divergence is
	// deterministic when it starts again.
	different, missing, extra, fixed := []int{50, 51, 52, 53, 55}, []int{60, 62, 63}, []int{5001, 5002}, 70
	var qs []string
	for _, id := range append(append(append([]int{}, different...), missing...), fixed) {
		qs = append(qs, fmt.Sprintf("UPDATE app.t SET v = 'again-%d' WHERE id = %d", id, id))
	}
	for _, id := range extra {
		qs = append(qs, fmt.Sprintf("INSERT INTO app.t VALUES (%d, 'x', 1, 1)", id), fmt.Sprintf("DELETE FROM app.t WHERE id = %d", id))
	}
	mariadbtest.MustExec(t, e.srcDB, qs...)
	e.waitSynced(t)
	mariadbtest.MustExec(t, e.dstDB,
		"UPDATE app.t SET v = 'tampered' WHERE id IN (50, 51, 52, 53, 55, 70)",
		"DELETE FROM app.t WHERE id IN (60, 62, 63)",
		"INSERT INTO app.t VALUES (5001, 'x', 1, 1), (5002, 'x', 1, 1)")

	v2 := e.validator(t)
	testutil.WaitFor(t, vTimeout, "the rows are checked once", func() bool { return v2.Status().RowsChecked >= 11 })
	mariadbtest.MustExec(t, e.dstDB, "UPDATE app.t SET v = 'again-70' WHERE id = 70")
	var st unit.ValidatorStatus
	testutil.Eventually(t, vTimeout, "10 errors reported", func() error {
		if st = v2.Status(); st.Errors.New != 10 || st.Pending != 0 {
			return fmt.Errorf("status %+v", st)
		}
		return nil
	})
	kinds, recs := vKinds(t, v2, StateNew)
	want := []string{}
	for _, id := range different {
		want = append(want, fmt.Sprintf(`different {"id":"%d"}`, id))
	}
	for _, id := range extra {
		want = append(want, fmt.Sprintf(`extra {"id":"%d"}`, id))
	}
	for _, id := range missing {
		want = append(want, fmt.Sprintf(`missing {"id":"%d"}`, id))
	}
	if strings.Join(kinds, "\n") != strings.Join(sortedCopy(want), "\n") {
		t.Fatalf("errors:\n%s\nwant:\n%s", strings.Join(kinds, "\n"), strings.Join(sortedCopy(want), "\n"))
	}
	vCheckRows(t, recs)
	ctx := context.Background()
	vOp(t, v2, OpIgnore, recs[0].ID, unit.ValidationErrorCounts{New: 9, Ignored: 1})
	vOp(t, v2, OpResolve, recs[1].ID, unit.ValidationErrorCounts{New: 8, Ignored: 1, Resolved: 1})
	if _, err := v2.OperateValidationErrors(ctx, OpIgnore, 999999, false); err == nil {
		t.Fatal("ignore of an unknown id succeeded")
	}

	// Replaying the same changes (an older checkpoint, as after kill -9)
	// finds the same rows diverged and stores nothing twice; states stay.
	v2.Stop()
	mariadbtest.MustExec(t, e.dstDB, fmt.Sprintf(
		"UPDATE dm_meta.validator_checkpoint SET binlog_name = '%s', binlog_pos = %s WHERE task = 'vt'",
		strings.Split(before, ":")[0], strings.Split(before, ":")[1]))
	v3 := e.validator(t)
	checked := v3.Status().RowsChecked
	testutil.WaitFor(t, vTimeout, "replayed rows checked again", func() bool {
		st := v3.Status()
		return st.RowsChecked >= checked+10 && st.Pending == 0
	})
	time.Sleep(3 * time.Second) // past row-error-delay: anything to report is reported
	if all, _ := vKinds(t, v3, StateAll); len(all) != 10 {
		t.Fatalf("after the replay %d errors, want 10 (no duplicates):\n%s", len(all), strings.Join(all, "\n"))
	}
	vOp(t, v3, OpIgnore, 0, unit.ValidationErrorCounts{Ignored: 9, Resolved: 1})
	vOp(t, v3, OpClear, recs[1].ID, unit.ValidationErrorCounts{Ignored: 9})
	vOp(t, v3, OpClear, 0, unit.ValidationErrorCounts{})
}

// vOp applies op to error id (all errors when id is 0) and checks the
// counters in status.
func vOp(t *testing.T, v *Validator, op string, id int64, want unit.ValidationErrorCounts) {
	t.Helper()
	if _, err := v.OperateValidationErrors(context.Background(), op, id, id == 0); err != nil {
		t.Fatalf("%s %d: %v", op, id, err)
	}
	if got := v.Status().Errors; got != want {
		t.Fatalf("counts after %s %d = %+v, want %+v", op, id, got, want)
	}
}

func sortedCopy(s []string) []string {
	out := append([]string(nil), s...)
	sort.Strings(out)
	return out
}

// vCheckRows checks both rows are shown as the kinds say.
func vCheckRows(t *testing.T, recs []ErrorRecord) {
	t.Helper()
	for _, r := range recs {
		src, dst := string(r.SourceRow), string(r.TargetRow)
		if src == "" {
			src = "null"
		}
		if dst == "" {
			dst = "null"
		}
		ok := false
		switch r.Kind {
		case KindDifferent:
			ok = strings.Contains(src, `"again-`) && strings.Contains(dst, `"tampered"`)
		case KindMissing:
			ok = strings.Contains(src, `"again-`) && dst == "null"
		case KindExtra:
			ok = src == "null" && strings.Contains(dst, `"x"`)
		}
		if !ok || r.Table != "app.t" || r.State != StateNew || r.Binlog == "" || r.Time.IsZero() {
			t.Errorf("error record %+v: source row %s target row %s", r, src, dst)
		}
	}
}
