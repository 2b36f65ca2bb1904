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
//     once; a missing dump, a dump other than the one whose chunks the
//     target already holds, or a dump taken under another block-allow list,
//     case sensitivity or online-ddl setting (dump.Fingerprint) is a
//     non-resumable load-dump error that says to clean the target and
//     restart with `dmctl task start --remove-meta`;
//  2. records load_status(dump_id, finished=0);
//  3. creates each table's routed schema and table (route rules merge
//     tables; the source's SHOW CREATE TABLE with only the name changed, IF
//     NOT EXISTS), unless a filter rule skips the create database / create
//     table event, and compares every target table's stored columns (names
//     in order, types) with the dumped ones: a difference is a
//     non-resumable load-schema error naming the table and the columns.
//     A route rule with extractors (extend columns) creates the merged
//     table with them in every primary and unique key, and an existing
//     one must have them (extend.go); LOAD DATA sets their values. A
//     filter rule that skips a table's inserts leaves its chunks unloaded
//     (but recorded); a rule with action Error stops the load. A table it
//     creates is created without its plain secondary indexes, recorded
//     in load_index first, and gets them with one ALTER TABLE after its
//     last chunk (index.go);
//  4. loads the chunks not yet recorded with loader.pool-size connections,
//     one chunk of each table in turn. Each chunk is one transaction that
//     loads its rows and inserts its load_checkpoint row, so after any
//     crash a chunk is loaded and recorded, or neither. A chunk whose rows
//     do not all go in (keys already in the target: rows there before, or
//     merged tables whose keys overlap) or whose file changed is refused;
//  5. in one transaction marks load_status finished and writes the sync
//     unit's checkpoint at the snapshot (manifest Start) and its safe point
//     at the dump's end (syncmeta.HandOff: mode all syncs from there; after
//     mode full, an incremental task of the same name without meta resumes
//     from there); then removes the
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
// of 125k with a secondary index on k, 194 MB of chunk files in 104 chunks
// of 10k rows, a fresh durable MariaDB 10.11 target with a 1 GiB buffer
// pool per run, on a 2-CPU machine shared with other test runs (load
// average 9 to 18), 3 runs each; CPU is the target server's plus the
// unit's, steadier than the wall time there):
//
//	method, pool-size                 wall (median, best)  rows/s (median)  CPU (median)
//	LOAD DATA, 16                     16.3 s,  9.2 s        61k             12.0 s
//	LOAD DATA, 4                      16.9 s,  6.0 s        59k             10.1 s
//	INSERT, 16                        16.0 s, 12.8 s        63k             15.5 s
//	INSERT, 4                         17.9 s,  6.4 s        56k             13.8 s
//	LOAD DATA, 4, unique_checks=0      9.8 s,  6.3 s       102k              8.8 s
//	LOAD DATA, 4, index k after data   9.0 s,  6.8 s       111k              7.8 s
//
// (an earlier, quieter run: LOAD DATA 9.2 s for both pool sizes, 109k
// rows/s.) The unit's heap stays at 4-6 MiB with LOAD DATA, 15-80 MiB with
// INSERT. LOAD DATA is the method because it costs a quarter less CPU than
// INSERT for the same rows (the server parses no SQL values) and streams
// the file without buffering statements. More connections than the
// target's cores only add contention (pool-size 4 used less CPU than 16 on
// two cores); size loader.pool-size to the target.
//
// unique_checks=0 is not set, although it saved about 13% CPU: it lets
// InnoDB skip the duplicate check of unique secondary indexes, and the unit
// relies on the server refusing duplicate keys (merged shards whose keys
// overlap, rows already in the target), which a dump of one consistent
// snapshot cannot rule out for merged or pre-existing tables. An operator
// who knows the data may set it in target-database.session. (On MariaDB
// 10.11 it also turns a load into an empty table into InnoDB's bulk insert,
// which took twice the CPU on these chunks, whose rows come in key order.)
// Plain secondary indexes of the tables the unit creates are added after
// their rows (index.go: recorded in load_index, so that a crash never
// leaves a table without them), which saved 13-20% of the target's CPU.
// (The wall times of the last two rows are from a quieter stretch of the
// shared machine than the rows above; in an earlier run index-after took
// 9.6 s against 9.2 s without.)
//
// The unit owns its rows in load_checkpoint, load_status and load_index,
// and in mode all the hand-off rows of the sync unit's tables; it never touches rows of
// other tasks or sources.
package load
