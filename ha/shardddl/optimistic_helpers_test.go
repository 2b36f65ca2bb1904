package shardddl

import (
	"context"
	"strings"
	"testing"

	"github.com/dmworker/dm-worker/pkg/sqlschema"
	"github.com/dmworker/dm-worker/tests/etcdtest"
)

// model builds a table schema from "name type [not null] [default X]"
// column specs, with PRIMARY KEY (id) when it has an id column.
func model(t *testing.T, specs ...string) *sqlschema.Table {
	t.Helper()
	tb := &sqlschema.Table{Schema: "up", Name: "t"}
	for i, spec := range specs {
		f := strings.Fields(spec)
		name, ct := f[0], f[1]
		rest := strings.Join(f[2:], " ")
		dt := ct
		if j := strings.IndexAny(dt, "("); j >= 0 {
			dt = dt[:j]
		}
		nullable := !strings.Contains(rest, "not null")
		charset := ""
		if strings.Contains(dt, "char") || strings.Contains(dt, "text") {
			charset = "utf8mb4"
		}
		c, err := sqlschema.NewColumn(name, dt, ct, charset, nullable)
		if err != nil {
			t.Fatal(err)
		}
		c.Ordinal = i + 1
		switch {
		case strings.Contains(rest, "default "):
			c.SetDefault(strings.Fields(rest[strings.Index(rest, "default ")+len("default "):])[0], true)
		case nullable:
			c.SetDefault("NULL", true)
		}
		tb.Columns = append(tb.Columns, c)
	}
	if tb.ColumnIndex("id") >= 0 {
		tb.Indexes = []sqlschema.Index{{Name: "PRIMARY", Columns: []string{"id"}, Primary: true, Unique: true, Type: "BTREE"}}
	}
	return tb
}

// Schemas of the optimistic tests.
func baseModel(t *testing.T) *sqlschema.Table { return model(t, "id int(11) not null", "a int(11)") }
func withC(t *testing.T) *sqlschema.Table {
	return model(t, "id int(11) not null", "a int(11)", "c int(11)")
}
func withCD(t *testing.T) *sqlschema.Table {
	return model(t, "id int(11) not null", "a int(11)", "c int(11)", "d int(11)")
}

const (
	optAddC  = "ALTER TABLE `shop`.`orders` ADD COLUMN `c` INT"
	optAddD  = "ALTER TABLE `shop`.`orders` ADD COLUMN `d` INT"
	optDropC = "ALTER TABLE `shop`.`orders` DROP COLUMN `c`"
	runAddC  = "ALTER TABLE `shop`.`orders` ADD COLUMN `c` int(11) NULL DEFAULT NULL AFTER `a`"
	runAddD  = "ALTER TABLE `shop`.`orders` ADD COLUMN `d` int(11) NULL DEFAULT NULL AFTER `c`"
	runDropC = "ALTER TABLE `shop`.`orders` DROP COLUMN `c`"
)

func optShare(ctx context.Context, t *testing.T, c *Coordinator, m *sqlschema.Table, tables ...Table) map[Table]OptState {
	t.Helper()
	models := map[Table]*sqlschema.Table{}
	for _, tb := range tables {
		models[tb] = m
	}
	st, err := c.ShareOptimistic(ctx, target, models)
	if err != nil {
		t.Fatalf("ShareOptimistic of %s: %v", c.source, err)
	}
	return st
}

func optReport(ctx context.Context, t *testing.T, c *Coordinator, table Table, ddl string, pos uint32, before, after *sqlschema.Table) OptState {
	t.Helper()
	st, err := c.ReportOptimistic(ctx, OptReport{Target: target, Table: table, DDLs: []string{ddl},
		Before: before, After: after, Location: Location{Name: "mariadb-bin.000001", Pos: pos}})
	if err != nil {
		t.Fatalf("ReportOptimistic of %s %s: %v", c.source, table, err)
	}
	return st
}

func optStateOf(ctx context.Context, t *testing.T, c *Coordinator, table Table) OptState {
	t.Helper()
	st, err := c.StateOptimistic(ctx, target, table)
	if err != nil {
		t.Fatalf("StateOptimistic of %s %s: %v", c.source, table, err)
	}
	return st
}

func wantOpt(t *testing.T, what string, st OptState, role Role) {
	t.Helper()
	if st.Role != role {
		t.Fatalf("%s: role %s, want %s (state %+v)", what, st.Role, role, st)
	}
}

// runOwner plays the owner: Begin, (the statements would run here), Done.
func runOwner(ctx context.Context, t *testing.T, c *Coordinator, table Table, st OptState) OptState {
	t.Helper()
	if _, err := c.BeginOptimistic(ctx, target, table, st.Version); err != nil {
		t.Fatalf("BeginOptimistic of %s %s: %v", c.source, table, err)
	}
	done, err := c.DoneOptimistic(ctx, target, table, st.Version)
	if err != nil {
		t.Fatalf("DoneOptimistic of %s %s: %v", c.source, table, err)
	}
	return done
}

func optLocks(ctx context.Context, t *testing.T, c *Coordinator) []LockInfo {
	t.Helper()
	locks, err := Locks(ctx, c.cli, "", testTask)
	if err != nil {
		t.Fatalf("Locks: %v", err)
	}
	return locks
}

func memberTables(ms []MemberTable) string {
	var parts []string
	for _, m := range ms {
		parts = append(parts, m.Source+" "+m.Table)
	}
	return strings.Join(parts, "; ")
}

// newCluster starts an embedded etcd; each Client(t) of it is another
// worker's connection.
func newCluster(t *testing.T) *etcdtest.Cluster {
	t.Helper()
	return etcdtest.Start(t)
}
