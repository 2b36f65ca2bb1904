package binlog

import (
	"strings"
	"testing"
)

// FuzzParseLocation parses "<file>:<pos>" strings (dmctl handle-error's
// --binlog-pos, the HTTP body's binlog-pos): never a panic; a parsed
// location prints (String) and parses back to itself; Compare is an order
// (reflexive, antisymmetric) on what parses; errors quote the input.
func FuzzParseLocation(f *testing.F) {
	for _, s := range []string{"mariadb-bin.000003:1234", "mysql-bin.000001:4", "a:b:7", "bin.999999:4294967295", "bin.1:4294967296",
		"x:", ":4", "", ":", "bin.000001:-1", "bin.000001:+4", "bin.000001: 4", "bin.000001:0x10", "名前.000001:4", "bin.00000000000000000000001:4"} {
		f.Add(s, "mariadb-bin.000004:4")
	}
	f.Fuzz(func(t *testing.T, s, other string) {
		l, err := ParseLocation(s)
		if err != nil {
			if !strings.Contains(err.Error(), "binlog: location") {
				t.Fatalf("error %q does not say what failed", err)
			}
			return
		}
		if l.IsZero() {
			t.Fatalf("ParseLocation(%q) = %+v: no file", s, l)
		}
		back, err := ParseLocation(l.String())
		if err != nil || back != l {
			t.Fatalf("ParseLocation(%q) = %+v; String %q parses as %+v, %v", s, l, l.String(), back, err)
		}
		if l.Compare(l) != 0 {
			t.Fatalf("%v does not compare equal to itself", l)
		}
		o, err := ParseLocation(other)
		if err != nil {
			return
		}
		if c1, c2 := l.Compare(o), o.Compare(l); c1 != -c2 {
			t.Fatalf("Compare(%v, %v) = %d but Compare(%v, %v) = %d", l, o, c1, o, l, c2)
		}
	})
}
