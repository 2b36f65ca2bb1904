package dump

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
	"strconv"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/dmworker/dm-worker/config"
	"github.com/dmworker/dm-worker/pkg/binlog"
	"github.com/dmworker/dm-worker/pkg/dbconn"
	"github.com/dmworker/dm-worker/pkg/errs"
	"github.com/dmworker/dm-worker/pkg/filter"
	"github.com/dmworker/dm-worker/pkg/onlineddl"
	"github.com/dmworker/dm-worker/unit"
)

// Defaults for mydumper settings left at 0 (mydumper's and DM's).
const (
	defaultThreads = 4
	defaultRows    = 10000
)

// Dumper is the dump unit of one subtask.
type Dumper struct {
	src     *config.SourceConfig
	dir     string
	logger  *zap.Logger
	metrics *unitMetrics
	prog    progress
	// lockWait bounds the wait for FLUSH TABLES WITH READ LOCK
	// (defaultLockWait; tests shorten it).
	lockWait time.Duration

	// handsOver: task mode all, the sync unit starts at the snapshot.
	handsOver atomic.Bool

	// Set by New and Update; read by runs (never concurrently with Update).
	// where is mydumper.where as config.WhereCondition restores it ("": every row).
	where   string
	cfg     *config.SubTaskConfig
	threads int
	rows    int64
	tables  *filter.Tables
	osc     *onlineddl.Rules // nil: online-ddl is off
	fp      string

	// sources is the worker's budget of source connections
	// (UseSourceBudget, before Init); nil: a pool of its own.
	sources *dbconn.Budget

	// Set by Init; used by runs, Close and Kill (never concurrently).
	source *sql.DB
}

// UseSourceBudget makes the unit's source pool take its connections from
// b, the worker's budget of connections to each source: a dump holds
// mydumper.threads readers and its lock session at once, fewer readers
// when the budget's limit is smaller (see readers). Call it before Init.
func (d *Dumper) UseSourceBudget(b *dbconn.Budget) { d.sources = b }

// readers is the number of reader sessions a dump holds: threads, within
// the budget of source connections (its limit less the lock session).
func (d *Dumper) readers() int {
	if d.sources == nil {
		return d.threads
	}
	return max(1, min(d.threads, d.sources.Limit()-1))
}

var (
	_ unit.Unit             = (*Dumper)(nil)
	_ unit.CheckpointHolder = (*Dumper)(nil)
)

// CheckpointLocation is the snapshot's location once it is taken, in task
// mode all (where the sync unit starts there): the relay keeps its files
// from there on while the dump and load run. Safe concurrently with
// Process.
func (d *Dumper) CheckpointLocation() (binlog.Location, bool) {
	if !d.handsOver.Load() {
		return binlog.Location{}, false
	}
	return d.prog.snapshot()
}

// New creates the dump unit of a subtask that writes into dir (created,
// 0750, when missing). metrics and logger may be nil.
func New(cfg *config.SubTaskConfig, src *config.SourceConfig, dir string, m *Metrics, logger *zap.Logger) (*Dumper, error) {
	if cfg == nil || src == nil {
		return nil, errs.New(CodeDumpConfig, false, "dump: subtask and source configs are required")
	}
	if dir == "" {
		return nil, errs.New(CodeDumpConfig, false, "dump: subtask %q has no dump directory", cfg.Name)
	}
	if logger == nil {
		logger = zap.NewNop()
	}
	d := &Dumper{
		src: src, dir: dir, logger: logger, lockWait: defaultLockWait,
		metrics: &unitMetrics{m: m, task: cfg.Name, source: cfg.SourceID},
	}
	if err := d.configure(cfg); err != nil {
		return nil, err
	}
	return d, nil
}

// configure installs cfg.
func (d *Dumper) configure(cfg *config.SubTaskConfig) error {
	osc, err := cfg.OnlineDDLRules()
	if err != nil {
		return errs.New(CodeDumpConfig, false, "dump: %w", err)
	}
	d.osc = osc
	d.where = ""
	if cfg.Mydumper.Where != "" {
		if d.where, err = config.WhereCondition(cfg.Mydumper.Where); err != nil {
			return errs.New(CodeDumpConfig, false, "dump: mydumper.where %q: %w", cfg.Mydumper.Where, err)
		}
	}
	c := *cfg
	d.cfg = &c
	d.threads = c.Mydumper.Threads
	if d.threads < 1 {
		d.threads = defaultThreads
	}
	d.rows = effectiveRows(&c)
	d.tables = filter.NewTables(c.BAList, c.CaseSensitive || d.src.CaseSensitive)
	d.fp = Fingerprint(&c, d.src)
	d.handsOver.Store(c.TaskMode == config.ModeAll)
	return nil
}

func effectiveRows(cfg *config.SubTaskConfig) int64 {
	if cfg.Mydumper.Rows < 1 {
		return defaultRows
	}
	return cfg.Mydumper.Rows
}

// Parts of a fingerprint, in order, and what they name in a log line:
// FingerprintBAList, FingerprintCase and FingerprintOnlineDDL decide which
// tables a dump holds.
const (
	FingerprintBAList    = "ba"
	FingerprintCase      = "cs"
	FingerprintOnlineDDL = "osc"
)

// FingerprintParts are the parts of a fingerprint, in order.
var FingerprintParts = []string{FingerprintBAList, FingerprintCase, "source", "rows", FingerprintOnlineDDL}

var fingerprintNames = map[string]string{
	FingerprintBAList: "the block-allow list", FingerprintCase: "case sensitivity",
	"source": "the source's endpoint (from.host/port)", "rows": "mydumper.rows",
	FingerprintOnlineDDL: "online-ddl (or its shadow-table-rules and trash-table-rules)",
}

