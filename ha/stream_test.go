package ha

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/dmworker/dm-worker/config"
)

func TestStreamCheckpointRoundtrip(t *testing.T) {
	s, _ := newStore(t)
	ctx := t.Context()
	cp := StreamCheckpoint{
		BinlogName: "mariadb-bin.000003", BinlogPos: 1234, BinlogGTID: "0-1-900",
		SnapshotDone: true, Time: time.Date(2026, 1, 2, 15, 4, 5, 0, time.UTC),
	}
	if _, found, err := s.GetStreamCheckpoint(ctx, "s1", "orders"); found || err != nil {
		t.Fatalf("before any put: found %v, err %v", found, err)
	}
	rev, err := s.PutStreamCheckpoint(ctx, "s1", "orders", cp)
	if err != nil {
		t.Fatal(err)
	}

	// The value has the contract's fields, and no lease.
	resp, err := s.Client().Get(ctx, "/dm/stream/checkpoint/s1/orders")
	if err != nil || len(resp.Kvs) != 1 {
		t.Fatalf("raw get: %v, %d keys", err, len(resp.Kvs))
	}
	kv := resp.Kvs[0]
	if kv.Lease != 0 || kv.ModRevision != rev {
		t.Errorf("key has lease %d, revision %d; want no lease and revision %d", kv.Lease, kv.ModRevision, rev)
	}
	var raw map[string]any
	if err := json.Unmarshal(kv.Value, &raw); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"binlog-name": "mariadb-bin.000003", "binlog-pos": 1234.0, "binlog-gtid": "0-1-900", "snapshot-done": true, "time": "2026-01-02T15:04:05Z"}
	if !reflect.DeepEqual(raw, want) {
		t.Errorf("value %s, want the fields %v", kv.Value, want)
	}

	got, found, err := s.GetStreamCheckpoint(ctx, "s1", "orders")
	if err != nil || !found || !reflect.DeepEqual(got, cp) {
		t.Fatalf("get: %+v, found %v, err %v; want %+v", got, found, err, cp)
	}
	if _, err := s.DeleteStreamCheckpoint(ctx, "s1", "orders"); err != nil {
		t.Fatal(err)
	}
	if _, found, err := s.GetStreamCheckpoint(ctx, "s1", "orders"); found || err != nil {
		t.Fatalf("after delete: found %v, err %v", found, err)
	}
	if _, err := s.DeleteStreamCheckpoint(ctx, "s1", "orders"); err != nil {
		t.Fatalf("delete of an absent checkpoint: %v", err)
	}
}

// TestStreamCheckpointTxn: a checkpoint inside a transaction keeps the
// contract's fields and adds the "txn" object, which reads back.
func TestStreamCheckpointTxn(t *testing.T) {
	s, _ := newStore(t)
	ctx := t.Context()
	cp := StreamCheckpoint{
		BinlogName: "mariadb-bin.000003", BinlogPos: 1234, BinlogGTID: "0-1-900", SnapshotDone: true,
		Time: time.Date(2026, 1, 2, 15, 4, 5, 0, time.UTC),
		Txn:  &StreamTxnProgress{BinlogName: "mariadb-bin.000003", BinlogPos: 99999, Row: 7, KeyDelete: true, GTID: "0-1-901", Events: 5000},
	}
	if _, err := s.PutStreamCheckpoint(ctx, "s1", "orders", cp); err != nil {
		t.Fatal(err)
	}
	resp, err := s.Client().Get(ctx, "/dm/stream/checkpoint/s1/orders")
	if err != nil || len(resp.Kvs) != 1 {
		t.Fatalf("raw get: %v", err)
	}
	var raw map[string]any
	if err := json.Unmarshal(resp.Kvs[0].Value, &raw); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"binlog-name": "mariadb-bin.000003", "binlog-pos": 1234.0, "binlog-gtid": "0-1-900", "snapshot-done": true,
		"time": "2026-01-02T15:04:05Z", "txn": map[string]any{"binlog-name": "mariadb-bin.000003", "binlog-pos": 99999.0, "row": 7.0,
			"key-delete": true, "gtid": "0-1-901", "events": 5000.0}}
	if !reflect.DeepEqual(raw, want) {
		t.Errorf("value %s, want %v", resp.Kvs[0].Value, want)
	}
	got, found, err := s.GetStreamCheckpoint(ctx, "s1", "orders")
	if err != nil || !found || !reflect.DeepEqual(got, cp) {
		t.Fatalf("get: %+v %+v, found %v, err %v; want %+v", got, got.Txn, found, err, cp)
	}
}

