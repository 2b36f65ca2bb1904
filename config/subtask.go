package config

import (
	"strings"

	"github.com/dmworker/dm-worker/pkg/onlineddl"
)

// Meta is a binlog location where incremental replication starts.
type Meta struct {
	BinlogName string `json:"binlog-name"`
	BinlogPos  uint32 `json:"binlog-pos"`
	BinlogGTID string `json:"binlog-gtid"`
}

// TableRef names one table (or a pattern of tables, with * and ? wildcards).
type TableRef struct {
	DBName  string `json:"db-name"`
	TblName string `json:"tbl-name"`
}

// BAList is a block-allow list of schemas and tables.
type BAList struct {
	DoDBs        []string   `json:"do-dbs,omitempty"`
	DoTables     []TableRef `json:"do-tables,omitempty"`
	IgnoreDBs    []string   `json:"ignore-dbs,omitempty"`
	IgnoreTables []TableRef `json:"ignore-tables,omitempty"`
}

// RouteRule renames matching tables (or merges many into one) on the target.
// The extractors (DM's extend-column) add columns to the target table that
// hold a part of the source table's, schema's or source's name, so rows of
// merged shards whose keys collide stay apart; see docs/design.md
// "Extend columns".
type RouteRule struct {
	SchemaPattern   string           `json:"schema-pattern"`
	TablePattern    string           `json:"table-pattern"`
	TargetSchema    string           `json:"target-schema"`
	TargetTable     string           `json:"target-table"`
	TableExtractor  *TableExtractor  `json:"extract-table,omitempty"`
	SchemaExtractor *SchemaExtractor `json:"extract-schema,omitempty"`
	SourceExtractor *SourceExtractor `json:"extract-source,omitempty"`
}

// TableExtractor fills TargetColumn with the submatches of TableRegexp in
// the source table's name, concatenated ("" when it does not match).
type TableExtractor struct {
	TargetColumn string `json:"target-column"`
	TableRegexp  string `json:"table-regexp"`
}

// SchemaExtractor fills TargetColumn with the submatches of SchemaRegexp in
// the source schema's name, concatenated.
type SchemaExtractor struct {
	TargetColumn string `json:"target-column"`
	SchemaRegexp string `json:"schema-regexp"`
}

// SourceExtractor fills TargetColumn with the submatches of SourceRegexp in
// the source id, concatenated.
type SourceExtractor struct {
	TargetColumn string `json:"target-column"`
	SourceRegexp string `json:"source-regexp"`
}

// Extractor is one extractor of a route rule, whichever kind.
type Extractor struct {
	// Field is the rule's field: extract-table, extract-schema or
	// extract-source; RegexpField the regexp's field inside it.
	Field, RegexpField string
	TargetColumn       string
	Regexp             string
}

// Extractors returns the rule's extractors in DM's order: table, schema,
// source (the order of the extend columns' values).
func (r *RouteRule) Extractors() []Extractor {
	var out []Extractor
	if e := r.TableExtractor; e != nil {
		out = append(out, Extractor{Field: "extract-table", RegexpField: "table-regexp", TargetColumn: e.TargetColumn, Regexp: e.TableRegexp})
	}
	if e := r.SchemaExtractor; e != nil {
		out = append(out, Extractor{Field: "extract-schema", RegexpField: "schema-regexp", TargetColumn: e.TargetColumn, Regexp: e.SchemaRegexp})
	}
	if e := r.SourceExtractor; e != nil {
		out = append(out, Extractor{Field: "extract-source", RegexpField: "source-regexp", TargetColumn: e.TargetColumn, Regexp: e.SourceRegexp})
	}
	return out
}

// clone copies the rule and its extractors.
func (r RouteRule) clone() RouteRule {
	r.TableExtractor = clonePtr(r.TableExtractor)
	r.SchemaExtractor = clonePtr(r.SchemaExtractor)
	r.SourceExtractor = clonePtr(r.SourceExtractor)
	return r
}

// FilterRule ignores (or explicitly does) binlog events of matching tables by
// event type or, for DDL, by SQL pattern.
type FilterRule struct {
	// Name is the rule's name in the task file's filters map (set when a
	// task is split; "" for rules written without one). Errors name it.
	Name          string   `json:"name,omitempty"`
	SchemaPattern string   `json:"schema-pattern"`
	TablePattern  string   `json:"table-pattern"`
	Events        []string `json:"events,omitempty"`
	SQLPattern    []string `json:"sql-pattern,omitempty"`
	Action        string   `json:"action"`
}

