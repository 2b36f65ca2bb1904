package ha

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Store is the typed etcd contract for one cluster prefix (default "/dm").
// Every write returns the revision of the write; every read returns the
// revision of the snapshot it read at. Deletes are idempotent. Names are
// validated before writing. A Store has no state of its own besides the
// client it was given, which it never closes.
type Store struct {
	cli  *clientv3.Client
	keys Keys
}

// NewStore returns the Store of prefix on cli. An empty prefix means
// DefaultPrefix; one trailing slash is dropped.
func NewStore(cli *clientv3.Client, prefix string) *Store {
	if prefix == "" {
		prefix = DefaultPrefix
	}
	return &Store{cli: cli, keys: Keys{Prefix: strings.TrimSuffix(prefix, "/")}}
}

// Client returns the etcd client the Store uses.
func (s *Store) Client() *clientv3.Client { return s.cli }

// Prefix returns the cluster prefix, without a trailing slash.
func (s *Store) Prefix() string { return s.keys.Prefix }

// Keys returns the key builder of the Store's prefix.
func (s *Store) Keys() Keys { return s.keys }

// put writes v as JSON at key.
func (s *Store) put(ctx context.Context, key string, v any, opts ...clientv3.OpOption) (int64, error) {
	data, err := jsonValue(key, v)
	if err != nil {
		return 0, err
	}
	resp, err := s.cli.Put(ctx, key, data, opts...)
	if err != nil {
		return 0, fmt.Errorf("ha: put %s: %w", key, err)
	}
	return resp.Header.Revision, nil
}

// jsonValue encodes the value to write at key.
func jsonValue(key string, v any) (string, error) {
	data, err := json.Marshal(v)
	if err != nil {
		return "", fmt.Errorf("ha: encode value of %s: %w", key, err)
	}
	return string(data), nil
}

// del deletes key; deleting an absent key succeeds.
func (s *Store) del(ctx context.Context, key string) (int64, error) {
	resp, err := s.cli.Delete(ctx, key)
	if err != nil {
		return 0, fmt.Errorf("ha: delete %s: %w", key, err)
	}
	return resp.Header.Revision, nil
}

// txn commits ops in one transaction and returns the key-values each op
// read, at the transaction's revision.
func (s *Store) txn(ctx context.Context, what string, ops ...clientv3.Op) ([][]*mvccpb.KeyValue, int64, error) {
	resp, err := s.cli.Txn(ctx).Then(ops...).Commit()
	if err != nil {
		return nil, 0, fmt.Errorf("ha: %s: %w", what, err)
	}
	out := make([][]*mvccpb.KeyValue, len(resp.Responses))
	for i, r := range resp.Responses {
		if rr := r.GetResponseRange(); rr != nil {
			out[i] = rr.Kvs
		}
	}
	return out, resp.Header.Revision, nil
}

// getOne reads key and decodes it. found is false when the key is absent.
func getOne[T any](ctx context.Context, s *Store, key string, dec Decoder[T], opts ...clientv3.OpOption) (v T, found bool, rev int64, err error) {
	resp, err := s.cli.Get(ctx, key, opts...)
	if err != nil {
		return v, false, 0, fmt.Errorf("ha: get %s: %w", key, err)
	}
	rev = resp.Header.Revision
	if len(resp.Kvs) == 0 {
		return v, false, rev, nil
	}
	kv := resp.Kvs[0]
	v, err = decodeKV(dec, kv)
	if err != nil {
		return v, true, rev, err
	}
	return v, true, rev, nil
}

// getRange reads every key under prefix and decodes each; the map is keyed
// by what follows the prefix. Keys that fail to decode are left out and
// reported in a *KeyErrors.
func getRange[T any](ctx context.Context, s *Store, prefix string, dec Decoder[T]) (map[string]T, int64, error) {
	resp, err := s.cli.Get(ctx, prefix, clientv3.WithPrefix())
	if err != nil {
		return nil, 0, fmt.Errorf("ha: list %s: %w", prefix, err)
	}
	out := make(map[string]T, len(resp.Kvs))
	var bad keyErrors
	for _, kv := range resp.Kvs {
		v, err := decodeKV(dec, kv)
		if err != nil {
			bad.add(string(kv.Key), err)
			continue
		}
		out[lastSegment(string(kv.Key), prefix)] = v
	}
	return out, resp.Header.Revision, bad.err()
}

// decodeKV decodes a present key-value (never as a delete) and stamps the
// value with the kv's ModRevision when it carries one.
func decodeKV[T any](dec Decoder[T], kv *mvccpb.KeyValue) (T, error) {
	v, err := dec(string(kv.Key), presentValue(kv.Value))
	if err != nil {
		var zero T
		return zero, err
	}
	return stampRevision(v, kv.ModRevision), nil
}

// presentValue turns the value of an existing key into a non-nil slice: a
// nil value means "deleted" to a Decoder, and etcd returns an empty value as
// nil.
func presentValue(v []byte) []byte {
	if v == nil {
		return []byte{}
	}
	return v
}

// revisioned is implemented by values that carry the etcd revision of the
// key-value they were decoded from (Stage, Bound).
type revisioned interface {
	withRevision(rev int64) any
}

// stampRevision sets the revision on values that carry one.
func stampRevision[T any](v T, rev int64) T {
	if r, ok := any(v).(revisioned); ok {
		if out, ok := r.withRevision(rev).(T); ok {
			return out
		}
	}
	return v
}

func (st Stage) withRevision(rev int64) any { st.Revision = rev; return st }

func (b Bound) withRevision(rev int64) any { b.Revision = rev; return b }
