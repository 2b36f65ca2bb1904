package mariadbtest

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dmworker/dm-worker/tests/testutil"
)

// helperEnv makes TestServerDiesWithTestProcess act as the doomed test process.
const helperEnv = "MARIADBTEST_DEATHSIG_HELPER"

// TestServerDiesWithTestProcess runs this test binary as a child that starts an instance,
// SIGKILLs the child so that no Cleanup runs, and checks that the kernel killed the server.
func TestServerDiesWithTestProcess(t *testing.T) {
	if os.Getenv(helperEnv) == "1" {
		inst := StartTarget(t)
		fmt.Printf("INSTANCE_DIR=%s\n", inst.Dir())
		// Wait to be killed; give up on our own so that a broken parent cannot leave us behind.
		timer := time.NewTimer(2 * time.Minute)
		defer timer.Stop()
		select {
		case <-timer.C:
		case <-t.Context().Done():
		}
		return
	}
	t.Parallel()
	requireBinaries(t)

	cmd := exec.Command(os.Args[0], "-test.run=^TestServerDiesWithTestProcess$", "-test.v", "-test.count=1")
	cmd.Env = append(os.Environ(), helperEnv+"=1")
	cmd.Stderr = os.Stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
			t.Errorf("kill helper: %v", err)
		}
		var exitErr *exec.ExitError // the helper was killed, so it never exits cleanly
		if err := cmd.Wait(); !errors.As(err, &exitErr) {
			t.Errorf("helper test process: wait returned %v, want the exit error of a killed process", err)
		}
	})

	var dir string
	lines := bufio.NewScanner(stdout)
	var output []string
	for dir == "" && lines.Scan() {
		output = append(output, lines.Text())
		if d, ok := strings.CutPrefix(lines.Text(), "INSTANCE_DIR="); ok {
			dir = d
		}
	}
	if dir == "" {
		t.Fatalf("the helper test process did not start an instance; its output:\n%s", strings.Join(output, "\n"))
	}
	t.Cleanup(func() {
		if err := os.RemoveAll(dir); err != nil { // the killed helper could not remove it
			t.Errorf("remove %s: %v", dir, err)
		}
	})
	if len(serverPIDs(t, dir)) != 1 {
		t.Fatalf("want exactly one mariadbd in %s while the helper runs", dir)
	}

	t.Cleanup(func() { // do not leak a server that outlived the helper into the rest of the run
		for _, pid := range serverPIDs(t, dir) {
			if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
				t.Errorf("kill leftover mariadbd %d: %v", pid, err)
			}
		}
	})
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 30*time.Second, "the kernel to kill mariadbd with the killed test process", func() error {
		if pids := serverPIDs(t, dir); len(pids) != 0 {
			return fmt.Errorf("mariadbd %v in %s still runs", pids, dir)
		}
		return nil
	})
}
