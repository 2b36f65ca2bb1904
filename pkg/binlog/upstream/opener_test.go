package upstream

import (
	"testing"

	"github.com/dmworker/dm-worker/config"
	"github.com/dmworker/dm-worker/pkg/dbconn"
)

func TestServerID(t *testing.T) {
	a, b := ServerID("task", "src"), ServerID("task", "src2")
	if a == b || a < serverIDBase || b < serverIDBase || a >= 2*serverIDBase {
		t.Fatalf("server ids %d, %d", a, b)
	}
	if a != ServerID("task", "src") {
		t.Fatal("server id is not stable")
	}
}

// TestOpenerBoundsEventCache: the dump's parsed events wait in a small
// queue, not in go-mysql's default of 10,240 (hundreds of MiB of row
// images while a large transaction is applied).
func TestOpenerBoundsEventCache(t *testing.T) {
	o := NewOpener(&config.SourceConfig{}, &dbconn.Endpoint{}, "mariadb", 1, nil)
	if got := o.cfg.EventCacheCount; got != EventCache || got > 256 {
		t.Fatalf("EventCacheCount = %d, want EventCache (%d)", got, EventCache)
	}
}
