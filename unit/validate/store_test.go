package validate

import (
	"context"
	"database/sql"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/dmworker/dm-worker/pkg/binlog"
	"github.com/dmworker/dm-worker/pkg/errs"
	"github.com/dmworker/dm-worker/tests/mariadbtest"
	"github.com/dmworker/dm-worker/unit"
)

const stSchema = "dm_meta_st"

// stStores starts a target and returns one prepared store per (task,
// source) pair given as "task/source".
func stStores(t *testing.T, pairs ...string) (*sql.DB, []*store) {
	t.Helper()
	db := mariadbtest.StartTarget(t).DB(t)
	var out []*store
	for _, p := range pairs {
		task, source, _ := strings.Cut(p, "/")
		s := newStore(db, stSchema, task, source)
		if err := s.prepare(context.Background()); err != nil {
			t.Fatal(err)
		}
		out = append(out, s)
	}
	return db, out
}

// stRec is an error record of table shop.t for key id at binlog position
// pos of mariadb-bin.000002.
func stRec(id, kind string, pos int, src, dst string) ErrorRecord {
	r := ErrorRecord{Table: "shop.t", TargetTable: "shop_t.t", Kind: kind, Key: json.RawMessage(`{"id": "` + id + `"}`),
		Binlog: binlog.Location{Name: "mariadb-bin.000002", Pos: uint32(pos)}.String()}
	if src != "" {
		r.SourceRow = json.RawMessage(src)
	}
	if dst != "" {
		r.TargetRow = json.RawMessage(dst)
	}
	return r
}

// stView is the part of a listed record the tests compare.
type stView struct {
	ID                   int64
	Key, Kind, State     string
	Binlog               string
	SourceRow, TargetRow string
}

// stList lists state and returns the records as views.
func stList(t *testing.T, s *store, state string) []stView {
	t.Helper()
	recs, err := s.list(context.Background(), state)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]stView, 0, len(recs))
	for _, r := range recs {
		if r.Table != "shop.t" || r.TargetTable != "shop_t.t" {
			t.Errorf("record %d tables = %q, %q", r.ID, r.Table, r.TargetTable)
		}
		if d := time.Since(r.Time); d < -time.Minute || d > time.Minute {
			t.Errorf("record %d time %s is not about now", r.ID, r.Time)
		}
		out = append(out, stView{r.ID, string(r.Key), r.Kind, r.State, r.Binlog, string(r.SourceRow), string(r.TargetRow)})
	}
	return out
}

// stReport reports recs and checks how many errors were added.
func stReport(t *testing.T, s *store, wantAdded int, recs ...ErrorRecord) {
	t.Helper()
	added, err := s.report(context.Background(), recs)
	if err != nil {
		t.Fatal(err)
	}
	if added != wantAdded {
		t.Errorf("report added %d, want %d", added, wantAdded)
	}
}

// stCheck compares a listing with want.
func stCheck(t *testing.T, step string, got, want []stView) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d records, want %d:\n got %+v\nwant %+v", step, len(got), len(want), got, want)
	}
	for i := range got {
		if got[i] != want[i] {
			t.Errorf("%s: record %d\n got %+v\nwant %+v", step, i, got[i], want[i])
		}
	}
}

func TestStoreCheckpoint(t *testing.T) {
	_, ss := stStores(t, "t1/s1", "t1/s2", "t2/s1")
	ctx := context.Background()
	if err := ss[0].prepare(ctx); err != nil { // twice: idempotent
		t.Fatal(err)
	}
	if _, _, ok, err := ss[0].loadCheckpoint(ctx); err != nil || ok {
		t.Fatalf("loadCheckpoint before any save: ok %v, %v", ok, err)
	}
	for i, s := range ss {
		loc := binlog.Location{Name: "mariadb-bin.000001", Pos: uint32(100 + i), GTID: "0-1-" + string(rune('5'+i))}
		if err := s.saveCheckpoint(ctx, loc, int64(10*i)); err != nil {
			t.Fatal(err)
		}
	}
	want := binlog.Location{Name: "mariadb-bin.000003", Pos: 4, GTID: "0-1-900,1-2-3"}
	if err := ss[0].saveCheckpoint(ctx, want, 123456789012); err != nil {
		t.Fatal(err)
	}
	loc, n, ok, err := ss[0].loadCheckpoint(ctx)
	if err != nil || !ok || loc != want || n != 123456789012 {
		t.Errorf("loadCheckpoint = %+v, %d, %v, %v; want %+v, 123456789012", loc, n, ok, err, want)
	}
	loc, n, ok, err = ss[2].loadCheckpoint(ctx)
	if err != nil || !ok || loc.Pos != 102 || n != 20 {
		t.Errorf("checkpoint of t2/s1 = %+v, %d, %v, %v; want its own", loc, n, ok, err)
	}
}

