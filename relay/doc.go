// Package relay owns the local binlog relay of one source: the writer that
// pulls the source's binlog over the replication protocol and stores it as
// standard binlog files (readable by mariadb-binlog), the relay meta, crash
// recovery, the Reader through which sync units and stream
// tasks read the relay as a binlog.StreamOpener, and the purger.
//
// Layout under the relay directory:
//
//	server-uuid.index              one subdirectory name per line, oldest first
//	<upstream-id>.000001/          one subdirectory per upstream server, in order
//	    mariadb-bin.000001 ...     the source's binlog files, same names, events byte-for-byte
//	    relay.meta                 JSON: binlog-name, binlog-pos, binlog-gtid of the last
//	                               transaction boundary written (atomic temp+fsync+rename)
//
// The upstream id of a MySQL source is its @@server_uuid. MariaDB has no
// server_uuid; its id is "mariadb-<@@server_id>-<@@gtid_domain_id>". Server
// ids are unique within a replication topology and survive restarts and
// address changes (a VIP moving, a port change), while a failover to another
// server always changes the id; hostname+port would do neither reliably.
//
// Positions inside relay files are the source's positions: a file started at
// the beginning of a source binlog has identical offsets; a file started from a
// GTID set in the middle of a source binlog (first start from
// relay-binlog-gtid, or after a switch of upstream) keeps a constant offset
// delta that the reader derives from the first event's header.
//
// The writer pulls with its own binlog dump reader (dump.go): go-mysql's
// client connects (TLS included) and sends the replica's commands, then
// events are read off the connection straight into reused buffers and
// appended to the file, whole transactions at a time; an event larger than
// flushSize is written as it arrives (passthrough.go), so that memory does
// not grow with the size of events or transactions.
//
// Durability: the writer takes sync points (the file's end after whole
// transactions, and the meta naming it) on a timer, at a rotation and at a
// stop, and one goroutine makes them durable strictly in the order they
// were taken, at most one fsync per Config.SyncInterval (1s) while data
// keeps arriving: fsync of the file (and, for a new file, of the
// directory), then the meta. A rotation does not wait for the finished file's fsync:
// the next file is created and written while the disk works, and the old
// file is closed after its fsync. So the meta only ever names durable data,
// never goes back, and never names file N+1 before file N is durable;
// files after the meta's may be incomplete after a power loss, anywhere in
// them. Recovery therefore checks every file from the meta's to the last:
// a file before the last is whole when it parses to its end and ends with
// the source's own rotate event; the first one that is not is truncated to
// its last complete event group and the files after it are removed, so
// that pulling resumes in it (the source sends the rest again, byte for
// byte). The last file is always truncated to its last complete group.
//
// The package must not touch the worker's etcd state, subtasks or the target
// database: it reads the source over the replication protocol and plain SQL,
// and writes only inside its relay directory.
package relay
