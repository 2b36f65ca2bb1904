package filter

import (
	"strconv"
	"strings"

	"github.com/pingcap/tidb/pkg/parser/ast"
	"github.com/pingcap/tidb/pkg/parser/format"
	"github.com/pingcap/tidb/pkg/parser/mysql"
	"github.com/pingcap/tidb/pkg/parser/types"

	"github.com/dmworker/dm-worker/pkg/sqlschema"
)

// The finer kinds of DDL DM's binlog event filter names (tidb-tools
// binlog-filter), which a rule may name beside the statement kinds above.
const (
	EvAddColumn              = "add column"
	EvDropColumn             = "drop column"
	EvModifyColumn           = "modify column"
	EvRenameColumn           = "rename column"
	EvRenameIndex            = "rename index"
	EvDropPrimaryKey         = "drop primary key"
	EvDropUniqueKey          = "drop unique key"
	EvAddPrimaryKey          = "add primary key"
	EvModifyDefaultValue     = "modify default value"
	EvModifyConstraint       = "modify constraint"
	EvModifyColumnsOrder     = "modify columns order"
	EvModifyCharset          = "modify charset"
	EvModifyCollation        = "modify collation"
	EvRemoveAutoIncrement    = "remove auto increment"
	EvModifyStorageEngine    = "modify storage engine"
	EvValueRangeDecrease     = "value range decrease"
	EvPrecisionDecrease      = "precision decrease"
	EvAddTablePartition      = "add table partition"
	EvDropTablePartition     = "drop table partition"
	EvTruncateTablePartition = "truncate table partition"
	EvReorganizePartition    = "reorganize table partition"
	EvRebuildPartition       = "rebuild table partition"
	EvCoalescePartition      = "coalesce table partition"
	EvExchangePartition      = "exchange table partition"
	EvAddForeignKey          = "add foreign key"
	EvDropForeignKey         = "drop foreign key"
	EvModifyTableComment     = "modify table comment"
	EvAlterTablePartitioning = "alter table partitioning"
	EvRemovePartitioning     = "remove table partitioning"
	EvIncompatibleDDLChanges = "incompatible ddl changes"
)

// incompatible are the kinds DM's filter classes as incompatible DDL
// changes, which a rule naming "incompatible ddl changes" matches.
var incompatible = map[string]bool{
	EvValueRangeDecrease: true, EvPrecisionDecrease: true, EvModifyColumn: true, EvRenameColumn: true,
	EvRenameIndex: true, EvDropColumn: true, EvDropPrimaryKey: true, EvDropUniqueKey: true,
	EvModifyDefaultValue: true, EvModifyConstraint: true, EvModifyColumnsOrder: true, EvModifyCharset: true,
	EvModifyCollation: true, EvRemoveAutoIncrement: true, EvModifyStorageEngine: true, EvReorganizePartition: true,
	EvRebuildPartition: true, EvCoalescePartition: true, "split table partition": true, EvExchangePartition: true,
	EvAddForeignKey: true, EvDropForeignKey: true, EvDropDatabase: true, EvDropTable: true, EvDropIndex: true,
	EvRenameTable: true, EvTruncateTable: true, EvDropTablePartition: true, EvTruncateTablePartition: true,
	"modify schema charset and collate": true, "modify table charset and collate": true, EvModifyTableComment: true,
	"recover table": true, EvAlterTablePartitioning: true, EvRemovePartitioning: true, EvAddColumn: true,
	"set default value": true, "rebase auto id": true, EvAddPrimaryKey: true, "alter index visibility": true,
	"alter ttl info": true, "alter ttl remove": true, "multi schema change": true,
}

// Incompatible reports whether DM's filter classes event as an
// incompatible DDL change.
func Incompatible(event string) bool { return incompatible[event] }

// OldColumns returns a table's columns and indexes as they are before an
// ALTER TABLE runs (nil when unknown: then a MODIFY or CHANGE COLUMN has no
// finer kind, as in DM when it cannot read the table).
type OldColumns func() *sqlschema.Table

