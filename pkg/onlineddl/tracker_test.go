package onlineddl

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/pingcap/tidb/pkg/parser"
	_ "github.com/pingcap/tidb/pkg/parser/test_driver"
)

// feed runs each statement through the tracker at location "pos-<i>".
func feed(t *testing.T, tr *Tracker, stmts ...string) []Action {
	t.Helper()
	p := parser.New()
	var out []Action
	for i, q := range stmts {
		nodes, _, err := p.Parse(q, "", "")
		if err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		a, err := tr.Statement(context.Background(), "shop", nodes[0], fmt.Sprintf("pos-%d", i))
		if err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		out = append(out, a)
	}
	return out
}

func newTracker(t *testing.T, st Store) *Tracker {
	t.Helper()
	r, err := NewRules(nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	tr, err := NewTracker(context.Background(), r, st)
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

func kinds(as []Action) []ActionKind {
	out := make([]ActionKind, len(as))
	for i, a := range as {
		out[i] = a.Kind
	}
	return out
}

// TestGhostSequence: gh-ost's statements: the changelog and shadow tables
// are skipped, the shadow's ALTER recorded, the atomic rename is the
// cut-over with the ALTER naming the real table, the drops are skipped.
func TestGhostSequence(t *testing.T) {
	st := &MemStore{}
	tr := newTracker(t, st)
	as := feed(t, tr,
		"CREATE TABLE `shop`.`_orders_ghc` (id BIGINT AUTO_INCREMENT PRIMARY KEY, hint VARCHAR(64))",
		"CREATE TABLE `shop`.`_orders_gho` LIKE `shop`.`orders`",
		"ALTER TABLE `shop`.`_orders_gho` ADD COLUMN c2 INT NOT NULL DEFAULT 7, ADD INDEX (k)",
		"RENAME TABLE `shop`.`orders` TO `shop`.`_orders_del`, `shop`.`_orders_gho` TO `shop`.`orders`",
	)
	if want := []ActionKind{Skip, Skip, Recorded, CutOver}; !slices.Equal(kinds(as), want) {
		t.Fatalf("kinds %v, want %v", kinds(as), want)
	}
	cut := as[3]
	if cut.Schema != "shop" || cut.Real != "orders" || len(cut.Stmts) != 1 ||
		!strings.HasPrefix(cut.Stmts[0], "ALTER TABLE `shop`.`orders` ADD COLUMN `c2`") {
		t.Fatalf("cut-over %+v", cut)
	}
	if len(st.Records) != 1 {
		t.Fatalf("records %v", st.Records)
	}
	if err := tr.Done(context.Background(), "shop", "orders", "pos-3"); err != nil {
		t.Fatal(err)
	}
	if len(tr.Pending()) != 0 {
		t.Fatalf("pending after Done: %v", tr.Pending())
	}
	// A replay of the cut-over event is the cut-over again; a later one
	// without a new shadow is refused.
	p := parser.New()
	nodes, _, _ := p.Parse("RENAME TABLE `shop`.`orders` TO `shop`.`_orders_del`, `shop`.`_orders_gho` TO `shop`.`orders`", "", "")
	if a, err := tr.Statement(context.Background(), "shop", nodes[0], "pos-3"); err != nil || a.Kind != CutOver {
		t.Fatalf("replayed cut-over: %+v %v", a, err)
	}
	if _, err := tr.Statement(context.Background(), "shop", nodes[0], "pos-9"); err == nil {
		t.Fatal("a second cut-over without a new shadow table passed")
	}
	as = feed(t, tr, "DROP TABLE IF EXISTS `shop`.`_orders_del`", "DROP TABLE IF EXISTS `shop`.`_orders_ghc`", "INSERT INTO shop.orders VALUES (1)")
	if want := []ActionKind{Skip, Skip, Pass}; !slices.Equal(kinds(as), want) {
		t.Fatalf("kinds %v, want %v", kinds(as), want)
	}
}

// TestPtOscSequence: pt-osc's statements, with the two-statement swap
// form, and a restart in between (the record comes back from the store;
// a replayed ALTER is not recorded twice).
func TestPtOscSequence(t *testing.T) {
	st := &MemStore{}
	tr := newTracker(t, st)
	feed(t, tr,
		"CREATE TABLE `shop`.`_orders_new` (`id` int NOT NULL, `k` int, PRIMARY KEY (`id`))",
		"ALTER TABLE `shop`.`_orders_new` ADD COLUMN c2 INT")
	tr = newTracker(t, st) // restart
	p := parser.New()
	nodes, _, _ := p.Parse("ALTER TABLE `shop`.`_orders_new` ADD COLUMN c2 INT", "", "")
	if a, err := tr.Statement(context.Background(), "shop", nodes[0], "pos-1"); err != nil || a.Kind != Recorded {
		t.Fatalf("replayed ALTER: %+v %v", a, err)
	}
	as := feed(t, tr, "RENAME TABLE `shop`.`orders` TO `shop`.`_orders_old`", "RENAME TABLE `shop`.`_orders_new` TO `shop`.`orders`",
		"DROP TABLE IF EXISTS `shop`.`_orders_old`")
	if want := []ActionKind{Skip, CutOver, Skip}; !slices.Equal(kinds(as), want) {
		t.Fatalf("kinds %v, want %v", kinds(as), want)
	}
	if len(as[1].Stmts) != 1 {
		t.Fatalf("cut-over statements %q, want the one ALTER", as[1].Stmts)
	}
}

// TestTrackerErrors: renames the tools never make, and a cut-over whose
// shadow was created before the task, are errors naming the tables.
func TestTrackerErrors(t *testing.T) {
	p := parser.New()
	for _, tt := range []struct {
		setup []string
		stmt  string
		says  string
	}{
		{nil, "RENAME TABLE `shop`.`_orders_gho` TO `shop`.`orders`", "did not see"},
		{nil, "ALTER TABLE `shop`.`_orders_gho` ADD COLUMN c INT", "did not see"},
		{[]string{"CREATE TABLE `shop`.`_orders_gho` LIKE `shop`.`orders`"}, "RENAME TABLE `shop`.`_orders_gho` TO `shop`.`other`", "another table"},
		{nil, "RENAME TABLE `shop`.`orders` TO `shop`.`_orders_gho`", "to a shadow table"},
	} {
		tr := newTracker(t, &MemStore{})
		feed(t, tr, tt.setup...)
		nodes, _, err := p.Parse(tt.stmt, "", "")
		if err != nil {
			t.Fatal(err)
		}
		_, err = tr.Statement(context.Background(), "shop", nodes[0], "x")
		var oe *Error
		if !errors.As(err, &oe) || !strings.Contains(err.Error(), tt.says) || !strings.Contains(err.Error(), "handle-error") {
			t.Errorf("%s: err %v, want an *Error saying %q and naming handle-error", tt.stmt, err, tt.says)
		}
	}
}
