package stream

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"strings"

	"github.com/go-mysql-org/go-mysql/replication"
	"github.com/pingcap/tidb/pkg/parser/ast"
	"go.uber.org/zap"

	"github.com/dmworker/dm-worker/pkg/errs"
	"github.com/dmworker/dm-worker/pkg/onlineddl"
)

// CodeOnlineDDL: with online-ddl, a DDL of an online schema change's
// tables that cannot be followed (a rename no tool makes, a shadow table
// whose CREATE the stream did not see); not resumable.
const CodeOnlineDDL = "stream-online-ddl"

// OnlineDDLRecord is, in a checkpoint, the DDLs a shadow table of an
// online schema change (gh-ost, pt-online-schema-change) went through
// since its CREATE TABLE, up to the checkpoint's location: the stream
// delivers them as one DDL event of the real table at the cut-over.
//
// The records are part of the checkpoint, saved with it in one write, so
// they are always those of the checkpoint's location: a restart (or a
// kill -9) replays the binlog from there with the records as they were
// there, and records again every shadow DDL after it. No other store is
// needed, and no crash can leave a record ahead of or behind the
// checkpoint.
type OnlineDDLRecord struct {
	Schema string `json:"schema"`
	Real   string `json:"real-table"`
	Shadow string `json:"shadow-table"`
	// Stmts are the shadow's DDLs, rewritten to name the real table, with
	// the binlog location ("file:pos") each was read at.
	Stmts []onlineddl.Stmt `json:"stmts"`
}

// oscRecords converts a tracker's pending records to a checkpoint's (nil
// when there are none).
func oscRecords(recs []onlineddl.Record) []OnlineDDLRecord {
	if len(recs) == 0 {
		return nil
	}
	out := make([]OnlineDDLRecord, len(recs))
	for i, r := range recs {
		out[i] = OnlineDDLRecord{Schema: r.Schema, Real: r.Real, Shadow: r.Shadow, Stmts: slices.Clone(r.Stmts)}
	}
	return out
}

// newOSCTracker is the online-DDL tracker of a run that starts at cp, nil
// when online-ddl is off.
func (t *Task) newOSCTracker(ctx context.Context, cp Checkpoint) (*onlineddl.Tracker, error) {
	if t.rules == nil {
		return nil, nil
	}
	st := &onlineddl.MemStore{}
	for _, r := range cp.OnlineDDL {
		if err := st.Put(ctx, onlineddl.Record{Schema: r.Schema, Real: r.Real, Shadow: r.Shadow, Stmts: slices.Clone(r.Stmts)}); err != nil {
			return nil, err
		}
	}
	tr, err := onlineddl.NewTracker(ctx, t.rules, st)
	if err != nil {
		return nil, errs.New(CodeOnlineDDL, false, "stream %q: online-ddl: load the records of the checkpoint: %w", t.name, err)
	}
	for _, r := range tr.Pending() {
		t.logger.Info("stream resumes with an online schema change under way", zap.String("table", r.Schema+"."+r.Real),
			zap.String("shadow", r.Shadow), zap.Int("recorded-ddls", len(r.Stmts)))
	}
	return tr, nil
}

// oscTable reports whether, with online-ddl on, table is a shadow or
// trash table: the stream delivers nothing of it.
func (t *Task) oscTable(table string) bool {
	return t.rules != nil && t.rules.Online(table)
}

// allowedTable is the stream's selection of tables: its block-allow list,
// without shadow and trash tables when online-ddl is on.
func (t *Task) allowedTable(db, table string) bool {
	return !t.oscTable(table) && t.tables.TableAllowed(db, table)
}

// warnShadowTables logs, once per run, the shadow tables on the source of
// tables the stream selects that the checkpoint has no record of: the
// stream did not see their CREATE TABLE, and their cut-over will stop it
// with a CodeOnlineDDL error (DM's precheck warns of the same).
func (t *Task) warnShadowTables(ctx context.Context, cp Checkpoint) {
	if t.rules == nil {
		return
	}
	known := map[string]bool{}
	for _, r := range cp.OnlineDDL {
		known[r.Schema+"\x00"+r.Shadow] = true
	}
	_, err := ListTables(ctx, t.cfg.DB, func(db, table string) bool {
		kind, real := t.rules.Classify(table)
		if kind == onlineddl.Shadow && t.tables.TableAllowed(db, real) && !known[db+"\x00"+table] {
			t.logger.Warn("online-ddl: an online schema change is under way on the source, started before this stream's checkpoint: "+
				"its DDLs cannot be delivered, and its cut-over will stop the stream; let the tool finish or abort it",
				zap.String("table", db+"."+real), zap.String("shadow", table))
		}
		return false
	})
	if err != nil && ctx.Err() == nil {
		t.logger.Warn("online-ddl: list the source's tables to look for online schema changes under way", zap.Error(err))
	}
}

