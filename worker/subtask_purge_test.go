package worker

import (
	"context"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/dmworker/dm-worker/config"
	"github.com/dmworker/dm-worker/pkg/binlog"
	"github.com/dmworker/dm-worker/pkg/stage"
	"github.com/dmworker/dm-worker/unit"
)

// snapshotUnit is a dump or load test unit that knows its snapshot
// location, as the real ones do in task mode all.
type snapshotUnit struct {
	*testUnit
	loc binlog.Location
}

func (u *snapshotUnit) CheckpointLocation() (binlog.Location, bool) { return u.loc, !u.loc.IsZero() }

// TestPurgeBlockerKeepsSnapshotOfRunningDump: a running subtask in its dump
// (or load) unit holds no relay reader, yet its sync unit will start at
// the snapshot: the relay purger must keep the files from there on. A
// running subtask in its sync unit blocks nothing (its reader does).
func TestPurgeBlockerKeepsSnapshotOfRunningDump(t *testing.T) {
	snap := binlog.Location{Name: "mariadb-bin.000003", Pos: 1234}
	dump := &snapshotUnit{testUnit: newTestUnit(unit.TypeDump, 0), loc: snap}
	sync := newTestUnit(unit.TypeSync, 0)
	reg := unit.NewRegistry(map[unit.Type]unit.Constructor{
		unit.TypeDump: func(*config.SubTaskConfig, *zap.Logger) (unit.Unit, error) { return dump, nil },
		unit.TypeLoad: func(*config.SubTaskConfig, *zap.Logger) (unit.Unit, error) { return newTestUnit(unit.TypeLoad, 0), nil },
		unit.TypeSync: func(*config.SubTaskConfig, *zap.Logger) (unit.Unit, error) { return sync, nil },
	}, nil)
	r := &subTaskReconciler{tasks: newLocalSet[*taskState](RealClock{}, "subtask")}

	copying := NewSubTask(testConfig("all"), reg, zaptest.NewLogger(t))
	defer copying.Close()
	copying.Run(context.Background())
	waitUnit(t, dump.testUnit, usRunning, "dump running")
	if copying.Stage() != stage.Running {
		t.Fatalf("stage %s, want Running", copying.Stage())
	}
	r.tasks.put("copying", &taskState{st: copying})
	name, loc, ok := r.purgeBlocker()
	if !ok || name != `subtask `+copying.Name() || loc != snap {
		t.Fatalf("purgeBlocker = %q %v %v, want the running dump's snapshot %v", name, loc, ok, snap)
	}

	incr := NewSubTask(testConfig("incremental"), reg, zaptest.NewLogger(t))
	defer incr.Close()
	incr.Run(context.Background())
	waitUnit(t, sync, usRunning, "sync running")
	r2 := &subTaskReconciler{tasks: newLocalSet[*taskState](RealClock{}, "subtask")}
	r2.tasks.put("incr", &taskState{st: incr})
	if name, loc, ok := r2.purgeBlocker(); ok {
		t.Fatalf("a running sync unit blocks the purge: %q %v", name, loc)
	}
}

// TestPurgeBlockerKeepsValidatorCheckpoint: a running validator re-reads
// from its checkpoint after a restart, so the relay keeps the files from
// there; a stopped one blocks nothing.
func TestPurgeBlockerKeepsValidatorCheckpoint(t *testing.T) {
	sync := newTestUnit(unit.TypeSync, 0)
	f := newTestFactory(true, sync)
	st := NewSubTask(testConfig("incremental"), f, zaptest.NewLogger(t))
	defer st.Close()
	st.Run(context.Background())
	waitUnit(t, sync, usRunning, "sync running")
	r := &subTaskReconciler{tasks: newLocalSet[*taskState](RealClock{}, "subtask")}
	r.tasks.put("t", &taskState{st: st})
	if name, loc, ok := r.purgeBlocker(); ok {
		t.Fatalf("a running sync unit without validator blocks the purge: %q %v", name, loc)
	}
	if err := st.StartValidator(context.Background()); err != nil {
		t.Fatal(err)
	}
	want, _ := binlog.ParseLocation(testValidatorCheckpoint)
	if name, loc, ok := r.purgeBlocker(); !ok || name != "the validator of subtask "+st.Name() || loc != want {
		t.Fatalf("purgeBlocker = %q %v %v, want the validator's checkpoint %v", name, loc, ok, want)
	}
	st.StopValidator()
	if name, loc, ok := r.purgeBlocker(); ok {
		t.Fatalf("a stopped validator blocks the purge: %q %v", name, loc)
	}
}
