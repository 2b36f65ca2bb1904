// Package worker is the dm-worker process's control plane and the home of
// everything that runs through stages on it. It owns:
//
//   - registration and the keepalive lease (Server), and the bound source's
//     SourceWorker, restarted when the binding or the source config changes
//     and killed at once when the lease is lost;
//   - the watch loops over etcd keys (watch.go) and the work queue they feed,
//     drained by one reconcile runner into one Reconciler per kind of key
//     (reconcile.go): the bound source (bound_reconcile.go), subtasks and
//     validators (subtask_reconcile.go, subtask_set.go) and the relay
//     (relay_reconcile.go);
//   - the lifecycle shared by everything with a stage (lifecycle.go): the
//     SubTask running its pipeline of units (subtask*.go) and the FileRelay
//     holder (file_relay.go, behind the RelayHolder interface);
//   - auto-resume of work paused by resumable errors (checker.go), status
//     (source_status.go, server_status.go), metrics, the HTTP API (http.go,
//     http_guard.go, openapi.yaml) and the error codes it reports (codes.go).
//
// It does not own the data plane: units live in unit/ (the sync unit in
// unit/syncer), the relay's files in relay/, the etcd contract in ha/.
// DESIGN.md §3 (keys), §5 (stages) and §6 (status, HTTP API) are the
// contract this package implements; docs/design.md maps its files.
package worker