// Filter actions.
const (
	FilterIgnore = "Ignore"
	FilterDo     = "Do"
	// FilterError pauses the subtask with a non-resumable error naming the
	// rule, schema, table and event when a matching event arrives.
	FilterError = "Error"
)

// SyncerConfig tunes the sync unit.
type SyncerConfig struct {
	WorkerCount int  `json:"worker-count"`
	Batch       int  `json:"batch"`
	SafeMode    bool `json:"safe-mode"`
	// CheckpointFlushInterval is in seconds.
	CheckpointFlushInterval int `json:"checkpoint-flush-interval"`
}

// MydumperConfig tunes the dump unit.
type MydumperConfig struct {
	Threads int   `json:"threads"`
	Rows    int64 `json:"rows"`
	// Where, when set, dumps only the rows of every table for which this
	// SQL condition holds (DM's, and mydumper's --where); the load and the
	// sync unit are unaffected.
	Where string `json:"where,omitempty"`
}

// LoaderConfig tunes the load unit.
type LoaderConfig struct {
	PoolSize int `json:"pool-size"`
	// Dir is where the dump unit writes chunk files; "" means
	// <data-dir>/dump/<task> on the worker.
	Dir string `json:"dir"`
	// CleanupDumpFile: remove the dump files after a successful load.
	// Omitted means true (DM's default); read it with CleanupDump.
	CleanupDumpFile *bool `json:"cleanup-dump-file,omitempty"`
}

// CleanupDump reports whether dump files are removed after a successful
// load (true unless cleanup-dump-file is false).
func (c LoaderConfig) CleanupDump() bool { return c.CleanupDumpFile == nil || *c.CleanupDumpFile }

// ValidatorConfig tunes the validator of a subtask.
type ValidatorConfig struct {
	Mode          string   `json:"mode"`
	WorkerCount   int      `json:"worker-count"`
	RowErrorDelay Duration `json:"row-error-delay"`
}

// Validator modes.
const (
	ValidationNone = "none"
	ValidationFast = "fast"
	ValidationFull = "full"
)

// Task modes.
const (
	ModeFull        = "full"
	ModeIncremental = "incremental"
	ModeAll         = "all"
)

// SubTaskConfig is one source's share of a task.
type SubTaskConfig struct {
	Name           string   `json:"name"`
	SourceID       string   `json:"source-id"`
	TaskMode       string   `json:"task-mode"`
	Meta           Meta     `json:"meta"`
	TargetDatabase DBConfig `json:"target-database"`
	MetaSchema     string   `json:"meta-schema"`
	CaseSensitive  bool     `json:"case-sensitive"`
	// ShardMode is the task's shard mode (ShardPessimistic, ShardOptimistic, or "").
	ShardMode                 string `json:"shard-mode,omitempty"`
	StrictOptimisticShardMode bool   `json:"strict-optimistic-shard-mode,omitempty"`
	// OnlineDDL handles gh-ost and pt-online-schema-change on the source:
	// see OnlineDDLRules.
	OnlineDDL        bool     `json:"online-ddl,omitempty"`
	ShadowTableRules []string `json:"shadow-table-rules,omitempty"`
	TrashTableRules  []string `json:"trash-table-rules,omitempty"`
	// IgnoreCheckingItems names precheck items (DM's names, or this
	// worker's) whose failures do not stop the subtask (they are reported
	// as warnings): DM's ignore-checking-items.
	IgnoreCheckingItems []string `json:"ignore-checking-items,omitempty"`
	// CollationCompatible is DM's collation_compatible. CollationStrict:
	// CREATE/ALTER DATABASE and TABLE statements the load and sync units
	// run on the target get the source's default collation wherever they
	// leave it out (pkg/collation); "" or CollationLoose: run as written.
	// dmctl writes "strict" or leaves the field out.
	CollationCompatible string       `json:"collation_compatible,omitempty"`
	BAList              BAList       `json:"block-allow-list"`
	RouteRules          []RouteRule  `json:"route-rules,omitempty"`
	FilterRules         []FilterRule `json:"filter-rules,omitempty"`
	// ExprFilter are DM's expression filters the subtask's sync unit
	// applies to the rows of the binlog (not to the dump), each with its
	// Name; see ExpressionFilter.
	ExprFilter []ExpressionFilter `json:"expression-filter,omitempty"`
	Syncer     SyncerConfig       `json:"syncer"`
	Mydumper   MydumperConfig     `json:"mydumper"`
	Loader     LoaderConfig       `json:"loader"`
	Validator  ValidatorConfig    `json:"validator"`

	// Notes lists what decoding left out or renamed; never encoded.
	Notes DecodeNotes `json:"-" toml:"-"`
}

