package main

import (
	"encoding/json"
	"strings"
	"testing"
)

const taskYAML = `name: task1
task-mode: all
target-database: {host: 127.0.0.1, port: 4000, user: root, password: tpw}
mysql-instances:
  - source-id: mysql-01
    block-allow-list: bal1
    route-rules: [r1]
    syncer-config-name: s1
  - source-id: mysql-02
    block-allow-list: bal2
    filter-rules: [f1]
    validator-config-name: v1
block-allow-list:
  bal1: {do-dbs: [db1]}
  bal2: {do-dbs: [db2]}
routes:
  r1: {schema-pattern: db1, table-pattern: "t*", target-schema: db1_t, target-table: t}
filters:
  f1: {schema-pattern: db2, events: [truncate table], action: Ignore}
syncers:
  s1: {worker-count: 4, batch: 50}
validators:
  v1: {mode: full}
`

// taskHarness has workers w1, w2 bound to sources mysql-01, mysql-02.
func taskHarness(t *testing.T) *harness {
	h := newHarness(t)
	h.worker("w1", true)
	h.worker("w2", true)
	h.ok("source", "create", h.sourceFile("mysql-01", ""), "--worker", "w1")
	h.ok("source", "create", h.sourceFile("mysql-02", ""), "--worker", "w2")
	return h
}

func TestTaskStartSplitsPerSource(t *testing.T) {
	h := taskHarness(t)
	file := h.file("task1.yaml", taskYAML)

	var res taskResult
	h.runJSON(&res, "task", "start", file)
	if res.Task != "task1" || res.Stage != "Running" || strings.Join(res.Sources, ",") != "mysql-01,mysql-02" {
		t.Errorf("task start result = %+v", res)
	}

	c1 := h.getJSON("/task/config/mysql-01/task1")
	checks := []struct {
		doc  map[string]any
		path string
		want any
	}{
		{c1, "name", "task1"},
		{c1, "source-id", "mysql-01"},
		{c1, "task-mode", "all"},
		{c1, "target-database.port", float64(4000)},
		{c1, "target-database.password", "tpw"},
		{c1, "syncer.worker-count", float64(4)},
		{c1, "syncer.batch", float64(50)},
		{c1, "validator.mode", "none"},
	}
	c2 := h.getJSON("/task/config/mysql-02/task1")
	checks = append(checks, []struct {
		doc  map[string]any
		path string
		want any
	}{
		{c2, "source-id", "mysql-02"},
		{c2, "syncer.worker-count", float64(16)},
		{c2, "validator.mode", "full"},
	}...)
	for _, c := range checks {
		if got := field(t, c.doc, c.path); got != c.want {
			t.Errorf("%s of %s: got %v, want %v", c.path, c.doc["source-id"], got, c.want)
		}
	}
	if got, _ := json.Marshal(c1["route-rules"]); string(got) != `[{"schema-pattern":"db1","table-pattern":"t*","target-schema":"db1_t","target-table":"t"}]` {
		t.Errorf("route-rules of mysql-01 = %s", got)
	}
	if _, ok := c1["filter-rules"]; ok {
		t.Errorf("mysql-01 got filter rules it does not name: %v", c1["filter-rules"])
	}
	if got, _ := json.Marshal(c2["filter-rules"]); !strings.Contains(string(got), `"truncate table"`) {
		t.Errorf("filter-rules of mysql-02 = %s", got)
	}
	if got, _ := json.Marshal(field(t, c2, "block-allow-list.do-dbs")); string(got) != `["db2"]` {
		t.Errorf("block-allow-list of mysql-02 = %s", got)
	}
	for _, s := range []string{"mysql-01", "mysql-02"} {
		v, _ := h.get("/stage/subtask/" + s + "/task1")
		if want := `{"expect":"Running","source":"` + s + `","task":"task1"}`; v != want {
			t.Errorf("stage of %s = %s, want %s", s, v, want)
		}
	}
	// The validator starts with the task where its mode is set.
	if v, _ := h.get("/stage/validator/mysql-02/task1"); v != `{"expect":"Running","source":"mysql-02","task":"task1"}` {
		t.Errorf("validator stage of mysql-02 = %s", v)
	}
	h.absent("/stage/validator/mysql-01/task1")

	h.fail([]string{"task", "start", file}, "task task1 already exists on source(s) mysql-01, mysql-02", "task stop task1")
}

