package e2e

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dmworker/dm-worker/tests/mariadbtest"
)

// TestValidatorCleanRun replicates vdChanges row changes (multi-row
// inserts, updates, deletes and key moves over a single-key and a
// composite-key table) plus a random workload over every column type, with
// the validator in mode full: once the target equals the source, the
// validator drains to the source's end with 0 errors.
func TestValidatorCleanRun(t *testing.T) {
	e := vdStart(t, vdOptions{delay: "2s"})
	mariadbtest.MustExec(t, e.srcDB, "INSERT INTO vd.t1 SELECT seq, seq, 'before', 1.5, NOW(6), 0.1 FROM vd.seq_1_to_100")
	e.wait(30*time.Second, "the task start started the validator in mode full", func(v vdValidator) bool {
		return v.Stage == "Running" && v.Mode == "full"
	})
	start := time.Now()
	w := startWorkload(t, e.srcDB, 4)
	n, err := vdLoad(context.Background(), e.srcDB, rand.New(rand.NewPCG(1, 2)), 1000, vdChanges(t))
	if err != nil {
		t.Fatal(err)
	}
	// Enough random transactions over every column type too.
	w.waitCommits(t, time.Minute, 3000)
	if err := w.stop(); err != nil {
		t.Fatal(err)
	}
	t.Logf("wrote %d row changes and %s in %s", n, w, time.Since(start).Round(time.Millisecond))
	e.waitEqual(2*time.Minute, 0)
	v := e.waitDrained(2 * time.Minute)
	t.Logf("validator drained %s after the writes began: %v", time.Since(start).Round(time.Millisecond), v)
	if v.RowsChecked == 0 || v.Errors.New != 0 || v.Errors.Ignored != 0 || v.Errors.Resolved != 0 || len(v.Skipped) != 0 {
		t.Errorf("validator after a clean run: %v, want rows checked, no errors, no skipped table", v)
	}
	if recs := e.errorsHTTP("all"); len(recs) != 0 {
		t.Errorf("%d validation errors after a clean run, want none; the first ones:\n%s", len(recs), vdShow(recs, 10))
	}
}

// vdShow prints up to n records.
func vdShow(recs []vdRecord, n int) string {
	s := ""
	for i, r := range recs {
		if i == n {
			return s + "...\n"
		}
		s += fmt.Sprintf("  %d %s %s key %v source %v target %v state %s binlog %s\n",
			r.ID, r.Table, r.Kind, r.Key, vdRow(r.SourceRow), vdRow(r.TargetRow), r.State, r.Binlog)
	}
	return s
}

// vdRow prints a row object ("null" for none).
func vdRow(row map[string]*string) string {
	if row == nil {
		return "null"
	}
	s := "{"
	for k, v := range row {
		if v == nil {
			s += k + ":NULL "
		} else {
			s += k + ":" + strconv.Quote(*v) + " "
		}
	}
	return s + "}"
}

