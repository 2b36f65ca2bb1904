package ha

import (
	"context"
	"fmt"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/dmworker/dm-worker/config"
)

// PutWorkerInfo writes P/worker/info/{info.Name}.
func (s *Store) PutWorkerInfo(ctx context.Context, info WorkerInfo) (int64, error) {
	if err := config.ValidateName("worker", info.Name); err != nil {
		return 0, fmt.Errorf("ha: put worker info: %w", err)
	}
	return s.put(ctx, s.keys.WorkerInfo(info.Name), info)
}

// GetWorkerInfos returns every worker info by worker name. Malformed keys
// are left out and reported in a *KeyErrors next to the map.
func (s *Store) GetWorkerInfos(ctx context.Context) (map[string]WorkerInfo, int64, error) {
	return getRange(ctx, s, s.keys.WorkerInfoPrefix(), s.DecodeWorkerInfo)
}

// DeleteWorkerInfo deletes P/worker/info/{worker}.
func (s *Store) DeleteWorkerInfo(ctx context.Context, worker string) (int64, error) {
	return s.del(ctx, s.keys.WorkerInfo(worker))
}

// GetKeepalives returns every live worker's keepalive by worker name.
// Malformed keys are left out and reported in a *KeyErrors next to the map.
func (s *Store) GetKeepalives(ctx context.Context) (map[string]KeepaliveInfo, int64, error) {
	return getRange(ctx, s, s.keys.KeepalivePrefix(), s.DecodeKeepalive)
}

// PutStatus writes P/status/{worker} with value as is, attached to lease
// (clientv3.NoLease for none).
func (s *Store) PutStatus(ctx context.Context, worker string, value []byte, lease clientv3.LeaseID) (int64, error) {
	if err := config.ValidateName("worker", worker); err != nil {
		return 0, fmt.Errorf("ha: put status: %w", err)
	}
	key := s.keys.Status(worker)
	var opts []clientv3.OpOption
	if lease != clientv3.NoLease {
		opts = append(opts, clientv3.WithLease(lease))
	}
	resp, err := s.cli.Put(ctx, key, string(value), opts...)
	if err != nil {
		return 0, fmt.Errorf("ha: put %s: %w", key, err)
	}
	return resp.Header.Revision, nil
}

// GetStatuses returns every worker's status value by worker name.
func (s *Store) GetStatuses(ctx context.Context) (map[string][]byte, int64, error) {
	return getRange(ctx, s, s.keys.StatusPrefix(), s.DecodeStatus)
}
