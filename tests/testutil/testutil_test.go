package testutil

import (
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestPollReturnsLastError(t *testing.T) {
	n := 0
	err := Poll(30*time.Millisecond, func() error {
		n++
		return errors.New("state " + strconv.Itoa(n))
	})
	if err == nil || err.Error() != "state "+strconv.Itoa(n) || n < 2 {
		t.Fatalf("Poll = %v after %d checks, want the last check's error after several", err, n)
	}
}

func TestPollStopsWhenCheckPasses(t *testing.T) {
	n := 0
	if err := Poll(time.Second, func() error {
		if n++; n < 3 {
			return errors.New("not yet")
		}
		return nil
	}); err != nil || n != 3 {
		t.Fatalf("Poll = %v after %d checks, want nil after 3", err, n)
	}
}

func TestFreePortIsBindable(t *testing.T) {
	port := MustFreePort(t)
	l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port))
	if err != nil {
		t.Fatalf("port %d from FreePort cannot be bound: %v", port, err)
	}
	l.Close()
}

// recorder is a testing.TB that records Fatalf instead of stopping the test.
type recorder struct {
	testing.TB
	failed string
}

func (r *recorder) Helper() {}

func (r *recorder) Fatalf(format string, args ...any) { r.failed = fmt.Sprintf(format, args...) }

func TestConsistentlyFailsAtTheFirstBreak(t *testing.T) {
	r := &recorder{TB: t}
	n := 0
	Consistently(r, time.Second, "stays below 3", func() error {
		if n++; n >= 3 {
			return errors.New("reached " + strconv.Itoa(n))
		}
		return nil
	})
	if r.failed == "" || n != 3 || !strings.Contains(r.failed, "reached 3") {
		t.Fatalf("after %d checks failure %q; want a failure at the third check naming its error", n, r.failed)
	}
	r = &recorder{TB: t}
	Consistently(r, 30*time.Millisecond, "always holds", func() error { return nil })
	if r.failed != "" {
		t.Fatalf("a condition that held failed: %s", r.failed)
	}
}
