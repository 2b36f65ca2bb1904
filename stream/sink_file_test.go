package stream

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"go.uber.org/zap/zaptest"

	"github.com/dmworker/dm-worker/config"
)

func newTestFileSink(t *testing.T, dir string, rotate config.ByteSize) Sink {
	t.Helper()
	s, err := NewSink("orders", config.SinkConfig{Type: config.SinkFile, File: &config.FileSinkConfig{Dir: dir, RotateSize: rotate}}, zaptest.NewLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// readFileSinkLines reads every line of the stream's files in sequence order and
// returns the ids of the events and the file names.
func readFileSinkLines(t *testing.T, dir string) (ids []int, files []string) {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "orders.*.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(files)
	for _, name := range files {
		f, err := os.Open(name)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			var r sinkRecord
			if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
				t.Fatalf("%s: line %q: %v", name, sc.Text(), err)
			}
			var key struct{ ID int }
			if err := json.Unmarshal(r.Key, &key); err != nil {
				t.Fatalf("%s: key %s: %v", name, r.Key, err)
			}
			if !strings.Contains(string(r.Value), fmt.Sprintf(`"row %d"`, key.ID)) {
				t.Fatalf("%s: value %s does not belong to key %s", name, r.Value, r.Key)
			}
			ids = append(ids, key.ID)
		}
		if err := sc.Err(); err != nil {
			t.Fatal(err)
		}
		f.Close()
	}
	return ids, files
}

func seqInts(from, to int) []int {
	var out []int
	for i := from; i < to; i++ {
		out = append(out, i)
	}
	return out
}

