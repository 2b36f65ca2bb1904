package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"go.uber.org/goleak"
)

// stampedVersion is linked into the test binaries, so that --version shows
// that the Makefile's -ldflags stamping reaches pkg/version.
const stampedVersion = "v0.0.0-e2e"

// bin holds the paths of the binaries TestMain builds.
var bin struct {
	worker, dmctl string
}

func TestMain(m *testing.M) { os.Exit(runTests(m)) }

func runTests(m *testing.M) int {
	dir, err := os.MkdirTemp("", "dm-e2e-bin-")
	if err != nil {
		fmt.Fprintf(os.Stderr, "e2e: temp dir for binaries: %v\n", err)
		return 1
	}
	defer os.RemoveAll(dir)
	if err := buildBinaries(dir); err != nil {
		fmt.Fprintf(os.Stderr, "e2e: %v\n", err)
		return 1
	}
	code := m.Run()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintf(os.Stderr, "e2e: goroutines leaked by the tests: %v\n", err)
			return 1
		}
	}
	return code
}

// buildBinaries builds ./cmd/dm-worker and ./cmd/dmctl into dir, with the
// version stamped as `make build` does.
func buildBinaries(dir string) error {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		return err
	}
	ldflags := "-X github.com/dmworker/dm-worker/pkg/version.Version=" + stampedVersion +
		" -X github.com/dmworker/dm-worker/pkg/version.GitHash=e2e"
	cmd := exec.Command("go", "build", "-ldflags", ldflags, "-o", dir+string(os.PathSeparator), "./cmd/dm-worker", "./cmd/dmctl")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build of the binaries in %s: %w\n%s", root, err, out)
	}
	bin.worker = filepath.Join(dir, "dm-worker")
	bin.dmctl = filepath.Join(dir, "dmctl")
	return nil
}
