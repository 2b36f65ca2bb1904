package check

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/dmworker/dm-worker/pkg/onlineddl"
	"github.com/dmworker/dm-worker/pkg/sqlschema"
)

// selected reports whether the task replicates table schema.name: the
// block-allow list selects it and, with online-ddl on, it is not a shadow
// or trash table of gh-ost or pt-online-schema-change (those are never
// dumped nor replicated).
func (c *run) selected(schema, name string) bool {
	return c.tables.TableAllowed(schema, name) && !c.osc.Online(name)
}

// shadowTable is a shadow table on the source and the real table it
// belongs to.
type shadowTable struct {
	schema, name, real string
}

// checkOnlineDDL, in the modes that sync with online-ddl on, warns about
// every shadow table of gh-ost or pt-online-schema-change (`_t_gho`,
// `_t_new`) on the source whose real table the task selects: an online
// schema change of that table is in progress, and the DDLs the tool ran
// on the shadow before the task's start location are never seen, so the
// sync unit cannot apply them to the real table at the cut-over (it stops
// with an error there). It passes when there is none.
func (c *run) checkOnlineDDL(ctx context.Context, s *server, l *items) {
	if !c.syncs() || !c.cfg.OnlineDDL {
		return
	}
	if c.oscErr != nil {
		l.fail("online_ddl", s.what, "correct shadow-table-rules and trash-table-rules in the task file", "online-ddl of task %s: %v", c.cfg.Name, c.oscErr)
		return
	}
	shadows, err := query(ctx, func(ctx context.Context) ([]shadowTable, error) { return c.readShadows(ctx, s.db) })
	if err != nil {
		l.warn("online_ddl", s.what, "give the source user SELECT on information_schema of the selected schemas",
			"list the tables of %s: %v; whether an online schema change is in progress on a selected table was not checked", s.what, err)
		return
	}
	for _, sh := range shadows {
		real := sqlschema.QuoteTable(sh.schema, sh.real)
		shadow := sqlschema.QuoteName(sh.name)
		l.warn("online_ddl", sqlschema.QuoteTable(sh.schema, sh.name),
			fmt.Sprintf("wait for the tool to finish and start the task after its cut-over, or stop the tool and drop %s before "+
				"starting the task; otherwise, when the sync unit stops at the cut-over, apply the tool's ALTER to the target's %s by hand "+
				"(the sync unit's error says how to go on)", shadow, real),
			"an online schema change of %s is in progress on source %s (shadow table %s exists: gh-ost or pt-online-schema-change): "+
				"the DDLs the tool ran on %s before the task's start location are not seen by the task, so when the tool cuts over "+
				"(renames %s to %s) the sync unit cannot apply them to %s and stops with an error",
			real, c.src.SourceID, shadow, shadow, shadow, sqlschema.QuoteName(sh.real), real)
	}
	if len(shadows) == 0 {
		l.pass("online_ddl", s.what, "no online schema change is in progress on the selected tables of source %s (no shadow table)", c.src.SourceID)
	}
}

// readShadows lists the source's shadow tables whose real table the
// block-allow list selects, sorted by name.
func (c *run) readShadows(ctx context.Context, db *sql.DB) ([]shadowTable, error) {
	var out []shadowTable
	err := sqlschema.ScanAll(ctx, db, "SELECT TABLE_SCHEMA, TABLE_NAME FROM information_schema.TABLES "+
		"WHERE TABLE_TYPE = 'BASE TABLE' AND TABLE_SCHEMA NOT IN "+sqlschema.SystemSchemaList()+" ORDER BY TABLE_SCHEMA, TABLE_NAME", nil,
		func(rows *sql.Rows) error {
			var sh shadowTable
			if err := rows.Scan(&sh.schema, &sh.name); err != nil {
				return err
			}
			kind, real := c.osc.Classify(sh.name)
			if kind == onlineddl.Shadow && c.tables.TableAllowed(sh.schema, real) {
				sh.real = real
				out = append(out, sh)
			}
			return nil
		})
	return out, err
}
