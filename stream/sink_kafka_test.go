package stream

import (
	"context"
	"crypto/tls"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap/zaptest"

	"github.com/dmworker/dm-worker/config"
	"github.com/dmworker/dm-worker/tests/testutil"
	"github.com/dmworker/dm-worker/tests/tlstest"
)

// startKafka runs franz-go's in-process Kafka cluster on loopback ports
// with topic cdc.orders of 3 partitions.
func startKafka(t *testing.T, opts ...kfake.Opt) *kfake.Cluster {
	t.Helper()
	c, err := kfake.NewCluster(append([]kfake.Opt{kfake.NumBrokers(1), kfake.SeedTopics(3, "cdc.orders")}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

func newTestKafkaSink(t *testing.T, cfg config.KafkaSinkConfig) Sink {
	t.Helper()
	if cfg.Topic == "" {
		cfg.Topic = "cdc.orders"
	}
	s, err := NewSink("orders", config.SinkConfig{Type: config.SinkKafka, Kafka: &cfg}, zaptest.NewLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// consumeAll reads n records of the topic from the start.
func consumeAll(t *testing.T, brokers []string, n int) []*kgo.Record {
	t.Helper()
	return consumeUntil(t, brokers, func(recs []*kgo.Record) bool { return len(recs) >= n })
}

// consumeUntil reads the topic from the start until done says it has
// read enough.
func consumeUntil(t *testing.T, brokers []string, done func([]*kgo.Record) bool) []*kgo.Record {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ConsumeTopics("cdc.orders"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var out []*kgo.Record
	for !done(out) {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("consumed %d records, not yet enough: %v", len(out), err)
		}
		fs.EachError(func(topic string, p int32, err error) { t.Fatalf("fetch %s/%d: %v", topic, p, err) })
		out = append(out, fs.Records()...)
	}
	return out
}

func TestKafkaSinkRecords(t *testing.T) {
	checkSinkLeaks(t)
	c := startKafka(t)
	s := newTestKafkaSink(t, config.KafkaSinkConfig{Brokers: c.ListenAddrs()})
	ctx := context.Background()
	if err := s.Probe(ctx); err != nil {
		t.Fatalf("probe: %v", err)
	}
	// 300 events over 20 keys: each key changes 15 times.
	events := sinkTestEvents(100, 300)
	for i := range events {
		events[i].Key = fmt.Appendf(nil, `{"id":%d}`, i%20)
	}
	if err := s.Write(ctx, events); err != nil {
		t.Fatal(err)
	}
	recs := consumeAll(t, c.ListenAddrs(), len(events))
	if len(recs) != len(events) {
		t.Fatalf("%d records, want %d", len(recs), len(events))
	}
	byID := map[string]Event{}
	for _, e := range events {
		byID[e.ID] = e
	}
	partitionOf := map[string]int32{} // key → partition
	lastIdx := map[string]int{}       // key → position in events of its last record
	index := map[string]int{}
	for i, e := range events {
		index[e.ID] = i
	}
	partitions := map[int32]bool{}
	for _, r := range recs {
		if len(r.Headers) != 1 || r.Headers[0].Key != KafkaEventIDHeader {
			t.Fatalf("record headers %+v, want one %s", r.Headers, KafkaEventIDHeader)
		}
		id := string(r.Headers[0].Value)
		e, ok := byID[id]
		if !ok {
			t.Fatalf("record with unknown %s %q", KafkaEventIDHeader, id)
		}
		delete(byID, id)
		if string(r.Key) != string(e.Key) || string(r.Value) != string(e.Value) {
			t.Fatalf("record %s: key %s value %s, want %s %s", id, r.Key, r.Value, e.Key, e.Value)
		}
		k := string(r.Key)
		if p, seen := partitionOf[k]; seen && p != r.Partition {
			t.Fatalf("key %s on partitions %d and %d", k, p, r.Partition)
		}
		partitionOf[k] = r.Partition
		partitions[r.Partition] = true
		if last, seen := lastIdx[k]; seen && index[id] < last {
			t.Fatalf("key %s: event %s arrived after a later one", k, id)
		}
		lastIdx[k] = index[id]
	}
	if len(byID) != 0 {
		t.Fatalf("%d events never arrived", len(byID))
	}
	if len(partitions) < 2 {
		t.Errorf("20 keys all on partition(s) %v: not partitioned by key", partitions)
	}
}

func TestKafkaSinkProbeMissingTopic(t *testing.T) {
	checkSinkLeaks(t)
	c := startKafka(t)
	s := newTestKafkaSink(t, config.KafkaSinkConfig{Brokers: c.ListenAddrs(), Topic: "cdc.missing"})
	err := s.Probe(context.Background())
	if err == nil || !strings.Contains(err.Error(), `"cdc.missing" does not exist`) || !strings.Contains(err.Error(), `stream "orders"`) {
		t.Fatalf("probe of a missing topic: %v", err)
	}
}

func TestKafkaSinkSASL(t *testing.T) {
	checkSinkLeaks(t)
	for _, mech := range []string{config.SASLPlain, config.SASLScramSHA256, config.SASLScramSHA512} {
		t.Run(mech, func(t *testing.T) {
			c := startKafka(t, kfake.EnableSASL(), kfake.Superuser(strings.ToUpper(mech), "cdc", "s3cret"))
			good := newTestKafkaSink(t, config.KafkaSinkConfig{Brokers: c.ListenAddrs(),
				SASL: &config.KafkaSASL{Mechanism: mech, User: "cdc", Password: "s3cret"}})
			if err := good.Probe(context.Background()); err != nil {
				t.Fatalf("probe with the right password: %v", err)
			}
			if err := good.Write(context.Background(), sinkTestEvents(100, 5)); err != nil {
				t.Fatal(err)
			}
			bad := newTestKafkaSink(t, config.KafkaSinkConfig{Brokers: c.ListenAddrs(),
				SASL: &config.KafkaSASL{Mechanism: mech, User: "cdc", Password: "wrong"}})
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			if err := bad.Probe(ctx); err == nil || !strings.Contains(strings.ToUpper(err.Error()), "SASL") {
				t.Fatalf("probe with a wrong password: %v", err)
			}
		})
	}
}

func TestKafkaSinkTLS(t *testing.T) {
	checkSinkLeaks(t)
	files := tlstest.Generate(t, tlstest.Options{})
	cert, err := tls.LoadX509KeyPair(files.ServerCert, files.ServerKey)
	if err != nil {
		t.Fatal(err)
	}
	c := startKafka(t, kfake.TLS(&tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}))
	s := newTestKafkaSink(t, config.KafkaSinkConfig{Brokers: c.ListenAddrs(), TLS: &config.Security{SSLCA: files.CA}})
	if err := s.Probe(context.Background()); err != nil {
		t.Fatalf("probe over TLS: %v", err)
	}
	if err := s.Write(context.Background(), sinkTestEvents(100, 3)); err != nil {
		t.Fatal(err)
	}
	// A CA that did not sign the broker's certificate: refused.
	wrong := newTestKafkaSink(t, config.KafkaSinkConfig{Brokers: c.ListenAddrs(), TLS: &config.Security{SSLCA: files.OtherCA}})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := wrong.Probe(ctx); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Fatalf("probe with the wrong CA: %v", err)
	}
}

// TestKafkaSinkBrokerDown takes the cluster away under a Write: Write keeps
// retrying while it is down and delivers once a cluster listens again on
// the same port; with the broker gone until ctx ends, Write says so.
func TestKafkaSinkBrokerDown(t *testing.T) {
	checkSinkLeaks(t)
	// The cluster keeps its data (topic IDs included) in dir, so the one
	// started again is the same cluster, as a restarted broker is.
	port, dir := testutil.MustFreePort(t), t.TempDir()
	c := startKafka(t, kfake.Ports(port), kfake.DataDir(dir), kfake.SyncWrites())
	brokers := c.ListenAddrs()
	s := newTestKafkaSink(t, config.KafkaSinkConfig{Brokers: brokers})
	ctx := context.Background()
	if err := s.Write(ctx, sinkTestEvents(100, 10)); err != nil {
		t.Fatal(err)
	}
	c.Close()

	short, cancel := context.WithTimeout(ctx, 700*time.Millisecond)
	defer cancel()
	err := s.Write(short, sinkTestEvents(110, 5))
	if err == nil || !strings.Contains(err.Error(), "gave up") {
		t.Fatalf("Write with the broker down until ctx ends: %v", err)
	}

	w := startWrite(t, s, sinkTestEvents(200, 20), time.Second)
	c2, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.Ports(port), kfake.DataDir(dir), kfake.SyncWrites())
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	w.succeeds(t)
	// Every event of the Write arrives (the 10 before and the 5 of the
	// abandoned Write may be there too: at-least-once).
	want := sinkTestEvents(200, 20)
	consumeUntil(t, c2.ListenAddrs(), func(recs []*kgo.Record) bool {
		ids := map[string]bool{}
		for _, r := range recs {
			ids[string(r.Headers[0].Value)] = true
		}
		for _, e := range want {
			if !ids[e.ID] {
				return false
			}
		}
		return true
	})
}