func TestStoreReportDedup(t *testing.T) {
	_, ss := stStores(t, "t1/s1", "t1/s2")
	s := ss[0]
	const row1, row1t = `{"id":"1","v":"a"}`, `{"id":"1","v":"b"}`

	stReport(t, s, 2, stRec("1", KindMissing, 100, row1, ""), stRec("2", KindExtra, 100, "null", `{"id": "2"}`))
	want := []stView{
		{1, `{"id":"1"}`, KindMissing, StateNew, "mariadb-bin.000002:100", row1, ""},
		{2, `{"id":"2"}`, KindExtra, StateNew, "mariadb-bin.000002:100", "", `{"id":"2"}`},
	}
	stCheck(t, "first report", stList(t, s, ""), want)

	// A restart judges the same changes again: nothing changes.
	stReport(t, s, 0, stRec("1", KindMissing, 100, row1, ""), stRec("2", KindExtra, 100, "", `{"id":"2"}`))
	stCheck(t, "same report again", stList(t, s, StateAll), want)

	// A later change of row 1 still differs: its new error is updated.
	stReport(t, s, 0, stRec("1", KindDifferent, 200, row1, row1t))
	want[0] = stView{1, `{"id":"1"}`, KindDifferent, StateNew, "mariadb-bin.000002:200", row1, row1t}
	stCheck(t, "later change of a row with a new error", stList(t, s, ""), want)
	// The older change judged again after a restart: skipped.
	stReport(t, s, 0, stRec("1", KindMissing, 100, row1, ""))
	stCheck(t, "older change again", stList(t, s, ""), want)

	// Once ignored, a later change of the row is a new error; the ignored
	// one stays.
	if n, err := s.operate(context.Background(), OpIgnore, 1, false); err != nil || n != 1 {
		t.Fatalf("ignore 1 = %d, %v", n, err)
	}
	stReport(t, s, 1, stRec("1", KindMissing, 300, row1, ""), stRec("1", KindMissing, 300, row1, ""))
	want[0].State = StateIgnored
	want = append(want, stView{3, `{"id":"1"}`, KindMissing, StateNew, "mariadb-bin.000002:300", row1, ""})
	stCheck(t, "after ignore", stList(t, s, ""), want)
	stCheck(t, "new only", stList(t, s, StateNew), want[1:])
	stCheck(t, "ignored only", stList(t, s, StateIgnored), want[:1])

	// Two changes of one row in one report: one error, at the later change.
	stReport(t, s, 1, stRec("3", KindMissing, 400, row1, ""), stRec("3", KindExtra, 500, "", row1))
	want = append(want, stView{4, `{"id":"3"}`, KindExtra, StateNew, "mariadb-bin.000002:500", "", row1})
	stCheck(t, "two changes in one report", stList(t, s, ""), want)

	// The other source has its own errors, ids and counts.
	stReport(t, ss[1], 1, stRec("1", KindMissing, 100, row1, ""))
	if got := stList(t, ss[1], ""); len(got) != 1 || got[0].ID != 5 {
		t.Errorf("errors of t1/s2 = %+v, want one with id 5", got)
	}
	c, err := s.counts(context.Background())
	if want := (unit.ValidationErrorCounts{New: 3, Ignored: 1}); err != nil || c != want {
		t.Errorf("counts = %+v, %v; want %+v", c, err, want)
	}
}

