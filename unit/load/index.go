package load

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"

	"go.uber.org/zap"

	"github.com/pingcap/tidb/pkg/parser"

	"github.com/dmworker/dm-worker/pkg/errs"
	"github.com/dmworker/dm-worker/pkg/filter"
	"github.com/dmworker/dm-worker/pkg/sqlschema"
	"github.com/dmworker/dm-worker/unit/dumpfile"
	"github.com/dmworker/dm-worker/unit/load/loadmeta"
)

// Deferred secondary indexes (myloader's --innodb-optimize-keys): a table
// the unit creates itself is created without its plain secondary indexes
// (KEY, not UNIQUE, FULLTEXT or SPATIAL), and they are added with one
// ALTER TABLE once the table's last chunk is loaded. InnoDB then builds each
// index by sorting the loaded rows instead of inserting every row into it
// in key order as it comes, which costs the target less CPU than the
// load's row-by-row inserts (about a seventh of the target's CPU on the
// sysbench tables, whose one secondary index is on a random column).
//
// Crash safety: the indexes to add are recorded in loadmeta.IndexTable
// before the table is created without them; the record is deleted after
// the ALTER TABLE. A run that finds a record creates the table the same way
// (if it is missing), loads what is left, and adds what the target table
// still lacks (indexes there already, by name, are skipped), so a crash
// before, during or after the ALTER ends with every index there. A table
// that already exists, or whose definition the unit does not rewrite (no
// CREATE TABLE text in the server's own form, foreign keys, partitions,
// extend columns), keeps its indexes as they are. Unique indexes are never
// deferred: the load relies on them to refuse duplicate keys.

// deferredIndex is one secondary index left out of a created table: its
// name and its definition as SHOW CREATE TABLE prints it (`KEY ... (...)`).
type deferredIndex struct {
	Name string `json:"name"`
	Def  string `json:"def"`
}

// tableIndexes is the deferral of one target table during a run.
type tableIndexes struct {
	list []deferredIndex
	// left counts the run's chunks of the table not loaded yet; the worker
	// that loads the last one adds the indexes.
	left atomic.Int64
	// added is set once the ALTER TABLE ran and the record is deleted.
	added atomic.Bool
	// mu is held by the addIndexes of the table.
	mu sync.Mutex
}

var (
	// plainKeyLine is a plain secondary index line of SHOW CREATE TABLE.
	plainKeyLine = regexp.MustCompile("^  KEY (`(?:[^`]|``)+`) \\(`((?:[^`]|``)+)`")
	// autoIncLine is the column line of an AUTO_INCREMENT column.
	autoIncLine = regexp.MustCompile("^  `((?:[^`]|``)+)` .* AUTO_INCREMENT(,| |$)")
)

// splitIndexes returns createSQL (SHOW CREATE TABLE text, starting with
// "CREATE TABLE `name` (") without its deferrable secondary indexes, and
// those indexes; nil when nothing is deferred (no such index, or a table
// whose text the unit does not rewrite: see the comment above).
func splitIndexes(createSQL string) (string, []deferredIndex) {
	lines := strings.Split(createSQL, "\n")
	if len(lines) < 3 || !strings.HasPrefix(lines[0], "CREATE TABLE `") || !strings.HasSuffix(lines[0], " (") {
		return createSQL, nil
	}
	end := -1
	for i := len(lines) - 1; i > 0; i-- {
		if strings.HasPrefix(lines[i], ")") {
			end = i
			break
		}
	}
	if end < 2 || strings.Contains(strings.Join(lines[end:], "\n"), "PARTITION") {
		return createSQL, nil
	}
	autoInc := ""
	for _, l := range lines[1:end] {
		if strings.HasPrefix(l, "  CONSTRAINT ") || strings.Contains(l, " FOREIGN KEY ") {
			return createSQL, nil
		}
		if m := autoIncLine.FindStringSubmatch(l); m != nil {
			autoInc = m[1]
		}
	}
	var kept []string
	var deferred []deferredIndex
	for _, l := range lines[1:end] {
		def := strings.TrimSuffix(strings.TrimSpace(l), ",")
		// An AUTO_INCREMENT column must lead some index: one that it
		// leads stays in the CREATE TABLE.
		if m := plainKeyLine.FindStringSubmatch(l); m != nil && m[2] != autoInc {
			name := strings.ReplaceAll(m[1][1:len(m[1])-1], "``", "`")
			deferred = append(deferred, deferredIndex{Name: name, Def: def})
			continue
		}
		kept = append(kept, "  "+def)
	}
	if len(deferred) == 0 || len(kept) == 0 {
		return createSQL, nil
	}
	out := lines[0] + "\n" + strings.Join(kept, ",\n") + "\n" + strings.Join(lines[end:], "\n")
	return out, deferred
}

