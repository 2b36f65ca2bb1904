package syncer

import (
	"fmt"

	"github.com/pingcap/tidb/pkg/parser/ast"

	"github.com/dmworker/dm-worker/pkg/extendcol"
	"github.com/dmworker/dm-worker/pkg/filter"
)

// Extend columns (DM's extend-column) in the sync unit: row changes get
// them through pkg/rowimage (the Table of a shard appends them and keys
// rows by them); DDL gets them here. A shard's CREATE TABLE creates the
// merged table with the extend columns, every primary and unique key
// extended by them (extendcol.AddToCreate), as the load unit creates it,
// so the merged table is the same whichever unit creates it first. Keys
// a shard adds later (ALTER TABLE ... ADD PRIMARY KEY / UNIQUE, CREATE
// UNIQUE INDEX) are extended the same way. Other DDL is routed unchanged.

// extendDDL adds the extend columns of src's route rule to node, a
// statement about source table src; it reports whether it changed node.
func (x *ddlTranslator) extendDDL(node ast.StmtNode, src tableName) (bool, error) {
	ext, err := x.router.Extend(src.Schema, src.Table)
	if err != nil || len(ext) == 0 {
		return false, err
	}
	switch n := node.(type) {
	case *ast.CreateTableStmt:
		if err := extendcol.AddToCreate(x.parser, n, ext); err != nil {
			return false, fmt.Errorf("table %s: %w", src, err)
		}
		return true, nil
	case *ast.AlterTableStmt:
		changed := false
		for _, spec := range n.Specs {
			if spec.Tp == ast.AlterTableAddConstraint && spec.Constraint != nil && uniqueConstraint(spec.Constraint.Tp) {
				spec.Constraint.Keys = appendExtendParts(spec.Constraint.Keys, ext)
				changed = true
			}
		}
		return changed, nil
	case *ast.CreateIndexStmt:
		if n.KeyType == ast.IndexKeyTypeUnique {
			n.IndexPartSpecifications = appendExtendParts(n.IndexPartSpecifications, ext)
			return true, nil
		}
	}
	return false, nil
}

func uniqueConstraint(tp ast.ConstraintType) bool {
	switch tp {
	case ast.ConstraintPrimaryKey, ast.ConstraintUniq, ast.ConstraintUniqKey, ast.ConstraintUniqIndex:
		return true
	}
	return false
}

// appendExtendParts appends the extend columns to a key's parts.
func appendExtendParts(parts []*ast.IndexPartSpecification, ext []filter.ExtendColumn) []*ast.IndexPartSpecification {
	for _, c := range ext {
		parts = append(parts, &ast.IndexPartSpecification{Column: &ast.ColumnName{Name: ast.NewCIStr(c.Name)}, Length: -1})
	}
	return parts
}
