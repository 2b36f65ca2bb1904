//go:build bench

package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/dmworker/dm-worker/config"
	"github.com/dmworker/dm-worker/pkg/binlog"
	"github.com/dmworker/dm-worker/pkg/stage"
	"github.com/dmworker/dm-worker/tests/mariadbtest"
	"github.com/dmworker/dm-worker/unit"
	"github.com/dmworker/dm-worker/unit/syncer"
	"github.com/dmworker/dm-worker/unit/validate"
)

// Parameters of the validator benchmark.
const (
	validatorRowsEnv   = "BENCH_VALIDATOR_ROWS"   // row changes in the backlog (default 1000000)
	validatorRoundsEnv = "BENCH_VALIDATOR_ROUNDS" // rounds of both runs, the first alternating (default 3)
	// validatorWorkers is the validator's worker-count (DM's default).
	validatorWorkers = 4
	// validatorSample is how often the child samples the validator's status.
	validatorSample = 100 * time.Millisecond
	// validatorDrainLimit bounds the wait for the validator once the sync unit has caught up.
	validatorDrainLimit = 10 * time.Minute
)

// validateParams are the sync-validate child's parameters: the sync child's, plus the backlog
// end the validator must read up to.
type validateParams struct {
	syncParams
	End string `json:"end"`
}

// validateRun is one sync-validate run as the parent sees it.
type validateRun struct {
	catchUp
	drain                  time.Duration
	maxLag, maxBehind      float64
	maxPending             int64
	rowsChecked, errorsNew int64
	// The validator's pending rows and lag when the sync unit had applied every row change.
	pendingAtSyncDone int64
	lagAtSyncDone     float64
}

// TestValidatorOverhead pre-generates the sync benchmark's backlog (BENCH_VALIDATOR_ROWS row
// changes), then catches it up BENCH_VALIDATOR_ROUNDS times each, alternating which goes first,
// with (a) the sync unit alone, exactly as TestSyncCatchUp's dm run, and (b) the same sync unit
// with a validator in full mode (worker-count 4, row-error-delay 30m) in the same child process.
// (b)'s rows/s is timed like (a)'s, until every row change is applied; the child then runs on
// until the validator has judged every row up to the backlog end. Every target must equal the
// source and the validator must report no validation error. Medians are reported.
func TestValidatorOverhead(t *testing.T) {
	rows := envInt(t, validatorRowsEnv, 1_000_000)
	rounds := int(envInt(t, validatorRoundsEnv, 3))
	b := newSyncBacklog(t, rows)
	work := t.TempDir()
	var alone []catchUp
	var validated []validateRun
	runAlone := func(round int) { alone = append(alone, b.runDM(t, round, 16, 100, work)) }
	runValidated := func(round int) { validated = append(validated, b.runValidated(t, round, work)) }
	for round := range rounds {
		if round%2 == 0 {
			runAlone(round)
			runValidated(round)
		} else {
			runValidated(round)
			runAlone(round)
		}
	}
	dm := median(alone, func(c catchUp) time.Duration { return c.elapsed })
	vr := median(validated, func(r validateRun) time.Duration { return r.elapsed })
	worst := worstValidation(validated)
	r := ratio(vr.rowsPerSec(b.committed), dm.rowsPerSec(b.committed))
	record(t, "validator-overhead",
		f("row_changes", b.committed), f("binlog_MB", mb(b.bytes)), f("rounds", rounds),
		f("validator_mode", config.ValidationFull), f("validator_workers", validatorWorkers),
		f("sync_rows_per_s", dm.rowsPerSec(b.committed)), f("sync_validate_rows_per_s", vr.rowsPerSec(b.committed)),
		f("ratio", r), f("target", verdict(r, 0.8)),
		f("sync_s", dm.elapsed.Seconds()), f("sync_validate_s", vr.elapsed.Seconds()),
		f("validator_drain_s", worst.drain.Seconds()), f("validator_max_lag_s", worst.maxLag),
		f("validator_max_behind_sync_s", worst.maxBehind), f("validator_max_pending", worst.maxPending),
		f("validator_pending_at_sync_done", worst.pendingAtSyncDone), f("validator_lag_at_sync_done_s", worst.lagAtSyncDone),
		f("rows_checked", vr.rowsChecked), f("validation_errors", worst.errorsNew),
		f("sync_peak_rss_MB", mb(maxPeakRSS(alone))), f("sync_validate_peak_rss_MB", mb(maxPeakRSS(validatedCatchUps(validated)))),
		f("sync_cpu_s", dm.child.CPU.Seconds()), f("sync_validate_cpu_s", vr.child.CPU.Seconds()),
		f("target_cpu_s_sync", dm.targetCPU.Seconds()), f("target_cpu_s_sync_validate", vr.targetCPU.Seconds()))
	if worst.errorsNew != 0 {
		t.Errorf("the validator reported %d validation errors on a clean backlog", worst.errorsNew)
	}
}

