//go:build bench

package bench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/pprof"
	"strconv"
	"syscall"
	"testing"
	"time"

	"go.uber.org/zap"
)

// childEnv names the role a re-executed test binary plays. The parent writes the role's
// parameters as one JSON line on the child's stdin and keeps stdin open; the child writes one
// JSON childReport line on stdout. When stdin closes (the parent died or gave up) the child
// cancels its work and exits.
const childEnv = "DMBENCH_CHILD"

// profileEnv, when set, names a directory where each child writes a CPU profile of its
// measured section (<role>-<n>.cpu.pprof); read them with `go tool pprof -top`.
const profileEnv = "BENCH_PROFILE_DIR"

// childRoles are the measured workloads a child can run.
var childRoles = map[string]func(ctx context.Context, log *zap.Logger, params json.RawMessage) (childReport, error){
	"relay":         runRelayChild,
	"sync":          runSyncChild,
	"sync-validate": runSyncValidateChild,
}

// childReport is what a child measured.
type childReport struct {
	// Elapsed is the measured section only (not the process start-up).
	Elapsed time.Duration `json:"elapsed"`
	// Detail is role-specific (e.g. the sync unit's counters).
	Detail map[string]any `json:"detail,omitempty"`
	Error  string         `json:"error,omitempty"`
}

// childCommon are the parameters every role accepts besides its own.
type childCommon struct {
	// CPUProfile, when set, is where the child writes a CPU profile of the measured section.
	CPUProfile string `json:"cpu-profile,omitempty"`
	// Timeout bounds the measured section.
	Timeout time.Duration `json:"timeout"`
}

