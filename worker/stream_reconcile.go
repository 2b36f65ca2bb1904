package worker

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"

	"go.uber.org/zap"

	"github.com/dmworker/dm-worker/config"
	"github.com/dmworker/dm-worker/ha"
	"github.com/dmworker/dm-worker/pkg/binlog"
	"github.com/dmworker/dm-worker/pkg/errs"
	"github.com/dmworker/dm-worker/pkg/stage"
	"github.com/dmworker/dm-worker/stream"
)

// kindStream is the queue-key kind of a source's stream tasks.
const kindStream = "stream"

// StreamRuntime is what a SourceWorker needs to run the stream tasks of its
// source; the Server builds one per source worker.
type StreamRuntime struct {
	// Meta is the local meta store of deployed stream tasks; nil when it
	// could not be opened (MetaErr says why, shown for every stream).
	Meta    *stream.Meta
	MetaErr error
	// NewTask builds a stream's task.
	NewTask StreamFactory
	// Current reads the source's current binlog position (ignore-untreated).
	Current func(ctx context.Context) (binlog.Location, error)
	// Close releases what the runtime holds (the source connection).
	Close func()
}

// streamReconciler is the Reconciler of a source's stream config and stage
// keys and the owner of its stream holders. Deploying a stream commits it
// to the meta store before acting on its stage; dropping one stops its
// task, then removes it from the meta store and its etcd checkpoint.
type streamReconciler struct {
	source  string
	store   *ha.Store
	rt      *StreamRuntime
	clock   Clock
	log     *zap.Logger
	enabled func() bool
	// life is the SourceWorker's context (set by its Start, before any
	// reconcile): its end cancels every stream's task.
	life context.Context
	// bad are stream keys whose names are invalid, for status.
	bad *badKeys

	// streams are the local stream holders and the control-plane errors of
	// streams.
	streams *localSet[*streamState]
}

// streamState is a local stream holder and the etcd revisions it was last
// reconciled with.
type streamState struct {
	h         *StreamHolder
	configRev int64
	stageRev  int64
}

func newStreamReconciler(cfg SourceWorkerConfig, log *zap.Logger, enabled func() bool) *streamReconciler {
	return &streamReconciler{source: cfg.Source.SourceID, store: cfg.Store, rt: cfg.Streams, clock: cfg.Clock,
		log: log, enabled: enabled, bad: newBadKeys(cfg.Clock.Now),
		streams: newLocalSet[*streamState](cfg.Clock, "stream")}
}

// watchSpecs are the watched prefixes of the source's stream config and
// stage keys; each key enqueues its stream.
func (r *streamReconciler) watchSpecs() []watchSpec {
	keys := r.store.Keys()
	keyOf := func(rest string) (string, bool) {
		return queueKey(kindStream, rest), config.ValidateName("stream", rest) == nil
	}
	return []watchSpec{
		{kind: "stream-config", prefix: keys.StreamConfigPrefix(r.source), keyOf: keyOf, extra: r.localKeys, bad: r.bad},
		{kind: "stream-stage", prefix: keys.StreamStagePrefix(r.source), keyOf: keyOf, extra: r.localKeys, bad: r.bad},
	}
}

// localKeys are the queue keys of every stream known locally: a holder, a
// recorded error, or a record of the meta store (a stream deployed before a
// restart is restarted, or dropped when its keys are gone).
func (r *streamReconciler) localKeys() []string {
	names := map[string]bool{}
	for _, n := range r.streams.names() {
		names[n] = true
	}
	if r.rt.Meta != nil {
		recs, err := r.rt.Meta.List()
		if err != nil {
			r.log.Error("list the stream meta store", zap.Error(err))
		}
		for _, rec := range recs {
			names[rec.Name] = true
		}
	}
	keys := make([]string, 0, len(names))
	for n := range names {
		keys = append(keys, queueKey(kindStream, n))
	}
	return keys
}

