package collation

import (
	"testing"

	"github.com/dmworker/dm-worker/tests/mariadbtest"
)

// TestRead reads a real server's defaults: its collation_server and each
// character set's default, and resolves a session's collation ids.
func TestRead(t *testing.T) {
	inst := mariadbtest.Start(t, mariadbtest.Options{Name: "collations",
		ExtraConfig: []string{"character-set-server=latin1", "collation-server=latin1_bin"}})
	c, err := Read(t.Context(), inst.DB(t))
	if err != nil {
		t.Fatal(err)
	}
	if c.Global.Server != "latin1_bin" {
		t.Errorf("collation_server %q, want latin1_bin", c.Global.Server)
	}
	for cs, want := range map[string]string{"utf8mb4": "utf8mb4_general_ci", "latin1": "latin1_swedish_ci", "binary": "binary", "UTF8MB3": "utf8mb3_general_ci"} {
		if got, ok := c.Global.ForCharset(cs); !ok || got != want {
			t.Errorf("default of %s: %q %v, want %q", cs, got, ok, want)
		}
	}
	// Ids as a binlog event carries them: 224 utf8mb4_unicode_ci as
	// collation_server, 46 utf8mb4_bin made utf8mb4's default, 8
	// latin1_swedish_ci (already latin1's), 9999 unknown.
	s := c.Session(224, 0, []uint16{46, 8, 9999})
	if s.Server != "utf8mb4_unicode_ci" {
		t.Errorf("session collation_server %q", s.Server)
	}
	if got, _ := s.ForCharset("utf8mb4"); got != "utf8mb4_bin" {
		t.Errorf("session utf8mb4 default %q", got)
	}
	if got, _ := s.ForCharset("latin1"); got != "latin1_swedish_ci" {
		t.Errorf("session latin1 default %q", got)
	}
	if got, _ := c.Global.ForCharset("utf8mb4"); got != "utf8mb4_general_ci" {
		t.Errorf("Session changed the global defaults: utf8mb4 %q", got)
	}
	if s := c.Session(0, 45, nil); s.Server != "latin1_bin" || s.Charsets["utf8mb4"] != "utf8mb4_general_ci" {
		t.Errorf("a session that says nothing: %+v", s)
	}
	if s := c.Session(0, 8, nil); s.Charsets["utf8mb4"] != "utf8mb4_general_ci" {
		t.Errorf("default_collation_for_utf8mb4 naming a latin1 collation was taken: %+v", s)
	}
}
