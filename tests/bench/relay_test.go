//go:build bench

package bench

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/dmworker/dm-worker/config"
	"github.com/dmworker/dm-worker/pkg/binlog"
	"github.com/dmworker/dm-worker/relay"
	"github.com/dmworker/dm-worker/tests/mariadbtest"
)

// Environment variables of the relay benchmark.
const (
	relayMBEnv     = "BENCH_RELAY_MB"     // binlog size in MiB (default 512)
	relayRoundsEnv = "BENCH_RELAY_ROUNDS" // rounds of both readers, alternating who goes first (default 3)
	relayMaxBinlog = 256 << 20            // the source's max_binlog_size
)

// relayParams are the relay child's parameters.
type relayParams struct {
	childCommon
	Dir      string `json:"dir"`
	Host     string `json:"host"`
	Port     int    `json:"port"`
	User     string `json:"user"`
	Password string `json:"password"`
	EndName  string `json:"end-name"`
	EndPos   uint32 `json:"end-pos"`
}

// readerRun is one timed pull of the whole binlog by one reader.
type readerRun struct {
	elapsed time.Duration
	usage   procUsage
	// sourceCPU is the CPU time the source's mariadbd used meanwhile (its binlog dump thread).
	sourceCPU time.Duration
}

// TestRelayThroughput pre-generates a binlog of BENCH_RELAY_MB MiB, then pulls all of it with
// the relay (into a relay directory, until Written reaches the source's end) and with
// `mariadb-binlog --read-from-remote-server --raw --to-last-log`, BENCH_RELAY_ROUNDS times each,
// alternating which goes first, and reports the medians in MB/s.
func TestRelayThroughput(t *testing.T) {
	size := envInt(t, relayMBEnv, 512) << 20
	rounds := int(envInt(t, relayRoundsEnv, 3))
	ctx := t.Context()
	prog := mariadbtest.Program(t, "mariadb-binlog")
	src := startSource(t, "relay-src", relayMaxBinlog)
	db := src.DB(t)
	execAll(t, ctx, db, bulkPrepare()...)

	began := time.Now()
	err := bulkFill(ctx, db, size, func() (int64, error) {
		return totalSize(binaryLogs(t, db)), nil
	})
	if err != nil {
		t.Fatal(err)
	}
	end := quietEnd(t, src)
	files := binaryLogs(t, db)
	total := totalSize(files)
	if last := files[len(files)-1]; last.name != end.Name || last.size != int64(end.Pos) {
		t.Fatalf("SHOW BINARY LOGS ends at %s:%d, SHOW MASTER STATUS at %s", last.name, last.size, end)
	}
	t.Logf("generated %d binlog files, %.1f MB, in %v; end %s", len(files), mb(total), since(began), end)

	work := t.TempDir()
	var ours, theirs []readerRun
	for round := range rounds {
		relayRun := func() {
			dir := filepath.Join(work, fmt.Sprintf("relay-%d", round))
			params := relayParams{childCommon: childCommon{Timeout: 10 * time.Minute},
				Dir: dir, Host: src.Host(), Port: src.Port(), User: mariadbtest.RootUser, EndName: end.Name, EndPos: end.Pos}
			if p := os.Getenv(profileEnv); p != "" {
				params.CPUProfile = filepath.Join(p, fmt.Sprintf("relay-%d.cpu.pprof", round))
			}
			cpu0 := serverCPU(t, src)
			rep, usage := spawnChild(t, ctx, "relay", params, work)
			srcCPU := serverCPU(t, src) - cpu0
			if got := dirBinlogBytes(t, dir); got != total {
				t.Fatalf("round %d: the relay wrote %d bytes of binlog, the source has %d", round, got, total)
			}
			ours = append(ours, readerRun{rep.Elapsed, usage, srcCPU})
			t.Logf("round %d: relay %v (%.1f MB/s), peak RSS %.1f MB, CPU %v, source CPU %v", round, rep.Elapsed.Round(time.Millisecond),
				mb(total)/rep.Elapsed.Seconds(), mb(usage.PeakRSS), usage.CPU.Round(time.Millisecond), srcCPU)
			removeAll(t, dir)
		}
		binlogRun := func() {
			dir := filepath.Join(work, fmt.Sprintf("mariadb-binlog-%d", round))
			if err := os.Mkdir(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			args := append(src.ClientArgs(), "--read-from-remote-server", "--raw", "--to-last-log",
				"--result-file="+dir+"/", files[0].name)
			cpu0 := serverCPU(t, src)
			run := runTool(t, ctx, prog, args)
			run.sourceCPU = serverCPU(t, src) - cpu0
			if got := dirBinlogBytes(t, dir); got != total {
				t.Fatalf("round %d: mariadb-binlog wrote %d bytes of binlog, the source has %d", round, got, total)
			}
			theirs = append(theirs, run)
			t.Logf("round %d: mariadb-binlog %v (%.1f MB/s), peak RSS %.1f MB, CPU %v, source CPU %v", round, run.elapsed.Round(time.Millisecond),
				mb(total)/run.elapsed.Seconds(), mb(run.usage.PeakRSS), run.usage.CPU.Round(time.Millisecond), run.sourceCPU)
			removeAll(t, dir)
		}
		if round%2 == 0 {
			relayRun()
			binlogRun()
		} else {
			binlogRun()
			relayRun()
		}
	}

	took := func(r readerRun) time.Duration { return r.elapsed }
	o, b := median(ours, took), median(theirs, took)
	oursMBs, theirsMBs := mb(total)/o.elapsed.Seconds(), mb(total)/b.elapsed.Seconds()
	r := ratio(oursMBs, theirsMBs)
	record(t, "relay-throughput",
		f("binlog_MB", mb(total)), f("files", len(files)), f("rounds", rounds),
		f("relay_MBps", oursMBs), f("mariadb_binlog_MBps", theirsMBs), f("ratio", r), f("target", verdict(r, 1.2)),
		f("relay_s", o.elapsed.Seconds()), f("mariadb_binlog_s", b.elapsed.Seconds()),
		f("relay_cpu_s", o.usage.CPU.Seconds()), f("mariadb_binlog_cpu_s", b.usage.CPU.Seconds()),
		f("source_cpu_s_relay", o.sourceCPU.Seconds()), f("source_cpu_s_mariadb_binlog", b.sourceCPU.Seconds()),
		f("relay_peak_rss_MB", mb(maxRSS(ours))), f("mariadb_binlog_peak_rss_MB", mb(maxRSS(theirs))))
}

// runTool runs a program to completion and times it; its peak RSS is its sampled VmHWM (see
// hwmSampler: ru_maxrss would report this process's RSS for a small program).
func runTool(t *testing.T, ctx context.Context, prog string, args []string) readerRun {
	t.Helper()
	r := runSampled(t, ctx, prog, args)
	return readerRun{elapsed: r.elapsed, usage: procUsage{Wall: r.elapsed, CPU: r.cpu, PeakRSS: r.peakRSS}}
}

// median returns the run with the median elapsed time (the upper one of an even count).
func median[T any](runs []T, elapsed func(T) time.Duration) T {
	sorted := slices.Clone(runs)
	slices.SortFunc(sorted, func(a, b T) int { return cmp.Compare(elapsed(a), elapsed(b)) })
	return sorted[len(sorted)/2]
}

func maxRSS(runs []readerRun) int64 {
	var m int64
	for _, r := range runs {
		m = max(m, r.usage.PeakRSS)
	}
	return m
}

func removeAll(t *testing.T, dir string) {
	t.Helper()
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
}

// runRelayChild pulls the source's binlog with a relay until Written reaches the end.
func runRelayChild(ctx context.Context, log *zap.Logger, raw json.RawMessage) (childReport, error) {
	var p relayParams
	if err := json.Unmarshal(raw, &p); err != nil {
		return childReport{}, fmt.Errorf("relay parameters: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, p.Timeout)
	defer cancel()
	r, err := relay.New(relay.Config{Dir: p.Dir, Worker: "bench", Logger: log,
		Source: &config.SourceConfig{SourceID: "bench", Flavor: config.FlavorMariaDB,
			From: config.DBConfig{Host: p.Host, Port: p.Port, User: p.User, Password: p.Password}}})
	if err != nil {
		return childReport{}, err
	}
	end := binlog.Location{Name: p.EndName, Pos: p.EndPos}
	var elapsed time.Duration
	err = profiled(p.CPUProfile, func() error {
		runCtx, stop := context.WithCancel(ctx)
		defer stop()
		done := make(chan error, 1)
		began := time.Now()
		go func() { done <- r.Run(runCtx) }()
		werr, returned := waitWritten(ctx, r, end, done)
		elapsed = time.Since(began)
		stop()
		if !returned {
			werr = errors.Join(werr, <-done)
		}
		return werr
	})
	err = errors.Join(err, r.Close())
	return childReport{Elapsed: elapsed, Detail: map[string]any{"written": r.Written().String()}}, err
}

// waitWritten waits until the relay has written up to end. returned reports whether Run's
// result was received from done (Run ended before reaching end).
func waitWritten(ctx context.Context, r *relay.Relay, end binlog.Location, done <-chan error) (err error, returned bool) {
	for {
		wake := r.Notify()
		if r.Written().Compare(end) >= 0 {
			return nil, false
		}
		select {
		case <-wake:
		case err := <-done:
			return fmt.Errorf("relay Run returned at %s before reaching %s: %v (last error: %v)", r.Written(), end, err, r.Err()), true
		case <-ctx.Done():
			return fmt.Errorf("relay reached only %s of %s: %w (last error: %v)", r.Written(), end, context.Cause(ctx), r.Err()), false
		}
	}
}