// Reconcile converges the local stream name to its etcd keys, read in one
// transaction.
func (r *streamReconciler) Reconcile(ctx context.Context, name string) error {
	if !r.enabled() {
		return nil
	}
	item, rev, err := r.store.GetStream(ctx, r.source, name)
	if err != nil {
		return fmt.Errorf("read stream %q of source %q: %w", name, r.source, err)
	}
	log := r.log.With(zap.String("stream", name), zap.Int64("rev", rev))
	ss, _ := r.streams.get(name)

	if item == nil || (item.Stage == nil && item.Err == nil) {
		r.setErr(name, nil)
		return r.drop(ctx, name, ss, log)
	}
	if !r.runnable(name, item, ss, log) {
		return nil
	}
	ss, err = r.deploy(ctx, name, ss, item, log)
	if err != nil || ss == nil {
		return err
	}
	r.applyStage(ctx, ss, item.Stage, log)
	return nil
}

// runnable records what is wrong with the keys of stream name, if
// anything, and reports whether the stream may run as they say.
func (r *streamReconciler) runnable(name string, item *ha.StreamItem, ss *streamState, log *zap.Logger) bool {
	var err error
	switch {
	case item.Err != nil:
		err = errs.New(CodeStreamValueMalformed, false,
			"stream %q: malformed etcd value: %v; rewrite the key with valid JSON", name, item.Err)
	case item.Config == nil:
		err = errs.New(CodeStreamStageWithoutConfig, false,
			"stream %q: stage key exists but config key %s is missing; put the config or delete the stage",
			name, r.store.Keys().StreamConfig(r.source, name))
		if ss != nil {
			r.remove(name, ss)
		}
	case item.Config.Name != name || item.Config.SourceID != r.source:
		err = errs.New(CodeStreamConfigInvalid, false,
			"stream %q: config names stream %q of source %q but sits under the key of stream %q of source %q",
			name, item.Config.Name, item.Config.SourceID, name, r.source)
	}
	// The config's own problems come before the meta store's: they are
	// what the stream's author can fix.
	if err == nil {
		if verr := item.Config.Validate(); verr != nil {
			err = errs.New(CodeStreamConfigInvalid, false, "stream %q: %v", name, verr)
		}
	}
	if err == nil && r.rt.Meta == nil {
		err = errs.Wrap(r.rt.MetaErr, CodeStreamMetaUnavailable,
			"stream %q: the stream meta store cannot be used; fix or move it aside and restart the worker", name)
	}
	if err != nil {
		log.Error("stream cannot run as its keys say; it keeps its current state", zap.Error(err))
		r.setErr(name, err)
		return false
	}
	r.setErr(name, nil)
	return true
}

// deploy makes sure the stream is registered in the meta store with the
// config of item, and returns its local state: a new holder when there was
// none, or a restarted one when the config changed (stop, save, restart
// with the new config; the checkpoint is kept).
func (r *streamReconciler) deploy(ctx context.Context, name string, ss *streamState, item *ha.StreamItem, log *zap.Logger) (*streamState, error) {
	if ss != nil && item.ConfigRevision == ss.configRev {
		return ss, nil
	}
	if ss != nil && reflect.DeepEqual(ss.h.Config(), item.Config) {
		ss.configRev = item.ConfigRevision
		return ss, nil
	}
	if ss != nil {
		// Stopped first: its last checkpoint is saved before the record is
		// rewritten with the new config.
		log.Info("stream config changed: stopping, saving and restarting it with the new config")
		r.remove(name, ss)
	}
	// The holder is put first: once the shutdown sweep has sealed the set,
	// the meta record is left as the stopped holder saved it (rewriting it
	// from a read made now could roll its checkpoint back).
	nss := &streamState{h: newStreamHolder(item.Config, r.holderDeps()), configRev: item.ConfigRevision}
	if err := r.streams.put(name, nss); err != nil {
		nss.h.Close()
		log.Info("stream not deployed", zap.Error(err))
		return nil, nil
	}
	undo := func() {
		r.streams.forget(name, nss)
		nss.h.Close()
	}
	rec, found, err := r.rt.Meta.Get(name)
	if err != nil {
		undo()
		r.setErr(name, errs.Wrap(err, CodeStreamMetaUnavailable, "stream %q: read its meta record", name))
		return nil, nil
	}
	if !found {
		rec = stream.Record{Name: name}
		if rec.Checkpoint, err = r.mirroredCheckpoint(ctx, name); err != nil {
			undo()
			return nil, err
		}
	}
	rec.Config, rec.ConfigRev, rec.State = item.Config, item.ConfigRevision, stream.StateChecking
	if err := r.rt.Meta.Put(rec); err != nil {
		undo()
		r.setErr(name, errs.Wrap(err, CodeStreamMetaUnavailable, "stream %q: commit it to the meta store", name))
		return nil, nil
	}
	log.Info("stream deployed", zap.Bool("from-meta", found), zap.Stringer("checkpoint", rec.Checkpoint.Location))
	return nss, nil
}