// onlineDDL handles, with online-ddl on, a DDL statement that names a
// shadow or trash table (nodes: the statements of the query event;
// targets: the tables they name). handled is false when the statement is
// to be delivered as usual. Nothing is delivered of the tools' mechanics;
// a shadow's DDLs are recorded; at the cut-over one DDL event of the real
// table carries them, in the place of the RENAME.
func (r *reader) onlineDDL(ctx context.Context, ev *replication.BinlogEvent, schema string, nodes []ast.StmtNode,
	targets []ddlTarget, query string) (handled bool, err error) {
	t := r.t
	online, selected := false, false
	for _, tg := range targets {
		if tg.table == "" {
			continue
		}
		if kind, real := t.rules.Classify(tg.table); kind != onlineddl.Real {
			online = true
			selected = selected || t.tables.TableAllowed(tg.db, real)
		}
	}
	switch {
	case !online, !selected:
		// Not about an online schema change of a table the stream
		// selects: delivered as usual, which leaves out shadow and trash
		// tables.
		return false, nil
	case len(nodes) != 1:
		return true, r.stopBefore(ctx, errs.New(CodeOnlineDDL, false, "stream %q: at binlog %s: online-ddl: a query event holds %d statements, "+
			"some of them about online schema change tables (%s); the stream delivered everything before it. %s",
			t.name, r.tr.Cur, len(nodes), clip(query), oscFix(t.name)))
	}
	at := r.tr.Cur.Name + ":" + strconv.FormatUint(uint64(ev.Header.LogPos), 10)
	act, err := r.osc.Statement(ctx, schema, nodes[0], at)
	if err != nil {
		var oe *onlineddl.Error
		if errors.As(err, &oe) {
			return true, r.stopBefore(ctx, errs.New(CodeOnlineDDL, false, "stream %q: at binlog %s (%s): %w. The stream delivered everything before it. %s",
				t.name, r.tr.Cur, clip(query), err, oscFix(t.name)))
		}
		return true, errs.New(CodeOnlineDDL, false, "stream %q: at binlog %s: %w", t.name, r.tr.Cur, err)
	}
	log := t.logger.With(zap.Stringer("at", r.tr.Cur), zap.String("why", act.Why))
	switch act.Kind {
	case onlineddl.Pass:
		return false, nil
	case onlineddl.Skip:
		r.oscDirty = true
		log.Info("stream delivers nothing of an online schema change tool's statement", zap.String("query", clip(query)))
		return true, nil
	case onlineddl.Recorded:
		r.oscDirty = true
		log.Info("stream records a DDL of a shadow table for the cut-over", zap.Strings("recorded", act.Stmts))
		return true, nil
	}
	// The cut-over.
	r.oscDirty = true
	if err := r.osc.Done(ctx, act.Schema, act.Real, at); err != nil {
		return true, errs.New(CodeOnlineDDL, false, "stream %q: at binlog %s: %w", t.name, r.tr.Cur, err)
	}
	t.schemas.Invalidate(act.Schema, act.Real)
	if len(act.Stmts) == 0 || !t.tables.TableAllowed(act.Schema, act.Real) {
		log.Info("stream: cut-over of an online schema change without DDLs to deliver", zap.String("query", clip(query)))
		return true, nil
	}
	ddl := strings.Join(act.Stmts, ";\n")
	log.Info("stream delivers the DDL of an online schema change at its cut-over", zap.String("table", act.Schema+"."+act.Real),
		zap.String("ddl", clip(ddl)))
	event, err := t.enc.DDL(act.Schema, act.Real, ddl, r.position(ev, 0))
	if err != nil {
		return true, errs.New(CodeEncode, false, "stream %q: DDL at binlog %s (%s): %w", t.name, r.tr.Cur, clip(ddl), err)
	}
	return true, r.add(ctx, event, mark{file: r.tr.Cur.Name, pos: ev.Header.LogPos})
}

// stopBefore hands the events read before the statement that fails with
// err to the writer, so that the stream stops with everything before the
// statement delivered and its checkpoint just before it, and returns err.
func (r *reader) stopBefore(ctx context.Context, err error) error {
	if cerr := r.cut(ctx, false); cerr != nil {
		return cerr
	}
	return err
}

// oscFix says how to get a stream past a CodeOnlineDDL error.
func oscFix(name string) string {
	return "Streams have no handle-error: once the tool finished (after its cut-over), deliver its change to the consumers by hand and run " +
		"`dmctl stream resume " + name + " --ignore-untreated` (it skips the changes from here to the source's current position), or " +
		"deploy the stream with online-ddl: false to deliver the tool's tables and statements as they are"
}

// commitOSC makes the tracker's records those of the end of the last
// complete transaction (the checkpoint the next batch completes).
func (r *reader) commitOSC() {
	if r.oscDirty {
		r.oscEnd, r.oscDirty = oscRecords(r.osc.Pending()), false
	}
}
