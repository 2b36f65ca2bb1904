package shardschema

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/dmworker/dm-worker/pkg/sqlschema"
)

func TestDiff(t *testing.T) {
	id := func() sqlschema.Column { return col(t, "id", "int(11)", "not null") }
	old := table([]sqlschema.Column{id(), col(t, "a", "int(11)"), col(t, "d", "int(11)")}, pk("id"), idx("ia", "a"))
	const tb = "ALTER TABLE `db`.`t``x` "
	cases := []struct {
		name     string
		new      *sqlschema.Table
		want     []string
		conflict string
	}{
		{"nothing", table([]sqlschema.Column{id(), col(t, "a", "int(11)"), col(t, "d", "int(11)")}, pk("id"), idx("ia", "a")), nil, ""},
		{"add after, add first, with default and charset",
			table([]sqlschema.Column{col(t, "f", "int(11)", "not null", "default 0"), id(), col(t, "a", "int(11)"),
				col(t, "v", "varchar(20)", "charset utf8mb4", "default 'it''s'"), col(t, "d", "int(11)")}, pk("id"), idx("ia", "a")),
			[]string{tb + "ADD COLUMN `f` int(11) NOT NULL DEFAULT 0 FIRST",
				tb + "ADD COLUMN `v` varchar(20) CHARACTER SET utf8mb4 NULL DEFAULT 'it''s' AFTER `a`"}, ""},
		{"widen and drop", table([]sqlschema.Column{id(), col(t, "a", "bigint(20)")}, pk("id"), idx("ia", "a")),
			[]string{tb + "MODIFY COLUMN `a` bigint(20) NULL DEFAULT NULL", tb + "DROP COLUMN `d`"}, ""},
		{"index dropped before its column, index added after its column",
			table([]sqlschema.Column{id(), col(t, "d", "int(11)"), col(t, "e", "int(11)", "invisible")}, pk("id"), uniq("ue", "e", "d")),
			[]string{tb + "DROP INDEX `ia`", tb + "ADD COLUMN `e` int(11) NULL DEFAULT NULL INVISIBLE AFTER `d`",
				tb + "DROP COLUMN `a`", tb + "ADD UNIQUE INDEX `ue` (`e`, `d`)"}, ""},
		{"index redefined, primary key changed", table([]sqlschema.Column{id(), col(t, "a", "int(11)"), col(t, "d", "int(11)")}, pk("id", "d"), idx("ia", "a", "d")),
			[]string{tb + "DROP PRIMARY KEY", tb + "DROP INDEX `ia`", tb + "ADD PRIMARY KEY (`id`, `d`)", tb + "ADD INDEX `ia` (`a`, `d`)"}, ""},
		{"generated column added", table([]sqlschema.Column{id(), col(t, "a", "int(11)"), col(t, "d", "int(11)"), col(t, "g", "int(11)", "generated")}, pk("id"), idx("ia", "a")),
			nil, "adding a generated column needs its expression"},
		{"prefix index added", table([]sqlschema.Column{id(), col(t, "a", "int(11)"), col(t, "d", "int(11)")}, pk("id"), idx("ia", "a"),
			sqlschema.Index{Name: "p", Columns: []string{"d"}, Type: "BTREE", Prefix: true}),
			nil, "index `p`: adding an index on column prefixes needs their lengths"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			changes, err := Diff(old, c.new, "db", "t`x")
			if c.conflict != "" {
				if !errors.Is(err, ErrIncompatible) || !strings.Contains(err.Error(), c.conflict) {
					t.Fatalf("Diff = %v, %v; want a conflict saying %q", changes, err, c.conflict)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := Statements(changes); !slices.Equal(got, c.want) {
				t.Errorf("statements\n got %q\nwant %q", got, c.want)
			}
			// Nothing is applied to old; everything to new.
			for _, ch := range changes {
				if ch.AppliedTo(old) {
					t.Errorf("%s reads as applied to the old schema", ch.SQL)
				}
				if !ch.AppliedTo(c.new) {
					t.Errorf("%s reads as not applied to the new schema", ch.SQL)
				}
			}
		})
	}
}

// TestRemaining: an owner that stopped after some statements runs only the
// rest; columns the target has besides (extend columns) stay.
func TestRemaining(t *testing.T) {
	id := func() sqlschema.Column { return col(t, "id", "int(11)", "not null") }
	old := table([]sqlschema.Column{id(), col(t, "a", "int(11)")})
	new := table([]sqlschema.Column{id(), col(t, "a", "int(11)"), col(t, "b", "int(11)"), col(t, "c", "int(11)")}, idx("ib", "b"))
	half := table([]sqlschema.Column{id(), col(t, "a", "int(11)"), col(t, "b", "int(11)"), col(t, "c_source", "varchar(64)")})
	got, err := Remaining(old, new, half, "db", "t")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"ALTER TABLE `db`.`t` ADD COLUMN `c` int(11) NULL DEFAULT NULL AFTER `b`", "ALTER TABLE `db`.`t` ADD INDEX `ib` (`b`)"}
	if !slices.Equal(got, want) {
		t.Errorf("Remaining\n got %q\nwant %q", got, want)
	}
}
