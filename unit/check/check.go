package check

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/dmworker/dm-worker/config"
	"github.com/dmworker/dm-worker/pkg/dbconn"
	"github.com/dmworker/dm-worker/pkg/filter"
	"github.com/dmworker/dm-worker/pkg/fkeys"
	"github.com/dmworker/dm-worker/pkg/onlineddl"
)

// Time bounds of Run.
const (
	// QueryTimeout bounds connecting to a server and each query.
	QueryTimeout = 10 * time.Second
	// ServerTimeout bounds all checks of one server (the comparison of
	// the target tables with the source's, one query, comes on top).
	ServerTimeout = 20 * time.Second
)

// Run checks cfg's requirements on its source src and its target for
// cfg's task mode and returns every outcome; it never stops at the first
// failure. A server that cannot be reached is one failure naming its
// address; the checks that need it are not run. Passwords must be
// resolved (plain text). Run is safe for concurrent use; the source and
// the target are checked in parallel, each connection and query is bounded
// by QueryTimeout, each server's checks by ServerTimeout, all by ctx. A
// check cut short by a timeout is a failure naming the error.
func Run(ctx context.Context, cfg *config.SubTaskConfig, src *config.SourceConfig) *Report {
	return RunBudgeted(ctx, cfg, src, Budgets{})
}

// Budgets are the worker's budgets of connections the checks take theirs
// from (two at most of each server, for the duration of the checks); a
// nil one: a pool of its own.
type Budgets struct {
	Targets, Sources *dbconn.Budget
}

// RunBudgeted is Run whose connections come from b.
func RunBudgeted(ctx context.Context, cfg *config.SubTaskConfig, src *config.SourceConfig, b Budgets) *Report {
	r := &Report{Task: cfg.Name, Source: cfg.SourceID}
	c := newRun(cfg, src)
	c.budgets = b
	var (
		wg       sync.WaitGroup
		srcItems items
		tgtItems items
		tables   []*table
		srcKeys  []fkeys.Key
		target   *server
	)
	wg.Add(2)
	go func() {
		defer wg.Done()
		sctx, cancel := context.WithTimeout(ctx, ServerTimeout)
		defer cancel()
		tables, srcKeys = c.checkSource(sctx, &srcItems)
	}()
	go func() {
		defer wg.Done()
		sctx, cancel := context.WithTimeout(ctx, ServerTimeout)
		defer cancel()
		target = c.checkTarget(sctx, &tgtItems)
	}()
	wg.Wait()
	if target != nil {
		if tables != nil {
			c.checkTargetTables(ctx, target, tables, &tgtItems)
			if c.syncs() {
				c.checkForeignKeys(ctx, target, srcKeys, &tgtItems)
			}
		}
		target.close()
	}
	r.Items = ignoreItems(cfg.IgnoreCheckingItems, append(srcItems.list, tgtItems.list...))
	return r
}

// ignoreItems turns the failures of the items the task's
// ignore-checking-items names (config.CheckingItems) into warnings that
// say so. A failure that came from an error (a server that cannot be
// reached or queried) stays: the units would fail the same way.
func ignoreItems(names []string, list []Item) []Item {
	by := map[string]string{} // item → the name that ignores it
	all := ""
	for _, n := range names {
		if n == "all" {
			all = n
		}
		for _, it := range config.CheckingItems[n] {
			by[it] = n
		}
	}
	for i := range list {
		it := &list[i]
		why, ok := by[it.Name]
		if !ok && all != "" {
			why, ok = all, true
		}
		if !ok || it.State != StateFail || it.cause != nil {
			continue
		}
		it.State = StateWarn
		it.Message = fmt.Sprintf("ignored (ignore-checking-items: %s): %s", why, it.Message)
	}
	return list
}

// run is what one Run checks with; read-only once built.
type run struct {
	cfg     *config.SubTaskConfig
	src     *config.SourceConfig
	mode    string
	cs      bool // names compare case-sensitively
	tables  *filter.Tables
	router  *filter.Router
	budgets Budgets // where the connections come from
	// osc names the shadow and trash tables of online schema changes (nil:
	// online-ddl is off, or its rules are wrong: oscErr).
	osc    *onlineddl.Rules
	oscErr error
}

func newRun(cfg *config.SubTaskConfig, src *config.SourceConfig) *run {
	cs := cfg.CaseSensitive || src.CaseSensitive
	osc, oscErr := cfg.OnlineDDLRules()
	return &run{
		cfg: cfg, src: src, mode: strings.ToLower(cfg.TaskMode), cs: cs,
		tables: filter.NewTables(cfg.BAList, cs),
		router: filter.NewRouter(cfg.RouteRules, cfg.SourceID, cs),
		osc:    osc, oscErr: oscErr,
	}
}

// dumps reports whether the mode dumps the source (full, all).
func (c *run) dumps() bool { return c.mode == config.ModeFull || c.mode == config.ModeAll }