func TestStoreReportRejects(t *testing.T) {
	_, ss := stStores(t, "t1/s1")
	s := ss[0]
	good := stRec("1", KindMissing, 100, `{"id":"1"}`, "")
	for _, c := range []struct {
		name string
		edit func(r *ErrorRecord)
		want string
	}{
		{"no table", func(r *ErrorRecord) { r.Table = "" }, "give the source table"},
		{"kind", func(r *ErrorRecord) { r.Kind = "wrong" }, `kind "wrong": use missing, extra or different`},
		{"key not JSON", func(r *ErrorRecord) { r.Key = json.RawMessage(`{id`) }, "not a JSON object"},
		{"key null", func(r *ErrorRecord) { r.Key = nil }, "not a JSON object"},
		{"binlog", func(r *ErrorRecord) { r.Binlog = "nowhere" }, "give the judged change's location as file:pos"},
		{"source row", func(r *ErrorRecord) { r.SourceRow = json.RawMessage(`{"a":`) }, "source row"},
	} {
		bad := good
		c.edit(&bad)
		_, err := s.report(context.Background(), []ErrorRecord{good, bad})
		if errs.Code(err) != CodeBadOp || errs.IsResumable(err) || err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: report = %v (code %s), want a non-resumable %s error containing %q", c.name, err, errs.Code(err), CodeBadOp, c.want)
		}
	}
	// A failure inside the transaction (a table name longer than the
	// column) keeps none of the batch.
	long := good
	long.Key = json.RawMessage(`{"id":"2"}`)
	long.Table = strings.Repeat("x", 300)
	if _, err := s.report(context.Background(), []ErrorRecord{good, long}); errs.Code(err) != CodeStore {
		t.Errorf("report of a too long table name = %v (code %s), want %s", err, errs.Code(err), CodeStore)
	}
	if got := stList(t, s, ""); len(got) != 0 {
		t.Errorf("failed reports left %+v", got)
	}
}

func TestStoreOperate(t *testing.T) {
	_, ss := stStores(t, "t1/s1", "t2/s1")
	s, other := ss[0], ss[1]
	ctx := context.Background()
	stReport(t, s, 4, stRec("1", KindMissing, 1, "", ""), stRec("2", KindMissing, 1, "", ""),
		stRec("3", KindMissing, 1, "", ""), stRec("4", KindMissing, 1, "", ""))
	stReport(t, other, 1, stRec("1", KindMissing, 1, "", "")) // id 5
	counts := func(want unit.ValidationErrorCounts) {
		t.Helper()
		if c, err := s.counts(ctx); err != nil || c != want {
			t.Errorf("counts = %+v, %v; want %+v", c, err, want)
		}
	}
	for _, c := range []struct {
		op   string
		id   int64
		all  bool
		want int64
	}{
		{OpIgnore, 1, false, 1},
		{OpIgnore, 1, false, 0}, // already ignored
		{OpResolve, 2, false, 1},
		{OpClear, 3, false, 1},
	} {
		if n, err := s.operate(ctx, c.op, c.id, c.all); err != nil || n != c.want {
			t.Errorf("operate(%s, %d, %v) = %d, %v; want %d", c.op, c.id, c.all, n, err, c.want)
		}
	}
	counts(unit.ValidationErrorCounts{New: 1, Ignored: 1, Resolved: 1})

	for _, c := range []struct {
		op   string
		id   int64
		all  bool
		code string
		msg  string
	}{
		{OpIgnore, 3, false, CodeErrorNotFound, "validation error 3 not found"},  // cleared
		{OpResolve, 5, false, CodeErrorNotFound, `for task "t1" on source "s1"`}, // another task's
		{"skip", 1, false, CodeBadOp, "use ignore, resolve or clear"},
		{OpClear, 0, false, CodeBadOp, "give the id of an error"},
		{OpClear, 1, true, CodeBadOp, "not both"},
	} {
		_, err := s.operate(ctx, c.op, c.id, c.all)
		if errs.Code(err) != c.code || errs.IsResumable(err) || err == nil || !strings.Contains(err.Error(), c.msg) {
			t.Errorf("operate(%s, %d, %v) = %v (code %s), want %s containing %q", c.op, c.id, c.all, err, errs.Code(err), c.code, c.msg)
		}
	}
	if _, err := s.list(ctx, "open"); errs.Code(err) != CodeBadOp || !strings.Contains(err.Error(), "use new, ignored, resolved or all") {
		t.Errorf("list(open) = %v", err)
	}

	// "all" settles the new errors only; the ignored one stays ignored.
	if n, err := s.operate(ctx, OpResolve, 0, true); err != nil || n != 1 {
		t.Errorf("resolve all = %d, %v; want 1 (the new one)", n, err)
	}
	counts(unit.ValidationErrorCounts{Ignored: 1, Resolved: 2})
	if n, err := s.operate(ctx, OpClear, 0, true); err != nil || n != 3 {
		t.Errorf("clear all = %d, %v; want 3", n, err)
	}
	counts(unit.ValidationErrorCounts{})
	if got := stList(t, other, ""); len(got) != 1 || got[0].ID != 5 || got[0].State != StateNew {
		t.Errorf("the other task's errors = %+v, want error 5 untouched", got)
	}
}