// mirroredCheckpoint is the checkpoint a stream deployed without a meta
// record starts from: its etcd mirror, written by the worker that ran it
// before (zero when there is none).
func (r *streamReconciler) mirroredCheckpoint(ctx context.Context, name string) (stream.Checkpoint, error) {
	cp, ok, err := r.store.GetStreamCheckpoint(ctx, r.source, name)
	if err != nil {
		return stream.Checkpoint{}, fmt.Errorf("read the checkpoint of stream %q of source %q: %w", name, r.source, err)
	}
	if !ok {
		return stream.Checkpoint{}, nil
	}
	return fromMirror(cp), nil
}

// fromMirror is the stream checkpoint an etcd mirror holds.
func fromMirror(cp ha.StreamCheckpoint) stream.Checkpoint {
	out := stream.Checkpoint{Location: binlog.Location{Name: cp.BinlogName, Pos: cp.BinlogPos, GTID: cp.BinlogGTID},
		SnapshotDone: cp.SnapshotDone, Time: cp.Time}
	if p := cp.Txn; p != nil {
		out.Txn = &stream.TxnProgress{File: p.BinlogName, Pos: p.BinlogPos, Row: p.Row, Delete: p.KeyDelete, GTID: p.GTID, Events: p.Events}
	}
	for _, r := range cp.OnlineDDL {
		out.OnlineDDL = append(out.OnlineDDL, stream.OnlineDDLRecord{Schema: r.Schema, Real: r.Real, Shadow: r.Shadow, Stmts: r.Stmts})
	}
	return out
}

// mirrorOf is the etcd mirror of a stream checkpoint.
func mirrorOf(cp stream.Checkpoint) ha.StreamCheckpoint {
	out := ha.StreamCheckpoint{
		BinlogName: cp.Location.Name, BinlogPos: cp.Location.Pos, BinlogGTID: cp.Location.GTID,
		SnapshotDone: cp.SnapshotDone, Time: cp.Time,
	}
	if p := cp.Txn; p != nil {
		out.Txn = &ha.StreamTxnProgress{BinlogName: p.File, BinlogPos: p.Pos, Row: p.Row, KeyDelete: p.Delete, GTID: p.GTID, Events: p.Events}
	}
	for _, r := range cp.OnlineDDL {
		out.OnlineDDL = append(out.OnlineDDL, ha.StreamOnlineDDL{Schema: r.Schema, Real: r.Real, Shadow: r.Shadow, Stmts: r.Stmts})
	}
	return out
}

// holderDeps wires a holder to the meta store, the etcd mirror and the
// runtime.
func (r *streamReconciler) holderDeps() streamHolderDeps {
	return streamHolderDeps{
		life:    r.life,
		factory: r.rt.NewTask,
		current: r.rt.Current,
		clock:   r.clock,
		log:     r.log,
		checkpoint: func(name string) (stream.Checkpoint, error) {
			rec, _, err := r.rt.Meta.Get(name)
			return rec.Checkpoint, err
		},
		save: func(name string) func(context.Context, stream.Checkpoint) error {
			return func(ctx context.Context, cp stream.Checkpoint) error {
				if err := r.rt.Meta.SaveCheckpoint(name, cp); err != nil {
					return errs.Wrap(err, CodeStreamMetaUnavailable, "stream %q: save its checkpoint", name)
				}
				_, err := r.store.PutStreamCheckpoint(ctx, r.source, name, mirrorOf(cp))
				if err != nil {
					// The local meta holds it; the mirror catches up at the next save.
					r.log.Warn("mirror the stream checkpoint to etcd", zap.String("stream", name), zap.Error(err))
				}
				return nil
			}
		},
	}
}