// diverge makes the target differ from the source while the validator is
// stopped (5 rows changed, 3 deleted, 2 extra, and a row F changed), starts
// the validator, fixes F on the target right after its first check and
// waits for the 10 errors. It checks and returns them, sorted by ID.
func (e *vdEnv) diverge() []vdRecord {
	t := e.t
	mariadbtest.MustExec(t, e.srcDB,
		"INSERT INTO vd.t1 SELECT seq, seq, CONCAT('base', seq), seq / 4, '2026-01-02 03:04:05.123456', seq / 3 FROM vd.seq_1_to_100",
		"INSERT INTO vd.t2 SELECT seq, CONCAT('k', seq), seq * 7, 'base' FROM vd.seq_1_to_20")
	e.waitEqual(30*time.Second, 0)
	e.waitDrained(30 * time.Second)
	e.c.ok("validation", "stop", vdTask)
	stopped := e.wait(30*time.Second, "the validator stops", func(v vdValidator) bool { return v.Stage == "Stopped" })
	mariadbtest.MustExec(t, e.srcDB,
		"UPDATE vd.t1 SET a = a + 1000, b = CONCAT(b, '-src') WHERE id BETWEEN 1 AND 5",
		"UPDATE vd.t2 SET v = v + 1, note = 'src' WHERE k1 BETWEEN 1 AND 3",
		"UPDATE vd.t1 SET b = 'F at the source' WHERE id = 21",
		"INSERT INTO vd.t1 VALUES (1001, 1, 'gone', 1.5, NOW(6), 0.25), (1002, 2, 'gone', 2.5, NOW(6), 0.5)",
		"DELETE FROM vd.t1 WHERE id IN (1001, 1002)")
	e.waitEqual(30*time.Second, 0)
	mariadbtest.MustExec(t, e.tgtDB,
		"UPDATE vd.t1 SET b = 'tampered', f = -1 WHERE id BETWEEN 1 AND 5",
		"DELETE FROM vd.t2 WHERE k1 BETWEEN 1 AND 3",
		"INSERT INTO vd.t1 VALUES (1001, 9, 'extra', 9.5, '2026-01-01 00:00:00', 9), (1002, 9, 'extra', 9.5, NULL, NULL)",
		"UPDATE vd.t1 SET b = 'F tampered' WHERE id = 21")
	e.c.ok("validation", "start", vdTask)
	base := stopped.RowsChecked
	e.wait(20*time.Second, "the validator checked the 11 changed keys", func(v vdValidator) bool {
		if v.RowsChecked < base {
			base = 0 // the count restarted with the validator
		}
		return v.Stage == "Running" && v.RowsChecked >= base+11
	})
	mariadbtest.MustExec(t, e.tgtDB, "UPDATE vd.t1 SET b = 'F at the source' WHERE id = 21")
	fixed := time.Now()
	v := e.wait(30*time.Second, "10 errors reported, nothing pending", func(v vdValidator) bool {
		return v.Errors.New >= 10 && v.Pending == 0
	})
	t.Logf("validator %s after fixing F: %v", time.Since(fixed).Round(time.Millisecond), v)
	if v.Error != nil {
		t.Errorf("the validator reported an error: %v\nworker log tail:\n%s", v, tail(e.w.logFile, 30))
	}
	recs := e.errorsHTTP("new")
	if len(recs) != 10 || v.Errors.New != 10 {
		t.Fatalf("%d errors listed, %d in status, want 10:\n%s", len(recs), v.Errors.New, vdShow(recs, 20))
	}
	vdCheckDivergence(t, recs)
	slices.SortFunc(recs, func(a, b vdRecord) int { return int(a.ID - b.ID) })
	return recs
}

// vdCheckDivergence requires exactly the errors diverge provokes: t1 ids
// 1-5 different, t2 (1-3, k1-k3) missing, t1 1001-1002 extra, nothing for
// F (t1 id 21), each with both rows shown.
func vdCheckDivergence(t *testing.T, recs []vdRecord) {
	t.Helper()
	want := map[string]string{}
	for i := 1; i <= 5; i++ {
		want[fmt.Sprintf("vd.t1 id=%d", i)] = "different"
	}
	for i := 1; i <= 3; i++ {
		want[fmt.Sprintf("vd.t2 k1=%d,k2=k%d", i, i)] = "missing"
	}
	want["vd.t1 id=1001"], want["vd.t1 id=1002"] = "extra", "extra"
	for _, r := range recs {
		key := r.Table + " " + r.keyText("id")
		if r.Table == "vd.t2" {
			key = r.Table + " " + r.keyText("k1", "k2")
		}
		bad := want[key] != r.Kind || r.TargetTable != r.Table || r.State != "new" || r.Time.IsZero() || r.Binlog == ""
		delete(want, key)
		switch b := func(row map[string]*string, col string) string {
			if row == nil || row[col] == nil {
				return "<none>"
			}
			return *row[col]
		}; r.Kind {
		case "different":
			bad = bad || b(r.SourceRow, "b") != "base"+r.keyText("id")[3:]+"-src" || b(r.TargetRow, "b") != "tampered"
		case "missing":
			bad = bad || b(r.SourceRow, "note") != "src" || r.TargetRow != nil
		case "extra":
			bad = bad || r.SourceRow != nil || b(r.TargetRow, "b") != "extra"
		}
		if bad {
			t.Errorf("unexpected validation error (F is t1 id=21):\n%s", vdShow([]vdRecord{r}, 1))
		}
	}
	if len(want) > 0 {
		t.Errorf("no validation error for %v", want)
	}
}