// AlterKinds returns the finer kinds of an ALTER TABLE, one per clause that
// has one, in order: what DM's syncer classifies (AstToDDLEvent; DM keeps
// only the first clause's kind) and the kinds DM lists but never derives
// (add column, add primary key, add or drop foreign key, table comment,
// add or remove partitioning). MODIFY and CHANGE COLUMN compare the new
// definition with the column as old has it, in DM's order: a type change
// (value range decrease, precision decrease, modify column), a removed
// AUTO_INCREMENT, the column leaving the primary key or its unique key, a
// new default, an explicit other charset, a new position, a new name.
func AlterKinds(n *ast.AlterTableStmt, old OldColumns) []string {
	var out []string
	var table *sqlschema.Table
	loaded := false
	for _, spec := range n.Specs {
		switch spec.Tp {
		case ast.AlterTableModifyColumn, ast.AlterTableChangeColumn:
			if !loaded && old != nil {
				table, loaded = old(), true
			}
			if k := modifyKind(spec, table); k != "" {
				out = append(out, k)
			}
		case ast.AlterTableRenameColumn:
			out = append(out, EvRenameColumn)
		case ast.AlterTableRenameIndex:
			out = append(out, EvRenameIndex)
		case ast.AlterTableRenameTable:
			out = append(out, EvRenameTable)
		case ast.AlterTableDropColumn:
			out = append(out, EvDropColumn)
		case ast.AlterTableDropIndex:
			out = append(out, EvDropIndex)
		case ast.AlterTableDropPartition:
			out = append(out, EvDropTablePartition)
		case ast.AlterTableDropPrimaryKey:
			out = append(out, EvDropPrimaryKey)
		case ast.AlterTableTruncatePartition:
			out = append(out, EvTruncateTablePartition)
		case ast.AlterTableAlterColumn:
			out = append(out, EvModifyDefaultValue)
		case ast.AlterTableAddConstraint:
			out = append(out, EvModifyConstraint)
			if spec.Constraint != nil {
				switch spec.Constraint.Tp {
				case ast.ConstraintPrimaryKey:
					out = append(out, EvAddPrimaryKey)
				case ast.ConstraintForeignKey:
					out = append(out, EvAddForeignKey)
				}
			}
		case ast.AlterTableDropForeignKey:
			out = append(out, EvDropForeignKey)
		case ast.AlterTableOption:
			for _, opt := range spec.Options {
				switch opt.Tp {
				case ast.TableOptionCharset:
					out = append(out, EvModifyCharset)
				case ast.TableOptionCollate:
					out = append(out, EvModifyCollation)
				case ast.TableOptionEngine:
					out = append(out, EvModifyStorageEngine)
				case ast.TableOptionComment:
					out = append(out, EvModifyTableComment)
				}
			}
		case ast.AlterTableReorganizePartition:
			out = append(out, EvReorganizePartition)
		case ast.AlterTableRebuildPartition:
			out = append(out, EvRebuildPartition)
		case ast.AlterTableCoalescePartitions:
			out = append(out, EvCoalescePartition)
		case ast.AlterTableExchangePartition:
			out = append(out, EvExchangePartition)
		case ast.AlterTableAddPartitions:
			out = append(out, EvAddTablePartition)
		case ast.AlterTablePartition:
			out = append(out, EvAlterTablePartitioning)
		case ast.AlterTableRemovePartitioning:
			out = append(out, EvRemovePartitioning)
		case ast.AlterTableAddColumns:
			out = append(out, EvAddColumn)
		}
	}
	return out
}

