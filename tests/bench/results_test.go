//go:build bench

package bench

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// resultsEnv names the file every benchmark appends its row to.
const resultsEnv = "BENCH_RESULTS"

// defaultResults is relative to this package's directory, where go test runs the tests.
const defaultResults = "results.tsv"

// resultsMu serialises appends from tests of this process.
var resultsMu sync.Mutex

// field is one name=value column of a result row.
type field struct {
	name  string
	value any
}

func f(name string, value any) field { return field{name, value} }

// record logs "BENCH <name>: k=v ..." and appends a tab-separated row
// (RFC 3339 time, name, k=v columns) to the results file.
func record(t *testing.T, name string, fields ...field) {
	t.Helper()
	cols := make([]string, 0, len(fields))
	for _, fl := range fields {
		cols = append(cols, fl.name+"="+format(fl.value))
	}
	t.Logf("BENCH %s: %s", name, strings.Join(cols, " "))
	path := os.Getenv(resultsEnv)
	if path == "" {
		path = defaultResults
	}
	row := time.Now().UTC().Format(time.RFC3339) + "\t" + name + "\t" + strings.Join(cols, "\t") + "\n"
	resultsMu.Lock()
	defer resultsMu.Unlock()
	file, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatalf("open results file: %v", err)
	}
	if _, err := file.WriteString(row); err != nil {
		_ = file.Close()
		t.Fatalf("append to %s: %v", path, err)
	}
	if err := file.Close(); err != nil {
		t.Fatalf("close %s: %v", path, err)
	}
}

func format(v any) string {
	switch x := v.(type) {
	case float64:
		return strconv.FormatFloat(x, 'f', 2, 64)
	case time.Duration:
		return x.Round(time.Millisecond).String()
	default:
		return strings.ReplaceAll(fmt.Sprint(x), "\t", " ")
	}
}

// mb is bytes in MB (10^6 bytes), for throughput and memory columns.
func mb(bytes int64) float64 { return float64(bytes) / 1e6 }

// ratio is a/b, 0 when b is 0.
func ratio(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return a / b
}

// verdict says whether a ratio meets its target.
func verdict(got, target float64) string {
	if got >= target {
		return fmt.Sprintf("met(>=%.2f)", target)
	}
	return fmt.Sprintf("MISSED(>=%.2f,short_by_%.0f%%)", target, 100*(1-got/target))
}

// envInt reads a positive integer from the environment, def when unset.
func envInt(t *testing.T, name string, def int64) int64 {
	t.Helper()
	s := os.Getenv(name)
	if s == "" {
		return def
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n <= 0 {
		t.Fatalf("%s=%q: want a positive integer", name, s)
	}
	return n
}

// rssVerdict says whether a peak RSS (bytes) stays within limit (bytes).
func rssVerdict(rss, limit int64) string {
	if rss <= limit {
		return fmt.Sprintf("met(<=%dMiB)", limit>>20)
	}
	return fmt.Sprintf("MISSED(<=%dMiB,over_by_%.0f%%)", limit>>20, 100*(float64(rss)/float64(limit)-1))
}