// worstValidation is, over runs, the longest drain, the largest lags and pending count, and the
// sum of the validation errors.
func worstValidation(runs []validateRun) validateRun {
	var w validateRun
	for _, r := range runs {
		w.drain = max(w.drain, r.drain)
		w.maxLag, w.maxBehind = max(w.maxLag, r.maxLag), max(w.maxBehind, r.maxBehind)
		w.maxPending, w.pendingAtSyncDone = max(w.maxPending, r.maxPending), max(w.pendingAtSyncDone, r.pendingAtSyncDone)
		w.lagAtSyncDone = max(w.lagAtSyncDone, r.lagAtSyncDone)
		w.errorsNew += r.errorsNew
	}
	return w
}

func validatedCatchUps(runs []validateRun) []catchUp {
	out := make([]catchUp, 0, len(runs))
	for _, r := range runs {
		out = append(out, r.catchUp)
	}
	return out
}

// maxPeakRSS is the largest child peak RSS of runs.
func maxPeakRSS(runs []catchUp) int64 {
	var m int64
	for _, r := range runs {
		if r.child != nil {
			m = max(m, r.child.PeakRSS)
		}
	}
	return m
}

// runValidated catches the backlog up with the sync unit and a full-mode validator in a
// "sync-validate" child into a fresh target, checks the target and returns the measurements.
func (b *syncBacklog) runValidated(t *testing.T, round int, work string) validateRun {
	t.Helper()
	src := b.src
	tgt := prepareTarget(t, "target-dm-validate")
	params := validateParams{syncParams: syncParams{childCommon: childCommon{Timeout: 30 * time.Minute},
		Source:    config.DBConfig{Host: src.Host(), Port: src.Port(), User: mariadbtest.SourceUser, Password: mariadbtest.SourcePassword},
		Target:    config.DBConfig{Host: tgt.inst.Host(), Port: tgt.inst.Port(), User: mariadbtest.RootUser},
		StartName: b.start.Name, StartPos: b.start.Pos, Rows: b.committed, WorkerCount: 16, Batch: 100},
		End: b.end.String()}
	if p := os.Getenv(profileEnv); p != "" {
		params.CPUProfile = filepath.Join(p, fmt.Sprintf("sync-validate-%d.cpu.pprof", round))
	}
	cpu := startCPUMeter(t, src, tgt.inst)
	rep, usage := spawnChild(t, t.Context(), "sync-validate", params, work)
	srcCPU, tgtCPU := cpu.stop(t)
	tgt.check(t, "dm sync with validator", b.want)
	res := validateRun{catchUp: catchUp{name: "dm+validator", elapsed: rep.Elapsed, targetRSS: serverPeakRSS(t, tgt.inst),
		child: &usage, sourceCPU: srcCPU, targetCPU: tgtCPU},
		drain: time.Duration(detailNum(rep, "drain_s") * float64(time.Second)), maxLag: detailNum(rep, "max_lag_s"),
		maxBehind: detailNum(rep, "max_behind_sync_s"), maxPending: int64(detailNum(rep, "max_pending")),
		rowsChecked: int64(detailNum(rep, "rows_checked")), errorsNew: int64(detailNum(rep, "errors_new")),
		pendingAtSyncDone: int64(detailNum(rep, "pending_at_sync_done")), lagAtSyncDone: detailNum(rep, "lag_at_sync_done_s")}
	t.Logf("round %d, dm sync + validator: %v, %.0f rows/s, drain %v, max lag %.1f s (%.1f s behind sync), "+
		"max pending %d, at sync done %d pending (lag %.1f s), child peak RSS %.1f MB, CPU: child %v (whole run), "+
		"source %v, target %v; status %v",
		round, rep.Elapsed.Round(time.Millisecond), res.rowsPerSec(b.committed), res.drain.Round(time.Millisecond),
		res.maxLag, res.maxBehind, res.maxPending, res.pendingAtSyncDone, res.lagAtSyncDone, mb(usage.PeakRSS), usage.CPU.Round(time.Millisecond), srcCPU, tgtCPU, rep.Detail)
	tgt.kill(t)
	return res
}