// Validate reports every problem of the subtask config at once as a
// *ValidationError (nil when there is none). Call it after Parse/Adjust.
func (c *SubTaskConfig) Validate() error {
	var p problems
	c.validate(&p)
	return p.err()
}

func (c *SubTaskConfig) validate(p *problems) {
	p.name("name", "task", c.Name)
	p.name("source-id", "source", c.SourceID)
	validateTaskMode(p, "task-mode", c.TaskMode)
	c.Meta.validate(p, "meta")
	// An incremental subtask without meta resumes from its checkpoints; the
	// sync unit stops with a clear error when there are none.
	c.TargetDatabase.validate(p, "target-database")
	validateMetaSchema(p, "meta-schema", c.MetaSchema)
	validateShardMode(p, c.ShardMode, c.StrictOptimisticShardMode)
	validateOnlineDDLRules(p, c.ShadowTableRules, c.TrashTableRules)
	validateCheckingItems(p, "ignore-checking-items", c.IgnoreCheckingItems)
	validateCollationCompatible(p, c.CollationCompatible)
	c.BAList.validate(p, "block-allow-list")
	for i := range c.RouteRules {
		c.RouteRules[i].validate(p, index("route-rules", i))
	}
	for i := range c.FilterRules {
		c.FilterRules[i].validate(p, index("filter-rules", i))
	}
	for i := range c.ExprFilter {
		c.ExprFilter[i].validate(p, index("expression-filter", i))
	}
	c.Syncer.validate(p, "syncer")
	c.Mydumper.validate(p, "mydumper")
	c.Loader.validate(p, "loader")
	c.Validator.validate(p, "validator")
}

// Values of collation_compatible (DM's; read in any case).
const (
	CollationLoose  = "loose"
	CollationStrict = "strict"
)

// StrictCollation reports whether collation_compatible is strict.
func (c *SubTaskConfig) StrictCollation() bool {
	return strings.EqualFold(strings.TrimSpace(c.CollationCompatible), CollationStrict)
}

// validateCollationCompatible checks collation_compatible.
func validateCollationCompatible(p *problems, v string) {
	switch strings.ToLower(strings.TrimSpace(v)) {
	case "", CollationLoose, CollationStrict:
	default:
		p.add("collation_compatible", v, `want "loose" (DDL runs on the target as written) or "strict" (the source's default collations are written into CREATE and ALTER statements that leave them out)`)
	}
}

// Shard modes (DM's shard-mode).
const (
	ShardPessimistic = "pessimistic"
	ShardOptimistic  = "optimistic"
)

// validateShardMode checks shard-mode and strict-optimistic-shard-mode.
func validateShardMode(p *problems, mode string, strict bool) {
	switch mode {
	case "", ShardPessimistic, ShardOptimistic:
	default:
		p.add("shard-mode", mode, `want "pessimistic" or "optimistic", or leave it out for a task without shard DDL coordination`)
	}
	if strict && mode != ShardOptimistic {
		p.add("strict-optimistic-shard-mode", "true", "belongs to shard-mode: optimistic; remove it")
	}
}

// OnlineDDLRules are the rules naming the shadow and trash tables of
// online schema changes, nil when online-ddl is off.
func (c *SubTaskConfig) OnlineDDLRules() (*onlineddl.Rules, error) {
	if !c.OnlineDDL {
		return nil, nil
	}
	return onlineddl.NewRules(c.ShadowTableRules, c.TrashTableRules)
}

// validateOnlineDDLRules checks shadow-table-rules and trash-table-rules:
// regular expressions whose first group is the real table's name.
func validateOnlineDDLRules(p *problems, shadow, trash []string) {
	for _, set := range []struct {
		path  string
		rules []string
	}{{"shadow-table-rules", shadow}, {"trash-table-rules", trash}} {
		for i, r := range set.rules {
			if _, err := onlineddl.CompileRule(r); err != nil {
				p.add(index(set.path, i), r, err.Error())
			}
		}
	}
}
