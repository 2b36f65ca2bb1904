package sqlschema

import (
	"strings"
	"testing"

	"github.com/dmworker/dm-worker/tests/mariadbtest"
)

// TestChooseKeyset checks which index pages a table: the primary key, else
// the first unique BTREE key over NOT NULL whole columns of pageable types.
func TestChooseKeyset(t *testing.T) {
	inst := mariadbtest.Start(t, mariadbtest.Options{Name: "keychoice", FastCommit: true})
	inst.Exec(t, "CREATE DATABASE k")
	cases := []struct {
		name, create string
		want         string // index chosen, "" for none
		wantCols     string
		rejected     []string // indexes passed over
	}{
		{name: "pk", create: "(a INT NOT NULL, b INT NOT NULL, UNIQUE KEY ub (b), PRIMARY KEY (a))", want: "PRIMARY", wantCols: "a"},
		{name: "bitpk", create: "(b BIT(64) NOT NULL PRIMARY KEY)", want: "PRIMARY", wantCols: "b"},
		{name: "floatpk", create: "(f FLOAT NOT NULL PRIMARY KEY, u INT NOT NULL, UNIQUE KEY uu (u))", want: "uu", wantCols: "u", rejected: []string{"PRIMARY"}},
		{name: "nullable", create: "(a INT NULL, b INT NOT NULL, c INT NOT NULL, UNIQUE KEY ua (a), UNIQUE KEY ubc (b, c))",
			want: "ubc", wantCols: "b,c"}, // the server orders ua after ubc
		{name: "onlynullable", create: "(a INT NULL, UNIQUE KEY ua (a))", rejected: []string{"ua"}},
		{name: "prefix", create: "(s VARCHAR(100) NOT NULL, n INT NOT NULL, UNIQUE KEY us (s(10)), UNIQUE KEY un (n))",
			want: "un", wantCols: "n"}, // the server orders us after un
		{name: "onlyprefix", create: "(s VARCHAR(100) NOT NULL, UNIQUE KEY us (s(10)))", rejected: []string{"us"}},
		{name: "hash", create: "(x BLOB NOT NULL, UNIQUE KEY ux (x))", rejected: []string{"ux"}},
		{name: "enum", create: "(e ENUM('b','a') NOT NULL, UNIQUE KEY ue (e))", rejected: []string{"ue"}},
		{name: "none", create: "(a INT, KEY ka (a))"},
	}
	for _, c := range cases {
		inst.Exec(t, "CREATE TABLE k."+c.name+" "+c.create)
	}
	conn := session(t, inst, "binary")
	for _, c := range cases {
		tbl, err := ReadTable(t.Context(), conn, "k", c.name)
		if err != nil {
			t.Fatal(err)
		}
		k, rejected, err := ChooseKeyset(tbl, "binary")
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		var got, cols string
		if k != nil {
			got, cols = k.Index, strings.Join(k.Names(), ",")
		}
		var rej []string
		for _, r := range rejected {
			rej = append(rej, r.Index)
		}
		if got != c.want || cols != c.wantCols || strings.Join(rej, ",") != strings.Join(c.rejected, ",") {
			t.Errorf("%s: chose %q (%s), passed over %v; want %q (%s), passed over %v", c.name, got, cols, rejected, c.want, c.wantCols, c.rejected)
		}
	}
}
