// Package dump is the dump unit of a subtask (DESIGN.md §5): it takes one
// consistent snapshot of the selected tables of a MariaDB source, records
// the snapshot's binlog location, and writes every selected table's rows
// into chunk files in the subtask's dump directory in the format of package
// unit/dumpfile, with the manifest written last.
//
// Snapshot: as mydumper does it, a brief FLUSH TABLES WITH READ LOCK on one
// connection while `threads` reader connections each START TRANSACTION WITH
// CONSISTENT SNAPSHOT, the binlog location read under the lock, then UNLOCK
// TABLES; where the lock is refused (no RELOAD privilege) or cannot be had
// within defaultLockWait (a long-running query), one reader connection and
// MariaDB's binlog_snapshot_file/position status instead.
//
// Rows are read with SET NAMES binary and time_zone +00:00 as the stored
// bytes of each column (FLOAT as CAST AS DOUBLE, BIT as CAST AS UNSIGNED,
// YEAR as CAST AS CHAR), in chunks of about mydumper.rows rows split on the
// primary key (or the first unique key of NOT NULL columns), by `threads`
// workers in parallel. go-sql-driver parses integer and DOUBLE fields of
// the text protocol, so their text is Go's (no ZEROFILL padding, "1e+308"
// for MariaDB's "1e308"): the same values, exactly.
//
// With online-ddl on, the shadow and trash tables of gh-ost and
// pt-online-schema-change (config's shadow-table-rules and
// trash-table-rules: `_t_gho`, `_t_new`, `_t_ghc`, `_t_del`, `_t_old`) are
// never dumped, even where the block-allow list selects them, and each is
// logged at Info with the table it belongs to: the sync unit never creates
// them on the target. The rules are part of the fingerprint, so a dump
// taken with online-ddl off is not reused with it on, nor the other way.
//
// DDL on the selected tables while the dump runs is not supported: table
// definitions are read as they are when each table is reached, and a table
// altered after the snapshot began fails its read (ER_TABLE_DEF_CHANGED);
// the dump then starts again from a fresh snapshot on resume.
//
// The package owns the dump directory's contents while it runs (it removes
// its own unfinished files, and refuses a directory holding other files);
// it writes nothing to the target and never touches the load unit's records.
package dump
