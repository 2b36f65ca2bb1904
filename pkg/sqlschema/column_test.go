package sqlschema

import (
	"reflect"
	"strings"
	"testing"
)

// TestParseElems checks ENUM / SET member lists with quotes, commas and
// escapes, and malformed lists.
func TestParseElems(t *testing.T) {
	cases := []struct {
		in   string
		want []string
	}{
		{`'a','b','c'`, []string{"a", "b", "c"}},
		{`'b''c','d,e',''`, []string{"b'c", "d,e", ""}},
		{`'x\\y','it\'s'`, []string{`x\y`, "it's"}},
		{`'日本','😀'`, []string{"日本", "😀"}},
	}
	for _, c := range cases {
		got, err := parseElems(c.in)
		if err != nil || !reflect.DeepEqual(got, c.want) {
			t.Errorf("parseElems(%s) = %q, %v; want %q", c.in, got, err, c.want)
		}
	}
	for _, bad := range []string{`a,'b'`, `'a`, `'a''`, `'a' 'b'`} {
		if got, err := parseElems(bad); err == nil {
			t.Errorf("parseElems(%s) = %q, want an error", bad, got)
		}
	}
}

// TestNewColumn checks what NewColumn derives from COLUMN_TYPE.
func TestNewColumn(t *testing.T) {
	cases := []struct {
		dataType, columnType string
		want                 Column
	}{
		{"int", "int(10) unsigned", Column{Unsigned: true}},
		{"decimal", "decimal(40,10)", Column{Scale: 10}},
		{"decimal", "decimal(5,0) unsigned zerofill", Column{Scale: 0, Unsigned: true}},
		{"datetime", "datetime(6)", Column{Scale: 6}},
		{"time", "time", Column{Scale: 0}},
		{"timestamp", "timestamp(3)", Column{Scale: 3}},
		{"binary", "binary(4)", Column{Length: 4}},
		{"binary", "binary", Column{Length: 1}},
		{"enum", "enum('a','b''c')", Column{Elems: []string{"a", "b'c"}}},
		{"set", "set('x','y,z')", Column{Elems: []string{"x", "y,z"}}},
	}
	for _, c := range cases {
		got, err := NewColumn("c", strings.ToUpper(c.dataType), c.columnType, "", false)
		if err != nil {
			t.Fatalf("NewColumn(%s): %v", c.columnType, err)
		}
		want := c.want
		want.Name, want.DataType, want.ColumnType = "c", c.dataType, c.columnType
		if !reflect.DeepEqual(got, want) {
			t.Errorf("NewColumn(%s) = %+v, want %+v", c.columnType, got, want)
		}
	}
	if _, err := NewColumn("e", "enum", "enum('a)", "", false); err == nil || !strings.Contains(err.Error(), "column e") {
		t.Errorf("NewColumn of a malformed enum: error = %v, want one naming column e", err)
	}
}

// TestSetExtra checks the generated and invisible flags from EXTRA as
// MariaDB and MySQL 8 print it.
func TestSetExtra(t *testing.T) {
	cases := []struct {
		extra                string
		generated, invisible bool
	}{
		{"", false, false},
		{"auto_increment", false, false},
		{"VIRTUAL GENERATED", true, false},
		{"STORED GENERATED", true, false},
		{"PERSISTENT", true, false},
		{"INVISIBLE", false, true},
		{"VIRTUAL GENERATED INVISIBLE", true, true},
		{"DEFAULT_GENERATED", false, false},
		{"DEFAULT_GENERATED on update CURRENT_TIMESTAMP", false, false},
	}
	for _, c := range cases {
		var col Column
		col.SetExtra(c.extra)
		if col.Generated != c.generated || col.Invisible != c.invisible {
			t.Errorf("SetExtra(%q): Generated %v Invisible %v, want %v %v", c.extra, col.Generated, col.Invisible, c.generated, c.invisible)
		}
	}
}
