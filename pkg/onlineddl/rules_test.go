package onlineddl

import (
	"strings"
	"testing"
)

func TestClassifyDefaults(t *testing.T) {
	r, err := NewRules(nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		table string
		kind  Kind
		real  string
	}{
		{"orders", Real, "orders"},
		{"_orders_gho", Shadow, "orders"},
		{"_orders_new", Shadow, "orders"},
		{"_orders_ghc", Trash, "orders"},
		{"_orders_del", Trash, "orders"},
		{"_orders_old", Trash, "orders"},
		{"_my_table_new", Shadow, "my_table"},
		{"__new", Real, "__new"},
		{"orders_new", Real, "orders_new"},
		{"_orders_gho_x", Real, "_orders_gho_x"},
	} {
		k, real := r.Classify(tt.table)
		if k != tt.kind || real != tt.real {
			t.Errorf("Classify(%q) = %s %q, want %s %q", tt.table, k, real, tt.kind, tt.real)
		}
	}
	var nilRules *Rules
	if k, _ := nilRules.Classify("_t_gho"); k != Real {
		t.Errorf("nil rules classify a shadow table as %s", k)
	}
}

func TestCustomRules(t *testing.T) {
	r, err := NewRules([]string{`^(.+)_shadow$`}, []string{`^(.+)_trash$`})
	if err != nil {
		t.Fatal(err)
	}
	if k, real := r.Classify("t_shadow"); k != Shadow || real != "t" {
		t.Errorf("got %s %q", k, real)
	}
	if k, _ := r.Classify("_t_gho"); k != Real {
		t.Errorf("custom rules replace the defaults; got %s", k)
	}
	for _, bad := range []string{`^_t_gho$`, `^(_t`} {
		if _, err := NewRules([]string{bad}, nil); err == nil || !strings.Contains(err.Error(), "shadow-table-rules") {
			t.Errorf("rule %q: err %v", bad, err)
		}
	}
}
