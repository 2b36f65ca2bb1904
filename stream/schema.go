package stream

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
)

// ErrTableNotFound is wrapped by SchemaCache.Table when the source has no
// such table (dropped, renamed, or not visible to the source user).
var ErrTableNotFound = errors.New("stream: table not found on the source")

// Column of a source table as information_schema describes it. Build one
// with NewColumn, which derives Unsigned, Elems, Scale and Length from
// ColumnType.
type Column struct {
	Name string
	// DataType is information_schema.COLUMNS.DATA_TYPE in lower case:
	// "int", "decimal", "datetime", "enum", "json", "blob", "bit", ...
	DataType string
	// ColumnType is COLUMN_TYPE, e.g. "int(10) unsigned", "enum('a','b')".
	ColumnType string
	Unsigned   bool
	// Elems are the ENUM / SET members in order (from ColumnType).
	Elems    []string
	Nullable bool
	// Charset is CHARACTER_SET_NAME ("" for non-text columns); the binlog
	// carries text in this charset and the encoder turns it into UTF-8.
	Charset string
	// Scale is the DECIMAL scale or the fractional-second digits of a
	// DATETIME, TIMESTAMP or TIME column (from ColumnType).
	Scale int
	// Length is the declared length of a BINARY(n) column, to which the
	// binlog's right-trimmed value is padded back with 0x00 bytes.
	Length int
}

// NewColumn builds a Column from information_schema's COLUMN_NAME,
// DATA_TYPE, COLUMN_TYPE, CHARACTER_SET_NAME and IS_NULLABLE.
func NewColumn(name, dataType, columnType, charset string, nullable bool) (Column, error) {
	c := Column{
		Name:       name,
		DataType:   strings.ToLower(dataType),
		ColumnType: columnType,
		Nullable:   nullable,
		Charset:    strings.ToLower(charset),
		Unsigned:   strings.Contains(strings.ToLower(columnType), "unsigned"),
	}
	args := columnTypeArgs(columnType)
	switch c.DataType {
	case "enum", "set":
		elems, err := parseElems(args)
		if err != nil {
			return Column{}, fmt.Errorf("stream: column %s: %w", name, err)
		}
		c.Elems = elems
	case "decimal", "numeric":
		if _, scale, ok := strings.Cut(args, ","); ok {
			c.Scale = columnAtoi(scale)
		}
	case "datetime", "timestamp", "time":
		c.Scale = columnAtoi(args)
	case "binary":
		c.Length = columnAtoi(args)
		if args == "" {
			c.Length = 1 // BINARY means BINARY(1)
		}
	}
	return c, nil
}

// typeArgs returns what is between the first "(" of a COLUMN_TYPE and its
// matching ")" ("" when there is none), e.g. "40,10" of "decimal(40,10)".
func columnTypeArgs(columnType string) string {
	open := strings.IndexByte(columnType, '(')
	end := strings.LastIndexByte(columnType, ')')
	if open < 0 || end < open {
		return ""
	}
	return columnType[open+1 : end]
}

func columnAtoi(s string) int {
	n, err := strconv.Atoi(strings.TrimSpace(s))
	if err != nil {
		return 0
	}
	return n
}

// parseElems parses the member list of an ENUM or SET COLUMN_TYPE: quoted
// members separated by commas, a quote inside a member doubled (MariaDB
// also accepts a backslash escape there); a member may hold commas.
func parseElems(list string) ([]string, error) {
	var elems []string
	for i := 0; i < len(list); {
		if list[i] != '\'' {
			return nil, fmt.Errorf("member list %q: expected a quote at offset %d", list, i)
		}
		var b strings.Builder
		i++
		for {
			if i >= len(list) {
				return nil, fmt.Errorf("member list %q: unterminated member", list)
			}
			ch := list[i]
			if ch == '\\' && i+1 < len(list) {
				b.WriteByte(list[i+1])
				i += 2
				continue
			}
			if ch == '\'' {
				if i+1 < len(list) && list[i+1] == '\'' {
					b.WriteByte('\'')
					i += 2
					continue
				}
				i++
				break
			}
			b.WriteByte(ch)
			i++
		}
		elems = append(elems, b.String())
		if i < len(list) {
			if list[i] != ',' {
				return nil, fmt.Errorf("member list %q: expected a comma at offset %d", list, i)
			}
			i++
		}
	}
	return elems, nil
}

// TableSchema is a source table's columns (in ordinal order) and key.
type TableSchema struct {
	DB, Table string
	Columns   []Column
	// Key holds indexes into Columns: the PRIMARY KEY, else the first
	// UNIQUE key whose columns are all NOT NULL, else all columns.
	Key   []int
	HasPK bool
	// KeyName is the index Key comes from: "PRIMARY", the unique key's
	// name, or "" when Key is all columns.
	KeyName string
}

// KeyColumns returns the names of the key columns in key order.
func (s *TableSchema) KeyColumns() []string {
	names := make([]string, len(s.Key))
	for i, k := range s.Key {
		names[i] = s.Columns[k].Name
	}
	return names
}

// String names the table as db.table.
func (s *TableSchema) String() string { return s.DB + "." + s.Table }