// indexRecords reads the deferred indexes recorded for this task and
// source, by target table.
func (s *metaStore) indexRecords(ctx context.Context, db *sql.DB) (map[filter.TableName][]deferredIndex, error) {
	rows, err := db.QueryContext(ctx, "SELECT table_schema, table_name, indexes FROM "+s.table(loadmeta.IndexTable)+
		" WHERE task = ? AND source = ?", s.task, s.source)
	if err != nil {
		return nil, s.readErr(err)
	}
	out := map[filter.TableName][]deferredIndex{}
	for rows.Next() {
		var t filter.TableName
		var list string
		if err := rows.Scan(&t.Schema, &t.Table, &list); err != nil {
			return nil, s.readErr(errors.Join(err, rows.Close()))
		}
		var idx []deferredIndex
		if err := json.Unmarshal([]byte(list), &idx); err != nil {
			return nil, s.readErr(errors.Join(err, rows.Close()))
		}
		out[t] = idx
	}
	if err := errors.Join(rows.Err(), rows.Close()); err != nil {
		return nil, s.readErr(err)
	}
	return out, nil
}

// recordIndexes records the indexes deferred for target.
func (s *metaStore) recordIndexes(ctx context.Context, db *sql.DB, target filter.TableName, idx []deferredIndex) error {
	b, err := json.Marshal(idx)
	if err != nil {
		return errs.New(CodeLoadCheckpoint, false, "load: encode the deferred indexes of %s: %w", target, err)
	}
	if _, err := db.ExecContext(ctx, "INSERT INTO "+s.table(loadmeta.IndexTable)+
		" (task, source, table_schema, table_name, indexes) VALUES (?, ?, ?, ?, ?)"+
		" ON DUPLICATE KEY UPDATE indexes = VALUES(indexes)", s.task, s.source, target.Schema, target.Table, string(b)); err != nil {
		return errs.Wrap(err, CodeLoadCheckpoint, "load: record the deferred indexes of table %s", target)
	}
	return nil
}

// dropIndexRecord deletes the record of target's deferred indexes.
func (s *metaStore) dropIndexRecord(ctx context.Context, db *sql.DB, target filter.TableName) error {
	if _, err := db.ExecContext(ctx, "DELETE FROM "+s.table(loadmeta.IndexTable)+
		" WHERE task = ? AND source = ? AND table_schema = ? AND table_name = ?", s.task, s.source, target.Schema, target.Table); err != nil {
		return errs.Wrap(err, CodeLoadCheckpoint, "load: delete the record of the deferred indexes of table %s", target)
	}
	return nil
}

