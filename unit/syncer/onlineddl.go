package syncer

import (
	"context"
	"errors"

	"github.com/go-mysql-org/go-mysql/replication"
	"go.uber.org/zap"

	"github.com/dmworker/dm-worker/pkg/binlog"
	"github.com/dmworker/dm-worker/pkg/errs"
	"github.com/dmworker/dm-worker/pkg/onlineddl"
)

// Online schema changes (online-ddl: true; issue 26, docs/operations.md
// "Online schema changes"). gh-ost and pt-online-schema-change change a
// table t through a shadow table they swap in by RENAME. The sync unit
// never creates the shadow and trash tables on the target and drops their
// row events; a DDL of a shadow table is recorded (pkg/onlineddl, in
// <meta-schema>.<task>_onlineddl, before the event passes) and at the
// cut-over the recorded statements run on t as if t had been altered
// there, through the same path as any DDL of t (shard DDL locks
// included).

// CodeOnlineDDL is the error code of online schema changes that cannot be
// followed.
const CodeOnlineDDL = "sync-online-ddl"

// startOnlineDDL gives the run its online schema change tracker, loaded
// from the meta schema; none when online-ddl is off.
func (r *reader) startOnlineDDL(ctx context.Context) error {
	rules, err := r.cfg.OnlineDDLRules()
	if err != nil {
		return errs.New(CodeConfig, false, "sync: task %q: %w", r.cfg.Name, err)
	}
	if rules == nil {
		return nil
	}
	st := onlineddl.NewSQLStore(r.s.target, r.cfg.MetaSchema, r.cfg.Name, r.cfg.SourceID)
	if err := st.Prepare(ctx); err != nil {
		return errs.Wrap(err, CodeCheckpoint, "sync: online-ddl")
	}
	tr, err := onlineddl.NewTracker(ctx, rules, st)
	if err != nil {
		return errs.Wrap(err, CodeCheckpoint, "sync: online-ddl")
	}
	r.online = tr
	for _, rec := range tr.Pending() {
		r.s.logger.Info("online-ddl: an online schema change is in progress", zap.String("table", rec.Schema+"."+rec.Real),
			zap.String("shadow", rec.Shadow), zap.Int("recorded", len(rec.Stmts)))
	}
	return nil
}

// skipsOnlineRows reports whether the rows of table are dropped: a shadow
// or trash table of an online schema change.
func (r *reader) skipsOnlineRows(table string) bool {
	return r.online != nil && r.online.Rules().Online(table)
}

// online handles a query event for online schema changes; handled is false
// when the event is not about their tables (the caller goes on as usual).
func (d *ddlApplier) online(ctx context.Context, e *replication.QueryEvent, query string, start, end binlog.Location) (handled bool, err error) {
	r := d.r
	if r.online == nil {
		return false, nil
	}
	nodes, err := d.translator.parse(query)
	if err != nil {
		return false, nil // the usual path reports it
	}
	schema, at := string(e.Schema), start.String()
	acts := make([]onlineddl.Action, len(nodes))
	for i, n := range nodes {
		acts[i], err = r.online.Statement(ctx, schema, n, at)
		var oe *onlineddl.Error
		switch {
		case errors.As(err, &oe):
			d.unit.setStuck(&stuckDDL{start: start, end: end})
			if h := d.unit.takeHandle(start, end); h != nil {
				return true, d.applyHandled(ctx, h, query, start, end)
			}
			return true, errs.New(CodeOnlineDDL, false, "sync: at binlog %s: %v", start, oe)
		case err != nil:
			return true, errs.Wrap(err, CodeCheckpoint, "sync: at binlog %s", start)
		}
	}
	pass := 0
	for _, a := range acts {
		if a.Kind == onlineddl.Pass {
			pass++
		}
	}
	switch {
	case pass == len(acts):
		return false, nil
	case len(acts) > 1:
		d.unit.setStuck(&stuckDDL{start: start, end: end})
		if h := d.unit.takeHandle(start, end); h != nil {
			return true, d.applyHandled(ctx, h, query, start, end)
		}
		return true, errs.New(CodeOnlineDDL, false, "sync: at binlog %s: a query event with several statements touches online schema "+
			"change tables (%s); skip or replace it with handle-error", start, clipSQL(query))
	}
	a := acts[0]
	switch a.Kind {
	case onlineddl.Skip, onlineddl.Recorded:
		d.logger.Info("online-ddl: "+a.Why, zap.String("table", a.Schema+"."+a.Real), zap.Stringer("binlog", start),
			zap.String("sql", clipSQL(query)))
		return true, r.endStatement()
	}
	// The cut-over: the recorded statements are t's DDL here.
	if err := r.online.Done(ctx, a.Schema, a.Real, at); err != nil {
		return true, errs.Wrap(err, CodeCheckpoint, "sync: at binlog %s", start)
	}
	d.logger.Info("online-ddl: "+a.Why+"; its recorded DDLs run on it", zap.Strings("ddls", a.Stmts), zap.Stringer("binlog", start))
	var stmts []targetDDL
	for _, q := range a.Stmts {
		ts, err := d.translator.translate(a.Schema, q)
		if err != nil {
			d.unit.setStuck(&stuckDDL{start: start, end: end})
			return true, errs.New(CodeOnlineDDL, false, "sync: the recorded DDL %q of the cut-over of %s.%s at binlog %s: %v; "+
				"skip or replace the cut-over with handle-error", clipSQL(q), a.Schema, a.Real, start, err)
		}
		stmts = append(stmts, ts...)
	}
	// Applied as this event's DDL; a replay after a restart tolerates its
	// changes already made, as any pending DDL's.
	return true, d.applyStmts(ctx, stmts, query, start, end)
}