func TestStreamCheckpointRefusals(t *testing.T) {
	s, _ := newStore(t)
	ctx := t.Context()
	good := StreamCheckpoint{BinlogName: "mariadb-bin.000001", BinlogPos: 4}
	for _, tc := range []struct {
		name, source, stream string
		cp                   StreamCheckpoint
		want                 string
	}{
		{"bad source", "bad/source", "orders", good, "bad/source"},
		{"bad stream", "s1", "", good, "stream"},
		{"no binlog file", "s1", "orders", StreamCheckpoint{BinlogPos: 4}, "binlog-name is empty"},
	} {
		_, err := s.PutStreamCheckpoint(ctx, tc.source, tc.stream, tc.cp)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error saying %q", tc.name, err, tc.want)
		}
	}
	if _, err := s.PutStreamCheckpoint(ctx, "s1", "bad name", good); !errors.Is(err, config.ErrInvalidName) {
		t.Errorf("invalid stream name: %v, want config.ErrInvalidName", err)
	}
	if _, _, err := s.GetStreamCheckpoint(ctx, "s1", "bad name"); !errors.Is(err, config.ErrInvalidName) {
		t.Errorf("get with an invalid stream name: %v, want config.ErrInvalidName", err)
	}
	if resp, err := s.Client().Get(ctx, "/dm/stream/checkpoint/", clientv3.WithPrefix()); err != nil || len(resp.Kvs) != 0 {
		t.Errorf("refused puts wrote %d keys (err %v)", len(resp.Kvs), err)
	}
}

func TestStreamCheckpointLenientDecode(t *testing.T) {
	s, _ := newStore(t)
	ctx := t.Context()
	raw := func(stream, value string) {
		t.Helper()
		if _, err := s.Client().Put(ctx, s.Keys().StreamCheckpoint("s1", stream), value); err != nil {
			t.Fatal(err)
		}
	}
	raw("minimal", `{"binlog-name":"mariadb-bin.000002","binlog-pos":4}`)
	raw("newer", `{"binlog-name":"mariadb-bin.000002","binlog-pos":8,"snapshot-done":true,"lag":{"ms":3}}`)
	raw("broken", `{"binlog-name":"mariadb-bin.0000`)
	raw("no-file", `{"binlog-pos":4}`)
	raw("wrong-type", `{"binlog-name":"mariadb-bin.000002","binlog-pos":"four"}`)
	if _, err := s.PutStreamCheckpoint(ctx, "s2", "other", StreamCheckpoint{BinlogName: "x.000001", BinlogPos: 4}); err != nil {
		t.Fatal(err)
	}

	got, found, err := s.GetStreamCheckpoint(ctx, "s1", "minimal")
	if err != nil || !found || !reflect.DeepEqual(got, StreamCheckpoint{BinlogName: "mariadb-bin.000002", BinlogPos: 4}) {
		t.Errorf("minimal: %+v, %v, %v", got, found, err)
	}
	got, _, err = s.GetStreamCheckpoint(ctx, "s1", "newer")
	if err != nil || got.BinlogPos != 8 || !got.SnapshotDone || !reflect.DeepEqual(got.Unknown, []string{"lag"}) {
		t.Errorf("a value with a field this worker does not know: %+v, %v; want it decoded with Unknown [lag]", got, err)
	}
	if _, found, err := s.GetStreamCheckpoint(ctx, "s1", "broken"); !found || !errors.Is(err, ErrMalformed) {
		t.Errorf("broken JSON: found %v, err %v; want ErrMalformed", found, err)
	}

	all, _, err := s.GetStreamCheckpoints(ctx, "s1")
	var ke *KeyErrors
	if !errors.As(err, &ke) || len(ke.Errors) != 3 {
		t.Fatalf("GetStreamCheckpoints: %v, want 3 malformed keys", err)
	}
	for i, stream := range []string{"broken", "no-file", "wrong-type"} {
		if k := ke.Errors[i].Key; k != s.Keys().StreamCheckpoint("s1", stream) {
			t.Errorf("malformed key %d: %s, want %s's", i, k, stream)
		}
	}
	if len(all) != 2 || all["minimal"].BinlogPos != 4 || all["newer"].BinlogPos != 8 {
		t.Errorf("GetStreamCheckpoints: %+v, want minimal and newer (and not s2's)", all)
	}
}
