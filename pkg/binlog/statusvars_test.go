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
