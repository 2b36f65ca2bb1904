package syncer

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/go-mysql-org/go-mysql/replication"

	"github.com/dmworker/dm-worker/pkg/errs"
	"github.com/dmworker/dm-worker/pkg/filter"
	"github.com/dmworker/dm-worker/pkg/fkeys"
)

// binaryCollation is the collation id of the binary character set.
const binaryCollation = 63

// tableInfo is what the apply path needs to know about one source table:
// its column names in binlog order, how to convert values, and which
// columns identify a row on the target.
type tableInfo struct {
	source, target tableName
	columns        []string
	types          []byte // real binlog column type (ENUM/SET resolved)
	unsigned       []bool
	binary         []bool // string column holding bytes (binary collation)
	// fixed is the byte length of a BINARY(n) column (0 for any other):
	// the binlog strips its trailing 0x00 bytes.
	fixed []int
	// key identifies a row: the primary key or a unique key over NOT NULL
	// columns. Empty: the table has none and rows are matched on all
	// columns.
	key []int
	// uniques are every unique key (key included), the causality keys.
	uniques [][]int
	// compact: a batch's changes of the table may be reduced to each key's
	// end state (see compact.go).
	compact bool
	// fkGroup names the group of target tables foreign keys connect this
	// table's target table to ("" when no key of the target touches it):
	// its changes are applied in binlog order on one worker, with the
	// source session's foreign_key_checks (see foreign_keys.go).
	fkGroup string
	// shape is the table map the info was built from, to notice changes.
	shape *replication.TableMapEvent
}

// targetColumn and targetTable are the target's view of a table, read from
// information_schema when the binlog lacks metadata and for unique keys.
type targetColumn struct {
	name     string
	unsigned bool
	binary   bool
}

type targetIndex struct {
	name     string
	columns  []string
	primary  bool
	nullable bool
}

type targetTable struct {
	exists  bool
	columns []targetColumn
	uniques []targetIndex
}

// tableCache caches table info for the read loop that owns it (not safe for
// concurrent use). DDL clears it.
type tableCache struct {
	db     *sql.DB
	route  *filter.Router
	infos  map[tableName]*tableInfo
	target map[tableName]*targetTable
	// groups are the target's foreign key groups, read with the first
	// table after a DDL; nil until then.
	groups *fkeys.Groups
}

func newTableCache(db *sql.DB, r *filter.Router) *tableCache {
	return &tableCache{db: db, route: r, infos: map[tableName]*tableInfo{}, target: map[tableName]*targetTable{}}
}

// invalidate forgets everything, after a DDL.
func (c *tableCache) invalidate() {
	clear(c.infos)
	clear(c.target)
	c.groups = nil
}

// realType resolves ENUM and SET, which the table map writes as STRING.
func realType(tm *replication.TableMapEvent, i int) byte {
	t := tm.ColumnType[i]
	if t == mysql.MYSQL_TYPE_STRING && tm.ColumnMeta[i] >= 256 {
		if rt := byte(tm.ColumnMeta[i] >> 8); rt == mysql.MYSQL_TYPE_ENUM || rt == mysql.MYSQL_TYPE_SET {
			return rt
		}
	}
	return t
}

func sameShape(a, b *replication.TableMapEvent) bool {
	if a.ColumnCount != b.ColumnCount || !bytes.Equal(a.ColumnType, b.ColumnType) ||
		!slices.Equal(a.ColumnMeta, b.ColumnMeta) || len(a.ColumnName) != len(b.ColumnName) ||
		!slices.Equal(a.PrimaryKey, b.PrimaryKey) {
		return false
	}
	for i := range a.ColumnName {
		if !bytes.Equal(a.ColumnName[i], b.ColumnName[i]) {
			return false
		}
	}
	return true
}

