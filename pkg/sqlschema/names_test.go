package sqlschema

import "testing"

// TestQuoteName checks that backticks inside a name are doubled.
func TestQuoteName(t *testing.T) {
	cases := []struct{ in, want string }{
		{"t", "`t`"},
		{"", "``"},
		{"a`b", "`a``b`"},
		{"``", "``````"},
		{"日本 x", "`日本 x`"},
	}
	for _, c := range cases {
		if got := QuoteName(c.in); got != c.want {
			t.Errorf("QuoteName(%q) = %s, want %s", c.in, got, c.want)
		}
	}
	if got, want := QuoteTable("s`x", "t"), "`s``x`.`t`"; got != want {
		t.Errorf("QuoteTable = %s, want %s", got, want)
	}
}

// TestSystemSchemas checks the one list in its three forms.
func TestSystemSchemas(t *testing.T) {
	for _, s := range []string{"mysql", "MySQL", "information_schema", "INFORMATION_SCHEMA", "performance_schema", "sys"} {
		if !IsSystemSchema(s) {
			t.Errorf("IsSystemSchema(%q) = false", s)
		}
	}
	for _, s := range []string{"", "app", "mysql2", "system"} {
		if IsSystemSchema(s) {
			t.Errorf("IsSystemSchema(%q) = true", s)
		}
	}
	if got, want := SystemSchemaList(), "('mysql','information_schema','performance_schema','sys')"; got != want {
		t.Errorf("SystemSchemaList() = %s, want %s", got, want)
	}
}
