// Package worker is the dm-worker process's control plane and the home of
// everything that runs through stages on it. It owns:
//
//   - registration and the keepalive lease (server.go), status publishing
//     and the worker status (server_status.go), the optional scheduler of
//     bindings (server_scheduler.go, worker/scheduler), and the bound
//     source's SourceWorker (bound_reconcile.go, source_worker.go),
//     restarted when the binding or the source config changes and killed
//     at once when the lease is lost;
//   - the watch loops over etcd keys (watch.go) and the work queue they feed,
//     drained by one reconcile runner into one Reconciler per kind of key
//     (reconcile.go): subtasks and validators (subtask_reconcile.go, their
//     set in subtask_set.go), stream tasks (stream_reconcile.go) and the
//     relay (relay_reconcile.go); subtasks and streams are kept in a
//     localSet (local_set.go), which the shutdown sweep seals;
//   - the stage machine shared by everything with a stage (lifecycle.go),
//     the one driver from an expected stage in etcd to it (stage_drive.go),
//     and the one supervisor primitive every holder runs its goroutine in,
//     supervise.Work (pkg/supervise; the lifecycle glue in lifecycle_work.go):
//     the SubTask running its pipeline of units
//     (subtask.go, subtask_lifecycle.go, subtask_supervisor.go) and its
//     validator (subtask_validator.go), the StreamHolder of a stream task
//     (stream_holder.go, built by stream_runtime.go) and the FileRelay
//     holder (file_relay.go, behind the RelayHolder interface of
//     relay_holder.go; relay_await.go lets readers wait for it);
//   - auto-resume of work paused by resumable errors (checker.go), status
//     (source_status.go, server_status.go), metrics (metrics.go), the HTTP
//     API (http.go, http_guard.go, openapi.go, openapi.yaml) and the error
//     codes it reports (codes.go); the unit factory of a source (units.go),
//     password resolution (secrets.go), config warnings (config_notes.go)
//     and the injected clock (clock.go).
//
// Everything a SourceWorker runs — subtask pipelines, stream tasks, the
// relay's pull — runs under a context the SourceWorker owns: its stop
// seals the sets, stops what they hold (subtasks and streams before the
// relay they read from), ends that context and waits.
//
// It does not own the data plane: units live in unit/ (the sync unit in
// unit/syncer), the relay's files in relay/, stream tasks in stream/, the
// etcd contract in ha/. DESIGN.md §3 (keys), §5 (stages) and §6 (status,
// HTTP API) are the contract this package implements; docs/design.md maps
// its files.
package worker