// get returns the info of the table a table map describes.
func (c *tableCache) get(ctx context.Context, tm *replication.TableMapEvent) (*tableInfo, error) {
	src := tableName{Schema: string(tm.Schema), Table: string(tm.Table)}
	if ti, ok := c.infos[src]; ok && (ti.shape == tm || sameShape(ti.shape, tm)) {
		ti.shape = tm
		return ti, nil
	}
	target := c.route.Route(src.Schema, src.Table)
	tt, err := c.targetTable(ctx, target)
	if err != nil {
		return nil, err
	}
	ti, err := buildTableInfo(src, target, tm, tt)
	if err != nil {
		return nil, err
	}
	if err := c.setForeignKeyGroup(ctx, ti); err != nil {
		return nil, err
	}
	c.infos[src] = ti
	return ti, nil
}

// buildTableInfo combines the table map's metadata with the target's.
func buildTableInfo(src, target tableName, tm *replication.TableMapEvent, tt *targetTable) (*tableInfo, error) {
	n := int(tm.ColumnCount)
	names, err := columnNames(src, target, tm, tt)
	if err != nil {
		return nil, err
	}
	ti := &tableInfo{source: src, target: target, shape: tm, columns: names,
		types: make([]byte, n), unsigned: make([]bool, n), binary: make([]bool, n), fixed: make([]int, n)}
	ti.setColumnTypes(tm, tt)
	byName := columnPositions{}
	for i, name := range names {
		byName[strings.ToLower(name)] = i
	}
	ti.setKeys(tm, tt, byName)
	return ti, nil
}

// columnNames are the table's column names in binlog order: from the table
// map when the source writes them (binlog_row_metadata FULL), else from the
// target table, which must then have as many columns.
func columnNames(src, target tableName, tm *replication.TableMapEvent, tt *targetTable) ([]string, error) {
	n := int(tm.ColumnCount)
	names := tm.ColumnNameString()
	if len(names) == n {
		return names, nil
	}
	if !tt.exists || len(tt.columns) != n {
		return nil, errs.New(CodeTableInfo, false,
			"sync: table %s: the binlog has %d columns without names (is binlog_row_metadata FULL on the source?) "+
				"and target table %s has %d columns; create the target table with the same columns",
			src, n, target, len(tt.columns))
	}
	names = make([]string, n)
	for i, col := range tt.columns {
		names[i] = col.name
	}
	return names, nil
}

// setColumnTypes sets each column's real type, signedness and whether it
// holds bytes: from the table map's metadata where the source writes it,
// else from the target's column of the same name, else (binary) from the
// type.
func (ti *tableInfo) setColumnTypes(tm *replication.TableMapEvent, tt *targetTable) {
	tcol := map[string]targetColumn{}
	for _, col := range tt.columns {
		tcol[strings.ToLower(col.name)] = col
	}
	unsigned := tm.UnsignedMap()
	collations := tm.CollationMap()
	for i := range ti.columns {
		ti.types[i] = realType(tm, i)
		tc, known := tcol[strings.ToLower(ti.columns[i])]
		if unsigned != nil {
			ti.unsigned[i] = unsigned[i]
		} else if known {
			ti.unsigned[i] = tc.unsigned
		}
		if coll, ok := collations[i]; ok {
			ti.binary[i] = coll == binaryCollation
		} else if known {
			ti.binary[i] = tc.binary
		} else {
			ti.binary[i] = ti.types[i] == mysql.MYSQL_TYPE_BLOB
		}
		if ti.binary[i] && ti.types[i] == mysql.MYSQL_TYPE_STRING {
			ti.fixed[i] = stringLength(tm.ColumnMeta[i])
		}
	}
}

// stringLength is the byte length of a CHAR/BINARY column from its table
// map metadata (the encoding go-mysql decodes values with).
func stringLength(meta uint16) int {
	if meta < 256 {
		return int(meta)
	}
	b0, b1 := uint8(meta>>8), uint8(meta&0xFF)
	if b0&0x30 != 0x30 {
		return int(uint16(b1) | uint16((b0&0x30)^0x30)<<4)
	}
	return int(b1)
}

// columnPositions maps a lower-cased column name to its binlog position.
type columnPositions map[string]int