func TestFileSinkRotationAndResume(t *testing.T) {
	checkSinkLeaks(t)
	dir := filepath.Join(t.TempDir(), "cdc") // created by the sink
	ctx := context.Background()
	// Ids of three digits: every line has the same length; ten lines a file.
	line := len(appendSinkRecord(nil, sinkTestEvents(100, 1)[0])) + 1
	rotate := config.ByteSize(10 * line)

	s := newTestFileSink(t, dir, rotate)
	if err := s.Probe(ctx); err != nil {
		t.Fatalf("probe: %v", err)
	}
	if err := s.Write(ctx, sinkTestEvents(100, 25)); err != nil {
		t.Fatal(err)
	}
	ids, files := readFileSinkLines(t, dir)
	if !slices.Equal(ids, seqInts(100, 125)) {
		t.Fatalf("ids after the first batch: %v", ids)
	}
	want := []string{"orders.000001.jsonl", "orders.000002.jsonl", "orders.000003.jsonl"}
	if got := fileBaseNames(files); !slices.Equal(got, want) {
		t.Fatalf("files %v, want %v", got, want)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	// Reopened: continues the last file (5 lines, below rotate-size) after
	// cutting a torn line a crash left behind.
	last := filepath.Join(dir, want[2])
	f, err := os.OpenFile(last, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString(`{"key":{"id":125},"val`); err != nil {
		t.Fatal(err)
	}
	f.Close()
	s = newTestFileSink(t, dir, rotate)
	defer s.Close()
	if err := s.Write(ctx, sinkTestEvents(125, 10)); err != nil {
		t.Fatal(err)
	}
	ids, files = readFileSinkLines(t, dir)
	if !slices.Equal(ids, seqInts(100, 135)) {
		t.Fatalf("ids after reopening: %v", ids)
	}
	if got := fileBaseNames(files); !slices.Equal(got, append(want, "orders.000004.jsonl")) {
		t.Fatalf("files after reopening: %v", got)
	}
	st, err := os.Stat(last)
	if err != nil || st.Size() != int64(10*line) {
		t.Fatalf("%s continued to %v bytes (%v), want %d", last, st.Size(), err, 10*line)
	}
}

func fileBaseNames(paths []string) []string {
	out := make([]string, len(paths))
	for i, p := range paths {
		out[i] = filepath.Base(p)
	}
	return out
}

func TestFileSinkResumeAfterFullFile(t *testing.T) {
	checkSinkLeaks(t)
	dir := t.TempDir()
	ctx := context.Background()
	// Files of other streams and other names are left alone.
	for _, name := range []string{"orders.000007.jsonl", "orders-2.000009.jsonl", "orders.9.jsonl"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("{}\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	s := newTestFileSink(t, dir, 2) // every file is full after one line
	defer s.Close()
	if err := s.Write(ctx, sinkTestEvents(0, 2)); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"orders.000008.jsonl", "orders.000009.jsonl"} {
		data, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil || strings.Count(string(data), "\n") != 1 {
			t.Errorf("%s: %q, %v; want one line", name, data, err)
		}
	}
	if data, _ := os.ReadFile(filepath.Join(dir, "orders.000007.jsonl")); string(data) != "{}\n" {
		t.Errorf("the full file was written to: %q", data)
	}
}

func TestFileSinkProbeFailures(t *testing.T) {
	checkSinkLeaks(t)
	ctx := context.Background()
	parent := filepath.Join(t.TempDir(), "plain-file")
	if err := os.WriteFile(parent, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	s := newTestFileSink(t, filepath.Join(parent, "cdc"), 0)
	err := s.Probe(ctx)
	if err == nil || !strings.Contains(err.Error(), `stream "orders"`) || !strings.Contains(err.Error(), "cannot be created") {
		t.Errorf("probe of a directory under a file: %v", err)
	}

	if os.Geteuid() == 0 {
		t.Log("running as root: a read-only directory is writable for root, its case is not checked")
		return
	}
	ro := filepath.Join(t.TempDir(), "ro")
	if err := os.Mkdir(ro, 0o555); err != nil {
		t.Fatal(err)
	}
	s = newTestFileSink(t, ro, 0)
	if err := s.Probe(ctx); err == nil || !strings.Contains(err.Error(), "not writable") {
		t.Errorf("probe of a read-only directory: %v", err)
	}
}

func TestNewSinkErrors(t *testing.T) {
	checkSinkLeaks(t)
	tests := []struct {
		name string
		cfg  config.SinkConfig
		want string
	}{
		{"unknown type", config.SinkConfig{Type: "pulsar"}, `sink.type "pulsar"`},
		{"missing file block", config.SinkConfig{Type: config.SinkFile}, "sink.file must be set"},
		{"missing kafka block", config.SinkConfig{Type: config.SinkKafka}, "sink.kafka must be set"},
		{"bad subject", config.SinkConfig{Type: config.SinkNATS, NATS: &config.NATSSinkConfig{URL: "nats://127.0.0.1:1", Subject: "a.*"}}, "sink.nats.subject"},
		{"bad webhook url", config.SinkConfig{Type: config.SinkWebhook, Webhook: &config.WebhookSinkConfig{URL: "::"}}, "sink.webhook.url"},
		{"kafka tls files", config.SinkConfig{Type: config.SinkKafka, Kafka: &config.KafkaSinkConfig{Brokers: []string{"127.0.0.1:1"}, Topic: "t", TLS: &config.Security{SSLCA: "/nonexistent/ca.pem"}}}, "sink.kafka.tls.ssl-ca"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := NewSink("orders", tt.cfg, nil)
			if err == nil {
				s.Close()
				t.Fatal("no error")
			}
			if !strings.Contains(err.Error(), `stream "orders"`) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %q does not name the stream and %q", err, tt.want)
			}
		})
	}
}

// The file sink writes the lines of events the encoder laid out as their
// records (Event.rec, copied in one piece) and of events built by hand
// alike, in order, across rotations and flushes: every line is exactly
// {"key":<Key>,"value":<Value>}.
func TestFileSinkEncodedLines(t *testing.T) {
	dir := t.TempDir()
	sink := newTestFileSink(t, dir, 64<<10)
	e := encEncoder(t, FormatDebezium)
	s := encSchema(t)
	var a arena
	var batch []Event
	for i := range 3000 {
		pos := encPos
		pos.Row = i
		ev, err := e.row(&a, s, "c", nil, []any{int32(i), fmt.Sprintf("row %d", i), int64(i), int64(1)}, pos)
		if err != nil {
			t.Fatal(err)
		}
		if ev.rec == nil {
			t.Fatal("an encoded row change has no record")
		}
		if i%3 == 0 {
			ev.rec = nil // as an event built by hand
		}
		batch = append(batch, ev)
	}
	ctx := context.Background()
	for from := 0; from < len(batch); from += 1100 {
		if err := sink.Write(ctx, batch[from:min(from+1100, len(batch))]); err != nil {
			t.Fatal(err)
		}
	}
	if err := sink.Close(); err != nil {
		t.Fatal(err)
	}
	files, err := filepath.Glob(filepath.Join(dir, "orders.*.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(files)
	var got []string
	for _, name := range files {
		b, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, strings.SplitAfter(string(b), "\n")...)
		if got[len(got)-1] == "" {
			got = got[:len(got)-1]
		}
	}
	if len(files) < 3 || len(got) != len(batch) {
		t.Fatalf("%d lines in %d files, want %d lines in several", len(got), len(files), len(batch))
	}
	for i, ev := range batch {
		if want := `{"key":` + string(ev.Key) + `,"value":` + string(ev.Value) + "}\n"; got[i] != want {
			t.Fatalf("line %d:\n%s\nwant\n%s", i, got[i], want)
		}
	}
}