// applyStage moves the holder toward the expected stage (driveStage); a
// resume commanded with ignore-untreated starts at the source's current
// position. The state a new stage value asks for is recorded in the meta
// store (a committed write, so not at every reconcile).
func (r *streamReconciler) applyStage(ctx context.Context, ss *streamState, want *ha.Stage, log *zap.Logger) {
	newCommand := driveStage(ctx, ss.h, want, ss.stageRev, ss.h.Start, func(newCommand bool) {
		ss.h.SetIgnoreUntreated(newCommand && want.IgnoreUntreated)
	}, log)
	ss.stageRev = want.Revision
	if !newCommand {
		return // the recorded state already follows this stage value
	}
	state := stream.StateStreaming
	if want.Expect != stage.Running {
		state = stream.StatePaused
	}
	if err := r.rt.Meta.SetState(ss.h.Name(), state); err != nil {
		log.Warn("record the stream's state in the meta store", zap.Error(err))
	}
}

// drop removes a stream whose stage key is gone: its task stops (the
// fill-history with it), then its meta record and etcd checkpoint go. The
// sink's data is left alone.
func (r *streamReconciler) drop(ctx context.Context, name string, ss *streamState, log *zap.Logger) error {
	if ss != nil {
		log.Info("stream stage deleted; dropping the stream task")
		r.remove(name, ss)
	}
	if r.rt.Meta == nil {
		return nil
	}
	if _, found, err := r.rt.Meta.Get(name); err != nil || !found {
		return nil
	}
	if err := r.rt.Meta.Drop(name); err != nil {
		r.setErr(name, errs.Wrap(err, CodeStreamMetaUnavailable, "stream %q: drop it from the meta store", name))
		return nil
	}
	if _, err := r.store.DeleteStreamCheckpoint(ctx, r.source, name); err != nil {
		return fmt.Errorf("delete the checkpoint of dropped stream %q: %w", name, err)
	}
	log.Info("stream dropped from the meta store")
	return nil
}

// remove forgets ss (unless it was replaced) and closes its holder.
func (r *streamReconciler) remove(name string, ss *streamState) {
	r.streams.forget(name, ss)
	ss.h.Close()
}

// closeAll closes every holder concurrently (their checkpoints saved) and
// forgets them, sealing the set (a reconcile can deploy none after it);
// the meta store keeps them for the next start.
func (r *streamReconciler) closeAll() {
	streams := r.streams.takeAll()
	var wg sync.WaitGroup
	for _, ss := range streams {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ss.h.Close()
		}()
	}
	wg.Wait()
	if len(streams) > 0 {
		r.log.Info("stream tasks stopped and saved", zap.Int("streams", len(streams)))
	}
}

func (r *streamReconciler) setErr(name string, err error) { r.streams.setErr(name, err) }

// list returns the local stream holders.
func (r *streamReconciler) list() []*StreamHolder {
	var out []*StreamHolder
	for _, ss := range r.streams.values() {
		out = append(out, ss.h)
	}
	return out
}

// status returns the streams' status, sorted by name, each with its
// control-plane error, and the errors of streams that do not run.
func (r *streamReconciler) status() ([]StreamStatus, []TaskError) {
	streamErrs := r.streams.errors()
	out := []StreamStatus{}
	for _, h := range r.list() {
		s := h.Status()
		if e, ok := streamErrs[s.Name]; ok {
			s.Errors = append(s.Errors, e)
		}
		out = append(out, s)
	}
	slices.SortFunc(out, func(a, b StreamStatus) int { return strings.Compare(a.Name, b.Name) })
	var taskErrs []TaskError
	for name, e := range streamErrs {
		taskErrs = append(taskErrs, TaskError{Task: name, Error: e})
	}
	return out, append(taskErrs, badKeyErrors(r.bad, "stream", CodeStreamNameInvalid)...)
}
