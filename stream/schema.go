package stream

import (
	"context"
	"database/sql"
	"fmt"
	"sync"

	"github.com/dmworker/dm-worker/pkg/sqlschema"
)

// ErrTableNotFound is wrapped by SchemaCache.Table when the source has no
// such table (dropped, renamed, or not visible to the source user). It is
// sqlschema.ErrTableNotFound, which the shared reader wraps.
var ErrTableNotFound = sqlschema.ErrTableNotFound

// SchemaCache reads source tables' models (sqlschema.ReadTable over a
// *sql.DB) and caches them. Call Invalidate after a DDL of the table. Its
// methods may be called from several goroutines.
type SchemaCache struct {
	db *sql.DB

	mu     sync.Mutex
	tables map[schemaTableName]*sqlschema.Table // guarded by mu
	// gen counts Invalidate calls, so that a read that overlapped one is
	// not cached (it may predate the DDL). Guarded by mu.
	gen uint64
}

type schemaTableName struct{ db, table string }

// NewSchemaCache returns an empty cache reading from db.
func NewSchemaCache(db *sql.DB) *SchemaCache {
	return &SchemaCache{db: db, tables: make(map[schemaTableName]*sqlschema.Table)}
}

// Table returns the model of db.table, reading it from the source when it
// is not cached. The returned model must not be modified. A missing table
// is an error wrapping ErrTableNotFound.
func (c *SchemaCache) Table(ctx context.Context, db, table string) (*sqlschema.Table, error) {
	name := schemaTableName{db, table}
	c.mu.Lock()
	s, ok := c.tables[name]
	gen := c.gen
	c.mu.Unlock()
	if ok {
		return s, nil
	}
	s, err := sqlschema.ReadTable(ctx, c.db, db, table)
	if err != nil {
		return nil, fmt.Errorf("stream: on the source: %w", err)
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
