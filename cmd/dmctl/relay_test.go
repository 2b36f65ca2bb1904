package main

import "testing"

func TestBindUnbindRelay(t *testing.T) {
	h := newHarness(t)
	h.worker("w1", true)
	h.worker("w2", true)
	h.worker("w3", false)
	h.ok("source", "create", h.sourceFile("mysql-01", ""), "--worker", "w1")
	h.ok("source", "create", h.sourceFile("mysql-02", ""), "--worker", "w2")

	h.ok("unbind", "w1")
	h.absent("/source/bound/w1")
	h.fail([]string{"unbind", "w1"}, "worker w1 is not bound")

	h.fail([]string{"bind", "mysql-01", "w3"}, "worker w3 is not alive")
	h.fail([]string{"bind", "nosuch", "w1"}, "source nosuch does not exist", "source create")
	h.fail([]string{"bind", "mysql-01", "w2"}, "worker w2 is already bound to source mysql-02")
	h.fail([]string{"bind", "mysql-01"}, "needs SOURCE WORKER", "usage: dmctl")
	h.fail([]string{"relay", "start", "mysql-01"}, "source mysql-01 is not bound", "dmctl bind mysql-01 WORKER")

	var b bindResult
	h.runJSON(&b, "bind", "mysql-01", "w1")
	if b != (bindResult{Source: "mysql-01", Worker: "w1"}) {
		t.Errorf("bind result = %+v", b)
	}
	if got := h.getJSON("/source/bound/w1"); got["source"] != "mysql-01" || got["worker"] != "w1" {
		t.Errorf("bound w1 = %v", got)
	}
	h.fail([]string{"bind", "mysql-01", "w1"}, "worker w1 is already bound to source mysql-01")

	h.fail([]string{"relay", "pause", "mysql-01"}, "relay of source mysql-01 is not started", "relay start mysql-01")
	h.fail([]string{"relay", "stop", "mysql-01"}, "relay of source mysql-01 is not started")

	steps := []struct {
		args       []string
		wantStage  string // "" = no relay stage key
		wantRelayW bool   // P/source/relay/w1 exists
	}{
		{[]string{"relay", "start", "mysql-01"}, "Running", true},
		{[]string{"relay", "pause", "mysql-01"}, "Paused", true},
		{[]string{"relay", "resume", "mysql-01"}, "Running", true},
		{[]string{"relay", "stop", "mysql-01"}, "", false},
	}
	for _, s := range steps {
		h.ok(s.args...)
		if s.wantStage == "" {
			h.absent("/stage/relay/mysql-01")
		} else if st := h.getJSON("/stage/relay/mysql-01"); st["expect"] != s.wantStage || st["source"] != "mysql-01" {
			t.Errorf("after %v: relay stage = %v, want %s", s.args, st, s.wantStage)
		}
		if s.wantRelayW {
			if rb := h.getJSON("/source/relay/w1"); rb["source"] != "mysql-01" || rb["worker"] != "w1" {
				t.Errorf("after %v: relay key = %v", s.args, rb)
			}
		} else {
			h.absent("/source/relay/w1")
		}
	}
	h.absent("/stage/relay/mysql-02", "/source/relay/w2")
	h.fail([]string{"relay", "resume", "nosuch"}, "source nosuch does not exist")
}
