package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/dmworker/dm-worker/tests/mariadbtest"
)

// TestMinimalJSONKeysReplicate is the black-box flow of a master other than
// dmctl: it writes each key with a raw put (as etcdctl would) holding only
// the required fields — no checker, purge, syncer, meta-schema, stage
// source/task — and expects the worker to fill in the defaults, run relay
// and the subtask, and replicate every row. A field the worker does not know
// is used around, and shown in status as a config-unknown-field warning.
func TestMinimalJSONKeysReplicate(t *testing.T) {
	src := mariadbtest.Start(t, mariadbtest.Options{Name: "source", Binlog: true})
	r := &replication{t: t, src: src, tgt: mariadbtest.StartTarget(t), c: newEtcdCluster(t)}
	r.srcDB, r.tgtDB = r.src.DB(t), r.tgt.DB(t)
	r.wopts = workerOptions{name: replWorker, endpoints: r.c.endpoints, prefix: r.c.prefix, dataDir: t.TempDir()}
	r.w = startWorker(t, r.wopts)

	file, pos, _ := r.src.MasterStatus(t)
	p := r.c.prefix
	put := func(key, value string) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if _, err := r.c.direct.Put(ctx, p+key, value); err != nil {
			t.Fatalf("put %s: %v", key, err)
		}
	}
	put("/source/config/"+replSource, fmt.Sprintf(
		`{"source-id":%q,"from":{"host":"127.0.0.1","port":%d,"user":"root"},"x-source-extra":true}`, replSource, r.src.Port()))
	put("/source/relay/"+replWorker, fmt.Sprintf(`{"source":%q,"worker":%q}`, replSource, replWorker))
	put("/stage/relay/"+replSource, `{"expect":"Running"}`)
	put("/source/bound/"+replWorker, fmt.Sprintf(`{"source":%q,"worker":%q}`, replSource, replWorker))
	put("/task/config/"+replSource+"/"+replTask, fmt.Sprintf(
		`{"name":%q,"source-id":%q,"task-mode":"incremental","meta":{"binlog-name":%q,"binlog-pos":%d},`+
			`"target-database":{"host":"127.0.0.1","port":%d,"user":"root"},"x-not-a-field":{"deep":1}}`,
		replTask, replSource, file, pos, r.tgt.Port()))
	put("/stage/subtask/"+replSource+"/"+replTask, `{"expect":"Running"}`)

	r.src.Exec(t, "CREATE DATABASE "+crashDB)
	for _, tb := range crashTables {
		r.src.Exec(t, tb.ddl)
	}
	wl := startWorkload(t, r.srcDB, 2)
	r.waitSubtask(30*time.Second, "the subtask syncs", subtaskDoc.syncing)
	wl.waitCommits(t, 30*time.Second, 300)
	if err := wl.stop(); err != nil {
		t.Fatal(err)
	}
	t.Logf("workload: %s", wl)
	r.waitCaughtUp(60 * time.Second)

	r.w.waitStatus(10*time.Second, "status shows the relay running and the unknown task field as a warning", func(st workerStatus) bool {
		return st.Relay.Enabled && st.hasError(replTask, "config-unknown-field") && st.hasError("", "config-unknown-field")
	})
	want := map[string]string{replTask: "x-not-a-field", "": "x-source-extra"}
	for _, e := range r.w.status().Errors {
		if e.Code == "config-unknown-field" && !strings.Contains(e.Message, want[e.Task]) {
			t.Errorf("config-unknown-field message %q (task %q) does not name %q", e.Message, e.Task, want[e.Task])
		}
	}
}
