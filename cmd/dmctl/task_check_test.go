package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/dmworker/dm-worker/tests/mariadbtest"
	"github.com/dmworker/dm-worker/unit/check"
)

// checkTaskYAML is a task of mode all on the given sources, each selecting
// schema shop, into target port.
func checkTaskYAML(name string, target int, sources ...string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "name: %s\ntask-mode: all\ntarget-database: {host: 127.0.0.1, port: %d, user: root, password: ''}\nmysql-instances:\n", name, target)
	for _, s := range sources {
		fmt.Fprintf(&b, "  - source-id: %s\n    block-allow-list: bal\n", s)
	}
	b.WriteString("block-allow-list:\n  bal: {do-dbs: [shop]}\n")
	return b.String()
}

func TestTaskCheck(t *testing.T) {
	good := mariadbtest.Start(t, mariadbtest.Options{Name: "good", Binlog: true, FastCommit: true})
	bad := mariadbtest.Start(t, mariadbtest.Options{Name: "bad", Binlog: true, FastCommit: true, ExtraConfig: []string{"binlog_format=STATEMENT"}})
	target := mariadbtest.Start(t, mariadbtest.Options{Name: "target", FastCommit: true})
	for _, s := range []*mariadbtest.Instance{good, bad} {
		s.Exec(t, "CREATE DATABASE shop")
		s.Exec(t, "CREATE TABLE shop.orders (id INT PRIMARY KEY, qty INT)")
	}
	good.Exec(t, "CREATE TABLE shop.log (line TEXT)") // no key: a warning
	bad.Exec(t, "CREATE USER 'nomon'@'%' IDENTIFIED BY 'pw'")
	bad.Exec(t, "GRANT REPLICATION SLAVE, SELECT, RELOAD ON *.* TO 'nomon'@'%'")

	h := newHarness(t)
	h.worker("w1", true)
	h.worker("w2", true)
	h.ok("source", "create", h.file("good.yaml", fmt.Sprintf("source-id: mysql-good\nenable-gtid: true\nfrom: {host: 127.0.0.1, port: %d, user: %s, password: %s}\n",
		good.Port(), mariadbtest.SourceUser, mariadbtest.SourcePassword)), "--worker", "w1")
	h.ok("source", "create", h.file("bad.yaml", fmt.Sprintf("source-id: mysql-bad\nfrom: {host: 127.0.0.1, port: %d, user: nomon, password: pw}\n",
		bad.Port())), "--worker", "w2")

	// A good source passes with its warning; nothing is written to etcd.
	goodFile := h.file("good-task.yaml", checkTaskYAML("t-good", target.Port(), "mysql-good"))
	before := h.keys()
	r := h.ok("task", "check", goodFile)
	for _, want := range []string{"task t-good, source mysql-good: 0 failure(s), 1 warning(s)",
		"[WARN] table_keys:", "`shop`.`log`", "[PASS] binlog_format: source mysql-good has binlog_format=ROW",
		"[PASS] target_writable:", "task t-good: 0 failure(s), 1 warning(s)"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("task check (good): stdout does not contain %q:\n%s", want, r.stdout)
		}
	}
	if strings.Contains(r.stdout, "[FAIL]") {
		t.Errorf("task check (good) printed a failure:\n%s", r.stdout)
	}
	t.Logf("task check (good):\n%s", r.stdout)

	// The bad source's two problems, with their fixes, and exit 1.
	badFile := h.file("bad-task.yaml", checkTaskYAML("t-bad", target.Port(), "mysql-good", "mysql-bad"))
	r = h.fail([]string{"task", "check", badFile}, "precheck failed: 2 failure(s) on source(s) mysql-bad of task t-bad")
	for _, want := range []string{
		"task t-bad, source mysql-bad: 2 failure(s)",
		"[FAIL] binlog_format: source mysql-bad has binlog_format=STATEMENT; it must be ROW",
		"fix: SET GLOBAL binlog_format=ROW",
		"[FAIL] privilege_replication_client: source user 'nomon'@'%' on source mysql-bad lacks REPLICATION CLIENT",
		"fix: GRANT REPLICATION CLIENT ON *.* TO 'nomon'@'%'",
		"task t-bad, source mysql-good: 0 failure(s), 1 warning(s)",
	} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("task check (bad): stdout does not contain %q:\n%s", want, r.stdout)
		}
	}
	t.Logf("task check (bad):\nstdout:\n%s\nstderr:\n%s", r.stdout, r.stderr)

	// JSON: the reports.
	var doc taskCheckJSON
	r = h.run("--output", "json", "task", "check", badFile)
	if r.code != 1 {
		t.Fatalf("task check --output json: exit %d, want 1; stderr:\n%s", r.code, r.stderr)
	}
	if err := json.Unmarshal([]byte(r.stdout), &doc); err != nil {
		t.Fatalf("task check --output json: %v\n%s", err, r.stdout)
	}
	if doc.Task != "t-bad" || doc.Failures != 2 || doc.Warnings != 1 || len(doc.Reports) != 2 {
		t.Fatalf("json document: task %s, %d failures, %d warnings, %d reports", doc.Task, doc.Failures, doc.Warnings, len(doc.Reports))
	}
	var names []string
	for _, it := range doc.Reports[1].Failures() {
		names = append(names, it.Name)
	}
	if doc.Reports[1].Source != "mysql-bad" || strings.Join(names, ",") != "privilege_replication_client,binlog_format" {
		t.Errorf("report of %s: failures %v", doc.Reports[1].Source, names)
	}
	if it := doc.Reports[1].Failures()[1]; it.State != check.StateFail || !strings.HasPrefix(it.Fix, "SET GLOBAL binlog_format=ROW") {
		t.Errorf("binlog_format item in JSON: %+v", it)
	}
	if after := h.keys(); len(after) != len(before) {
		t.Errorf("task check changed etcd: %d keys before, %d after", len(before), len(after))
	}

	// An unknown source is refused before anything runs.
	h.fail([]string{"task", "check", h.file("none.yaml", checkTaskYAML("t-none", target.Port(), "mysql-none"))},
		"source(s) mysql-none do not exist")
}

