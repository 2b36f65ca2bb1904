package scheduler

import (
	"slices"

	"github.com/dmworker/dm-worker/ha"
)

// Reasons of a move (the reason label of dm_scheduler_moves_total).
const (
	// ReasonWorkerDead: every worker bound to the source lost its keepalive.
	ReasonWorkerDead = "worker-dead"
	// ReasonUnbound: the source has a config and no binding at all.
	ReasonUnbound = "unbound"
	// ReasonStale: a dead worker's binding to a source an alive worker
	// serves was removed.
	ReasonStale = "stale"
)

// snapshot is what one scheduling pass decides from: the cluster's workers,
// bindings and sources at one etcd revision.
type snapshot struct {
	Rev int64
	// Alive are the workers whose keepalive key exists.
	Alive map[string]bool
	// Bound is every bound key by worker, Revision = its mod revision. A
	// malformed value has Source "": the worker is not free, and the key
	// names no source.
	Bound map[string]ha.Bound
	// Relay is every relay-bound key by worker, like Bound.
	Relay map[string]ha.Bound
	// Sources are the sources that have a config.
	Sources map[string]bool
}

// move is one binding change a pass decided.
type move struct {
	ha.Move
	Reason string
}

// plan is what decide returns.
type plan struct {
	Moves []move
	// Unplaced are the sources that need a worker and found no free one,
	// sorted.
	Unplaced []string
	// Sources maps every source with a config to its alive bound worker
	// (the lowest name when several), the worker a move binds it to, or ""
	// when unplaced.
	Sources map[string]string
	// Stale are the bindings of dead workers to a source an alive worker
	// serves: removed, so a dead worker that comes back does not serve the
	// source a second time.
	Stale []stale
}

// stale is one binding to remove: worker's bound key, at its mod revision.
type stale struct {
	Worker, Source string
	Revision       int64
}

// decide is the scheduling policy, a pure function of the snapshot. A source
// with a config whose bound workers include no alive one is bound to an
// alive worker without a bound key: one whose relay-bound key names the
// source first, else the lowest name. The move removes the source's bound and
// relay-bound keys of other workers (relay goes along to the new worker).
// Sources with an alive bound worker keep it (the bindings of dead workers
// to them are stale, to remove); bound keys naming a source without a config
// are left alone; a source gets at most one move.
func decide(snap snapshot) plan {
	p := plan{Sources: make(map[string]string, len(snap.Sources))}
	free := freeWorkers(snap)
	for _, src := range sortedKeys(snap.Sources) {
		bound := ha.WorkersOf(snap.Bound, src)
		if w := firstAlive(bound, snap.Alive); w != "" {
			p.Sources[src] = w
			for _, d := range bound {
				if !snap.Alive[d] {
					p.Stale = append(p.Stale, stale{Worker: d, Source: src, Revision: snap.Bound[d].Revision})
				}
			}
			continue
		}
		to := pickWorker(free, snap.Relay, src)
		if to == "" {
			p.Sources[src] = ""
			p.Unplaced = append(p.Unplaced, src)
			continue
		}
		free = slices.DeleteFunc(free, func(w string) bool { return w == to })
		p.Sources[src] = to
		p.Moves = append(p.Moves, newMove(snap, src, to, bound))
	}
	return p
}

// newMove builds the move of src to worker to, from the workers in bound
// (none of them alive).
func newMove(snap snapshot, src, to string, bound []string) move {
	mv := move{Move: ha.Move{Source: src, To: to}, Reason: ReasonUnbound}
	if len(bound) > 0 {
		mv.Reason = ReasonWorkerDead
		mv.From = make(map[string]int64, len(bound))
		for _, w := range bound {
			mv.From[w] = snap.Bound[w].Revision
		}
	}
	for _, w := range ha.WorkersOf(snap.Relay, src) {
		if mv.RelayFrom == nil {
			mv.RelayFrom = make(map[string]int64)
		}
		mv.RelayFrom[w] = snap.Relay[w].Revision
	}
	return mv
}

// freeWorkers returns the alive workers without a bound key, sorted.
func freeWorkers(snap snapshot) []string {
	var out []string
	for w := range snap.Alive {
		if _, bound := snap.Bound[w]; !bound {
			out = append(out, w)
		}
	}
	slices.Sort(out)
	return out
}

// pickWorker returns the free worker whose relay-bound key names src, else
// the first free worker, else "".
func pickWorker(free []string, relay map[string]ha.Bound, src string) string {
	for _, w := range free {
		if r, ok := relay[w]; ok && r.Source == src {
			return w
		}
	}
	if len(free) == 0 {
		return ""
	}
	return free[0]
}

// firstAlive returns the first of workers that is alive, or "".
func firstAlive(workers []string, alive map[string]bool) string {
	for _, w := range workers {
		if alive[w] {
			return w
		}
	}
	return ""
}

// sortedKeys returns the keys of m in order.
func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
