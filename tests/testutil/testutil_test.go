package testutil

import (
	"errors"
	"net"
	"strconv"
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
