// Package load is the load unit of a subtask (task modes full and all): it
// loads the dump the dump unit left in the subtask's dump directory
// (package dumpfile: a manifest and chunk files) into the target, exactly
// once across pauses and crashes, and in mode all hands the source over to
// the sync unit at the dump's snapshot location.
//
// A run (Process or Resume):
//
//  1. reads the manifest and the unit's records in <meta-schema> on the
//     target (tables named by package loadmeta): a finished load returns at
//     once; a missing dump, or a dump other than the one whose chunks the
//     target already holds, is a non-resumable load-dump error that says to
//     clean the target and restart with `dmctl task start --remove-meta`;
//  2. records load_status(dump_id, finished=0);
//  3. creates each table's routed schema and table (route rules merge
//     tables; the source's SHOW CREATE TABLE with only the name changed, IF
//     NOT EXISTS), unless a filter rule skips the create database / create
//     table event, and compares every target table's stored columns (names
//     in order, types) with the dumped ones: a difference is a
//     non-resumable load-schema error naming the table and the columns. A
//     filter rule that skips a table's inserts leaves its chunks unloaded
//     (but recorded); a rule with action Error stops the load;
//  4. loads the chunks not yet recorded with loader.pool-size connections,
//     one chunk of each table in turn. Each chunk is one transaction that
//     loads its rows and inserts its load_checkpoint row, so after any
//     crash a chunk is loaded and recorded, or neither. A chunk whose rows
//     do not all go in (keys already in the target: rows there before, or
//     merged tables whose keys overlap) or whose file changed is refused;
//  5. in one transaction marks load_status finished and, in mode all, writes
//     the sync unit's checkpoint at the snapshot (manifest Start) and its
//     safe point at the dump's end (syncmeta.HandOff); then removes the
//     chunk files and the manifest unless loader.cleanup-dump-file is false.
//
// Rows go in with LOAD DATA LOCAL INFILE streamed from the file through the
// driver's reader handler (CHARACTER SET binary, so the dumped bytes are
// stored unconverted; BIT and YEAR columns through a user variable cast to
// an integer). A target that refuses LOAD DATA LOCAL (local_infile=OFF) gets
// multi-row INSERT statements of at most 1 MiB instead, values as _binary
// literals. Sessions use time_zone '+00:00', sql_mode
// NO_AUTO_VALUE_ON_ZERO,NO_ENGINE_SUBSTITUTION (zero dates load) and
// foreign_key_checks=0. Memory is bounded: files are streamed, never read
// whole.
//
// Measured (TestLoadBenchmark, DM_LOAD_BENCH=1: 1M sysbench rows, 8 tables
// of 125k with a secondary index on k, 194 MB of chunk files in 104
// chunks of 10k rows, a fresh durable MariaDB 10.11 target with a 1 GiB
// buffer pool on the same 2-CPU machine, median of 3):
//
//	BENCH-NUMBERS
//
// LOAD DATA is the default because it is faster than INSERT at the same pool
// size and holds less memory in the worker. unique_checks=0 is not set: it
// lets InnoDB skip the duplicate check of unique secondary indexes, and the
// unit relies on the server refusing duplicate keys (merged shards, rows
// already in the target); it did not measurably help either. Secondary
// indexes are not dropped for the load and added afterwards: the DDL sits
// outside the chunk transactions (a crash between them leaves a table
// without its index unless the unit records and replays it), a target table
// may be shared with other sources' loads or hold the user's rows, and the
// measurement above shows no gain worth that.
//
// The unit owns its rows in load_checkpoint and load_status, and in mode
// all the hand-off rows of the sync unit's tables; it never touches rows of
// other tasks or sources.
package load
