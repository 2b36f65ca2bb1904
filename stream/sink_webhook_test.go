package stream

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"github.com/dmworker/dm-worker/config"
)

// hookRequest is what the test receiver saw of one POST.
type hookRequest struct {
	key, contentType, token string
	records                 []sinkRecord
}

// hookReceiver records POSTs and answers with the statuses in plan, in
// turn (200 once the plan is used up).
type hookReceiver struct {
	mu sync.Mutex
	// The fields below are guarded by mu.
	plan []int
	got  []hookRequest // accepted requests only
	seen int           // every POST
}

func (h *hookReceiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.WriteHeader(http.StatusMethodNotAllowed)
		return
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.seen++
	status := http.StatusOK
	if len(h.plan) > 0 {
		status, h.plan = h.plan[0], h.plan[1:]
	}
	if status/100 != 2 {
		http.Error(w, "receiver says no", status)
		return
	}
	var recs []sinkRecord
	if err := json.Unmarshal(body, &recs); err != nil {
		http.Error(w, "not a JSON array: "+err.Error(), http.StatusBadRequest)
		return
	}
	h.got = append(h.got, hookRequest{key: r.Header.Get("Idempotency-Key"), contentType: r.Header.Get("Content-Type"),
		token: r.Header.Get("Authorization"), records: recs})
	w.WriteHeader(status)
}

func (h *hookReceiver) accepted() []hookRequest {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]hookRequest(nil), h.got...)
}

func newTestWebhookSink(t *testing.T, url string, batch int) Sink {
	t.Helper()
	cfg := config.WebhookSinkConfig{URL: url, Timeout: config.Duration{Duration: 2 * time.Second}, Batch: batch,
		Headers: map[string]string{"Authorization": "Bearer t0k"}}
	s, err := NewSink("orders", config.SinkConfig{Type: config.SinkWebhook, Webhook: &cfg}, zaptest.NewLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestWebhookSinkBatchesAndHeaders(t *testing.T) {
	checkSinkLeaks(t)
	h := &hookReceiver{}
	srv := httptest.NewServer(h)
	defer srv.Close()
	s := newTestWebhookSink(t, srv.URL+"/events", 4)
	events := sinkTestEvents(100, 10)
	if err := s.Write(context.Background(), events); err != nil {
		t.Fatal(err)
	}
	got := h.accepted()
	if len(got) != 3 {
		t.Fatalf("%d requests for 10 events in batches of 4, want 3", len(got))
	}
	n := 0
	for i, req := range got {
		if want := min(4, 10-4*i); len(req.records) != want {
			t.Errorf("request %d carries %d events, want %d", i, len(req.records), want)
		}
		if req.key != events[n].ID || req.contentType != "application/json" || req.token != "Bearer t0k" {
			t.Errorf("request %d headers: Idempotency-Key %q (want %q), Content-Type %q, Authorization %q",
				i, req.key, events[n].ID, req.contentType, req.token)
		}
		for _, r := range req.records {
			if string(r.Key) != string(events[n].Key) || string(r.Value) != string(events[n].Value) {
				t.Errorf("sinkRecord %d: %s %s, want %s %s", n, r.Key, r.Value, events[n].Key, events[n].Value)
			}
			n++
		}
	}
}

func TestWebhookSinkRetries(t *testing.T) {
	checkSinkLeaks(t)
	h := &hookReceiver{plan: []int{http.StatusInternalServerError, http.StatusBadRequest, http.StatusServiceUnavailable}}
	srv := httptest.NewServer(h)
	defer srv.Close()
	s := newTestWebhookSink(t, srv.URL, 500)
	events := sinkTestEvents(100, 3)
	if err := s.Write(context.Background(), events); err != nil {
		t.Fatal(err)
	}
	got := h.accepted()
	h.mu.Lock()
	seen := h.seen
	h.mu.Unlock()
	if seen != 4 || len(got) != 1 || len(got[0].records) != 3 || got[0].key != events[0].ID {
		t.Fatalf("after 3 refusals: %d POSTs, accepted %+v; want 4 POSTs, the last accepted with the 3 events", seen, got)
	}

	// A receiver that keeps refusing: Write gives up when ctx is done and
	// says why.
	h.mu.Lock()
	h.plan = []int{418, 418, 418, 418, 418, 418, 418, 418, 418, 418, 418, 418}
	h.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	err := s.Write(ctx, events)
	if err == nil || !strings.Contains(err.Error(), "418") || !strings.Contains(err.Error(), "receiver says no") || !strings.Contains(err.Error(), events[0].ID) {
		t.Fatalf("Write against a refusing receiver: %v", err)
	}
}

func TestWebhookSinkTimeout(t *testing.T) {
	checkSinkLeaks(t)
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()
	defer close(release)
	cfg := config.WebhookSinkConfig{URL: srv.URL, Timeout: config.Duration{Duration: 100 * time.Millisecond}, Batch: 10}
	s, err := NewSink("orders", config.SinkConfig{Type: config.SinkWebhook, Webhook: &cfg}, zaptest.NewLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 600*time.Millisecond)
	defer cancel()
	start := time.Now()
	err = s.Write(ctx, sinkTestEvents(100, 1))
	if err == nil || !strings.Contains(err.Error(), "sink.webhook.timeout") {
		t.Fatalf("Write to a receiver that never answers: %v", err)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("Write returned %v after ctx ended", d)
	}
}

func TestWebhookSinkProbe(t *testing.T) {
	checkSinkLeaks(t)
	tests := []struct {
		name    string
		handler http.HandlerFunc
		ok      bool
	}{
		{"405", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusMethodNotAllowed) }, true},
		{"204", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNoContent) }, true},
		{"404", http.NotFound, false},
		{"500", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusInternalServerError) }, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := httptest.NewServer(tt.handler)
			defer srv.Close()
			err := newTestWebhookSink(t, srv.URL, 10).Probe(context.Background())
			if (err == nil) != tt.ok {
				t.Fatalf("probe against %s: %v", tt.name, err)
			}
			if err != nil && (!strings.Contains(err.Error(), tt.name) || !strings.Contains(err.Error(), `stream "orders"`)) {
				t.Errorf("probe error does not name the status and stream: %v", err)
			}
		})
	}
	// Nothing listens: the error says to check the receiver.
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL
	srv.Close()
	if err := newTestWebhookSink(t, url, 10).Probe(context.Background()); err == nil || !strings.Contains(err.Error(), "receiver") {
		t.Errorf("probe of a closed port: %v", err)
	}
}