// modifyKind is the kind of a MODIFY or CHANGE COLUMN clause ("" for a
// plain alter table), following DM's handleModifyColumn.
func modifyKind(spec *ast.AlterTableSpec, t *sqlschema.Table) string {
	if t == nil || len(spec.NewColumns) == 0 || spec.NewColumns[0].Tp == nil {
		return ""
	}
	def := spec.NewColumns[0]
	name := def.Name.Name.O
	if spec.Tp == ast.AlterTableChangeColumn && spec.OldColumnName != nil {
		name = spec.OldColumnName.Name.O
	}
	var oc *sqlschema.Column
	for i := range t.Columns {
		if strings.EqualFold(t.Columns[i].Name, name) {
			oc = &t.Columns[i]
		}
	}
	if oc == nil {
		return ""
	}
	if k := typeChangeKind(oc, def.Tp); k != "" {
		return k
	}
	has := func(tp ast.ColumnOptionType) *ast.ColumnOption {
		for _, o := range def.Options {
			if o.Tp == tp {
				return o
			}
		}
		return nil
	}
	switch {
	case oc.AutoIncrement && has(ast.ColumnOptionAutoIncrement) == nil:
		return EvRemoveAutoIncrement
	case inIndex(t, oc.Name, true, false) && has(ast.ColumnOptionPrimaryKey) == nil:
		return EvDropPrimaryKey
	case inIndex(t, oc.Name, false, true) && has(ast.ColumnOptionUniqKey) == nil:
		return EvDropUniqueKey
	case defaultChanged(oc, has(ast.ColumnOptionDefaultValue)):
		return EvModifyDefaultValue
	case def.Tp.GetCharset() != "" && !strings.EqualFold(def.Tp.GetCharset(), oc.Charset) && oc.Charset != "":
		return EvModifyCharset
	case spec.Position != nil && spec.Position.Tp != ast.ColumnPositionNone:
		return EvModifyColumnsOrder
	case !strings.EqualFold(def.Name.Name.O, oc.Name):
		return EvRenameColumn
	}
	return ""
}

// inIndex reports whether column is in the primary key (primary) or is the
// only column of a unique key (unique), as the flags DM reads say.
func inIndex(t *sqlschema.Table, column string, primary, unique bool) bool {
	for _, ix := range t.Indexes {
		isPK := ix.Primary
		switch {
		case primary && isPK:
			for _, c := range ix.Columns {
				if strings.EqualFold(c, column) {
					return true
				}
			}
		case unique && !isPK && ix.Unique && len(ix.Columns) == 1 && strings.EqualFold(ix.Columns[0], column):
			return true
		}
	}
	return false
}

// defaultChanged compares the column's default with the new definition's
// DEFAULT (nil: none given), as text: MariaDB's COLUMN_DEFAULT is an SQL
// expression ('text' quoted, 5, NULL, current_timestamp()).
func defaultChanged(oc *sqlschema.Column, opt *ast.ColumnOption) bool {
	old := ""
	if oc.HasDefault && !strings.EqualFold(oc.Default, "NULL") {
		old = oc.Default
	}
	if opt == nil || opt.Expr == nil {
		return old != ""
	}
	var b strings.Builder
	if err := opt.Expr.Restore(format.NewRestoreCtx(format.RestoreStringSingleQuotes|format.RestoreStringWithoutCharset|format.RestoreKeyWordLowercase, &b)); err != nil {
		return false
	}
	now := b.String()
	if strings.EqualFold(now, "NULL") {
		now = ""
	}
	norm := func(s string) string {
		s = strings.ToLower(strings.TrimSuffix(s, "()"))
		if s == "now" || s == "current_timestamp" {
			return "current_timestamp"
		}
		return s
	}
	return norm(old) != norm(now)
}

// typeByName maps information_schema's DATA_TYPE to the parser's type.
var typeByName = map[string]byte{
	"tinyint": mysql.TypeTiny, "smallint": mysql.TypeShort, "mediumint": mysql.TypeInt24, "int": mysql.TypeLong,
	"bigint": mysql.TypeLonglong, "decimal": mysql.TypeNewDecimal, "float": mysql.TypeFloat, "double": mysql.TypeDouble,
	"bit": mysql.TypeBit, "char": mysql.TypeString, "binary": mysql.TypeString, "varchar": mysql.TypeVarchar,
	"varbinary": mysql.TypeVarchar, "tinytext": mysql.TypeTinyBlob, "tinyblob": mysql.TypeTinyBlob,
	"text": mysql.TypeBlob, "blob": mysql.TypeBlob, "mediumtext": mysql.TypeMediumBlob, "mediumblob": mysql.TypeMediumBlob,
	"longtext": mysql.TypeLongBlob, "longblob": mysql.TypeLongBlob, "enum": mysql.TypeEnum, "set": mysql.TypeSet,
	"date": mysql.TypeDate, "datetime": mysql.TypeDatetime, "timestamp": mysql.TypeTimestamp, "time": mysql.TypeDuration,
	"year": mysql.TypeYear, "json": mysql.TypeJSON,
}

