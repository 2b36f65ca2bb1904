//go:build failpoint

package syncer

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/dmworker/dm-worker/config"
	"github.com/dmworker/dm-worker/tests/mariadbtest"
	"github.com/dmworker/dm-worker/unit/unittest"
)

// childEnv carries the configs to the child process that crashes.
const childEnv = "DM_SYNC_FAILPOINT_CHILD"

type childConfig struct {
	Subtask *config.SubTaskConfig `json:"subtask"`
	Source  *config.SourceConfig  `json:"source"`
}

// TestFailpointChild is the crashing child of TestCrashAtFaultPoints; it
// does nothing in a normal run.
func TestFailpointChild(t *testing.T) {
	raw := os.Getenv(childEnv)
	if raw == "" {
		t.Skip("runs only as the child of TestCrashAtFaultPoints")
	}
	var cc childConfig
	if err := json.Unmarshal([]byte(raw), &cc); err != nil {
		t.Fatal(err)
	}
	u := newUnit(t, cc.Subtask, cc.Source)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	res := u.Process(ctx)
	t.Fatalf("the fault point did not crash the process: %+v", res)
}

// TestCrashAtFaultPoints crashes a child process at each fault point,
// then restarts the unit in this process and checks target == source.
func TestCrashAtFaultPoints(t *testing.T) {
	tests := []struct {
		name, failpoint string
	}{
		{"after batch", "github.com/dmworker/dm-worker/unit/syncer/SyncCrashAfterBatch=5*off->return(true)"},
		{"after ddl", "github.com/dmworker/dm-worker/unit/syncer/SyncCrashAfterDDL=2*off->return(true)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, mariadbtest.Options{})
			cfg, src := e.configs(t, "fp")
			cfg.Syncer.Batch = 10
			mariadbtest.MustExec(t, e.srcDB, "CREATE DATABASE app", "CREATE TABLE app.t1 "+workloadTable)
			w := &workload{db: e.srcDB, tables: []string{"app.t1"}}
			if err := w.run(context.Background(), 1000, 2); err != nil {
				t.Fatal(err)
			}
			mariadbtest.MustExec(t, e.srcDB, "ALTER TABLE app.t1 ADD COLUMN x INT DEFAULT 3", "ALTER TABLE app.t1 ADD INDEX ix (x)",
				"ALTER TABLE app.t1 DROP COLUMN x")
			if err := w.run(context.Background(), 2000, 2); err != nil {
				t.Fatal(err)
			}
			raw, err := json.Marshal(childConfig{Subtask: cfg, Source: src})
			if err != nil {
				t.Fatal(err)
			}
			cmd := exec.Command(os.Args[0], "-test.run=^TestFailpointChild$", "-test.count=1")
			cmd.Env = append(os.Environ(), childEnv+"="+string(raw), "GO_FAILPOINTS="+tt.failpoint)
			out, err := cmd.CombinedOutput()
			var exitErr *exec.ExitError
			if !errors.As(err, &exitErr) || exitErr.ExitCode() != crashExitCode {
				t.Fatalf("child exited with %v, want exit status %d (is failpoint-ctl enable run?)\n%s", err, crashExitCode, out)
			}
			u := newUnit(t, cfg, src)
			defer u.Close()
			r := unittest.Start(u, false, 0)
			defer r.Stop(t)
			e.waitEqual(t, same("app.t1"), r)
		})
	}
}
