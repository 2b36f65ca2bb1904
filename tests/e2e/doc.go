// Package e2e tests the dm-worker and dmctl binaries end to end, as an
// operator uses them: its TestMain builds both binaries once, and the tests
// start dm-worker processes on free loopback ports beside an embedded etcd
// (tests/etcdtest) or the worker's own --embed-etcd, drive them with dmctl,
// read their HTTP API and signal them.
//
// It owns only the processes, ports, files and etcd servers it starts: every
// process runs in its own process group with Pdeathsig, is killed in its
// test's Cleanup, and the Cleanup checks that nothing of it is left. It
// never talks to an etcd or MariaDB it did not start.
package e2e
