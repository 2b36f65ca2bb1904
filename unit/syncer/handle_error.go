package syncer

import (
	"context"
	"fmt"

	"github.com/dmworker/dm-worker/pkg/binlog"
	"github.com/dmworker/dm-worker/pkg/errs"
	"github.com/dmworker/dm-worker/unit"
)

// stuckDDL is the DDL event the target rejected.
type stuckDDL struct {
	start, end binlog.Location // of the event
}

// handleOp is an operator's decision for one DDL event, applied when the
// read loop reaches the event whose start or end location is at.
type handleOp struct {
	op   string
	at   binlog.Location
	sqls []string
}

// HandleError records that the DDL the unit is stuck on (or the DDL event
// at req.BinlogPos, start or end position of the event) is to be skipped
// or replaced by req.SQLs when the unit next reaches it; the subtask is
// then resumed as usual.
func (s *Syncer) HandleError(_ context.Context, req unit.HandleErrorRequest) error {
	switch req.Op {
	case unit.HandleErrorSkip:
	case unit.HandleErrorReplace:
		if len(req.SQLs) == 0 {
			return errs.New(CodeHandleError, false, "sync: handle-error replace needs sqls")
		}
	default:
		return errs.New(CodeHandleError, false, "sync: handle-error op %q is not skip or replace", req.Op)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var at binlog.Location
	if req.BinlogPos != "" {
		loc, err := binlog.ParseLocation(req.BinlogPos)
		if err != nil {
			return errs.New(CodeHandleError, false, "sync: handle-error binlog-pos: %w", err)
		}
		at = loc
	} else {
		if s.stuck == nil {
			return errs.New(CodeHandleError, false, "%w", ErrNothingToHandle)
		}
		at = s.stuck.start
	}
	s.handle = &handleOp{op: req.Op, at: at, sqls: append([]string(nil), req.SQLs...)}
	return nil
}

// takeHandle returns and forgets the operator's decision for the DDL event
// at start..end, if there is one.
func (s *Syncer) takeHandle(start, end binlog.Location) *handleOp {
	s.mu.Lock()
	defer s.mu.Unlock()
	h := s.handle
	if !h.isAt(start, end) {
		return nil
	}
	s.handle = nil
	return h
}

// isAt reports whether h is for the DDL event at start..end.
func (h *handleOp) isAt(start, end binlog.Location) bool {
	return h != nil && h.at.Name == start.Name && (h.at.Pos == start.Pos || h.at.Pos == end.Pos)
}

// handlePendingAt reports whether an operator's decision waits for the DDL
// event at start..end.
func (s *Syncer) handlePendingAt(start, end binlog.Location) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.handle.isAt(start, end)
}

// setStuck records (or clears, with nil) the DDL the target rejected.
func (s *Syncer) setStuck(st *stuckDDL) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stuck = st
	s.prog.stuckOn = ""
	if st != nil {
		s.prog.stuckOn = st.start.String()
	}
}

func (h *handleOp) String() string { return fmt.Sprintf("%s at %s", h.op, h.at) }

// handlePending reports whether an operator's decision waits to be taken.
func (s *Syncer) handlePending() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.handle != nil
}
