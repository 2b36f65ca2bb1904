package check

import (
	"context"
	"database/sql"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/dmworker/dm-worker/pkg/filter"
	"github.com/dmworker/dm-worker/pkg/sqlschema"
)

// listMax is how many names a message lists before it says how many more.
const listMax = 10

// table is one selected source table, or one target table.
type table struct {
	schema, name string
	columns      []column // in order, generated columns left out
	keyed        bool     // has a primary key or a unique key on NOT NULL columns
	// autoKey is the AUTO_INCREMENT column when it is in the row key
	// ("" for none): shards merged into one table collide on it.
	autoKey string
}

func (t *table) String() string { return filter.TableName{Schema: t.schema, Table: t.name}.String() }

// column is a stored column: its name and its type in a comparable form.
type column struct {
	name, typ string
}

// readTables returns the selected base tables of the source (c.selected)
// with their columns and whether they have a key, sorted by name.
func (c *run) readTables(ctx context.Context, db *sql.DB) ([]*table, error) {
	byName := map[[2]string]*table{}
	var out []*table
	var schemas []string
	err := sqlschema.ScanAll(ctx, db, "SELECT TABLE_SCHEMA, TABLE_NAME FROM information_schema.TABLES "+
		"WHERE TABLE_TYPE = 'BASE TABLE' AND TABLE_SCHEMA NOT IN "+sqlschema.SystemSchemaList(), nil,
		func(rows *sql.Rows) error {
			var schema, name string
			if err := rows.Scan(&schema, &name); err != nil {
				return err
			}
			if c.selected(schema, name) {
				t := &table{schema: schema, name: name}
				byName[[2]string{schema, name}] = t
				out = append(out, t)
				if !slices.Contains(schemas, schema) {
					schemas = append(schemas, schema)
				}
			}
			return nil
		})
	if err != nil || len(out) == 0 {
		return out, err
	}
	err = readColumns(ctx, db, schemas, func(m *sqlschema.Table, cols []column) {
		if t := byName[[2]string{m.Schema, m.Name}]; t != nil {
			// A key: the primary key or a unique key none of whose
			// columns may be NULL.
			t.columns, t.keyed = cols, m.Keyed()
			if m.Keyed() {
				for _, i := range m.RowKey {
					if m.Columns[i].AutoIncrement {
						t.autoKey = m.Columns[i].Name
					}
				}
			}
		}
	})
	if err != nil {
		return nil, err
	}
	slices.SortFunc(out, func(a, b *table) int { return strings.Compare(a.String(), b.String()) })
	return out, nil
}

// readColumns reads the model of every table and view of schemas and calls
// fn with each and its stored columns in order (generated ones left out,
// types normalised).
func readColumns(ctx context.Context, db *sql.DB, schemas []string, fn func(m *sqlschema.Table, cols []column)) error {
	models, err := sqlschema.ReadSchemas(ctx, db, schemas...)
	if err != nil {
		return err
	}
	for _, m := range models {
		cols := make([]column, 0, len(m.Columns))
		for _, col := range m.Columns {
			if !col.Generated {
				cols = append(cols, column{name: col.Name, typ: normalizeType(col.ColumnType)})
			}
		}
		fn(m, cols)
	}
	return nil
}

// displayWidth is the display width of integer types, which MySQL 8 no
// longer prints and which does not change what a column holds.
var displayWidth = regexp.MustCompile(`^(tinyint|smallint|mediumint|int|integer|bigint|year)\(\d+\)`)

func normalizeType(t string) string {
	return displayWidth.ReplaceAllString(strings.ToLower(strings.TrimSpace(t)), "$1")
}

// checkSelected checks the selected tables: that there are some, SELECT on
// them (modes that dump) and that they have keys.
func (c *run) checkSelected(s *server, tables []*table, g *grants, l *items) {
	id := c.src.SourceID
	if len(tables) == 0 {
		l.warn("source_tables", s.what, "check block-allow-list in the task file, and that the source user has SELECT on the tables",
			"no table of source %s matches the block-allow list of task %s (or the source user cannot see them)", id, c.cfg.Name)
	} else {
		l.pass("source_tables", s.what, "%d table(s) of source %s match the block-allow list", len(tables), id)
	}
	if c.dumps() && g != nil {
		c.checkSelect(s, tables, g, l)
	}
	var keyless []string
	for _, t := range tables {
		if !t.keyed {
			keyless = append(keyless, t.String())
		}
	}
	if len(keyless) == 0 {
		if len(tables) > 0 {
			l.pass("table_keys", s.what, "every selected table of source %s has a primary or NOT NULL unique key", id)
		}
		return
	}
	l.warn("table_keys", s.what, "add a PRIMARY KEY (or a UNIQUE key on NOT NULL columns) to these tables",
		"%d selected table(s) of source %s have no primary key and no unique key on NOT NULL columns: %s; the dump reads each of them as one chunk and sync finds their rows by every column (slower, and identical rows cannot be told apart)",
		len(keyless), id, capList(keyless, listMax))
}

// checkSelect checks that the source user may read every selected table.
func (c *run) checkSelect(s *server, tables []*table, g *grants, l *items) {
	id := c.src.SourceID
	if g.global("SELECT") {
		l.pass("privilege_select", s.what, "source user %s has SELECT on *.*", g.user)
		return
	}
	if len(tables) == 0 {
		l.fail("privilege_select", s.what, fmt.Sprintf("GRANT SELECT ON *.* TO %s (or on each selected schema)", g.user),
			"source user %s has no SELECT on *.* and sees no selected table of source %s; the dump reads them with SELECT", g.user, id)
		return
	}
	var missing, fixes []string
	seen := map[string]bool{}
	for _, t := range tables {
		if g.onTable("SELECT", t.schema, t.name) {
			continue
		}
		missing = append(missing, t.String())
		if !seen[t.schema] {
			seen[t.schema] = true
			fixes = append(fixes, fmt.Sprintf("GRANT SELECT ON %s.* TO %s", sqlschema.QuoteName(t.schema), g.user))
		}
	}
	if len(missing) == 0 {
		l.pass("privilege_select", s.what, "source user %s has SELECT on the %d selected table(s)", g.user, len(tables))
		return
	}
	l.fail("privilege_select", s.what, capJoin(fixes, 5, "; ")+" (or GRANT SELECT ON *.*)",
		"source user %s lacks SELECT on %d selected table(s) of source %s, which the dump reads: %s", g.user, len(missing), id, capList(missing, listMax))
}