// detailNum is a number of a child's detail (JSON numbers decode as float64), 0 when absent.
func detailNum(rep childReport, key string) float64 {
	n, _ := rep.Detail[key].(float64)
	return n
}

// runSyncValidateChild runs runSyncChild's sync unit with a full-mode validator started before
// it: the elapsed time is the sync unit's, until every row change is applied; the child then
// waits until the validator has judged every row up to the backlog end.
func runSyncValidateChild(ctx context.Context, log *zap.Logger, raw json.RawMessage) (childReport, error) {
	var p validateParams
	if err := json.Unmarshal(raw, &p); err != nil {
		return childReport{}, fmt.Errorf("sync-validate parameters: %w", err)
	}
	end, err := binlog.ParseLocation(p.End)
	if err != nil {
		return childReport{}, fmt.Errorf("sync-validate parameters: backlog end: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, p.Timeout)
	defer cancel()
	u, cfg, src, err := newBenchSync(ctx, p.syncParams,
		config.ValidatorConfig{Mode: config.ValidationFull, WorkerCount: validatorWorkers}, log)
	if err != nil {
		return childReport{}, err
	}
	defer u.Close()
	v, err := validate.New(cfg, src, nil, u, validate.NewMetrics(prometheus.NewRegistry()), log)
	if err != nil {
		return childReport{}, err
	}
	if err := v.Start(ctx); err != nil {
		return childReport{}, fmt.Errorf("start validator: %w", err)
	}
	defer v.Stop()
	mon := startValidatorMonitor(v, u)
	var ph phases
	err = profiled(p.CPUProfile, func() error {
		var perr error
		ph, perr = syncThenDrain(ctx, u, v, p.Rows, end)
		return perr
	})
	mon.stop()
	return validateReport(u, v, mon, ph), err
}

// phases are the two measured phases of a sync-validate child.
type phases struct {
	// elapsed: until the sync unit applied every row change; drain: from then until the
	// validator had judged them all.
	elapsed, drain time.Duration
	// atSyncDone is the validator's status when the sync unit had applied every row change.
	atSyncDone unit.ValidatorStatus
}

// syncThenDrain runs the sync unit until it has applied rows row changes (elapsed) and then until
// the validator has drained up to end (drain), and stops the sync unit.
func syncThenDrain(ctx context.Context, u *syncer.Syncer, v *validate.Validator, rows int64, end binlog.Location) (
	ph phases, err error) {
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	done := make(chan unit.Result, 1)
	began := time.Now()
	go func() { done <- u.Process(runCtx) }()
	err, returned := waitApplied(ctx, u, rows, done)
	ph.elapsed, ph.atSyncDone = time.Since(began), v.Status()
	if err == nil {
		err, returned = waitDrained(ctx, v, end, done)
		ph.drain = time.Since(began) - ph.elapsed
	}
	stop()
	if !returned {
		if res := <-done; res.Failed() {
			err = errors.Join(err, fmt.Errorf("sync unit: %+v", res.Errors))
		}
	}
	return ph, err
}

// waitDrained polls the validator's status until no row waits to be judged and it has read up
// to end. returned reports whether the sync unit's result was received from done.
func waitDrained(ctx context.Context, v *validate.Validator, end binlog.Location, done <-chan unit.Result) (err error, returned bool) {
	ctx, cancel := context.WithTimeout(ctx, validatorDrainLimit)
	defer cancel()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		st := v.Status()
		if st.Stage == stage.Stopped {
			return fmt.Errorf("the validator stopped before it had judged the backlog: %s", statusText(st)), false
		}
		if read, perr := binlog.ParseLocation(st.Binlog); perr == nil && st.Pending == 0 && read.Compare(end) >= 0 {
			return nil, false
		}
		select {
		case <-tick.C:
		case res := <-done:
			return fmt.Errorf("sync unit stopped while the validator was draining: %+v; validator: %s", res, statusText(st)), true
		case <-ctx.Done():
			return fmt.Errorf("the validator did not judge the backlog up to %s within %v after the sync unit caught up: %s",
				end, validatorDrainLimit, statusText(st)), false
		}
	}
}

// statusText is a validator status for error messages.
func statusText(st unit.ValidatorStatus) string {
	out, err := json.Marshal(st)
	if err != nil {
		return fmt.Sprintf("%+v", st)
	}
	return string(out)
}

// validatorMonitor samples the validator's status every validatorSample.
type validatorMonitor struct {
	quit chan struct{}
	wg   sync.WaitGroup
	// Written by the sampling goroutine, read after stop.
	maxLag, maxBehind float64
	maxPending        int64
}

// startValidatorMonitor samples v's lag and pending rows, and how far (in the source's event
// time) the oldest unjudged row trails the newest event the sync unit u has read.
func startValidatorMonitor(v *validate.Validator, u *syncer.Syncer) *validatorMonitor {
	m := &validatorMonitor{quit: make(chan struct{})}
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		tick := time.NewTicker(validatorSample)
		defer tick.Stop()
		var head time.Time // the newest event time the sync unit has read
		for {
			now := time.Now()
			if lag := u.Status().(syncer.Status).LagSeconds; lag > 0 {
				if h := now.Add(-time.Duration(lag * float64(time.Second))); h.After(head) {
					head = h
				}
			}
			st := v.Status()
			m.maxLag, m.maxPending = max(m.maxLag, st.LagSeconds), max(m.maxPending, st.Pending)
			if st.Pending > 0 && !head.IsZero() {
				oldest := now.Add(-time.Duration(st.LagSeconds * float64(time.Second)))
				m.maxBehind = max(m.maxBehind, head.Sub(oldest).Seconds())
			}
			select {
			case <-tick.C:
			case <-m.quit:
				return
			}
		}
	}()
	return m
}