// TestValidatorDivergence: errors of the right kind for exactly the
// diverged rows after row-error-delay, none for a row fixed before it;
// ignore, resolve and clear through HTTP and dmctl change states and
// counters.
func TestValidatorDivergence(t *testing.T) {
	e := vdStart(t, vdOptions{delay: "2s"})
	recs := e.diverge()
	id := func(i int) string { return strconv.FormatInt(recs[i].ID, 10) }
	path := "/api/v1/subtasks/" + vdTask + "/validation/errors"
	e.operateHTTP(`{"op":"ignore","id":`+id(0)+`}`, 1)
	e.operateHTTP(`{"op":"resolve","id":`+id(1)+`}`, 1)
	e.operateHTTP(`{"op":"clear","id":`+id(2)+`}`, 1)
	e.waitCounts(7, 1, 1)
	e.c.ok("validation", "ignore", vdTask, id(3))
	e.c.ok("validation", "resolve", vdTask, id(4))
	e.c.ok("validation", "clear", vdTask, id(5))
	e.waitCounts(4, 2, 2)
	expectError(t, e.w, http.MethodPost, path, `{"op":"ignore","id":999999}`, http.StatusNotFound, "validation-error-not-found")
	if r := e.c.run("validation", "resolve", vdTask, "999999"); r.code != 1 {
		t.Errorf("dmctl validation resolve of an unknown ID: exit %d, want 1\n%s%s", r.code, r.stdout, r.stderr)
	}

	var st validationStatusDoc
	e.c.json(&st, "validation", "status", vdTask)
	if len(st.Sources) != 1 || st.Sources[0].Expect != "Running" || st.Sources[0].Validator == nil ||
		st.Sources[0].Validator.Errors.New != 4 || st.Sources[0].Validator.Errors.Ignored != 2 || st.Sources[0].Validator.Errors.Resolved != 2 {
		t.Errorf("dmctl validation status: %v, want expect Running and 4 new, 2 ignored, 2 resolved", st)
	}
	var list struct {
		Sources []struct {
			Source string     `json:"source"`
			Errors []vdRecord `json:"errors"`
		} `json:"sources"`
	}
	e.c.json(&list, "validation", "errors", vdTask, "--state", "all")
	wantState := map[int64]string{recs[0].ID: "ignored", recs[1].ID: "resolved", recs[3].ID: "ignored", recs[4].ID: "resolved"}
	for _, r := range recs[6:] {
		wantState[r.ID] = "new"
	}
	if len(list.Sources) != 1 || len(list.Sources[0].Errors) != len(wantState) {
		t.Fatalf("dmctl validation errors --state all: %v, want %d errors", list, len(wantState))
	}
	for _, r := range list.Sources[0].Errors {
		if wantState[r.ID] != r.State {
			t.Errorf("error %d is %s, want %q", r.ID, r.State, wantState[r.ID])
		}
	}
	e.c.json(&list, "validation", "errors", vdTask)
	if n := len(list.Sources[0].Errors); n != 4 {
		t.Errorf("dmctl validation errors (default new): %d errors, want 4", n)
	}
	if got := e.errorsHTTP("ignored"); len(got) != 2 || got[0].ID+got[1].ID != recs[0].ID+recs[3].ID {
		t.Errorf("GET ?state=ignored:\n%s", vdShow(got, 5))
	}
	// An operation on all errors settles the new ones only.
	var op struct {
		Sources []struct {
			Changed *int64 `json:"changed"`
		} `json:"sources"`
	}
	e.c.json(&op, "validation", "resolve", vdTask, "--all")
	if len(op.Sources) != 1 || op.Sources[0].Changed == nil || *op.Sources[0].Changed != 4 {
		t.Errorf("dmctl validation resolve --all: %+v, want 4 changed", op)
	}
	e.waitCounts(0, 2, 6)
	e.operateHTTP(`{"op":"clear","all":true}`, 8)
	e.waitCounts(0, 0, 0)
	if got := e.errorsHTTP("all"); len(got) != 0 {
		t.Errorf("errors left after clear all:\n%s", vdShow(got, 5))
	}
}

// validationStatusDoc is `dmctl validation status -o json`.
type validationStatusDoc struct {
	Sources []struct {
		Source    string       `json:"source"`
		Expect    string       `json:"expect"`
		Validator *vdValidator `json:"validator"`
	} `json:"sources"`
}

// waitCounts waits until status counts the errors by state so.
func (e *vdEnv) waitCounts(n, ignored, resolved int64) {
	e.t.Helper()
	e.wait(10*time.Second, fmt.Sprintf("errors new %d, ignored %d, resolved %d", n, ignored, resolved), func(v vdValidator) bool {
		return v.Errors.New == n && v.Errors.Ignored == ignored && v.Errors.Resolved == resolved
	})
}

