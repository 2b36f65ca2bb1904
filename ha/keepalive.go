package ha

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/dmworker/dm-worker/config"
)

// Keepalive holds the worker's lease and keeps P/worker/keepalive/{worker}
// alive on it. Its one goroutine is stopped by Close, which must be called
// to release it.
type Keepalive struct {
	store *Store
	info  KeepaliveInfo
	lg    *zap.Logger
	// lease, stop and done are set by StartKeepalive and never change.
	lease clientv3.LeaseID
	stop  context.CancelFunc // stops the goroutine keeping lease alive
	done  chan struct{}      // closed when that goroutine has returned

	lost     chan struct{} // closed once by markLost; never by Close
	lostOnce sync.Once

	mu     sync.Mutex // serialises Close; held across its etcd calls
	closed bool
}

// StartKeepalive grants a lease with ttl (rounded up to whole seconds), puts
// the keepalive key {"name","join-time"} on it, and keeps it alive in a
// goroutine it owns until Close, the loss of the lease, or ctx is done (then
// the lease is left to expire and no loss is reported).
func (s *Store) StartKeepalive(ctx context.Context, worker string, ttl time.Duration, logger *zap.Logger) (*Keepalive, error) {
	if err := config.ValidateName("worker", worker); err != nil {
		return nil, fmt.Errorf("ha: start keepalive: %w", err)
	}
	if logger == nil {
		logger = zap.NewNop()
	}
	k := &Keepalive{
		store: s,
		info:  KeepaliveInfo{Name: worker, JoinTime: time.Now().UTC().Format(time.RFC3339)},
		lg:    logger.With(zap.String("worker", worker)),
		lost:  make(chan struct{}),
	}
	lease, deadline, rev, err := k.attach(ctx, ttl)
	if err != nil {
		return nil, err
	}
	k.lease = lease
	k.stop, k.done = k.start(ctx, lease, deadline, rev)
	return k, nil
}

// LeaseID returns the lease the keepalive key is on.
func (k *Keepalive) LeaseID() clientv3.LeaseID { return k.lease }

// Lost is closed when the lease is lost: revoked, expired, or not renewed
// within its TTL (etcd unreachable). Close never closes it. After a loss the
// caller stops its lease-bound work, Closes this Keepalive and starts a new
// one.
func (k *Keepalive) Lost() <-chan struct{} { return k.lost }

// Close stops keeping alive and revokes the lease, so the key (and anything
// else on the lease) disappears. It is idempotent.
func (k *Keepalive) Close(ctx context.Context) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.closed {
		return nil
	}
	k.closed = true
	k.stop()
	<-k.done
	return k.revoke(ctx, k.lease)
}

// attach grants a lease with ttl and puts the keepalive key on it. The
// deadline is when the lease expires unless renewed, counted from before
// the grant; rev is the revision of the put.
func (k *Keepalive) attach(ctx context.Context, ttl time.Duration) (lease clientv3.LeaseID, deadline time.Time, rev int64, err error) {
	secs := int64((ttl + time.Second - 1) / time.Second)
	if secs < 1 {
		return 0, time.Time{}, 0, fmt.Errorf("ha: keepalive of worker %s: TTL %s is below 1s", k.info.Name, ttl)
	}
	before := time.Now()
	resp, err := k.store.cli.Grant(ctx, secs)
	if err != nil {
		return 0, time.Time{}, 0, fmt.Errorf("ha: grant keepalive lease of worker %s: %w", k.info.Name, err)
	}
	deadline = before.Add(time.Duration(resp.TTL) * time.Second)
	key := k.store.keys.Keepalive(k.info.Name)
	rev, err = k.store.put(ctx, key, k.info, clientv3.WithLease(resp.ID))
	if err != nil {
		if rerr := k.revoke(ctx, resp.ID); rerr != nil {
			k.lg.Warn("revoke unused keepalive lease", zap.Int64("lease", int64(resp.ID)), zap.Error(rerr))
		}
		return 0, time.Time{}, 0, err
	}
	return resp.ID, deadline, rev, nil
}