func TestTaskLifecycle(t *testing.T) {
	h := taskHarness(t)
	file := h.file("task1.yaml", taskYAML)
	h.ok("task", "start", file, "--stage", "Paused")

	stageOf := func(kind, source string) string {
		t.Helper()
		v, ok := h.get("/stage/" + kind + "/" + source + "/task1")
		if !ok {
			return ""
		}
		var st struct {
			Expect, Source, Task string
		}
		if err := json.Unmarshal([]byte(v), &st); err != nil || st.Source != source || st.Task != "task1" {
			t.Fatalf("%s stage of %s = %s (%v)", kind, source, v, err)
		}
		return st.Expect
	}
	steps := []struct {
		args          []string
		wantSubtask   string
		wantValidator [2]string // mysql-01, mysql-02
	}{
		{nil, "Paused", [2]string{"", "Running"}},
		{[]string{"task", "resume", "task1"}, "Running", [2]string{"", "Running"}},
		{[]string{"task", "pause", "task1"}, "Paused", [2]string{"", "Running"}},
		{[]string{"validation", "stop", "task1"}, "Paused", [2]string{"Stopped", "Stopped"}},
		{[]string{"validation", "start", "task1"}, "Paused", [2]string{"Running", "Running"}},
		{[]string{"task", "resume", "task1"}, "Running", [2]string{"Running", "Running"}},
	}
	for _, s := range steps {
		if s.args != nil {
			h.ok(s.args...)
		}
		for i, src := range []string{"mysql-01", "mysql-02"} {
			if got := stageOf("subtask", src); got != s.wantSubtask {
				t.Errorf("after %v: subtask stage of %s = %q, want %q", s.args, src, got, s.wantSubtask)
			}
			if got := stageOf("validator", src); got != s.wantValidator[i] {
				t.Errorf("after %v: validator stage of %s = %q, want %q", s.args, src, got, s.wantValidator[i])
			}
		}
	}

	var list taskListJSON
	h.runJSON(&list, "task", "list")
	if len(list.Tasks) != 1 || list.Tasks[0].Task != "task1" || len(list.Tasks[0].Sources) != 2 ||
		list.Tasks[0].Sources[0] != (taskSourceView{Source: "mysql-01", Stage: "Running", Validator: "Running"}) {
		t.Errorf("task list = %+v", list)
	}

	h.ok("task", "stop", "task1")
	for _, s := range []string{"mysql-01", "mysql-02"} {
		h.absent("/task/config/"+s+"/task1", "/stage/subtask/"+s+"/task1", "/stage/validator/"+s+"/task1")
	}
	for _, cmd := range []string{"pause", "resume", "stop", "status"} {
		h.fail([]string{"task", cmd, "task1"}, "task task1 does not exist")
	}
	h.fail([]string{"validation", "start", "task1"}, "task task1 does not exist")
	h.runJSON(&list, "task", "list")
	if len(list.Tasks) != 0 {
		t.Errorf("task list after stop = %+v", list)
	}
}

