package main

import (
	"encoding/json"
	"testing"
)

func TestChunkProgress(t *testing.T) {
	tests := []struct{ progress, want string }{
		{`{"stage":"dumping","chunks-total":21,"chunks-done":20,"rows":205000,"rows-per-second":99999.6,"eta-seconds":0.4}`,
			"chunks 20/21  rows 205000  100000 rows/s  eta 0s"},
		{`{"stage":"snapshot","chunks-total":0,"chunks-done":0,"rows":0,"rows-per-second":0}`, "chunks 0/?  rows 0  0 rows/s"},
		{`{"chunks-total":21,"chunks-done":16,"rows":155000,"rows-total":205000,"rows-per-second":82554.6,"eta-seconds":61.2}`,
			"chunks 16/21  rows 155000/205000  82555 rows/s  eta 1m1s"},
		{`{"binlog":"mariadb-bin.000001:4","inserts":3}`, ""},
		{`{}`, ""},
		{`null`, ""},
	}
	for _, tt := range tests {
		if got := chunkProgress(json.RawMessage(tt.progress)); got != tt.want {
			t.Errorf("chunkProgress(%s) = %q, want %q", tt.progress, got, tt.want)
		}
	}
}
