// Package shardddl coordinates the shard DDL locks of pessimistic and
// optimistic shard mode (optimistic*.go; its schema rules are
// pkg/shardschema's) through etcd, with no master process: every worker
// runs the same code and every step is one etcd transaction guarded by the
// revisions of exactly the keys its decision was based on, so a step
// decided from a stale read fails and is decided again from a fresh one.
//
// It owns the keys under P/shardddl/ (layout in keys.go and in the project's
// docs/design.md, "Shard DDL coordination") and the rules that turn them into
// a lock's state. It must not touch the target database or the binlog: the
// sync unit executes or skips the DDL the Coordinator tells it to, and dmctl
// lists and unlocks through the same package.
package shardddl
