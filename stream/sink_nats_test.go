package stream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap/zaptest"

	"github.com/dmworker/dm-worker/config"
	"github.com/dmworker/dm-worker/tests/natstest"
	"github.com/dmworker/dm-worker/tests/testutil"
)

func newTestNATSSink(t *testing.T, url, subject, stream string) Sink {
	t.Helper()
	cfg := config.NATSSinkConfig{URL: url, Subject: subject, Stream: stream}
	s, err := NewSink("orders", config.SinkConfig{Type: config.SinkNATS, NATS: &cfg}, zaptest.NewLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// natsReader reads what a JetStream stream holds, from its own connection.
type natsReader struct {
	t  *testing.T
	js jetstream.JetStream
}

func newNATSReader(t *testing.T, url string) *natsReader {
	t.Helper()
	nc, err := nats.Connect(url, nats.MaxReconnects(-1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return &natsReader{t: t, js: js}
}

// natsStored is one message of the stream.
type natsStored struct {
	subject, msgID string
	rec            sinkRecord
}

// all returns every message of stream, in order.
func (r *natsReader) all(stream string) ([]natsStored, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	st, err := r.js.Stream(ctx, stream)
	if err != nil {
		return nil, err
	}
	info, err := st.Info(ctx)
	if err != nil {
		return nil, err
	}
	var out []natsStored
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq && info.State.Msgs > 0; seq++ {
		m, err := st.GetMsg(ctx, seq)
		if err != nil {
			return nil, fmt.Errorf("message %d: %w", seq, err)
		}
		var rec sinkRecord
		if err := json.Unmarshal(m.Data, &rec); err != nil {
			return nil, fmt.Errorf("message %d body %q: %w", seq, m.Data, err)
		}
		out = append(out, natsStored{subject: m.Subject, msgID: m.Header.Get(jetstream.MsgIDHeader), rec: rec})
	}
	return out, nil
}

// checkStored compares the stream's messages with events, in order.
func checkStored(got []natsStored, events []Event, subject func(Event) string) error {
	if len(got) != len(events) {
		return fmt.Errorf("the stream holds %d messages, want %d", len(got), len(events))
	}
	for i, e := range events {
		g := got[i]
		if g.msgID != e.ID || g.subject != subject(e) || string(g.rec.Key) != string(e.Key) || string(g.rec.Value) != string(e.Value) {
			return fmt.Errorf("message %d: subject %q Nats-Msg-Id %q body %s %s; want %q %q %s %s",
				i, g.subject, g.msgID, g.rec.Key, g.rec.Value, subject(e), e.ID, e.Key, e.Value)
		}
	}
	return nil
}

func TestNATSSinkPublishAndDedup(t *testing.T) {
	checkSinkLeaks(t)
	srv := natstest.Start(t)
	ctx := context.Background()
	s := newTestNATSSink(t, srv.URL(), "cdc.orders", "")
	if err := s.Probe(ctx); err != nil {
		t.Fatalf("probe: %v", err)
	}
	events := sinkTestEvents(100, 600) // more than the publish window
	events[1].Table = "order.items"
	events[2] = Event{ID: "s1:mariadb-bin.000001:99:0", Key: []byte(`{"db":"shop","table":""}`), Value: []byte(`{"ddl":"CREATE DATABASE shop"}`), DB: "shop", Op: "ddl"}
	if err := s.Write(ctx, events); err != nil {
		t.Fatal(err)
	}
	subject := func(e Event) string {
		switch e.Table {
		case "":
			return "cdc.orders.shop._"
		case "order.items":
			return "cdc.orders.shop.order%2Eitems"
		}
		return "cdc.orders.shop.orders"
	}
	r := newNATSReader(t, srv.URL())
	got, err := r.all("cdc_orders")
	if err != nil {
		t.Fatal(err)
	}
	if err := checkStored(got, events, subject); err != nil {
		t.Fatal(err)
	}

	// Publishing the same events again (a retried batch after a crash)
	// stores nothing new: JetStream drops them by Nats-Msg-Id.
	if err := s.Write(ctx, events[:300]); err != nil {
		t.Fatal(err)
	}
	got, err = r.all("cdc_orders")
	if err != nil {
		t.Fatal(err)
	}
	if err := checkStored(got, events, subject); err != nil {
		t.Fatalf("after publishing again: %v", err)
	}

	// A second sink on the same subject finds the stream the first made.
	s2 := newTestNATSSink(t, srv.URL(), "cdc.orders", "")
	if err := s2.Write(ctx, sinkTestEvents(700, 1)); err != nil {
		t.Fatal(err)
	}
	if got, err := r.all("cdc_orders"); err != nil || len(got) != len(events)+1 {
		t.Fatalf("after a second sink wrote one event: %d messages, %v", len(got), err)
	}
}

func TestNATSSinkNamedStream(t *testing.T) {
	checkSinkLeaks(t)
	srv := natstest.Start(t)
	ctx := context.Background()
	// Missing: created with the subject.
	if err := newTestNATSSink(t, srv.URL(), "cdc.a", "CDC_A").Probe(ctx); err != nil {
		t.Fatalf("probe with a stream to create: %v", err)
	}
	r := newNATSReader(t, srv.URL())
	st, err := r.js.Stream(ctx, "CDC_A")
	if err != nil || st.CachedInfo().Config.Subjects[0] != "cdc.a.>" {
		t.Fatalf("stream CDC_A: %v", err)
	}
	// Existing, covering the subject with a wildcard: used.
	if _, err := r.js.CreateStream(ctx, jetstream.StreamConfig{Name: "WIDE", Subjects: []string{"wide.*.>"}}); err != nil {
		t.Fatal(err)
	}
	if err := newTestNATSSink(t, srv.URL(), "wide.x", "WIDE").Probe(ctx); err != nil {
		t.Errorf("probe of a covering stream: %v", err)
	}
	// Existing but bound to other subjects: refused, naming both.
	err = newTestNATSSink(t, srv.URL(), "cdc.b", "CDC_A").Probe(ctx)
	if err == nil || !strings.Contains(err.Error(), `"CDC_A"`) || !strings.Contains(err.Error(), "cdc.b.>") {
		t.Errorf("probe of a stream bound elsewhere: %v", err)
	}
}

func TestNATSSinkProbeNoServer(t *testing.T) {
	checkSinkLeaks(t)
	url := fmt.Sprintf("nats://127.0.0.1:%d", testutil.MustFreePort(t))
	err := newTestNATSSink(t, url, "cdc.orders", "").Probe(context.Background())
	if err == nil || !strings.Contains(err.Error(), `stream "orders"`) || !strings.Contains(err.Error(), "sink.nats.url") {
		t.Fatalf("probe without a server: %v", err)
	}
}

// TestNATSSinkServerDown stops the server under a Write: Write keeps
// retrying (and does not return) while it is down, and delivers every
// event exactly once after it is back.
func TestNATSSinkServerDown(t *testing.T) {
	checkSinkLeaks(t)
	srv := natstest.Start(t)
	ctx := context.Background()
	s := newTestNATSSink(t, srv.URL(), "cdc.orders", "")
	first := sinkTestEvents(100, 50)
	if err := s.Write(ctx, first); err != nil {
		t.Fatal(err)
	}
	srv.Stop()

	second := sinkTestEvents(150, 400)
	w := startWrite(t, s, second, 1500*time.Millisecond)
	srv.Restart()
	w.succeeds(t)
	all := append(first, second...)
	r := newNATSReader(t, srv.URL())
	testutil.Eventually(t, 10*time.Second, "the stream holds every event once, in order", func() error {
		got, err := r.all("cdc_orders")
		if err != nil {
			return err
		}
		return checkStored(got, all, func(Event) string { return "cdc.orders.shop.orders" })
	})

	// A Write whose ctx ends while the server is down says so.
	srv.Stop()
	short, cancelShort := context.WithTimeout(ctx, 700*time.Millisecond)
	defer cancelShort()
	err := s.Write(short, sinkTestEvents(600, 1))
	if err == nil || !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "gave up") {
		t.Fatalf("Write with the server down until ctx ends: %v", err)
	}
}