// syncs reports whether the mode reads the binlog (incremental, all).
func (c *run) syncs() bool { return c.mode == config.ModeIncremental || c.mode == config.ModeAll }

// server is an open connection pool to a source or target.
type server struct {
	db   *sql.DB
	addr string
	// what names the server in messages: "source mysql-01 (127.0.0.1:3306)".
	what string
}

func (s *server) close() { _ = s.db.Close() }

// connect opens a pool of two connections to db (from budget b for task
// owner; nil: a pool of its own) and pings it; on failure it adds one
// failure item (name) that names the address and says what was skipped.
func connect(ctx context.Context, b *dbconn.Budget, owner string, db config.DBConfig, ref dbconn.Ref, what, name, skipped, fix string, l *items) *server {
	ep, err := dbconn.NewEndpoint(db, ref)
	if err != nil {
		l.fail(name, what, "correct the "+ref.Field+" settings", "%s: %v; %s", what, err, skipped)
		return nil
	}
	what = fmt.Sprintf("%s (%s)", what, ep.Addr())
	pool, err := b.Open(ep, ep.DriverConfig(), owner, 2)
	if err == nil {
		qctx, cancel := context.WithTimeout(ctx, QueryTimeout)
		err = pool.PingContext(qctx)
		cancel()
		if err != nil {
			_ = pool.Close()
		}
	}
	if err != nil {
		l.failErr(err, name, what, fmt.Sprintf(fix, ep.Addr()), "cannot connect to %s: %v; %s", what, err, skipped)
		return nil
	}
	l.pass(name, what, "connected to %s", what)
	return &server{db: pool, addr: ep.Addr(), what: what}
}

// query runs fn with a context bounded by QueryTimeout.
func query[T any](ctx context.Context, fn func(ctx context.Context) (T, error)) (T, error) {
	qctx, cancel := context.WithTimeout(ctx, QueryTimeout)
	defer cancel()
	return fn(qctx)
}

// checkSource runs the source's checks and returns its selected tables
// (nil when they could not be read) and, in modes that sync, its foreign
// keys (nil when it has none, or when they could not be read, which is a
// warning item).
func (c *run) checkSource(ctx context.Context, l *items) ([]*table, []fkeys.Key) {
	s := connect(ctx, c.budgets.Sources, c.cfg.Name, c.src.From, dbconn.SourceRef(c.src.SourceID), "source "+c.src.SourceID, "source_connection",
		"the source's privilege, binlog and table checks were not run",
		"start the server at %s or correct from.host/from.port of the source config (`dmctl source update FILE`), and check that it accepts from.user with from.password from this host", l)
	if s == nil {
		return nil, nil
	}
	defer s.close()
	var g *grants
	info, err := query(ctx, func(ctx context.Context) (*serverInfo, error) { return readServerInfo(ctx, s.db, c.src.Flavor) })
	if err != nil {
		l.failErr(err, "source_variables", s.what, "give the source user access to SHOW GLOBAL VARIABLES",
			"read the server variables of %s: %v; the privilege and binlog checks were not run", s.what, err)
	} else {
		g = c.checkPrivileges(ctx, s, info, l)
		if c.syncs() {
			c.checkBinlog(s, info, l)
		}
	}
	tables, err := query(ctx, func(ctx context.Context) ([]*table, error) { return c.readTables(ctx, s.db) })
	if err != nil {
		l.failErr(err, "source_tables", s.what, "give the source user SELECT on the selected tables",
			"read the selected tables of %s from information_schema: %v", s.what, err)
		return nil, nil
	}
	c.checkSelected(s, tables, g, l)
	c.checkShards(s, tables, l)
	c.checkOnlineDDL(ctx, s, l)
	c.checkExprFilters(ctx, s, l)
	if !c.syncs() {
		return tables, nil
	}
	keys, err := query(ctx, func(ctx context.Context) ([]fkeys.Key, error) { return fkeys.Read(ctx, s.db, nil) })
	if err != nil {
		l.warn("foreign_keys", s.what, "give the source user SELECT on information_schema of the selected schemas",
			"read the foreign keys of %s: %v; whether the target reproduces the source's cascades was not checked", s.what, err)
		return tables, nil
	}
	return tables, keys
}

// checkTarget connects to the target and checks that the task can write
// its meta schema there; it returns the open target, nil when it cannot
// be reached.
func (c *run) checkTarget(ctx context.Context, l *items) *server {
	s := connect(ctx, c.budgets.Targets, c.cfg.Name, c.cfg.TargetDatabase, dbconn.TargetRef(c.cfg.Name), "target of task "+c.cfg.Name, "target_connection",
		"the target's write and table checks were not run",
		"start the server at %s or correct target-database host/port in the task file, and check that it accepts target-database.user with its password from this host", l)
	if s == nil {
		return nil
	}
	c.checkWritable(ctx, s, l)
	return s
}
