package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestDryRun: --dry-run checks files without etcd (the endpoint is closed),
// prints what would be written with passwords masked and warns about DM
// fields without effect; invalid files exit 1 with every problem.
func TestDryRun(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	ep := closedEndpoint(t)
	dmTask := write("dm-task.yaml", strings.Replace(taskYAML, "task-mode: all", "task-mode: all\nenable-heartbeat: true\nblack-white-list:\n  old: {do-dbs: [x]}", 1)+
		"mydumpers:\n  global: {threads: 4, chunk-filesize: 64, skip-tz-utc: true}\n")
	source := write("source.yaml", "source-id: mysql-01\nauto-fix-gtid: true\nfrom: {host: 127.0.0.1, user: root, password: s3cret-pw}\nchecker: {backoff-rollback: 5m}\n")
	bad := write("bad.yaml", strings.Replace(taskYAML, "syncers:\n  s1: {worker-count: 4, batch: 50}", "syncers:\n  s1: {worker-count: 4, batch: 50, wrker: 1}\nshard-mode: optimistc\nonline-ddll: true", 1)+
		"routes2: {}\n")

	t.Run("task text", func(t *testing.T) {
		r := runDmctl(t, "--etcd-endpoints", ep, "task", "start", dmTask, "--dry-run")
		if r.code != 0 {
			t.Fatalf("exit %d: %s", r.code, r.stderr)
		}
		for _, want := range []string{"source mysql-01", "source mysql-02", "worker-count: 4", "password: '******'"} {
			if !strings.Contains(r.stdout, want) {
				t.Errorf("stdout lacks %q:\n%s", want, r.stdout)
			}
		}
		if strings.Contains(r.stdout, "tpw") {
			t.Errorf("password shown:\n%s", r.stdout)
		}
		for _, want := range []string{"enable-heartbeat", "mydumpers.global.chunk-filesize", "mydumpers.global.skip-tz-utc"} {
			if !strings.Contains(r.stderr, want) {
				t.Errorf("warning lacks %q:\n%s", want, r.stderr)
			}
		}
	})
	t.Run("task json", func(t *testing.T) {
		r := runDmctl(t, "--etcd-endpoints", ep, "--output", "json", "task", "start", dmTask, "--dry-run")
		if r.code != 0 {
			t.Fatalf("exit %d: %s", r.code, r.stderr)
		}
		// black-white-list is among the ignored: block-allow-list is set
		// too and, as in DM, the current name wins.
		var doc dryRunTaskJSON
		if err := json.Unmarshal([]byte(r.stdout), &doc); err != nil {
			t.Fatalf("%v:\n%s", err, r.stdout)
		}
		if doc.Task != "task1" || len(doc.Subtasks) != 2 || doc.Subtasks[0].TargetDatabase.Password != "******" || len(doc.Ignored) != 4 {
			t.Errorf("doc %+v", doc)
		}
	})
	t.Run("source", func(t *testing.T) {
		r := runDmctl(t, "--etcd-endpoints", ep, "source", "create", source, "--dry-run")
		if r.code != 0 {
			t.Fatalf("exit %d: %s", r.code, r.stderr)
		}
		if strings.Contains(r.stdout+r.stderr, "s3cret-pw") || !strings.Contains(r.stdout, "source-id: mysql-01") {
			t.Errorf("stdout:\n%s", r.stdout)
		}
		if !strings.Contains(r.stderr, "auto-fix-gtid") || !strings.Contains(r.stderr, "checker.backoff-rollback") {
			t.Errorf("stderr:\n%s", r.stderr)
		}
	})
	t.Run("invalid task lists every problem", func(t *testing.T) {
		r := runDmctl(t, "--etcd-endpoints", ep, "task", "start", bad, "--dry-run")
		if r.code != 1 {
			t.Fatalf("exit %d, want 1", r.code)
		}
		for _, want := range []string{`"syncers.s1.wrker"`, `"online-ddll"`, `"routes2"`, "shard-mode"} {
			if !strings.Contains(r.stderr, want) {
				t.Errorf("stderr lacks %q:\n%s", want, r.stderr)
			}
		}
		if r.stdout != "" {
			t.Errorf("stdout: %s", r.stdout)
		}
	})
}
