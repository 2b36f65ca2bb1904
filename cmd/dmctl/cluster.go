package main

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/dmworker/dm-worker/config"
	"github.com/dmworker/dm-worker/ha"
)

// cluster is one read of the workers, bindings and sources that commands
// check their input against before they write.
type cluster struct {
	infos       map[string]ha.WorkerInfo    // by worker
	keepalives  map[string]ha.KeepaliveInfo // by worker
	bounds      map[string]ha.Bound         // P/source/bound, by worker
	relayBounds map[string]ha.Bound         // P/source/relay, by worker
	sources     map[string]*config.SourceConfig
	// bad holds the keys of the kinds above whose value is malformed; they
	// are missing from the maps.
	bad  map[string]*ha.KeyError
	keys ha.Keys
	// leader is the worker leading the scheduler ("" when none campaigns).
	leader string
}

// readCluster reads worker infos, keepalives, bound and relay keys and
// source configs.
func readCluster(ctx context.Context, st *ha.Store) (*cluster, error) {
	c := &cluster{bad: make(map[string]*ha.KeyError), keys: st.Keys()}
	var err error
	if c.infos, err = readAll(ctx, c, "worker infos", st.GetWorkerInfos); err != nil {
		return nil, err
	}
	if c.keepalives, err = readAll(ctx, c, "worker keepalives", st.GetKeepalives); err != nil {
		return nil, err
	}
	if c.bounds, err = readAll(ctx, c, "source bindings", st.GetBounds); err != nil {
		return nil, err
	}
	if c.relayBounds, err = readAll(ctx, c, "relay bindings", st.GetRelayBounds); err != nil {
		return nil, err
	}
	if c.sources, err = readAll(ctx, c, "source configs", st.GetSourceConfigs); err != nil {
		return nil, err
	}
	if c.leader, err = st.GetSchedulerLeader(ctx); err != nil {
		return nil, err
	}
	return c, nil
}

// readAll reads one key kind with get, recording its malformed keys in c
// (see tolerate).
func readAll[T any](ctx context.Context, c *cluster, what string,
	get func(context.Context) (map[string]T, int64, error)) (map[string]T, error) {
	m, _, err := get(ctx)
	if err = c.tolerate(err); err != nil {
		return nil, fmt.Errorf("read %s: %w", what, err)
	}
	return m, nil
}

// tolerate records the malformed keys of a *ha.KeyErrors (the entries that
// did decode are still returned) and returns every other error.
func (c *cluster) tolerate(err error) error {
	var ke *ha.KeyErrors
	if !errors.As(err, &ke) {
		return err
	}
	for _, e := range ke.Errors {
		c.bad[e.Key] = e
	}
	return nil
}

// malformed returns the error of key when its value is malformed, else nil.
func (c *cluster) malformed(key string) error {
	if e, ok := c.bad[key]; ok {
		return e
	}
	return nil
}

// workerView is one worker as "worker list" shows it.
type workerView struct {
	Name   string `json:"name"`
	Addr   string `json:"addr"`
	Alive  bool   `json:"alive"`
	Source string `json:"source"`
	// Leader: the worker leads the scheduler (workers started with
	// --scheduler elect one).
	Leader bool `json:"leader"`
}

// workerList returns every worker that has an info, keepalive or bound key,
// sorted by name.
func (c *cluster) workerList() []workerView {
	names := make(map[string]bool)
	for n := range c.infos {
		names[n] = true
	}
	for n := range c.keepalives {
		names[n] = true
	}
	for n := range c.bounds {
		names[n] = true
	}
	out := make([]workerView, 0, len(names))
	for _, n := range slices.Sorted(maps.Keys(names)) {
		_, alive := c.keepalives[n]
		out = append(out, workerView{Name: n, Addr: c.infos[n].Addr, Alive: alive, Source: c.bounds[n].Source,
			Leader: n == c.leader})
	}
	return out
}

// alive reports whether worker has a keepalive key.
func (c *cluster) alive(worker string) bool {
	_, ok := c.keepalives[worker]
	return ok || c.malformed(c.keys.Keepalive(worker)) != nil
}

// boundWorkers returns the workers bound to source, sorted.
func (c *cluster) boundWorkers(source string) []string {
	return ha.WorkersOf(c.bounds, source)
}

// relayWorkers returns the workers whose relay key names source, sorted.
func (c *cluster) relayWorkers(source string) []string {
	return ha.WorkersOf(c.relayBounds, source)
}

// checkSource returns an error when source has no config.
func (c *cluster) checkSource(source string) error {
	if err := c.malformed(c.keys.SourceConfig(source)); err != nil {
		return fmt.Errorf("source %s has a malformed config in etcd (%w); fix it with `dmctl source update FILE`", source, err)
	}
	if _, ok := c.sources[source]; !ok {
		return fmt.Errorf("source %s does not exist; create it first with `dmctl source create FILE`", source)
	}
	return nil
}

// checkBindable returns an error unless worker is alive and bound to no
// source, so that source may be bound to it.
func (c *cluster) checkBindable(worker, source string) error {
	if !c.alive(worker) {
		if _, known := c.infos[worker]; known {
			return fmt.Errorf("worker %s is not alive (no keepalive key); start it or choose another worker (see `dmctl worker list`)", worker)
		}
		return fmt.Errorf("worker %s is unknown and not alive; start it or choose another worker (see `dmctl worker list`)", worker)
	}
	if err := c.malformed(c.keys.Bound(worker)); err != nil {
		return fmt.Errorf("worker %s has a malformed binding in etcd (%w); remove it with `dmctl unbind %s`", worker, err, worker)
	}
	if b, ok := c.bounds[worker]; ok {
		return fmt.Errorf("worker %s is already bound to source %s; unbind it first with `dmctl unbind %s` or choose another worker",
			worker, b.Source, worker)
	}
	if ws := c.boundWorkers(source); len(ws) > 0 {
		return fmt.Errorf("source %s is already bound to worker %s; unbind it first with `dmctl unbind %s`", source, ws[0], ws[0])
	}
	return nil
}

// freeWorker returns the first alive worker (by name) bound to no source.
func (c *cluster) freeWorker() (string, error) {
	for _, n := range slices.Sorted(maps.Keys(c.keepalives)) {
		if _, bound := c.bounds[n]; !bound && c.malformed(c.keys.Bound(n)) == nil {
			return n, nil
		}
	}
	return "", fmt.Errorf("no alive worker is free (%d alive, all bound); start another dm-worker or unbind one with `dmctl unbind W`",
		len(c.keepalives))
}

// relayMalformed is shown as the relay stage when the value in etcd does
// not decode.
const relayMalformed = "malformed"

// relayExpect reads the expected relay stage of source. A malformed value
// counts as present, with expect relayMalformed, so that commands can
// overwrite or delete it.
func relayExpect(ctx context.Context, st *ha.Store, source string) (expect string, found bool, err error) {
	stg, found, _, err := st.GetRelayStage(ctx, source)
	switch {
	case errors.Is(err, ha.ErrMalformed):
		return relayMalformed, true, nil
	case err != nil:
		return "", false, fmt.Errorf("read relay stage of source %s: %w", source, err)
	case !found:
		return "", false, nil
	}
	return string(stg.Expect), true, nil
}

// hasSource reports whether source has a config key, well-formed or not.
func (c *cluster) hasSource(source string) bool {
	_, ok := c.sources[source]
	return ok || c.malformed(c.keys.SourceConfig(source)) != nil
}
