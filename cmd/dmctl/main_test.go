package main

import (
	"strings"
	"testing"
	"time"
)

func TestBadInputWritesNothing(t *testing.T) {
	h := newHarness(t)
	h.worker("w1", true)
	h.worker("w2", true)
	h.ok("source", "create", h.sourceFile("mysql-01", ""), "--worker", "w1")

	badYAML := h.file("bad.yaml", "source-id: [unclosed\n")
	badName := h.file("badname.yaml", "source-id: bad name!\nfrom: {host: 127.0.0.1}\n")
	badFields := h.file("badfields.yaml", "source-id: mysql-02\nflavor: oracle\nfrom: {host: '', port: 70000}\n")
	unknownField := h.file("unknown.yaml", "source-id: mysql-02\nfrom: {host: h}\nenable-realy: true\n")
	unknownRule := h.file("rule.yaml", strings.Replace(taskYAML, "route-rules: [r1]", "route-rules: [nosuch]", 1))
	badTaskName := h.file("taskname.yaml", strings.Replace(taskYAML, "name: task1", "name: -task", 1))
	missingSource := h.file("missing.yaml", taskYAML) // mysql-02 does not exist

	cases := []struct {
		name    string
		args    []string
		wantErr []string
	}{
		{"invalid YAML", []string{"source", "create", badYAML}, []string{"bad.yaml", "decode source config"}},
		{"invalid source name in file", []string{"source", "create", badName}, []string{"badname.yaml", "source-id", "invalid source name"}},
		{"every problem at once", []string{"source", "create", badFields}, []string{"flavor", "from.host", "from.port"}},
		{"unknown field", []string{"source", "create", unknownField}, []string{"enable-realy"}},
		{"missing file", []string{"source", "create", h.dir + "/nosuch.yaml"}, []string{"nosuch.yaml"}},
		{"invalid worker name", []string{"source", "create", badYAML, "--worker", "w/1"}, []string{`invalid worker name "w/1"`}},
		{"unknown rule name", []string{"task", "start", unknownRule}, []string{"rule.yaml", "route-rules[0]", "nosuch", "no such entry in routes"}},
		{"invalid task name", []string{"task", "start", badTaskName}, []string{"taskname.yaml", "invalid task name"}},
		{"task on a missing source", []string{"task", "start", missingSource}, []string{"task task1", "source(s) mysql-02 do not exist", "source create"}},
		{"bad --stage", []string{"task", "start", missingSource, "--stage", "Stopped"}, []string{`--stage "Stopped"`}},
		{"invalid source argument", []string{"source", "delete", "a/b"}, []string{`invalid source name "a/b"`}},
		{"invalid task argument", []string{"task", "pause", "..x"}, []string{`invalid task name "..x"`}},
		{"invalid stream argument", []string{"stream", "resume", "x y", "--ignore-untreated"}, []string{`invalid stream name "x y"`}},
		{"too many arguments", []string{"bind", "mysql-01", "w2", "w3"}, []string{"needs SOURCE WORKER", "usage: dmctl [global flags] bind SOURCE WORKER"}},
		{"unknown command", []string{"source", "frobnicate"}, []string{`unknown command "source frobnicate"`, "Commands:"}},
		{"unknown flag", []string{"source", "list", "--all"}, []string{"flag provided but not defined"}},
		{"bad output", []string{"--output", "xml", "source", "list"}, []string{`--output "xml"`}},
		{"no command", nil, []string{"no command given"}},
	}
	parent := h.t
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h.t = t
			defer func() { h.t = parent }()
			h.fail(c.args, c.wantErr...)
		})
	}
}

func TestUnreachableEtcd(t *testing.T) {
	ep := closedEndpoint(t)
	start := time.Now()
	r := runDmctl(t, "--etcd-endpoints", ep, "--timeout", "1s", "source", "list")
	if r.code != 1 || !strings.Contains(r.stderr, ep) || !strings.Contains(r.stderr, "--etcd-endpoints") {
		t.Errorf("exit %d, stderr:\n%s", r.code, r.stderr)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("took %s with --timeout 1s", d)
	}

	// Against a real etcd, the same write command on an unreachable
	// endpoint leaves it unchanged.
	h := newHarness(t)
	h.worker("w1", true)
	file := h.sourceFile("mysql-01", "")
	before := h.keys()
	r = runDmctl(t, "--etcd-endpoints", ep, "--etcd-prefix", testPrefix, "--timeout", "1s", "source", "create", file)
	if r.code != 1 {
		t.Errorf("exit %d, stderr:\n%s", r.code, r.stderr)
	}
	if after := h.keys(); len(after) != len(before) {
		t.Errorf("keys changed: %v -> %v", before, after)
	}
}

func TestHelpAndVersion(t *testing.T) {
	r := runDmctl(t, "-h")
	if r.code != 0 {
		t.Fatalf("-h: exit %d", r.code)
	}
	for _, c := range commands() {
		if !strings.Contains(r.stdout, c.name) {
			t.Errorf("usage lacks %q:\n%s", c.name, r.stdout)
		}
	}
	for _, f := range []string{"--etcd-endpoints", "-etcd-prefix", "-output", "-timeout", "-etcd-cacert"} {
		if !strings.Contains(r.stdout, strings.TrimLeft(f, "-")) {
			t.Errorf("usage lacks %s", f)
		}
	}
	if r := runDmctl(t, "--version"); r.code != 0 || !strings.HasPrefix(r.stdout, "dmctl ") {
		t.Errorf("--version: exit %d, %q", r.code, r.stdout)
	}
	if r := runDmctl(t, "task", "start", "-h"); r.code != 0 || !strings.Contains(r.stdout, "task start FILE") {
		t.Errorf("task start -h: exit %d, %q", r.code, r.stdout)
	}
}

func TestParseArgs(t *testing.T) {
	cmd := &command{name: "x"}
	cases := []struct {
		args       []string
		wantPos    []string
		wantWorker string
		wantErr    bool
	}{
		{[]string{"f"}, []string{"f"}, "", false},
		{[]string{"f", "--worker", "w"}, []string{"f"}, "w", false},
		{[]string{"--worker=w", "f"}, []string{"f"}, "w", false},
		{[]string{"--", "-f"}, []string{"-f"}, "", false},
		{[]string{"f", "g"}, nil, "", true},
		{nil, nil, "", true},
		{[]string{"f", "--nope"}, nil, "", true},
	}
	for _, c := range cases {
		fs := newFlags(cmd)
		w := fs.String("worker", "", "")
		pos, err := parseArgs(cmd, fs, c.args, "FILE")
		if (err != nil) != c.wantErr {
			t.Errorf("%q: err %v", c.args, err)
			continue
		}
		if err == nil && (strings.Join(pos, " ") != strings.Join(c.wantPos, " ") || *w != c.wantWorker) {
			t.Errorf("%q: pos %q worker %q", c.args, pos, *w)
		}
	}
}
