package worker

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"strconv"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/dmworker/dm-worker/pkg/dbconn"
	"github.com/dmworker/dm-worker/pkg/periodic"

	"github.com/dmworker/dm-worker/worker/scheduler"
)

// WorkerStatus is the JSON of GET /api/v1/status and of P/status/{worker}
// (DESIGN.md §6).
type WorkerStatus struct {
	Worker   string          `json:"worker"`
	Addr     string          `json:"addr"`
	Source   string          `json:"source"`
	Relay    RelayStatus     `json:"relay"`
	SubTasks []SubTaskStatus `json:"subtasks"`
	Streams  []StreamStatus  `json:"streams"`
	// Errors lists problems that belong to no running subtask: the bound
	// source's config, tasks whose keys cannot be acted on.
	Errors []TaskError `json:"errors"`
	// SourceConnections is the worker's connections to the bound source
	// (extension, source-connection-limit); absent when unbound.
	SourceConnections *dbconn.SourceConnections `json:"source-connections,omitempty"`
	// Scheduler is the scheduler's view (workers started with
	// --scheduler only): the leader, and on the leader the bindings it
	// keeps and the moves it made.
	Scheduler *scheduler.Status `json:"scheduler,omitempty"`
}

// Status is the worker status of DESIGN.md §6.
func (s *Server) Status() WorkerStatus {
	s.mu.Lock()
	sw, swCfg, serr, swarn := s.sw, s.swCfg, s.serverErr, s.serverWarn
	s.mu.Unlock()
	st := WorkerStatus{
		Worker: s.cfg.Name, Addr: s.cfg.Addr,
		Relay: RelayStatus{Enabled: false}, SubTasks: []SubTaskStatus{}, Streams: []StreamStatus{}, Errors: []TaskError{},
	}
	if sw != nil {
		ss := sw.Status()
		st.Source, st.Relay, st.SubTasks, st.Streams, st.Errors = ss.Source, ss.Relay, ss.SubTasks, ss.Streams, ss.Errors
		if swCfg != nil {
			st.SourceConnections = s.cfg.Sources.ServerStatus(net.JoinHostPort(swCfg.From.Host, strconv.Itoa(swCfg.From.Port)))
		}
	}
	for i := range st.SubTasks {
		st.SubTasks[i].TargetConnections = s.cfg.Budget.OwnerStatus(st.SubTasks[i].Name)
	}
	if swarn != nil {
		st.Errors = append([]TaskError{*swarn}, st.Errors...)
	}
	if serr != nil {
		st.Errors = append([]TaskError{*serr}, st.Errors...)
	}
	st.Scheduler = s.schedulerStatus()
	return st
}

// statusRefresh is how often an unchanged status is written again.
const statusRefresh = time.Minute

// publishStatus writes P/status/{worker} on the keepalive lease every
// StatusInterval until ctx is done. An unchanged value on the same lease is
// written only every statusRefresh: with many subtasks the value is large,
// and every write stays in etcd's log and history for a while.
func (s *Server) publishStatus(ctx context.Context) {
	var (
		last      []byte
		lastLease clientv3.LeaseID
		lastPut   time.Time
	)
	periodic.Run(ctx, s.cfg.StatusInterval, periodic.Now, func(ctx context.Context) {
		s.mu.Lock()
		lease := s.keepalive.LeaseID()
		s.mu.Unlock()
		data, err := json.Marshal(s.Status())
		if err == nil && lease == lastLease && bytes.Equal(data, last) && time.Since(lastPut) < statusRefresh {
			return
		}
		if err == nil {
			_, err = s.store.PutStatus(ctx, s.cfg.Name, data, lease)
		}
		if err != nil {
			last = nil
			if ctx.Err() == nil {
				s.log.Warn("publish status to etcd", zap.Error(err))
			}
			return
		}
		last, lastLease, lastPut = data, lease, time.Now()
	})
}
