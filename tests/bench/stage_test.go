//go:build bench

package bench

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"
)

// stageIterations is -benchtime for BenchmarkStageToAction: each iteration is one stage flip
// (Running <-> Paused) written to etcd and awaited.
const stageIterations = "1000x"

// nsPerOp matches go test's benchmark result line.
var nsPerOp = regexp.MustCompile(`(?m)^BenchmarkStageToAction\S*\s+(\d+)\s+(\d+(?:\.\d+)?) ns/op`)

// TestStageToAction runs worker's BenchmarkStageToAction (stage key written to etcd -> subtask
// in that stage, embedded etcd, no data plane) and records its latency.
func TestStageToAction(t *testing.T) {
	goBin := filepath.Join(runtime.GOROOT(), "bin", "go")
	if _, err := os.Stat(goBin); err != nil {
		if goBin, err = exec.LookPath("go"); err != nil {
			t.Fatalf("find the go command: %v", err)
		}
	}
	modRoot, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(t.Context(), goBin, "test", "-count=1", "-run=^$", "-bench=^BenchmarkStageToAction$",
		"-benchtime="+stageIterations, "-benchmem", "./worker")
	cmd.Dir = modRoot
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	began := time.Now()
	if err := cmd.Run(); err != nil {
		t.Fatalf("go test -bench StageToAction ./worker: %v\n%s", err, out.String())
	}
	m := nsPerOp.FindStringSubmatch(out.String())
	if m == nil {
		t.Fatalf("no BenchmarkStageToAction result in:\n%s", out.String())
	}
	ns, err := strconv.ParseFloat(m[2], 64)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("go test -bench StageToAction ./worker (%v):\n%s", since(began), strings.TrimSpace(out.String()))
	record(t, "stage-to-action", f("iterations", m[1]), f("ms_per_stage_change", ns/1e6))
}
