package onlineddl

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// TableName is the meta table of task's records, DM's
// `<meta-schema>`.`<task>_onlineddl` (a task name too long for a table
// name is shortened with a hash of it).
func TableName(task string) string {
	const suffix = "_onlineddl"
	if len(task)+len(suffix) <= 64 {
		return task + suffix
	}
	h := sha256.Sum256([]byte(task))
	return task[:40] + "_" + hex.EncodeToString(h[:6]) + suffix
}

// SQLStore keeps one source's records of a task in the meta schema on the
// target, one row per real table:
//
//	`<meta-schema>`.`<task>_onlineddl` (source, schema_name, real_table,
//	shadow_table, stmts JSON [{"at","sql"}], cut_at, updated_at)
type SQLStore struct {
	db            *sql.DB
	table, source string
}

func quote(s string) string { return "`" + strings.ReplaceAll(s, "`", "``") + "`" }

// NewSQLStore returns the store of source's records of task in schema.
func NewSQLStore(db *sql.DB, schema, task, source string) *SQLStore {
	return &SQLStore{db: db, table: quote(schema) + "." + quote(TableName(task)), source: source}
}

// Prepare creates the table when missing (the meta schema exists).
func (s *SQLStore) Prepare(ctx context.Context) error {
	_, err := s.db.ExecContext(ctx, "CREATE TABLE IF NOT EXISTS "+s.table+` (
  source VARCHAR(128) NOT NULL, schema_name VARCHAR(64) NOT NULL, real_table VARCHAR(64) NOT NULL,
  shadow_table VARCHAR(64) NOT NULL, stmts LONGTEXT NOT NULL, cut_at VARCHAR(300) NOT NULL DEFAULT '',
  updated_at TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP(3) ON UPDATE CURRENT_TIMESTAMP(3),
  PRIMARY KEY (source, schema_name, real_table))`)
	if err != nil {
		return fmt.Errorf("create %s: %w", s.table, err)
	}
	return nil
}

// Load reads the source's records.
func (s *SQLStore) Load(ctx context.Context) (out []Record, err error) {
	rows, err := s.db.QueryContext(ctx, "SELECT schema_name, real_table, shadow_table, stmts, cut_at FROM "+s.table+" WHERE source = ?", s.source)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", s.table, err)
	}
	defer func() { err = errors.Join(err, rows.Close()) }()
	for rows.Next() {
		var r Record
		var stmts string
		if err := rows.Scan(&r.Schema, &r.Real, &r.Shadow, &stmts, &r.CutAt); err != nil {
			return nil, fmt.Errorf("read %s: %w", s.table, err)
		}
		if err := json.Unmarshal([]byte(stmts), &r.Stmts); err != nil {
			return nil, fmt.Errorf("read %s: the record of `%s`.`%s` is damaged (%w); delete its row and replay the tool's ALTER "+
				"on the target by hand at the cut-over", s.table, r.Schema, r.Real, err)
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

// Put writes r.
func (s *SQLStore) Put(ctx context.Context, r Record) error {
	stmts, err := json.Marshal(r.Stmts)
	if err != nil {
		return err
	}
	if r.Stmts == nil {
		stmts = []byte("[]")
	}
	_, err = s.db.ExecContext(ctx, "REPLACE INTO "+s.table+" (source, schema_name, real_table, shadow_table, stmts, cut_at) VALUES (?,?,?,?,?,?)",
		s.source, r.Schema, r.Real, r.Shadow, string(stmts), r.CutAt)
	return err
}

// Delete removes the record of schema.real.
func (s *SQLStore) Delete(ctx context.Context, schema, real string) error {
	_, err := s.db.ExecContext(ctx, "DELETE FROM "+s.table+" WHERE source = ? AND schema_name = ? AND real_table = ?", s.source, schema, real)
	return err
}

// MemStore is a Store in memory, for callers that keep the records in
// their own state (and tests).
type MemStore struct{ Records map[string]Record }

func memKey(schema, real string) string { return schema + "\x00" + real }

// Load returns the records.
func (m *MemStore) Load(context.Context) ([]Record, error) {
	out := make([]Record, 0, len(m.Records))
	for _, r := range m.Records {
		out = append(out, r)
	}
	return out, nil
}

// Put stores r.
func (m *MemStore) Put(_ context.Context, r Record) error {
	if m.Records == nil {
		m.Records = map[string]Record{}
	}
	m.Records[memKey(r.Schema, r.Real)] = r
	return nil
}

// Delete removes a record.
func (m *MemStore) Delete(_ context.Context, schema, real string) error {
	delete(m.Records, memKey(schema, real))
	return nil
}