// indexes returns the positions of cols, or nil when one is not a column.
func (p columnPositions) indexes(cols []string) []int {
	out := make([]int, 0, len(cols))
	for _, name := range cols {
		i, ok := p[strings.ToLower(name)]
		if !ok {
			return nil
		}
		out = append(out, i)
	}
	return out
}

// setKeys sets the key that identifies a row (the table map's primary key,
// else the target's first unique key over NOT NULL columns), every unique
// key, and whether the table's changes may be compacted.
func (ti *tableInfo) setKeys(tm *replication.TableMapEvent, tt *targetTable, byName columnPositions) {
	if len(tm.PrimaryKey) > 0 {
		for _, k := range tm.PrimaryKey {
			ti.key = append(ti.key, int(k))
		}
	} else {
		for _, idx := range tt.uniques {
			if idx.nullable {
				continue
			}
			if cols := byName.indexes(idx.columns); cols != nil {
				ti.key = cols
				break
			}
		}
	}
	if len(ti.key) > 0 {
		ti.uniques = append(ti.uniques, ti.key)
	}
	var targetUniques [][]int
	for _, idx := range tt.uniques {
		cols := byName.indexes(idx.columns)
		targetUniques = append(targetUniques, cols)
		if cols == nil || slices.Equal(cols, ti.key) {
			continue
		}
		ti.uniques = append(ti.uniques, cols)
	}
	ti.compact = compactable(ti, targetUniques)
}

// targetTable reads (and caches) the target's columns and unique keys.
func (c *tableCache) targetTable(ctx context.Context, t tableName) (*targetTable, error) {
	if tt, ok := c.target[t]; ok {
		return tt, nil
	}
	tt, err := readTargetTable(ctx, c.db, t)
	if err != nil {
		return nil, errs.Wrap(err, CodeTableInfo, "sync: read structure of target table %s", t)
	}
	c.target[t] = tt
	return tt, nil
}

func readTargetTable(ctx context.Context, db *sql.DB, t tableName) (_ *targetTable, err error) {
	tt := &targetTable{}
	rows, err := db.QueryContext(ctx, "SELECT COLUMN_NAME, COLUMN_TYPE, IFNULL(CHARACTER_SET_NAME, ''), DATA_TYPE "+
		"FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ? ORDER BY ORDINAL_POSITION",
		t.Schema, t.Table)
	if err != nil {
		return nil, err
	}
	for rows.Next() {
		var name, colType, charset, dataType string
		if err := rows.Scan(&name, &colType, &charset, &dataType); err != nil {
			return nil, errors.Join(err, rows.Close())
		}
		dataType = strings.ToLower(dataType)
		tt.columns = append(tt.columns, targetColumn{
			name:     name,
			unsigned: strings.Contains(strings.ToLower(colType), "unsigned"),
			binary:   charset == "" && (strings.Contains(dataType, "binary") || strings.Contains(dataType, "blob")),
		})
	}
	if err := errors.Join(rows.Err(), rows.Close()); err != nil {
		return nil, err
	}
	tt.exists = len(tt.columns) > 0
	rows, err = db.QueryContext(ctx, "SELECT INDEX_NAME, COLUMN_NAME, NULLABLE FROM information_schema.STATISTICS "+
		"WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ? AND NON_UNIQUE = 0 ORDER BY INDEX_NAME = 'PRIMARY' DESC, INDEX_NAME, SEQ_IN_INDEX",
		t.Schema, t.Table)
	if err != nil {
		return nil, err
	}
	defer func() { err = errors.Join(err, rows.Close()) }()
	for rows.Next() {
		var index, column, nullable string
		if err := rows.Scan(&index, &column, &nullable); err != nil {
			return nil, err
		}
		if len(tt.uniques) == 0 || tt.uniques[len(tt.uniques)-1].name != index {
			tt.uniques = append(tt.uniques, targetIndex{name: index, primary: index == "PRIMARY"})
		}
		last := &tt.uniques[len(tt.uniques)-1]
		last.columns = append(last.columns, column)
		if strings.EqualFold(nullable, "YES") {
			last.nullable = true
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read unique keys: %w", err)
	}
	return tt, nil
}
