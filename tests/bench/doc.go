//go:build bench

// Package bench holds dm-worker's end-to-end benchmarks, run by `make bench` (build tag bench,
// so `make test` never compiles them):
//
//   - TestRelayThroughput: the relay pulling a pre-generated binlog of BENCH_RELAY_MB MiB
//     (default 512) into a relay directory, against `mariadb-binlog --read-from-remote-server
//     --raw` on the same files;
//   - TestSyncCatchUp: the sync unit (incremental, worker-count 16, batch 100) catching up a
//     backlog of BENCH_SYNC_ROWS row changes (default 1000000), against native MariaDB
//     replication of the same binlog, single-threaded and with slave_parallel_threads=4;
//   - TestSyncBlackBox: the same comparison as a new user would run it: real sysbench
//     oltp_write_only (4 tables of 50k rows, 4 threads, 30 s), a real dm-worker process whose
//     task is written into etcd as minimal JSON with default syncer settings, each replicator
//     timed from its start until a marker row written last is on its target and every table's
//     CHECKSUM TABLE equals the source's (sync_blackbox_test.go);
//   - TestRelayLargeTxnMemory: the relay's peak RSS pulling one transaction of ~512 MiB and rows
//     of 48 MiB (relay_memory_test.go);
//   - TestWorkerIdleMemory and TestManyIdleSubtasksMemory: the RSS of an idle bound worker and of
//     one worker running BENCH_IDLE_TASKS idle subtasks (default 200 and 1000; memory_test.go);
//   - TestStreamCatchUp: a file-sink stream task (debezium) run by a real dm-worker process
//     catching up the same kind of backlog, against `mariadb-binlog --verbose
//     --base64-output=decode-rows` decoding its binlog files to text and against the sync unit
//     on the same backlog (worker_test.go starts the worker and drives it with dmctl);
//   - TestFullDumpLoad: a task in mode full (dump + load) copying BENCH_FULL_ROWS sysbench rows
//     (default 1000000 in 8 tables) into an empty target, against `mariadb-dump
//     --single-transaction | mariadb` and `mydumper` + `myloader` (4 threads each), completion
//     measured by the target's COUNT(*) and CHECKSUM TABLE (dumpload_*_test.go);
//   - TestShardMergeCatchUp: real dm-worker processes (task in etcd) catching up a backlog of
//     BENCH_SHARD_ROWS row changes (default 300000) on 8 shard tables merged into one target
//     table with shard-mode pessimistic, against the same backlog into 8 target tables; and
//     TestShardDDLLatency: the time from the last shard's ALTER to the DDL on the merged table
//     over BENCH_SHARD_LOCKS locks (default 20; shard_test.go);
//   - TestStageToAction: worker's BenchmarkStageToAction, run through `go test -bench`.
//
// Each benchmark logs one "BENCH ..." result line and appends one row to the results file
// (BENCH_RESULTS, default results.tsv in this directory). Our side of each comparison runs in a
// child process (this test binary re-executed, see child_test.go) so that its peak RSS and CPU
// time are its own, as they are for mariadb-binlog; native replication runs inside the target
// mariadbd, whose peak RSS is reported instead. A stream runs in the dm-worker binary, whose
// peak RSS (VmHWM) and CPU time are read from /proc before it is stopped.
//
// The package owns only the MariaDB instances, directories and child processes it starts; it
// never connects to a server it did not start and sends traffic only over loopback.
package bench
