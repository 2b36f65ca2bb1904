package natstest

import (
	"net"
	"strings"
	"testing"
)

// dialable reports whether something accepts connections at the server's
// address.
func dialable(s *Server) bool {
	c, err := net.Dial("tcp", strings.TrimPrefix(s.URL(), "nats://"))
	if err != nil {
		return false
	}
	c.Close()
	return true
}

func TestStartStopRestart(t *testing.T) {
	s := Start(t)
	url := s.URL()
	if !dialable(s) {
		t.Fatalf("nothing listens at %s after Start", url)
	}
	s.Kill()
	if dialable(s) {
		t.Fatalf("%s still accepts connections after Kill", url)
	}
	s.Restart()
	if s.URL() != url || !dialable(s) {
		t.Fatalf("after Restart: URL %s (was %s), listening %v", s.URL(), url, dialable(s))
	}
	s.Stop()
	s.Stop() // a second Stop does nothing
	if dialable(s) {
		t.Fatalf("%s still accepts connections after Stop", url)
	}
}
