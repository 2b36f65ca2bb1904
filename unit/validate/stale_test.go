package validate

import (
	"testing"

	"go.uber.org/zap/zaptest"

	"github.com/dmworker/dm-worker/tests/mariadbtest"
)

// TestDropStale: an inconclusive mismatch whose image the source no longer
// has (a newer change exists) is settled; one the source still has as
// imaged keeps its mismatch.
func TestDropStale(t *testing.T) {
	e := cmpStart(t)
	src, err := openPool(e.srcEP, 2)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = src.Close() })
	ct := e.tables["ci"] // ('abc', 1) on both sides, imaged as such
	stale := ct.rows[0]
	// A newer change of 'abc' reached the source and the target; 'x' was
	// changed on the target only.
	mariadbtest.MustExec(t, e.src, "UPDATE app.ci SET v = 2 WHERE k = 'abc'", "INSERT INTO app.ci VALUES ('x', 5)")
	mariadbtest.MustExec(t, e.tgt, "UPDATE app.ci SET v = 2 WHERE k = 'abc'", "INSERT INTO app.ci VALUES ('x', 6)")
	diverged := []any{[]byte("x"), int64(5)}
	checks := []rowCheck{
		{key: cmpKeyOf(ct.t, stale), want: stale},
		{key: cmpKeyOf(ct.t, diverged), want: diverged},
	}
	r := &run{v: &Validator{logger: zaptest.NewLogger(t)}, cmp: newComparer(e.read, true), srcCmp: newComparer(src, true)}
	results, err := r.cmp.compare(t.Context(), ct.t, checks)
	if err != nil {
		t.Fatal(err)
	}
	if results[0].kind != KindDifferent || results[1].kind != KindDifferent {
		t.Fatalf("target verdicts %q %q, want both different", results[0].kind, results[1].kind)
	}
	r.dropStale(t.Context(), batch{table: ct.t}, checks, results)
	if results[0].kind != "" {
		t.Errorf("the superseded image of 'abc' is still a mismatch: %q", results[0].kind)
	}
	if results[1].kind != KindDifferent {
		t.Errorf("the diverged row 'x' lost its mismatch: %q", results[1].kind)
	}
}