// addIndexes adds the deferred indexes of plan's target table that it
// does not have yet (by name) in one ALTER TABLE, then deletes their
// record. It does nothing for a table without deferred indexes or once
// done.
func (l *Loader) addIndexes(ctx context.Context, plan *tablePlan) error {
	d := plan.indexes
	if d == nil || d.added.Load() {
		return nil
	}
	d.mu.Lock() // merged tables share d: one ALTER at a time
	defer d.mu.Unlock()
	if d.added.Load() {
		return nil
	}
	have := map[string]bool{}
	err := sqlschema.ScanAll(ctx, l.db, "SELECT DISTINCT INDEX_NAME FROM information_schema.STATISTICS WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ?",
		[]any{plan.target.Schema, plan.target.Table}, func(r *sql.Rows) error {
			var name string
			if err := r.Scan(&name); err != nil {
				return err
			}
			have[strings.ToLower(name)] = true
			return nil
		})
	if err != nil {
		return errs.Wrap(err, CodeLoadSchema, "load: read the indexes of target table %s", plan.target)
	}
	var adds []string
	for _, ix := range d.list {
		if !have[strings.ToLower(ix.Name)] {
			adds = append(adds, "ADD "+ix.Def)
		}
	}
	if len(adds) > 0 {
		q := "ALTER TABLE " + plan.target.String() + " " + strings.Join(adds, ", ")
		if _, err := l.db.ExecContext(ctx, q); err != nil {
			return errs.Wrap(err, CodeLoadSchema, "load: add the secondary indexes of target table %s after its rows (%s)", plan.target, q)
		}
		l.logger.Info("secondary indexes added after the rows", zap.Stringer("table", plan.target), zap.Int("indexes", len(adds)))
	}
	if err := l.store.dropIndexRecord(ctx, l.db, plan.target); err != nil {
		return err
	}
	d.added.Store(true)
	return nil
}

// deferIndexes decides, for every table of m the unit creates, whether its
// target table is created without its plain secondary indexes, records
// that decision before any such table is created, and returns the CREATE
// TABLE text of each table (the dumped one, or the one without those
// indexes). A target recorded by an earlier run keeps its deferral; one
// that exists on the target already never gets one. Merged tables share
// their target's decision.
func (l *Loader) deferIndexes(ctx context.Context, m *dumpfile.Manifest, plans []tablePlan, create []bool) ([]string, error) {
	out := make([]string, len(m.Tables))
	for i := range m.Tables {
		out[i] = m.Tables[i].CreateSQL
	}
	recs, err := l.store.indexRecords(ctx, l.db)
	if err != nil {
		return nil, err
	}
	decided := map[filter.TableName]*tableIndexes{}
	for i := range m.Tables {
		plan := &plans[i]
		if !create[i] || plan.skipRows || len(plan.extend) > 0 {
			continue
		}
		stripped, idx := splitIndexes(m.Tables[i].CreateSQL)
		d, seen := decided[plan.target]
		if !seen {
			switch list, ok := recs[plan.target]; {
			case ok:
				d = &tableIndexes{list: list}
			case len(idx) > 0:
				exists, err := tableExists(ctx, l.db, plan.target)
				if err != nil {
					return nil, err
				}
				if !exists {
					if err := l.store.recordIndexes(ctx, l.db, plan.target, idx); err != nil {
						return nil, err
					}
					d = &tableIndexes{list: idx}
				}
			}
			decided[plan.target] = d
		}
		if d != nil {
			plan.indexes, out[i] = d, stripped
		}
	}
	return out, nil
}

// tableExists reports whether t exists on the target.
func tableExists(ctx context.Context, db *sql.DB, t filter.TableName) (bool, error) {
	var n int
	if err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ?",
		t.Schema, t.Table).Scan(&n); err != nil {
		return false, errs.Wrap(err, CodeLoadSchema, "load: look for target table %s", t)
	}
	return n > 0, nil
}

// addAllIndexes adds the deferred indexes of every plan not added yet (the
// tables none of whose chunks were left to load in this run), on up to
// pool-size connections.
func (l *Loader) addAllIndexes(ctx context.Context, plans []tablePlan) error {
	return l.eachTable(ctx, len(plans), func(ctx context.Context, i int, _ *parser.Parser) error {
		return l.addIndexes(ctx, &plans[i])
	})
}
