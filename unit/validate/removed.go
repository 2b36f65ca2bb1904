package validate

import (
	"github.com/pingcap/tidb/pkg/parser"
	"github.com/pingcap/tidb/pkg/parser/ast"

	"github.com/dmworker/dm-worker/pkg/filter"
	"github.com/dmworker/dm-worker/pkg/onlineddl"
)

// rowsRemovedBy names the tables (schema-qualified with the event's default
// schema) whose rows a DDL statement removes or moves away: TRUNCATE TABLE,
// DROP TABLE and the old names of RENAME TABLE; and the databases DROP
// DATABASE removes. A query that does not parse removes nothing. Only the
// validator asks this (to drop the pending checks of those rows), so it
// lives here rather than in the sync unit.
//
// With online-ddl on (osc not nil), a real table renamed to a shadow or
// trash table (`RENAME TABLE t TO _t_del, _t_gho TO t`, gh-ost's and
// pt-osc's cut-over, in one statement or two) keeps its rows: the sync
// unit renames nothing on the target, where t stays t and gets the
// shadow's DDLs, so the pending checks of t's rows still hold.
func rowsRemovedBy(schema, query string, osc *onlineddl.Rules) (tables []filter.TableName, dbs []string) {
	nodes, _, err := parser.New().Parse(query, "", "")
	if err != nil {
		return nil, nil
	}
	qualify := func(t *ast.TableName) filter.TableName {
		db := t.Schema.O
		if db == "" {
			db = schema
		}
		return filter.TableName{Schema: db, Table: t.Name.O}
	}
	for _, n := range nodes {
		switch n := n.(type) {
		case *ast.TruncateTableStmt:
			tables = append(tables, qualify(n.Table))
		case *ast.DropTableStmt:
			if n.IsView {
				continue
			}
			for _, t := range n.Tables {
				tables = append(tables, qualify(t))
			}
		case *ast.RenameTableStmt:
			for _, tt := range n.TableToTables {
				if osc != nil && !osc.Online(tt.OldTable.Name.O) && osc.Online(tt.NewTable.Name.O) {
					continue
				}
				tables = append(tables, qualify(tt.OldTable))
			}
		case *ast.DropDatabaseStmt:
			dbs = append(dbs, n.Name.O)
		}
	}
	return tables, dbs
}
