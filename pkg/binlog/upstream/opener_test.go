package upstream

import "testing"

func TestServerID(t *testing.T) {
	a, b := ServerID("task", "src"), ServerID("task", "src2")
	if a == b || a < serverIDBase || b < serverIDBase || a >= 2*serverIDBase {
		t.Fatalf("server ids %d, %d", a, b)
	}
	if a != ServerID("task", "src") {
		t.Fatal("server id is not stable")
	}
}
