package main

import (
	"strings"
	"testing"
)

func TestStreamCommands(t *testing.T) {
	h := newHarness(t)
	h.worker("w1", true)
	h.ok("source", "create", h.sourceFile("mysql-01", ""))
	file := h.file("cdc.yaml", `name: orders-cdc
source-id: mysql-01
snapshot: true
block-allow-list: {do-dbs: [shop]}
sink: {type: file, file: {dir: /var/lib/cdc/orders, rotate-size: 64MiB}}
`)
	missing := h.file("cdc2.yaml", "name: cdc2\nsource-id: mysql-09\nsink: {type: file, file: {dir: /x}}\n")
	h.fail([]string{"stream", "create", missing}, "stream cdc2", "source mysql-09 does not exist")

	h.ok("stream", "create", file)
	cfg := h.getJSON("/stream/config/mysql-01/orders-cdc")
	if cfg["name"] != "orders-cdc" || cfg["snapshot"] != true || field(t, cfg, "sink.file.rotate-size") == nil {
		t.Errorf("stream config = %v", cfg)
	}
	h.fail([]string{"stream", "create", file}, "stream orders-cdc already exists on source(s) mysql-01")
	h.fail([]string{"stream", "pause", "orders-cdc", "--ignore-untreated"}, "flag provided but not defined: -ignore-untreated")

	steps := []struct {
		args []string
		want string // the stage value
	}{
		{nil, `{"expect":"Running","source":"mysql-01","task":"orders-cdc"}`},
		{[]string{"stream", "pause", "orders-cdc"}, `{"expect":"Paused","source":"mysql-01","task":"orders-cdc"}`},
		{[]string{"stream", "resume", "orders-cdc", "--ignore-untreated"}, `{"expect":"Running","source":"mysql-01","task":"orders-cdc","ignore-untreated":true}`},
		{[]string{"stream", "pause", "orders-cdc"}, `{"expect":"Paused","source":"mysql-01","task":"orders-cdc"}`},
		{[]string{"stream", "resume", "orders-cdc"}, `{"expect":"Running","source":"mysql-01","task":"orders-cdc"}`},
	}
	for _, s := range steps {
		if s.args != nil {
			h.ok(s.args...)
		}
		if v, _ := h.get("/stage/stream/mysql-01/orders-cdc"); v != s.want {
			t.Errorf("after %v: stream stage = %s, want %s", s.args, v, s.want)
		}
	}

	var list streamListJSON
	h.runJSON(&list, "stream", "list")
	if len(list.Streams) != 1 || list.Streams[0] != (streamView{Stream: "orders-cdc", Source: "mysql-01", Stage: "Running", Sink: "file"}) {
		t.Errorf("stream list = %+v", list)
	}
	if out := h.ok("stream", "list").stdout; !strings.Contains(out, "orders-cdc") {
		t.Errorf("stream list text:\n%s", out)
	}
	h.fail([]string{"source", "delete", "mysql-01"}, "still has stream(s) orders-cdc")

	h.ok("stream", "stop", "orders-cdc")
	h.absent("/stage/stream/mysql-01/orders-cdc", "/stream/config/mysql-01/orders-cdc")
	for _, cmd := range []string{"pause", "resume", "stop"} {
		h.fail([]string{"stream", cmd, "orders-cdc"}, "stream orders-cdc does not exist")
	}
	h.ok("source", "delete", "mysql-01")
}
