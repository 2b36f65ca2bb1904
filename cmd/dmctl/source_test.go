package main

import (
	"strings"
	"testing"
)

func TestSourceCreateListUpdateDelete(t *testing.T) {
	h := newHarness(t)
	h.worker("w1", true)
	h.worker("w2", true)
	h.worker("w3", false)
	src1 := h.sourceFile("mysql-01", "")
	src2 := h.sourceFile("mysql-02", "enable-relay: true\nflavor: mariadb\n")
	src3 := h.sourceFile("mysql-03", "")

	steps := []struct {
		name    string
		args    []string
		wantErr []string // nil: must succeed
	}{
		{"bind to a dead worker", []string{"source", "create", src1, "--worker", "w3"}, []string{"worker w3 is not alive", "mysql-01"}},
		{"bind to an unknown worker", []string{"source", "create", src1, "--worker", "w9"}, []string{"worker w9 is unknown"}},
		{"free worker", []string{"source", "create", src1}, nil},
		{"again", []string{"source", "create", src1}, []string{"source mysql-01 already exists", "source update"}},
		{"to a bound worker", []string{"source", "create", src2, "--worker", "w1"}, []string{"worker w1 is already bound to source mysql-01"}},
		{"with relay, flag after file", []string{"source", "create", src2, "--worker", "w2"}, nil},
		{"no free worker", []string{"source", "create", src3}, []string{"no alive worker is free"}},
		{"update of a missing source", []string{"source", "update", src3}, []string{"source mysql-03 does not exist"}},
	}
	for _, s := range steps {
		if s.wantErr == nil {
			h.ok(s.args...)
		} else {
			h.fail(s.args, s.wantErr...)
		}
		if t.Failed() {
			t.Fatalf("step %q failed", s.name)
		}
	}

	cfg := h.getJSON("/source/config/mysql-01")
	if field(t, cfg, "source-id") != "mysql-01" || field(t, cfg, "from.port") != float64(3306) || field(t, cfg, "from.password") != "secret" {
		t.Errorf("config of mysql-01 = %v", cfg)
	}
	if b := h.getJSON("/source/bound/w1"); b["source"] != "mysql-01" || b["worker"] != "w1" {
		t.Errorf("bound w1 = %v", b)
	}
	if b := h.getJSON("/source/bound/w2"); b["source"] != "mysql-02" || b["worker"] != "w2" {
		t.Errorf("bound w2 = %v", b)
	}
	st := h.getJSON("/stage/relay/mysql-02")
	if st["expect"] != "Running" || st["source"] != "mysql-02" {
		t.Errorf("relay stage of mysql-02 = %v", st)
	}
	if _, ok := st["task"]; ok {
		t.Errorf("relay stage must not carry a task: %v", st)
	}
	h.absent("/stage/relay/mysql-01", "/source/config/mysql-03")

	var list sourceListJSON
	h.runJSON(&list, "source", "list")
	want := []sourceView{
		{Source: "mysql-01", Worker: "w1"},
		{Source: "mysql-02", Worker: "w2", EnableRelay: true, Relay: "Running"},
	}
	if len(list.Sources) != len(want) {
		t.Fatalf("source list = %+v, want %+v", list.Sources, want)
	}
	for i := range want {
		if list.Sources[i] != want[i] {
			t.Errorf("source list[%d] = %+v, want %+v", i, list.Sources[i], want[i])
		}
	}
	if out := h.ok("source", "list").stdout; !strings.Contains(out, "mysql-02") || !strings.Contains(out, "Running") {
		t.Errorf("source list text:\n%s", out)
	}

	var workers workerListJSON
	h.runJSON(&workers, "worker", "list")
	wantWorkers := []workerView{
		{Name: "w1", Addr: "127.0.0.1:8262", Alive: true, Source: "mysql-01"},
		{Name: "w2", Addr: "127.0.0.1:8262", Alive: true, Source: "mysql-02"},
		{Name: "w3", Addr: "127.0.0.1:8262", Alive: false},
	}
	if len(workers.Workers) != len(wantWorkers) {
		t.Fatalf("worker list = %+v", workers.Workers)
	}
	for i := range wantWorkers {
		if workers.Workers[i] != wantWorkers[i] {
			t.Errorf("worker list[%d] = %+v, want %+v", i, workers.Workers[i], wantWorkers[i])
		}
	}

	// update replaces the config and keeps the binding.
	upd := h.file("upd.yaml", "source-id: mysql-01\nfrom: {host: 127.0.0.2, port: 3307}\n")
	h.ok("source", "update", upd)
	if cfg := h.getJSON("/source/config/mysql-01"); field(t, cfg, "from.port") != float64(3307) || field(t, cfg, "from.host") != "127.0.0.2" {
		t.Errorf("updated config = %v", cfg)
	}
	if b := h.getJSON("/source/bound/w1"); b["source"] != "mysql-01" {
		t.Errorf("binding lost on update: %v", b)
	}

	// delete refuses while a task or stream uses the source.
	h.put("/task/config/mysql-02/task1", `{}`)
	h.fail([]string{"source", "delete", "mysql-02"}, "still has task(s) task1", "task stop")
	h.put("/stage/stream/mysql-02/cdc1", `{"expect":"Running","source":"mysql-02","task":"cdc1"}`)
	if _, err := h.cli.Delete(h.ctx(), testPrefix+"/task/config/mysql-02/task1"); err != nil {
		t.Fatal(err)
	}
	h.fail([]string{"source", "delete", "mysql-02"}, "still has stream(s) cdc1")
	if _, err := h.cli.Delete(h.ctx(), testPrefix+"/stage/stream/mysql-02/cdc1"); err != nil {
		t.Fatal(err)
	}
	h.put("/source/relay/w2", `{"source":"mysql-02","worker":"w2"}`)

	h.ok("source", "delete", "mysql-02")
	h.absent("/source/config/mysql-02", "/source/bound/w2", "/source/relay/w2", "/stage/relay/mysql-02")
	if _, ok := h.get("/source/bound/w1"); !ok {
		t.Error("deleting mysql-02 removed the binding of mysql-01")
	}
	h.fail([]string{"source", "delete", "mysql-02"}, "source mysql-02 does not exist")

	// w2 is free again.
	var created sourceResult
	h.runJSON(&created, "source", "create", src3)
	if created != (sourceResult{Source: "mysql-03", Worker: "w2"}) {
		t.Errorf("create result = %+v", created)
	}
}
