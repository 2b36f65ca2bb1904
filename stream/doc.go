// Package stream runs change-data-capture stream tasks (DESIGN.md §4, §5):
// per-source feeds that turn the source's row changes into JSON change
// events on a sink (file, webhook, NATS JetStream, Kafka), optionally
// preceded by a snapshot of the rows that already exist (fill-history).
//
// Its parts:
//   - Event and the Encoder (event.go, encode*.go): row changes and DDL as
//     §4 change events, debezium or canal-json, every column type encoded
//     as §4 says; the SchemaCache (schema.go) caches each table's
//     sqlschema model (columns and row key) read from the source;
//   - Sink (sink.go and sink_*.go): one small type per sink behind one
//     interface — probe, write a batch and return once acknowledged, close;
//   - Meta (meta.go): the local meta store (bbolt) of every deployed stream
//     task of the bound source: config, deploy revision, state, checkpoint;
//   - the fill-history snapshot (snapshot.go): the selected tables read in
//     primary-key order in chunks at one consistent point whose binlog
//     location streaming starts from;
//   - Task (task.go): one stream task's run: checking → fill-history →
//     streaming, checkpointing after the sink acknowledged.
//   - online schema changes (onlineddl.go): with online-ddl, no events of
//     gh-ost's and pt-osc's shadow and trash tables, and one DDL event of
//     the real table at the cut-over; the shadow's recorded DDLs travel
//     in the checkpoint.
//
// The worker (worker/stream_*.go) deploys tasks from etcd, drives their
// stages through the shared lifecycle and reports their status.
package stream
