package binlog

import "testing"

func TestSQLMode(t *testing.T) {
	mode := []byte{1, 0x04, 0, 0, 0x20, 0, 0, 0, 0} // ANSI_QUOTES | bit 29
	cases := []struct {
		name string
		vars []byte
		want uint64
		ok   bool
	}{
		{"flags2 then sql_mode", append([]byte{0, 0, 0, 0, 0}, mode...), 0x20000004, true},
		{"after catalog, time zone and invoker", append([]byte{
			6, 3, 's', 't', 'd', // Q_CATALOG_NZ
			5, 6, 'S', 'Y', 'S', 'T', 'E', 'M', // Q_TIME_ZONE
			11, 1, 'u', 1, 'h', // Q_INVOKER
			4, 1, 0, 2, 0, 3, 0, // Q_CHARSET
		}, mode...), 0x20000004, true},
		{"no sql_mode", []byte{0, 0, 0, 0, 0, 4, 1, 0, 2, 0, 3, 0}, 0, false},
		{"truncated", []byte{0, 0, 0, 0, 0, 1, 4, 0}, 0, false},
		{"an unknown code before it", append([]byte{200, 1}, mode...), 0, false},
		{"empty", nil, 0, false},
	}
	for _, c := range cases {
		got, ok := SQLMode(c.vars)
		if got != c.want || ok != c.ok {
			t.Errorf("%s: %#x %v, want %#x %v", c.name, got, ok, c.want, c.ok)
		}
	}
	if m, _ := SQLMode(append([]byte{0, 0, 0, 0, 0}, mode...)); m&SQLModeANSIQuotes == 0 {
		t.Error("ANSI_QUOTES bit not set")
	}
}

func TestCollations(t *testing.T) {
	// A CREATE TABLE of MariaDB 10.11 under SET collation_server =
	// utf8mb4_unicode_ci (224): FLAGS2, SQL_MODE, CATALOG_NZ, CHARSET, XID.
	mariadb := []byte{0, 0, 0, 0, 1, 1, 0, 0, 0x20, 0x54, 0, 0, 0, 0, 6, 3, 's', 't', 'd',
		4, 0x2d, 0, 0x2d, 0, 0xe0, 0, 0x81, 6, 0, 0, 0, 0, 0, 0, 0}
	cases := []struct {
		name string
		vars []byte
		want SessionCollations
	}{
		{"mariadb 10.11", mariadb, SessionCollations{Server: 224}},
		{"character_set_collations before CHARSET (MariaDB 11.5)", []byte{
			131, 2, 45, 0, 0x35, 0x08, 33, 0, 0x36, 0x08, // utf8mb4→2101, utf8mb3→2102
			4, 8, 0, 8, 0, 8, 0,
		}, SessionCollations{Server: 8, Defaults: []uint16{2101, 2102}}},
		{"mysql 8 default_collation_for_utf8mb4", []byte{4, 0xff, 0, 0xff, 0, 0xff, 0, 18, 0x2d, 0}, SessionCollations{Server: 255, UTF8MB4: 45}},
		{"truncated charset", []byte{4, 8, 0, 8}, SessionCollations{}},
		{"unknown code first", []byte{200, 4, 8, 0, 8, 0, 8, 0}, SessionCollations{}},
	}
	for _, c := range cases {
		got := Collations(c.vars)
		if got.Server != c.want.Server || got.UTF8MB4 != c.want.UTF8MB4 || len(got.Defaults) != len(c.want.Defaults) {
			t.Errorf("%s: %+v, want %+v", c.name, got, c.want)
			continue
		}
		for i := range got.Defaults {
			if got.Defaults[i] != c.want.Defaults[i] {
				t.Errorf("%s: %+v, want %+v", c.name, got, c.want)
			}
		}
	}
	if m, ok := SQLMode(mariadb); !ok || m != 0x54200000 {
		t.Errorf("sql_mode of the mariadb event: %#x %v", m, ok)
	}
}
