package ha

import (
	"context"
	"fmt"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// GetSchedulerLeader returns the worker leading the scheduler: the value of
// the oldest key under the election prefix (how etcd's concurrency.Election
// orders candidates); "" when no worker campaigns.
func (s *Store) GetSchedulerLeader(ctx context.Context) (string, error) {
	resp, err := s.cli.Get(ctx, s.keys.SchedulerLeader()+"/", clientv3.WithPrefix(),
		clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortAscend), clientv3.WithLimit(1))
	if err != nil {
		return "", fmt.Errorf("ha: read the scheduler leader: %w", err)
	}
	if len(resp.Kvs) == 0 {
		return "", nil
	}
	return string(resp.Kvs[0].Value), nil
}

// BoundRevisions returns the mod revision of the bound key of each worker
// (0 for a worker without one), for a Move.
func (s *Store) BoundRevisions(ctx context.Context, workers ...string) (map[string]int64, error) {
	return s.modRevisions(ctx, s.keys.Bound, workers)
}

// RelayBoundRevisions is BoundRevisions for the relay-bound keys.
func (s *Store) RelayBoundRevisions(ctx context.Context, workers ...string) (map[string]int64, error) {
	return s.modRevisions(ctx, s.keys.RelayBound, workers)
}

func (s *Store) modRevisions(ctx context.Context, key func(string) string, workers []string) (map[string]int64, error) {
	out := make(map[string]int64, len(workers))
	for _, w := range workers {
		resp, err := s.cli.Get(ctx, key(w))
		if err != nil {
			return nil, fmt.Errorf("ha: read the binding of worker %s: %w", w, err)
		}
		out[w] = 0
		if len(resp.Kvs) > 0 {
			out[w] = resp.Kvs[0].ModRevision
		}
	}
	return out, nil
}

// DeleteBoundIf deletes worker's bound key if it still has mod revision
// modRev and every extra comparison holds; ok is false (nil error) when a
// condition failed.
func (s *Store) DeleteBoundIf(ctx context.Context, worker string, modRev int64, extra ...clientv3.Cmp) (ok bool, err error) {
	key := s.keys.Bound(worker)
	cmps := append([]clientv3.Cmp{clientv3.Compare(clientv3.ModRevision(key), "=", modRev)}, extra...)
	resp, err := s.cli.Txn(ctx).If(cmps...).Then(clientv3.OpDelete(key)).Commit()
	if err != nil {
		return false, fmt.Errorf("ha: remove the binding of worker %s: %w", worker, err)
	}
	return resp.Succeeded, nil
}