// childMain runs the role named by childEnv and returns the process exit code.
func childMain(role string) int {
	log, err := zap.NewProduction(zap.IncreaseLevel(zap.WarnLevel))
	if err != nil {
		fmt.Fprintf(os.Stderr, "bench child: logger: %v\n", err)
		return 2
	}
	defer func() { _ = log.Sync() }()
	run, ok := childRoles[role]
	if !ok {
		fmt.Fprintf(os.Stderr, "bench child: unknown role %q\n", role)
		return 2
	}
	in := bufio.NewReader(os.Stdin)
	line, err := in.ReadBytes('\n')
	if err != nil {
		fmt.Fprintf(os.Stderr, "bench child: read parameters: %v\n", err)
		return 2
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stdinClosed := make(chan struct{})
	go func() { // ends when the parent closes stdin, at the latest when the parent exits
		defer close(stdinClosed)
		_, _ = io.Copy(io.Discard, in)
		cancel()
	}()

	rep, err := run(ctx, log, json.RawMessage(line))
	if err != nil {
		rep.Error = err.Error()
	}
	out, merr := json.Marshal(rep)
	if merr != nil {
		fmt.Fprintf(os.Stderr, "bench child: encode report: %v\n", merr)
		return 2
	}
	if _, err := fmt.Fprintf(os.Stdout, "%s\n", out); err != nil {
		fmt.Fprintf(os.Stderr, "bench child: write report: %v\n", err)
		return 2
	}
	<-stdinClosed // the parent closes stdin once it has read the report
	if rep.Error != "" {
		return 1
	}
	return 0
}

// profiled runs measure between starting and stopping a CPU profile into path ("" = none).
func profiled(path string, measure func() error) error {
	if path == "" {
		return measure()
	}
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("create CPU profile: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		return errors.Join(fmt.Errorf("start CPU profile: %w", err), f.Close())
	}
	err = measure()
	pprof.StopCPUProfile()
	return errors.Join(err, f.Close())
}

// procUsage is what the kernel accounted for a finished child process.
type procUsage struct {
	Wall    time.Duration // from start to exit, as seen by the parent
	CPU     time.Duration // user + system
	PeakRSS int64         // bytes: VmHWM where it could be read, else ru_maxrss
}

func usageOf(state *os.ProcessState, wall time.Duration) procUsage {
	u := procUsage{Wall: wall, CPU: state.UserTime() + state.SystemTime()}
	if ru, ok := state.SysUsage().(*syscall.Rusage); ok {
		u.PeakRSS = ru.Maxrss * 1024 // kilobytes on Linux
	}
	return u
}

// spawnChild re-executes the test binary as role with params and waits for its report. The
// child's stderr goes to a file in dir, whose tail is shown when the child fails.
func spawnChild(t *testing.T, ctx context.Context, role string, params any, dir string) (childReport, procUsage) {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatalf("find the test binary: %v", err)
	}
	payload, err := json.Marshal(params)
	if err != nil {
		t.Fatalf("encode %s parameters: %v", role, err)
	}
	stderrPath := filepath.Join(dir, role+"-child.stderr")
	stderr, err := os.Create(stderrPath)
	if err != nil {
		t.Fatal(err)
	}
	defer stderr.Close()
	cmd := exec.CommandContext(ctx, exe, "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"="+role)
	cmd.Stderr = stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s child: %v", role, err)
	}
	// stdin stays open while the child works: closing it tells the child to stop.
	_, werr := stdin.Write(append(payload, '\n'))
	line, rerr := readReport(stdout) // returns at the report, or when the child exits
	// The child waits for stdin to close after its report, so its VmHWM can still be read:
	// ru_maxrss would start at this process's peak RSS (see hwmSampler).
	hwm, herr := vmHWM(strconv.Itoa(cmd.Process.Pid))
	cerr := ignoreClosed(stdin.Close())
	_, _ = io.Copy(io.Discard, stdout)
	waitErr := cmd.Wait()
	usage := usageOf(cmd.ProcessState, time.Since(began))
	if herr == nil && rerr == nil {
		usage.PeakRSS = hwm * 1024
	}
	if err := errors.Join(werr, cerr); err != nil {
		t.Fatalf("talk to %s child: %v\n%s", role, err, fileTail(stderrPath))
	}
	var rep childReport
	if rerr != nil {
		t.Fatalf("%s child gave no report (%v; exit: %v)\n%s", role, rerr, waitErr, fileTail(stderrPath))
	}
	if err := json.Unmarshal(line, &rep); err != nil {
		t.Fatalf("%s child report %q: %v\n%s", role, line, err, fileTail(stderrPath))
	}
	if rep.Error != "" {
		t.Fatalf("%s child failed: %s\n%s", role, rep.Error, fileTail(stderrPath))
	}
	if waitErr != nil {
		t.Fatalf("%s child: %v\n%s", role, waitErr, fileTail(stderrPath))
	}
	return rep, usage
}

// readReport returns the first line of r that looks like a JSON object.
func readReport(r io.Reader) ([]byte, error) {
	br := bufio.NewReader(r)
	for {
		line, err := br.ReadBytes('\n')
		if trimmed := bytes.TrimSpace(line); len(trimmed) > 0 && trimmed[0] == '{' {
			return trimmed, nil
		}
		if err != nil {
			return nil, fmt.Errorf("read report: %w", err)
		}
	}
}

func ignoreClosed(err error) error {
	if errors.Is(err, os.ErrClosed) {
		return nil
	}
	return err
}

// fileTail is the end of a child's stderr file for failure messages.
func fileTail(path string) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Sprintf("(cannot read %s: %v)", path, err)
	}
	const max = 4000
	// A crash dumps every goroutine: show its start (the reason and the
	// failing goroutine) as well as the tail.
	head := ""
	for _, mark := range []string{"panic:", "fatal error:"} {
		if i := bytes.Index(data, []byte(mark)); i >= 0 && len(data)-i > max {
			head = "--- child stderr (crash) ---\n" + string(data[i:min(len(data), i+max)]) + "\n"
			break
		}
	}
	if len(data) > max {
		data = data[len(data)-max:]
	}
	return head + "--- child stderr (tail) ---\n" + string(data)
}
