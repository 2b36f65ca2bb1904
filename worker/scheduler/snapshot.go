package scheduler

import (
	"context"
	"fmt"
	"strings"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/dmworker/dm-worker/config"
	"github.com/dmworker/dm-worker/ha"
)

// view is one read of the cluster: the snapshot decide works on, whether
// this worker's election key still exists with the revision it won with,
// and the keys that were left out or degraded because they are malformed.
type view struct {
	snap    snapshot
	leading bool
	bad     map[string]error // key -> why
}

// readView reads keepalives, bound and relay-bound keys and source config
// names in one transaction (one revision), and the election key leaderKey,
// which must have been created at leaderRev for leading to be true.
func readView(ctx context.Context, store *ha.Store, leaderKey string, leaderRev int64) (view, error) {
	k := store.Keys()
	keysOnly := []clientv3.OpOption{clientv3.WithPrefix(), clientv3.WithKeysOnly()}
	resp, err := store.Client().Txn(ctx).Then(
		clientv3.OpGet(k.KeepalivePrefix(), keysOnly...),
		clientv3.OpGet(k.BoundPrefix(), clientv3.WithPrefix()),
		clientv3.OpGet(k.RelayBoundPrefix(), clientv3.WithPrefix()),
		clientv3.OpGet(k.SourceConfigPrefix(), keysOnly...),
		clientv3.OpGet(leaderKey, clientv3.WithKeysOnly()),
	).Commit()
	if err != nil {
		return view{}, fmt.Errorf("scheduler: read workers, bindings and sources under %s: %w", store.Prefix(), err)
	}
	kvs := func(i int) []*mvccpb.KeyValue { return resp.Responses[i].GetResponseRange().Kvs }
	v := view{bad: map[string]error{}, snap: snapshot{Rev: resp.Header.Revision}}
	v.snap.Alive = v.names(kvs(0), k.KeepalivePrefix(), "worker")
	v.snap.Sources = v.names(kvs(3), k.SourceConfigPrefix(), "source")
	v.snap.Bound = v.bounds(kvs(1), k.BoundPrefix(), store.DecodeBound)
	v.snap.Relay = v.bounds(kvs(2), k.RelayBoundPrefix(), store.DecodeRelayBound)
	if l := kvs(4); len(l) == 1 && l[0].CreateRevision == leaderRev {
		v.leading = true
	}
	return v, nil
}

// names returns the set of valid names that follow prefix in the keys of
// kvs; invalid ones are recorded in v.bad.
func (v *view) names(kvs []*mvccpb.KeyValue, prefix, kind string) map[string]bool {
	out := make(map[string]bool, len(kvs))
	for _, kv := range kvs {
		name, ok := v.name(string(kv.Key), prefix, kind)
		if ok {
			out[name] = true
		}
	}
	return out
}

// name returns the name that follows prefix in key, recording an invalid one
// in v.bad.
func (v *view) name(key, prefix, kind string) (string, bool) {
	name := strings.TrimPrefix(key, prefix)
	if err := config.ValidateName(kind, name); err != nil {
		v.bad[key] = err
		return "", false
	}
	return name, true
}

// bounds decodes bound or relay-bound keys by worker, with their mod
// revision. A malformed value of a valid worker key is kept with Source ""
// (the worker holds a key, so it is not free) and recorded in v.bad.
func (v *view) bounds(kvs []*mvccpb.KeyValue, prefix string, dec ha.Decoder[ha.Bound]) map[string]ha.Bound {
	out := make(map[string]ha.Bound, len(kvs))
	for _, kv := range kvs {
		key := string(kv.Key)
		worker, ok := v.name(key, prefix, "worker")
		if !ok {
			continue
		}
		value := kv.Value
		if value == nil {
			value = []byte{} // present, not a delete
		}
		b, err := dec(key, value)
		if err != nil {
			v.bad[key] = err
			b = ha.Bound{Worker: worker}
		}
		b.Revision = kv.ModRevision
		out[worker] = b
	}
	return out
}
