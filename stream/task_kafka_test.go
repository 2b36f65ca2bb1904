package stream

import (
	"cmp"
	"context"
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap/zaptest"

	"github.com/dmworker/dm-worker/config"
)

// TestTaskKafkaEventsEqualChanges is the events-equal-changes test against
// franz-go's in-process Kafka cluster (topic of 3 partitions): every
// record of the topic carries a dm-event-id header and no identity appears
// twice in this uninterrupted run; the record values applied partition by
// partition, each in offset order, reproduce the source's tables, whichever
// partition is applied first (a consumer may take them in any order: each
// key's events must all be on one partition).
func TestTaskKafkaEventsEqualChanges(t *testing.T) {
	e := newTaskEnv(t)
	c := startKafka(t)
	sink, err := NewSink("cdc", config.SinkConfig{Type: config.SinkKafka,
		Kafka: &config.KafkaSinkConfig{Brokers: c.ListenAddrs(), Topic: "cdc.orders"}}, zaptest.NewLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	run := runEventsEqualChanges(t, e, sink)

	recs := consumeTopic(t, c.ListenAddrs(), "cdc.orders")
	seen := map[string]int{}
	for _, r := range recs {
		var ids []string
		for _, h := range r.Headers {
			if h.Key == KafkaEventIDHeader {
				ids = append(ids, string(h.Value))
			}
		}
		if len(ids) != 1 || ids[0] == "" {
			t.Errorf("record %d/%d (key %s): %s headers %q, want one non-empty", r.Partition, r.Offset, r.Key, KafkaEventIDHeader, ids)
			continue
		}
		seen[ids[0]]++
	}
	for id, n := range seen {
		if n > 1 {
			t.Errorf("event %s is in the topic %d times in one uninterrupted run", id, n)
		}
	}

	checkRowsOnOnePartition(t, recs)

	// Partition by partition, each in offset order: first in ascending
	// partition order (checked in full), then descending (the tables only).
	slices.SortFunc(recs, func(a, b *kgo.Record) int {
		return cmp.Or(cmp.Compare(a.Partition, b.Partition), cmp.Compare(a.Offset, b.Offset))
	})
	records := make([]record, len(recs))
	partitions := map[int32]int{}
	for i, r := range recs {
		records[i] = record{Key: r.Key, Value: r.Value}
		partitions[r.Partition]++
	}
	t.Logf("%d records by partition %v", len(recs), partitions)
	checkEventsEqualChanges(t, e, run, records)

	slices.SortStableFunc(recs, func(a, b *kgo.Record) int { return cmp.Compare(b.Partition, a.Partition) })
	for i, r := range recs {
		records[i] = record{Key: r.Key, Value: r.Value}
	}
	e.applyEvents(t, records)
}

// consumeTopic reads every record of topic up to its end offsets (read
// first: call it once the producer is done), in partition and offset
// order per partition.
func consumeTopic(t *testing.T, brokers []string, topic string) []*kgo.Record {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ends, err := kadm.NewClient(cl).ListEndOffsets(ctx, topic)
	if err != nil {
		t.Fatalf("end offsets of %s: %v", topic, err)
	}
	var want int64
	ends.Each(func(o kadm.ListedOffset) {
		if o.Err != nil {
			t.Fatalf("end offset of %s/%d: %v", topic, o.Partition, o.Err)
		}
		want += o.Offset
	})
	var out []*kgo.Record
	for int64(len(out)) < want {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("consumed %d of the %d records of %s: %v", len(out), want, topic, err)
		}
		fs.EachError(func(tp string, p int32, err error) { t.Fatalf("fetch %s/%d: %v", tp, p, err) })
		out = append(out, fs.Records()...)
	}
	return out
}

// checkRowsOnOnePartition requires all events of a row to be on one
// partition: an update that changes the row's key is keyed by the new key,
// so the old key's events (on the old key's partition) and the update must
// share a partition, or a consumer of the partitions may apply the update
// before the old key's insert and keep a row the source no longer has.
func checkRowsOnOnePartition(t *testing.T, recs []*kgo.Record) {
	t.Helper()
	canon := func(m map[string]json.RawMessage) string {
		b, err := json.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	partitionOf := map[string]int32{} // canonical key → partition
	for _, r := range recs {
		var key map[string]json.RawMessage
		if err := json.Unmarshal(r.Key, &key); err != nil {
			t.Fatalf("record key %s: %v", r.Key, err)
		}
		partitionOf[canon(key)] = r.Partition
	}
	for _, r := range recs {
		v := decodeValue(t, record{Key: r.Key, Value: r.Value})
		if v.Op != "u" {
			continue
		}
		var key map[string]json.RawMessage
		if err := json.Unmarshal(r.Key, &key); err != nil {
			t.Fatalf("record key %s: %v", r.Key, err)
		}
		old := map[string]json.RawMessage{}
		for name := range key {
			old[name] = v.Before[name]
		}
		if canon(old) == canon(key) {
			continue
		}
		if p, ok := partitionOf[canon(old)]; ok && p != r.Partition {
			t.Errorf("the update of %s.%s changing the key %s to %s is one record keyed %s on partition %d, "+
				"while the events of key %s are on partition %d: the row's events are not in order on one partition "+
				"(a consumer applying partition %d first keeps the old row)",
				v.Source.DB, v.Source.Table, canon(old), canon(key), r.Key, r.Partition, canon(old), p, r.Partition)
		}
	}
}