// TestValidatorKill9: stored errors survive kill -9 of the worker with
// their IDs and states and without duplicates, and a kill while a workload
// runs adds no false error.
func TestValidatorKill9(t *testing.T) {
	e := vdStart(t, vdOptions{delay: "2s"})
	recs := e.diverge()
	e.operateHTTP(`{"op":"ignore","id":`+strconv.FormatInt(recs[0].ID, 10)+`}`, 1)
	e.operateHTTP(`{"op":"resolve","id":`+strconv.FormatInt(recs[1].ID, 10)+`}`, 1)
	e.waitCounts(8, 1, 1)
	before := e.errorsHTTP("all")

	e.killWorker()
	e.restartWorker()
	e.waitDrained(time.Minute)
	e.waitCounts(8, 1, 1)
	vdSameErrors(t, "after kill -9 of an idle worker", before, e.errorsHTTP("all"))

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := vdLoad(ctx, e.srcDB, rand.New(rand.NewPCG(3, 4)), 100000, 60000)
		done <- err
	}()
	w := startWorkload(t, e.srcDB, 4)
	checked := e.status().RowsChecked
	e.wait(time.Minute, "the validator checks rows of the workload", func(v vdValidator) bool {
		return v.RowsChecked > checked+2000 && v.Pending > 0
	})
	t.Logf("kill -9 while the validator checks the workload: %v", e.status())
	e.killWorker()
	e.restartWorker()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if err := w.stop(); err != nil {
		t.Fatal(err)
	}
	e.waitEqual(2*time.Minute, 100000)
	v := e.waitDrained(2 * time.Minute)
	t.Logf("validator after the workload and the kill: %v", v)
	e.waitCounts(8, 1, 1)
	vdSameErrors(t, "after kill -9 during a workload", before, e.errorsHTTP("all"))
}

// vdSameErrors requires got to hold the same errors as want: IDs, kinds,
// keys and states.
func vdSameErrors(t *testing.T, when string, want, got []vdRecord) {
	t.Helper()
	key := func(r vdRecord) string { return fmt.Sprintf("%d %s %s %v %s", r.ID, r.Table, r.Kind, r.Key, r.State) }
	w, g := make([]string, len(want)), make([]string, len(got))
	for i, r := range want {
		w[i] = key(r)
	}
	for i, r := range got {
		g[i] = key(r)
	}
	slices.Sort(w)
	slices.Sort(g)
	if !slices.Equal(w, g) {
		t.Errorf("validation errors %s:\n%s\nwant:\n%s", when, vdShow(got, 30), vdShow(want, 30))
	}
}

// TestValidatorThroughRelay runs the validator of a source with relay on:
// it reads the relay files as the sync unit does, validates a workload
// clean and finds the divergences of TestValidatorDivergence.
func TestValidatorThroughRelay(t *testing.T) {
	e := vdStart(t, vdOptions{delay: "2s", sourceLines: []string{"enable-relay: true"}})
	n, err := vdLoad(t.Context(), e.srcDB, rand.New(rand.NewPCG(3, 4)), 100000, 20000)
	if err != nil {
		t.Fatal(err)
	}
	e.waitEqual(2*time.Minute, 0)
	v := e.waitDrained(2 * time.Minute)
	if v.RowsChecked == 0 || v.Errors.New != 0 {
		t.Fatalf("validator after %d row changes through relay: %v, want rows checked and no errors", n, v)
	}
	rd, err := e.relay()
	if err != nil || !rd.Enabled || rd.Stage != "Running" || !vdAtOrAfter(rd.RelayBinlog, strings.Split(v.Binlog, ":")[0], 4) {
		t.Fatalf("relay status %+v (%v), want running relay up to the validator's %s", rd, err, v.Binlog)
	}
	e.diverge()
}

// TestValidatorModeAll: in a task of mode all the validator waits while the
// dump and load run, starts where the sync unit starts and validates what
// the sync unit applies after the load.
func TestValidatorModeAll(t *testing.T) {
	e := vdStart(t, vdOptions{delay: "2s", all: true})
	if _, err := vdLoad(t.Context(), e.srcDB, rand.New(rand.NewPCG(5, 6)), 100000, 10000); err != nil {
		t.Fatal(err)
	}
	e.waitEqual(2*time.Minute, 0)
	v := e.waitDrained(2 * time.Minute)
	if v.RowsChecked == 0 || v.Errors.New != 0 || v.Mode != "full" {
		t.Fatalf("validator of a task in mode all: %v, want rows checked and no errors", v)
	}
}
