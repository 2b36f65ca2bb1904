package validate

import (
	"fmt"
	"testing"
	"time"

	"github.com/dmworker/dm-worker/config"
	"github.com/dmworker/dm-worker/tests/mariadbtest"
	"github.com/dmworker/dm-worker/unit"
)

// TestValidatorExpressionFilters: the changes the subtask's expression
// filters keep off the target (even inserts, updates to 'secret', deletes
// of multiples of 5) are not expected there: the validator checks the
// others and reports nothing.
func TestValidatorExpressionFilters(t *testing.T) {
	e := vStartWith(t, config.ValidationFull, time.Second, func(c *config.SubTaskConfig) {
		c.ExprFilter = []config.ExpressionFilter{
			{Name: "even", Schema: "app", Table: "t", InsertValueExpr: "id % 2 = 0"},
			{Name: "secret", Schema: "app", Table: "t", UpdateNewValueExpr: "v = 'secret'"},
			{Name: "five", Schema: "app", Table: "t", DeleteValueExpr: "id % 5 = 0"},
		}
	})
	v := e.validator(t)
	var qs []string
	for i := 1; i <= 300; i++ {
		qs = append(qs, fmt.Sprintf("INSERT INTO app.t VALUES (%d, 'r%d', %d.25, %d.5)", i, i, i, i))
		if i%3 == 0 {
			qs = append(qs, fmt.Sprintf("UPDATE app.t SET v = 'secret' WHERE id = %d", i-2))
		}
		if i%4 == 0 {
			qs = append(qs, fmt.Sprintf("UPDATE app.t SET n = n + 1 WHERE id = %d", i-1))
		}
		if i%5 == 0 {
			qs = append(qs, fmt.Sprintf("DELETE FROM app.t WHERE id IN (%d, %d)", i-3, i-5))
		}
	}
	mariadbtest.MustExec(t, e.srcDB, qs...)
	// Checked: inserts of odd ids (150), the updates of n (all of odd
	// ids) and the deletes of ids that are no multiple of 5.
	st := waitDrained(t, v, 150)
	if st.Errors != (unit.ValidationErrorCounts{}) || len(st.SkippedTables) != 0 {
		kinds, _ := vKinds(t, v, StateAll)
		t.Fatalf("status = %+v (errors %v), want no errors and no skipped table", st, kinds)
	}
	ss := e.sync.Status()
	t.Logf("validator checked %d rows; sync status %+v", st.RowsChecked, ss)
}