// revoke revokes lease; a lease that is already gone is not an error.
func (k *Keepalive) revoke(ctx context.Context, lease clientv3.LeaseID) error {
	_, err := k.store.cli.Revoke(ctx, lease)
	if err != nil && !errors.Is(err, rpctypes.ErrLeaseNotFound) {
		return fmt.Errorf("ha: revoke keepalive lease %x of worker %s: %w", int64(lease), k.info.Name, err)
	}
	return nil
}

// start runs the goroutine keeping lease alive until ctx is done; stop ends
// it and done is closed when it has returned.
func (k *Keepalive) start(ctx context.Context, lease clientv3.LeaseID, deadline time.Time, rev int64) (stop context.CancelFunc, done chan struct{}) {
	ctx, cancel := context.WithCancel(ctx)
	done = make(chan struct{})
	go func() {
		defer close(done)
		k.run(ctx, lease, deadline, rev)
	}()
	return cancel, done
}

// run consumes the client's keep-alive responses for lease until ctx is
// done or the lease is lost. A loss is: the client closes the channel (the
// lease was revoked or expired, or the client gave up renewing it), or no
// renewal arrived before the lease's deadline (the client's own limit is
// longer before the first renewal), or the keepalive key is deleted after
// rev (a revoked lease deletes it at once, long before the next renewal
// would notice). On a loss it stops renewing the lease.
func (k *Keepalive) run(ctx context.Context, lease clientv3.LeaseID, deadline time.Time, rev int64) {
	kctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel() // ends the client's keep-alive of lease and the watch
	ch, err := k.store.cli.KeepAlive(kctx, lease)
	if err != nil {
		if ctx.Err() == nil {
			k.markLost(lease, err)
		}
		return
	}
	// Creating a watch blocks while etcd is unreachable, so it has a
	// goroutine of its own; renewals and the timer work meanwhile.
	deleted := make(chan struct{})
	wg.Add(1)
	go func() {
		defer wg.Done()
		k.watchDelete(kctx, rev, deleted)
	}()
	timer := time.NewTimer(time.Until(deadline))
	defer timer.Stop()
	for {
		select {
		case <-deleted:
			if ctx.Err() == nil {
				k.markLost(lease, errors.New("keepalive key deleted: lease revoked or expired"))
			}
			return
		case resp, ok := <-ch:
			if !ok {
				if ctx.Err() == nil {
					k.markLost(lease, errors.New("keep-alive channel closed: lease revoked, expired or not renewed within its TTL"))
				}
				return
			}
			timer.Reset(lossAfter(time.Duration(resp.TTL) * time.Second))
		case <-timer.C:
			if ctx.Err() == nil {
				k.markLost(lease, errors.New("lease not renewed within its TTL"))
			}
			return
		case <-ctx.Done():
			return
		}
	}
}

// lossAfter is how long after a renewal's reply the worker takes its lease
// for lost: a quarter of the TTL before the TTL. etcd renewed the lease when
// it sent the reply, a network trip earlier, and expires it TTL after that,
// when another worker may be given the source; stopping this much earlier
// leaves the margin to the old worker, not to luck. The client renews every
// third of the TTL, so a healthy lease never comes near it.
func lossAfter(ttl time.Duration) time.Duration { return ttl - ttl/4 }

// watchDelete closes deleted when the keepalive key is deleted after rev.
// A compacted or cancelled watch just ends: renewals and the TTL timer still
// detect the loss, only later.
func (k *Keepalive) watchDelete(ctx context.Context, rev int64, deleted chan<- struct{}) {
	wch := k.store.cli.Watch(ctx, k.store.keys.Keepalive(k.info.Name), clientv3.WithRev(rev+1), clientv3.WithFilterPut())
	for wresp := range wch {
		if len(wresp.Events) > 0 {
			close(deleted)
			return
		}
		if wresp.Err() != nil {
			return
		}
	}
}

func (k *Keepalive) markLost(lease clientv3.LeaseID, err error) {
	k.lostOnce.Do(func() {
		k.lg.Error("keepalive lease lost", zap.Int64("lease", int64(lease)), zap.Error(err))
		close(k.lost)
	})
}
