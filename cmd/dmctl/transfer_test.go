package main

import (
	"strings"
	"testing"
)

// TestSourceTransfer moves a source with its relay binding to an alive,
// unbound worker in one transaction, and refuses what would not stick.
func TestSourceTransfer(t *testing.T) {
	h := newHarness(t)
	h.worker("w1", true)
	h.worker("w2", true)
	h.worker("w3", true)
	h.worker("w4", false)
	h.ok("source", "create", h.sourceFile("mysql-01", "enable-relay: true\nflavor: mariadb\n"), "--worker", "w1")
	h.ok("source", "create", h.sourceFile("mysql-02", ""), "--worker", "w2")
	h.put("/source/relay/w1", `{"source":"mysql-01","worker":"w1"}`)

	h.fail([]string{"source", "transfer", "mysql-01", "w4"}, "worker w4 is not alive", "scheduler")
	h.fail([]string{"source", "transfer", "mysql-01", "w2"}, "worker w2 already serves source mysql-02")
	h.fail([]string{"source", "transfer", "mysql-01", "w1"}, "already bound to worker w1")
	h.fail([]string{"source", "transfer", "nosuch", "w3"}, "source nosuch does not exist")

	var res transferResult
	h.runJSON(&res, "source", "transfer", "mysql-01", "w3")
	if res.Source != "mysql-01" || res.Worker != "w3" || strings.Join(res.From, ",") != "w1" {
		t.Fatalf("transfer result %+v", res)
	}
	h.absent("/source/bound/w1", "/source/relay/w1")
	if b := h.getJSON("/source/bound/w3"); b["source"] != "mysql-01" || b["worker"] != "w3" {
		t.Errorf("bound w3 = %v", b)
	}
	if b := h.getJSON("/source/relay/w3"); b["source"] != "mysql-01" {
		t.Errorf("relay bound w3 = %v", b)
	}
}

// TestWorkerListLeader marks the worker that leads the scheduler: the
// oldest key under the election prefix.
func TestWorkerListLeader(t *testing.T) {
	h := newHarness(t)
	h.worker("w1", true)
	h.worker("w2", true)
	h.put("/scheduler/leader/694d8f1a2b3c4d5e", "w2")
	h.put("/scheduler/leader/694d8f1a2b3c4d5f", "w1")
	var doc workerListJSON
	h.runJSON(&doc, "worker", "list")
	if len(doc.Workers) != 2 || doc.Workers[0].Leader || !doc.Workers[1].Leader {
		t.Fatalf("workers %+v, want w2 as the leader", doc.Workers)
	}
	if out := h.ok("worker", "list").stdout; !strings.Contains(out, "SCHEDULER") || !strings.Contains(out, "leader") {
		t.Errorf("worker list table:\n%s", out)
	}
}
