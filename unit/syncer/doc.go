// Package syncer is the sync unit (DESIGN.md §1, §5): it reads the source's
// binlog (from the relay reader when relay runs for the source, else over a
// replication connection of its own), selects and routes tables (block-allow
// list, route rules, binlog event filters), applies row changes to the target
// in parallel with causality by row key, applies DDL as a barrier, and keeps
// a crash-safe checkpoint in the target's meta schema.
//
// Crash safety: the global checkpoint (tables <meta-schema>.syncer_checkpoint)
// is only ever a transaction boundary all of whose changes every apply worker
// has committed. Every batch a worker commits also records, in the same
// target transaction, the highest binlog location it contains
// (<meta-schema>.syncer_safe_point, one row per worker). After a restart the
// unit resumes at the checkpoint and runs in safe mode (INSERT as REPLACE,
// UPDATE as DELETE + REPLACE) until it has passed the highest recorded
// location, so replaying changes that were already applied is idempotent.
// Workers commit batches inside a source transaction (a large transaction
// is never held whole), so a replay can repeat part of one. Two kinds of
// tables cannot be replayed that way: tables without a key, where REPLACE
// cannot recognise a row, and tables that foreign keys of the target
// connect, where REPLACE cascades. Their changes are ordered on one worker,
// every batch records the last change of each such table it applied
// (<meta-schema>.syncer_table_point), and a restarted run skips exactly the
// changes up to it and applies the rest without safe mode (tablepoint.go).
// A DDL is recorded as pending in the checkpoint before it runs; if the
// process dies before the checkpoint after it, the replayed DDL tolerates
// "already done" errors (duplicate column, table exists...).
//
// The row model (how a row image becomes target values, the row and unique
// keys) is pkg/rowimage's, shared with the validator, built on the target's
// sqlschema models; table.go adds compaction and foreign key groups.
//
// The package owns the sync unit's connections to the source and target and
// its rows in the meta schema. It must not touch relay files (it reads them
// only through binlog.StreamOpener) nor any other unit's state.
package syncer