// SchemaCache reads TableSchema from the source (information_schema over
// a *sql.DB) and caches it. Call Invalidate after a DDL of the table. Its
// methods may be called from several goroutines.
type SchemaCache struct {
	db *sql.DB

	mu     sync.Mutex
	tables map[schemaTableName]*TableSchema // guarded by mu
	// gen counts Invalidate calls, so that a read that overlapped one is
	// not cached (it may predate the DDL). Guarded by mu.
	gen uint64
}

type schemaTableName struct{ db, table string }

// NewSchemaCache returns an empty cache reading from db.
func NewSchemaCache(db *sql.DB) *SchemaCache {
	return &SchemaCache{db: db, tables: make(map[schemaTableName]*TableSchema)}
}

// Table returns the schema of db.table, reading it from the source when it
// is not cached. The returned schema must not be modified. A missing table
// is an error wrapping ErrTableNotFound.
func (c *SchemaCache) Table(ctx context.Context, db, table string) (*TableSchema, error) {
	name := schemaTableName{db, table}
	c.mu.Lock()
	s, ok := c.tables[name]
	gen := c.gen
	c.mu.Unlock()
	if ok {
		return s, nil
	}
	s, err := schemaLoad(ctx, c.db, db, table)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	if c.gen == gen {
		c.tables[name] = s
	}
	c.mu.Unlock()
	return s, nil
}

// Invalidate drops db.table from the cache, or every table of db when
// table is "", so that the next Table reads it again.
func (c *SchemaCache) Invalidate(db, table string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.gen++
	for name := range c.tables {
		if name.db == db && (table == "" || name.table == table) {
			delete(c.tables, name)
		}
	}
}

const columnsQuery = `SELECT COLUMN_NAME, DATA_TYPE, COLUMN_TYPE, IFNULL(CHARACTER_SET_NAME, ''), IS_NULLABLE
FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ? ORDER BY ORDINAL_POSITION`

// keysQuery lists the unique keys in the server's key order (PRIMARY
// first), columns in key order.
const keysQuery = `SELECT INDEX_NAME, COLUMN_NAME
FROM information_schema.STATISTICS WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ? AND NON_UNIQUE = 0`

// loadSchema reads db.table's columns and keys from information_schema.
func schemaLoad(ctx context.Context, conn *sql.DB, db, table string) (*TableSchema, error) {
	s := &TableSchema{DB: db, Table: table}
	if err := schemaQueryRows(ctx, conn, columnsQuery, db, table, func(rows *sql.Rows) error {
		var name, dataType, columnType, charset, nullable string
		if err := rows.Scan(&name, &dataType, &columnType, &charset, &nullable); err != nil {
			return err
		}
		col, err := NewColumn(name, dataType, columnType, charset, nullable == "YES")
		if err != nil {
			return err
		}
		s.Columns = append(s.Columns, col)
		return nil
	}); err != nil {
		return nil, fmt.Errorf("stream: read the columns of %s from the source: %w", s, err)
	}
	if len(s.Columns) == 0 {
		return nil, fmt.Errorf("stream: %s: %w (check that it exists and that the source user may SELECT it)", s, ErrTableNotFound)
	}
	var order []string
	keys := map[string][]string{}
	if err := schemaQueryRows(ctx, conn, keysQuery, db, table, func(rows *sql.Rows) error {
		var index, column string
		if err := rows.Scan(&index, &column); err != nil {
			return err
		}
		if _, seen := keys[index]; !seen {
			order = append(order, index)
		}
		keys[index] = append(keys[index], column)
		return nil
	}); err != nil {
		return nil, fmt.Errorf("stream: read the keys of %s from the source: %w", s, err)
	}
	s.chooseKey(order, keys)
	return s, nil
}

// chooseKey sets Key, KeyName and HasPK from the unique keys (names in
// server order, each with its columns in key order).
func (s *TableSchema) chooseKey(order []string, keys map[string][]string) {
	index := make(map[string]int, len(s.Columns))
	for i, c := range s.Columns {
		index[c.Name] = i
	}
	pick := func(name string) bool {
		var key []int
		for _, col := range keys[name] {
			i, ok := index[col]
			if !ok || (s.Columns[i].Nullable && name != "PRIMARY") {
				return false
			}
			key = append(key, i)
		}
		s.Key, s.KeyName = key, name
		return len(key) > 0
	}
	if _, ok := keys["PRIMARY"]; ok && pick("PRIMARY") {
		s.HasPK = true
		return
	}
	for _, name := range order {
		if name != "PRIMARY" && pick(name) {
			return
		}
	}
	s.Key, s.KeyName = make([]int, len(s.Columns)), ""
	for i := range s.Key {
		s.Key[i] = i
	}
}

// queryRows runs query with the table's db and name and calls each for
// every row.
func schemaQueryRows(ctx context.Context, conn *sql.DB, query, db, table string, each func(*sql.Rows) error) error {
	rows, err := conn.QueryContext(ctx, query, db, table)
	if err != nil {
		return err
	}
	defer func() { _ = rows.Close() }()
	for rows.Next() {
		if err := each(rows); err != nil {
			return err
		}
	}
	return rows.Err()
}
