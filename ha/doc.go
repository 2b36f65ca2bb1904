// Package ha implements the etcd contract of DESIGN.md §3: typed
// put/get/delete/watch for every key kind under the cluster prefix, the
// worker keepalive lease, and one generic revision-resuming watch loop that
// every key kind uses.
//
// It owns key names and value encodings. It must not hold data-plane state
// or decide what a worker does with what it reads.
package ha