// TestTaskCheckEncryptedPasswords: passwords encrypted with `dmctl
// encrypt` are decrypted with --secret-key-path; without it the failed
// connections say so, and the password never shows.
func TestTaskCheckEncryptedPasswords(t *testing.T) {
	const password = "Pw-9z'q"
	src := mariadbtest.Start(t, mariadbtest.Options{Name: "source", Binlog: true, FastCommit: true})
	src.Exec(t, "CREATE USER 'dm'@'127.0.0.1' IDENTIFIED BY 'Pw-9z\\'q'")
	src.Exec(t, "GRANT ALL PRIVILEGES ON *.* TO 'dm'@'127.0.0.1'")
	src.Exec(t, "CREATE DATABASE shop")
	src.Exec(t, "CREATE TABLE shop.t (id INT PRIMARY KEY)")
	h := newHarness(t)
	key := h.dir + "/key.hex"
	h.ok("gen-key", key)
	enc := strings.TrimSpace(h.ok("--secret-key-path", key, "encrypt", password).stdout)
	h.worker("w1", true)
	h.ok("source", "create", h.file("mysql-01.yaml", fmt.Sprintf(
		"source-id: mysql-01\nfrom: {host: 127.0.0.1, port: %d, user: dm, password: %q}\n", src.Port(), enc)), "--worker", "w1")
	task := h.file("te.yaml", fmt.Sprintf(`name: te
task-mode: all
target-database: {host: 127.0.0.1, port: %d, user: dm, password: %q}
mysql-instances:
  - source-id: mysql-01
    block-allow-list: bal
block-allow-list:
  bal: {do-dbs: [shop]}
`, src.Port(), enc))

	r := h.fail([]string{"task", "check", task}, "precheck failed: 2 failure(s)")
	for _, want := range []string{"[FAIL] source_connection:", "[FAIL] target_connection:", "Access denied",
		"from.password has the form of a `dmctl encrypt` ciphertext", "target-database.password has the form of a `dmctl encrypt` ciphertext"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("task check without the key: stdout does not contain %q:\n%s", want, r.stdout)
		}
	}
	if strings.Contains(r.stdout+r.stderr, password) {
		t.Errorf("the password shows:\n%s\n%s", r.stdout, r.stderr)
	}
	r = h.ok("--secret-key-path", key, "task", "check", task)
	if !strings.Contains(r.stdout, "task te: 0 failure(s)") {
		t.Errorf("task check with the key:\n%s", r.stdout)
	}
}
