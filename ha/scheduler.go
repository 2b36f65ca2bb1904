package ha

import (
	"context"
	"fmt"
	"slices"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/dmworker/dm-worker/config"
)

// Move binds Source to worker To in one etcd transaction (Store.MoveBound).
// It is the one primitive every binding change goes through: the scheduler's
// and `dmctl source transfer`.
type Move struct {
	Source string
	To     string
	// From are the workers whose bound key (to Source) is removed, with the
	// mod revision it was seen at.
	From map[string]int64
	// RelayFrom are workers whose relay-bound key for Source is removed, with
	// its mod revision; when non-empty, To gets a relay-bound key for Source.
	// To itself may be listed: its key is then checked and overwritten.
	RelayFrom map[string]int64
}

// MoveBound applies mv if, atomically: every From bound key still has its
// mod revision, every RelayFrom key too, To's keepalive key exists, To has no
// bound key, and every extra comparison holds. ok is false (nil error) when a
// condition failed: someone changed the cluster meanwhile; the caller
// re-reads and decides again. The values written are those PutBound and
// PutRelayBound write.
func (s *Store) MoveBound(ctx context.Context, mv Move, extra ...clientv3.Cmp) (ok bool, err error) {
	if err := validateMove(mv); err != nil {
		return false, fmt.Errorf("ha: move source %s to worker %s: %w", mv.Source, mv.To, err)
	}
	cmps, ops, err := s.moveTxn(mv)
	if err != nil {
		return false, err
	}
	resp, err := s.cli.Txn(ctx).If(append(cmps, extra...)...).Then(ops...).Commit()
	if err != nil {
		return false, fmt.Errorf("ha: move source %s to worker %s: %w", mv.Source, mv.To, err)
	}
	return resp.Succeeded, nil
}

// validateMove checks the names of mv and that To is not one of the workers
// the source is taken from.
func validateMove(mv Move) error {
	if err := validateBound(Bound{Source: mv.Source, Worker: mv.To}); err != nil {
		return err
	}
	for w := range mv.From {
		if err := config.ValidateName("worker", w); err != nil {
			return fmt.Errorf("from: %w", err)
		}
	}
	for w := range mv.RelayFrom {
		if err := config.ValidateName("worker", w); err != nil {
			return fmt.Errorf("relay from: %w", err)
		}
	}
	if _, ok := mv.From[mv.To]; ok {
		return fmt.Errorf("worker %s is both the target and a worker the source is taken from; "+
			"a source is moved to a worker that has no bound key", mv.To)
	}
	return nil
}

// moveTxn returns the comparisons and operations of mv.
func (s *Store) moveTxn(mv Move) ([]clientv3.Cmp, []clientv3.Op, error) {
	bound := Bound{Source: mv.Source, Worker: mv.To}
	value, err := jsonValue(s.keys.Bound(mv.To), bound)
	if err != nil {
		return nil, nil, err
	}
	cmps := []clientv3.Cmp{
		clientv3.Compare(clientv3.CreateRevision(s.keys.Keepalive(mv.To)), ">", 0),
		clientv3.Compare(clientv3.CreateRevision(s.keys.Bound(mv.To)), "=", 0),
	}
	ops := []clientv3.Op{clientv3.OpPut(s.keys.Bound(mv.To), value)}
	for _, w := range sortedNames(mv.From) {
		key := s.keys.Bound(w)
		cmps = append(cmps, clientv3.Compare(clientv3.ModRevision(key), "=", mv.From[w]))
		ops = append(ops, clientv3.OpDelete(key))
	}
	if len(mv.RelayFrom) == 0 {
		return cmps, ops, nil
	}
	for _, w := range sortedNames(mv.RelayFrom) {
		key := s.keys.RelayBound(w)
		cmps = append(cmps, clientv3.Compare(clientv3.ModRevision(key), "=", mv.RelayFrom[w]))
		if w != mv.To {
			ops = append(ops, clientv3.OpDelete(key))
		}
	}
	// Same value as the bound key: {"source","worker"}.
	ops = append(ops, clientv3.OpPut(s.keys.RelayBound(mv.To), value))
	return cmps, ops, nil
}

// sortedNames returns the keys of m in order, so that a transaction's
// operations do not depend on map order.
func sortedNames(m map[string]int64) []string {
	out := make([]string, 0, len(m))
	for w := range m {
		out = append(out, w)
	}
	slices.Sort(out)
	return out
}