// typeChangeKind is DM's needChangeColumnData: the kind of a type change
// that rewrites or may truncate the column's data ("" when none).
func typeChangeKind(oc *sqlschema.Column, nt *types.FieldType) string {
	ot, ok := typeByName[oc.DataType]
	if !ok {
		return ""
	}
	oflen, odec := typeArgs(oc)
	nflen, ndec := nt.GetFlen(), nt.GetDecimal()
	newUnsigned := mysql.HasUnsignedFlag(nt.GetFlag())
	toggled := newUnsigned != oc.Unsigned
	truncOrToggle := (nflen > 0 && (nflen < oflen || (ndec >= 0 && ndec < odec))) || toggled
	ntp := nt.GetType()
	isInt := func(tp byte) bool {
		return tp == mysql.TypeTiny || tp == mysql.TypeShort || tp == mysql.TypeInt24 || tp == mysql.TypeLong || tp == mysql.TypeLonglong
	}
	isString := func(tp byte) bool {
		switch tp {
		case mysql.TypeVarchar, mysql.TypeString, mysql.TypeVarString, mysql.TypeBlob, mysql.TypeTinyBlob, mysql.TypeMediumBlob, mysql.TypeLongBlob:
			return true
		}
		return false
	}
	if ot == ntp {
		switch {
		case ot == mysql.TypeNewDecimal:
			if (nflen > 0 && nflen != oflen) || (ndec >= 0 && ndec != odec) || toggled {
				return EvPrecisionDecrease
			}
			return ""
		case ot == mysql.TypeEnum || ot == mysql.TypeSet:
			if elemsChanged(oc.Elems, nt.GetElems()) {
				return EvValueRangeDecrease
			}
			return ""
		case isInt(ot):
			if toggled {
				return EvPrecisionDecrease
			}
			return ""
		case ot == mysql.TypeString:
			if strings.HasPrefix(oc.DataType, "binary") && nflen > 0 && nflen != oflen {
				return EvPrecisionDecrease
			}
			return ""
		}
		if truncOrToggle {
			return EvValueRangeDecrease
		}
		return ""
	}
	if (ot == mysql.TypeString && ntp == mysql.TypeVarchar) || (ot == mysql.TypeVarchar && ntp == mysql.TypeString) {
		return EvModifyColumn
	}
	switch {
	case isString(ot) && isString(ntp):
		if truncOrToggle {
			return EvModifyColumn
		}
		return ""
	case isInt(ot) && isInt(ntp):
		ow, _ := mysql.GetDefaultFieldLengthAndDecimal(ot)
		nw, _ := mysql.GetDefaultFieldLengthAndDecimal(ntp)
		if (nw > 0 && nw < ow) || toggled {
			return EvValueRangeDecrease
		}
		return ""
	}
	return EvModifyColumn
}

// typeArgs returns a column's declared length and decimals from its
// COLUMN_TYPE ("varchar(20)": 20, -1; "decimal(10,2)": 10, 2); a type
// without arguments gets the parser's defaults.
func typeArgs(oc *sqlschema.Column) (flen, dec int) {
	flen, dec = mysql.GetDefaultFieldLengthAndDecimal(typeByName[oc.DataType])
	open := strings.IndexByte(oc.ColumnType, '(')
	end := strings.IndexByte(oc.ColumnType, ')')
	if open < 0 || end < open || oc.DataType == "enum" || oc.DataType == "set" {
		return flen, dec
	}
	args := strings.Split(oc.ColumnType[open+1:end], ",")
	flen = atoi(args[0], flen)
	if len(args) > 1 {
		dec = atoi(args[1], dec)
	}
	return flen, dec
}

func atoi(s string, def int) int {
	if n, err := strconv.Atoi(strings.TrimSpace(s)); err == nil && n >= 0 {
		return n
	}
	return def
}

// elemsChanged is TiDB's IsElemsChangedToModifyColumn: an ENUM or SET
// change needs a data change unless it only appends members.
func elemsChanged(old, cur []string) bool {
	if len(cur) < len(old) {
		return true
	}
	for i := range old {
		if old[i] != cur[i] {
			return true
		}
	}
	return false
}