func (m *validatorMonitor) stop() {
	close(m.quit)
	m.wg.Wait()
}

// validateReport is the child's report: the sync unit's counters and the validator's.
func validateReport(u *syncer.Syncer, v *validate.Validator, m *validatorMonitor, ph phases) childReport {
	st, vs := u.Status().(syncer.Status), v.Status()
	detail := map[string]any{
		"inserts": st.Inserts, "updates": st.Updates, "deletes": st.Deletes,
		"transactions": st.Transactions, "batches": st.Batches, "binlog": st.Binlog,
		"drain_s": ph.drain.Seconds(), "max_lag_s": m.maxLag,
		"pending_at_sync_done": ph.atSyncDone.Pending, "lag_at_sync_done_s": ph.atSyncDone.LagSeconds, "max_behind_sync_s": m.maxBehind,
		"max_pending": m.maxPending, "rows_checked": vs.RowsChecked, "errors_new": vs.Errors.New,
		"validator_binlog": vs.Binlog, "validator_checkpoint": vs.Checkpoint, "validator_pending": vs.Pending,
		"validator_state": vs.State,
	}
	if len(vs.SkippedTables) > 0 {
		detail["skipped_tables"] = vs.SkippedTables
	}
	if vs.Error != nil {
		detail["validator_error"] = vs.Error
	}
	return childReport{Elapsed: ph.elapsed, Detail: detail}
}