// Fingerprint sums what decides a dump's contents: the block-allow list,
// case sensitivity, the source's endpoint, the chunk size (mydumper.rows)
// and, with online-ddl on, its table rules (the shadow and trash tables
// are left out). Threads, routes and filters (applied by the load unit)
// are not part of it. It reads
// "ba=<hash>;cs=<bool>;source=<host:port>;rows=<n>[;osc=<hash>]", so that
// a log can say which part changed; the osc part is there only with
// online-ddl on, so a dump taken before online-ddl existed keeps its
// fingerprint.
func Fingerprint(cfg *config.SubTaskConfig, src *config.SourceConfig) string {
	ba, err := json.Marshal(cfg.BAList)
	if err != nil { // a struct of strings always encodes
		panic("dump: encode block-allow list: " + err.Error())
	}
	sum := sha256.Sum256(ba)
	fp := fmt.Sprintf("ba=%s;cs=%t;source=%s;rows=%d", hex.EncodeToString(sum[:8]),
		cfg.CaseSensitive || src.CaseSensitive,
		net.JoinHostPort(src.From.Host, strconv.Itoa(src.From.Port)), effectiveRows(cfg))
	if w := cfg.Mydumper.Where; w != "" {
		sum := sha256.Sum256([]byte(w))
		fp += ";where=" + hex.EncodeToString(sum[:8])
	}
	if cfg.OnlineDDL {
		shadow, trash := cfg.ShadowTableRules, cfg.TrashTableRules
		if len(shadow) == 0 {
			shadow = []string{onlineddl.DefaultShadowRule}
		}
		if len(trash) == 0 {
			trash = []string{onlineddl.DefaultTrashRule}
		}
		rules, err := json.Marshal([][]string{shadow, trash})
		if err != nil { // slices of strings always encode
			panic("dump: encode online-ddl rules: " + err.Error())
		}
		sum := sha256.Sum256(rules)
		fp += ";" + FingerprintOnlineDDL + "=" + hex.EncodeToString(sum[:8])
	}
	return fp
}

// Type is unit.TypeDump.
func (d *Dumper) Type() unit.Type { return unit.TypeDump }

// Init creates the dump directory and the (lazily connecting) source pool.
func (d *Dumper) Init(context.Context) error {
	if err := makeDir(d.dir); err != nil {
		return err
	}
	if d.source != nil {
		return nil
	}
	db, err := openSource(d.sources, d.src, d.cfg.Name, d.readers()+2)
	if err != nil {
		return err
	}
	d.source = db
	return nil
}

// openSource opens a pool to the source whose connections read raw bytes
// (no parseTime), from budget b for task owner (nil: a pool of its own);
// session settings are made per connection (session.go).
func openSource(b *dbconn.Budget, src *config.SourceConfig, owner string, maxConns int) (*sql.DB, error) {
	ep, err := dbconn.NewEndpoint(src.From, dbconn.SourceRef(src.SourceID))
	if err != nil {
		return nil, errs.New(CodeDumpConfig, false, "dump: %w", err)
	}
	cfg := ep.DriverConfig()
	cfg.ParseTime = false
	cfg.InterpolateParams = false
	if b != nil {
		db, err := b.Open(ep, cfg, owner, maxConns)
		if err != nil {
			return nil, errs.New(CodeDumpConfig, false, "dump: %w", err)
		}
		return db, nil
	}
	db, err := ep.Open(cfg)
	if err != nil {
		return nil, errs.New(CodeDumpConfig, false, "dump: %w", err)
	}
	db.SetMaxOpenConns(maxConns)
	db.SetMaxIdleConns(2)
	db.SetConnMaxIdleTime(time.Minute)
	return db, nil
}

// IsFreshTask reports whether the directory holds no finished dump for the
// current config.
func (d *Dumper) IsFreshTask(context.Context) (bool, error) {
	m, _, err := finishedDump(d.dir, d.cfg.Name, d.cfg.SourceID, d.fp, d.cfg.StrictCollation())
	if err != nil {
		return false, err
	}
	return m == nil, nil
}

// Process dumps, or returns at once when the directory already holds the
// finished dump of the current config.
func (d *Dumper) Process(ctx context.Context) unit.Result { return d.result(ctx, d.run(ctx)) }

// Resume is Process: an unfinished dump is always taken again from a fresh
// snapshot.
func (d *Dumper) Resume(ctx context.Context) unit.Result { return d.result(ctx, d.run(ctx)) }

func (d *Dumper) result(ctx context.Context, err error) unit.Result {
	return unit.Outcome(ctx, err, d.logger, "dump unit")
}

// Pause does nothing: a run closes its connections when it returns.
func (d *Dumper) Pause() {}

// Update applies a config whose fingerprint is unchanged (threads, routes,
// filters, load and sync settings); one that changes what the dump holds
// returns unit.ErrUpdateUnsupported.
func (d *Dumper) Update(_ context.Context, cfg *config.SubTaskConfig) error {
	if fp := Fingerprint(cfg, d.src); fp != d.fp {
		return fmt.Errorf("dump: %s: %w", fingerprintChange(d.fp, fp), unit.ErrUpdateUnsupported)
	}
	return d.configure(cfg)
}

// Close closes the source pool.
func (d *Dumper) Close() { d.Kill() }

// Kill closes the source pool; a running dump has already returned.
func (d *Dumper) Kill() {
	if d.source != nil {
		if err := d.source.Close(); err != nil {
			d.logger.Warn("close source pool", zap.Error(err))
		}
		d.source = nil
	}
	d.metrics.forget()
}

// Status returns a Status.
func (d *Dumper) Status() any { return d.prog.status(d.dir, time.Now()) }