// statusW1 is a hand-written P/status/w1 value: task1 runs in the sync
// unit with an error; another task has an error too.
const statusW1 = `{"worker":"w1","addr":"127.0.0.1:8262","source":"mysql-01",
 "relay":{"enabled":false},
 "subtasks":[
  {"name":"other","stage":"Running","unit":"Load","errors":[],"progress":{}},
  {"name":"task1","stage":"Paused","unit":"Sync","errors":[{"code":"sync-apply","message":"connection refused","resumable":true,"time":"2026-01-02T15:04:05Z"}],
   "progress":{"rows":42,"binlog":"mariadb-bin.000003:1234","lag-seconds":0},
   "shard-ddl":{"lock":"task1-` + "`m`.`t`" + `","state":"waiting","ddls":["ALTER TABLE ` + "`m`.`t`" + ` ADD COLUMN ` + "`c`" + ` INT"],
    "waiting-for":[{"source":"mysql-02","table":"` + "`s2`.`t_1`" + `"}]}}],
 "streams":[],
 "errors":[{"task":"task1","code":"stage-without-config","message":"something about task1","resumable":false,"time":"2026-01-02T15:04:05Z"},
           {"task":"other","code":"x","message":"not ours","resumable":false,"time":"2026-01-02T15:04:05Z"}]}`

func TestTaskStatus(t *testing.T) {
	h := taskHarness(t)
	h.ok("task", "start", h.file("task1.yaml", taskYAML))
	h.put("/status/w1", statusW1)
	h.put("/status/w2", `{"worker":"w2","source":"mysql-02","subtasks":[],"errors":[]}`)

	var doc struct {
		Task    string `json:"task"`
		Sources []struct {
			Source  string           `json:"source"`
			Worker  string           `json:"worker"`
			Subtask map[string]any   `json:"subtask"`
			Errors  []map[string]any `json:"errors"`
		} `json:"sources"`
	}
	h.runJSON(&doc, "task", "status", "task1")
	if doc.Task != "task1" || len(doc.Sources) != 2 {
		t.Fatalf("status = %+v", doc)
	}
	s1, s2 := doc.Sources[0], doc.Sources[1]
	if s1.Source != "mysql-01" || s1.Worker != "w1" || s1.Subtask["name"] != "task1" || s1.Subtask["unit"] != "Sync" ||
		field(t, s1.Subtask, "progress.rows") != float64(42) {
		t.Errorf("mysql-01 status = %+v", s1)
	}
	if len(s1.Errors) != 1 || s1.Errors[0]["code"] != "stage-without-config" {
		t.Errorf("mysql-01 errors = %v", s1.Errors)
	}
	if s2.Source != "mysql-02" || s2.Worker != "w2" || s2.Subtask != nil || len(s2.Errors) != 0 {
		t.Errorf("mysql-02 status = %+v", s2)
	}

	// The raw document: subtask is null (not absent) and errors [] when the
	// worker does not report the task.
	raw := h.ok("--output", "json", "task", "status", "task1").stdout
	if !strings.Contains(raw, `"subtask": null`) || !strings.Contains(raw, `"errors": []`) {
		t.Errorf("status JSON lacks null subtask / empty errors:\n%s", raw)
	}

	text := h.ok("task", "status", "task1").stdout
	for _, want := range []string{"source mysql-01", "worker w1", "stage Paused", "unit Sync", `"rows":42`,
		"error [sync-apply] connection refused (resumable)", "error [stage-without-config] something about task1",
		"source mysql-02", "worker w2 reports no subtask task1",
		"shard-ddl: lock task1-`m`.`t` waiting  ddls ALTER TABLE `m`.`t` ADD COLUMN `c` INT  waiting for mysql-02 `s2`.`t_1`"} {
		if !strings.Contains(text, want) {
			t.Errorf("status text lacks %q:\n%s", want, text)
		}
	}
	if strings.Contains(text, "not ours") {
		t.Errorf("status text shows another task's error:\n%s", text)
	}

	// An unreadable status is reported, not fatal.
	h.put("/status/w2", `{not json`)
	h.runJSON(&doc, "task", "status", "task1")
	if len(doc.Sources[1].Errors) != 1 || doc.Sources[1].Errors[0]["code"] != statusUnreadable {
		t.Errorf("mysql-02 errors with a broken status = %v", doc.Sources[1].Errors)
	}
}
