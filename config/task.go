package config

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
)

// MySQLInstance is one source's entry in a DM task file; its rule fields
// name entries of the task file's named maps. As in DM, an instance may give
// its mydumper, loader and syncer settings inline instead of by name, and
// mydumper-thread, loader-thread and syncer-thread override the threads,
// pool-size and worker-count of whichever settings it uses.
type MySQLInstance struct {
	SourceID    string   `json:"source-id"`
	Meta        *Meta    `json:"meta,omitempty"`
	BAListName  string   `json:"block-allow-list,omitempty"`
	RouteRules  []string `json:"route-rules,omitempty"`
	FilterRules []string `json:"filter-rules,omitempty"`
	// ExpressionFilters name entries of the task file's expression-filter.
	ExpressionFilters   []string        `json:"expression-filters,omitempty"`
	SyncerConfigName    string          `json:"syncer-config-name,omitempty"`
	MydumperConfigName  string          `json:"mydumper-config-name,omitempty"`
	LoaderConfigName    string          `json:"loader-config-name,omitempty"`
	ValidatorConfigName string          `json:"validator-config-name,omitempty"`
	Syncer              *SyncerConfig   `json:"syncer,omitempty"`
	Mydumper            *MydumperConfig `json:"mydumper,omitempty"`
	Loader              *LoaderConfig   `json:"loader,omitempty"`
	SyncerThread        int             `json:"syncer-thread,omitempty"`
	MydumperThread      int             `json:"mydumper-thread,omitempty"`
	LoaderThread        int             `json:"loader-thread,omitempty"`
}

// TaskConfig is a DM task file as given to `dmctl task start`. DM's fields
// that are not fields here are handled by the decode engine (dmfields.go):
// accepted and listed in Notes, renamed, or refused.
type TaskConfig struct {
	Name          string `json:"name"`
	TaskMode      string `json:"task-mode"`
	MetaSchema    string `json:"meta-schema,omitempty"`
	CaseSensitive bool   `json:"case-sensitive,omitempty"`
	// ShardMode coordinates the DDL of the upstream tables a route merges
	// into one target table (ShardPessimistic; "" for none). IsSharding
	// is DM's old spelling of pessimistic.
	ShardMode                 string `json:"shard-mode,omitempty"`
	IsSharding                bool   `json:"is-sharding,omitempty"`
	StrictOptimisticShardMode bool   `json:"strict-optimistic-shard-mode,omitempty"`
	// OnlineDDL handles gh-ost and pt-online-schema-change on the source
	// (pkg/onlineddl); OnlineDDLScheme (gh-ost or pt) is DM's deprecated
	// form of it. The rules name the shadow and trash tables (DM's
	// defaults when empty).
	OnlineDDL        bool     `json:"online-ddl,omitempty"`
	OnlineDDLScheme  string   `json:"online-ddl-scheme,omitempty"`
	ShadowTableRules []string `json:"shadow-table-rules,omitempty"`
	TrashTableRules  []string `json:"trash-table-rules,omitempty"`
	// IgnoreCheckingItems: see SubTaskConfig.
	IgnoreCheckingItems []string `json:"ignore-checking-items,omitempty"`
	// CollationCompatible is DM's collation_compatible: CollationLoose
	// or CollationStrict, in any case ("" is loose). See SubTaskConfig.
	CollationCompatible string                `json:"collation_compatible,omitempty"`
	TargetDatabase      DBConfig              `json:"target-database"`
	MySQLInstances      []MySQLInstance       `json:"mysql-instances"`
	BAList              map[string]BAList     `json:"block-allow-list,omitempty"`
	Routes              map[string]RouteRule  `json:"routes,omitempty"`
	Filters             map[string]FilterRule `json:"filters,omitempty"`
	// ExprFilter are DM's expression filters by name (see
	// ExpressionFilter); instances use them by name.
	ExprFilter map[string]ExpressionFilter `json:"expression-filter,omitempty"`
	Syncers    map[string]SyncerConfig     `json:"syncers,omitempty"`
	Mydumpers  map[string]MydumperConfig   `json:"mydumpers,omitempty"`
	Loaders    map[string]LoaderConfig     `json:"loaders,omitempty"`
	Validators map[string]ValidatorConfig  `json:"validators,omitempty"`
	// CleanDumpFile is DM's task-level switch for removing dump files after
	// a successful load; it applies to every instance whose loader does not
	// set cleanup-dump-file itself. Omitted means true.
	CleanDumpFile *bool `json:"clean-dump-file,omitempty"`
	// RemoveMeta is DM's deprecated task-file form of `dmctl task start
	// --remove-meta`: the task's checkpoints in the target are removed when
	// dmctl creates the task (once: the worker never sees the field, so
	// restarts, pauses and resumes keep the checkpoints).
	RemoveMeta bool `json:"remove-meta,omitempty"`

	// Notes lists what decoding left out or renamed; never encoded.
	Notes DecodeNotes `json:"-" toml:"-"`
}

// validateNamed validates every entry of one of the task file's named maps,
// in key order, under the path field.name.
func validateNamed[V any, PV interface {
	*V
	validate(p *problems, path string)
}](p *problems, field string, m map[string]V) {
	for _, k := range slices.Sorted(maps.Keys(m)) {
		v := m[k]
		PV(&v).validate(p, join(field, k))
	}
}

// Validate reports every problem of the task file at once as a
// *ValidationError (nil when there is none): the task's own fields, every
// named rule and config, every instance, duplicate source ids and references
// to rules or configs that do not exist. Call it after Parse/Adjust.
func (c *TaskConfig) Validate() error {
	var p problems
	p.name("name", "task", c.Name)
	validateTaskMode(&p, "task-mode", c.TaskMode)
	validateMetaSchema(&p, "meta-schema", c.MetaSchema)
	validateShardMode(&p, c.shardMode(), c.StrictOptimisticShardMode)
	switch strings.ToLower(c.OnlineDDLScheme) {
	case "", "gh-ost", "pt":
	default:
		p.add("online-ddl-scheme", c.OnlineDDLScheme, `want "gh-ost" or "pt" (deprecated in DM: use online-ddl: true, which handles both)`)
	}
	validateOnlineDDLRules(&p, c.ShadowTableRules, c.TrashTableRules)
	validateCheckingItems(&p, "ignore-checking-items", c.IgnoreCheckingItems)
	validateCollationCompatible(&p, c.CollationCompatible)
	c.TargetDatabase.validate(&p, "target-database")

	validateNamed(&p, "block-allow-list", c.BAList)
	validateNamed(&p, "routes", c.Routes)
	validateNamed(&p, "filters", c.Filters)
	validateExprFilters(&p, "expression-filter", c.ExprFilter)
	validateNamed(&p, "syncers", c.Syncers)
	validateNamed(&p, "mydumpers", c.Mydumpers)
	validateNamed(&p, "loaders", c.Loaders)
	validateNamed(&p, "validators", c.Validators)

	if len(c.MySQLInstances) == 0 {
		p.add("mysql-instances", "[]", "a task needs at least one source")
	}
	seen := make(map[string]int, len(c.MySQLInstances))
	for i := range c.MySQLInstances {
		c.validateInstance(&p, i, seen)
	}
	return p.err()
}

// validateInstance checks one mysql-instances entry; seen maps source ids to
// the index of the first instance that used them.
func (c *TaskConfig) validateInstance(p *problems, i int, seen map[string]int) {
	inst := &c.MySQLInstances[i]
	at := index("mysql-instances", i)
	p.name(join(at, "source-id"), "source", inst.SourceID)
	if first, dup := seen[inst.SourceID]; dup {
		p.add(join(at, "source-id"), inst.SourceID,
			"duplicate source id: already used by mysql-instances["+strconv.Itoa(first)+"]; a source takes part in a task once")
	} else {
		seen[inst.SourceID] = i
	}
	if inst.Meta != nil {
		inst.Meta.validate(p, join(at, "meta"))
	}
	// Without meta an incremental task resumes from its checkpoints in the
	// target (dmctl checks they exist); a meta that names no start point is
	// a mistake, as in DM.
	if strings.EqualFold(c.TaskMode, ModeIncremental) && inst.Meta != nil && inst.Meta.empty() {
		p.add(join(at, "meta"), "{}", "an incremental task's meta needs binlog-name or binlog-gtid (leave meta out to resume from the task's checkpoints)")
	}
	ref := func(field, name, section string, exists bool) {
		if name != "" && !exists {
			p.add(join(at, field), name, "no such entry in "+section)
		}
	}
	_, ok := c.BAList[inst.BAListName]
	ref("block-allow-list", inst.BAListName, "block-allow-list", ok)
	for j, name := range inst.RouteRules {
		_, ok := c.Routes[name]
		ref(index("route-rules", j), name, "routes", ok)
	}
	for j, name := range inst.FilterRules {
		_, ok := c.Filters[name]
		ref(index("filter-rules", j), name, "filters", ok)
	}
	used := map[string]bool{}
	for j, name := range inst.ExpressionFilters {
		_, ok := c.ExprFilter[name]
		ref(index("expression-filters", j), name, "expression-filter", ok)
		if used[name] {
			p.add(join(at, index("expression-filters", j)), name, "listed twice: name each expression filter once")
		}
		used[name] = true
	}
	_, ok = c.Syncers[inst.SyncerConfigName]
	ref("syncer-config-name", inst.SyncerConfigName, "syncers", ok)
	_, ok = c.Mydumpers[inst.MydumperConfigName]
	ref("mydumper-config-name", inst.MydumperConfigName, "mydumpers", ok)
	_, ok = c.Loaders[inst.LoaderConfigName]
	ref("loader-config-name", inst.LoaderConfigName, "loaders", ok)
	_, ok = c.Validators[inst.ValidatorConfigName]
	ref("validator-config-name", inst.ValidatorConfigName, "validators", ok)
	// As in DM, a setting comes by name or inline, not both.
	both := func(field, name string, inline bool) {
		if name != "" && inline {
			p.add(join(at, field), "set", "give either "+field+"-config-name or "+field+", not both")
		}
	}
	both("syncer", inst.SyncerConfigName, inst.Syncer != nil)
	both("mydumper", inst.MydumperConfigName, inst.Mydumper != nil)
	both("loader", inst.LoaderConfigName, inst.Loader != nil)
	if inst.Syncer != nil {
		inst.Syncer.validate(p, join(at, "syncer"))
	}
	if inst.Mydumper != nil {
		inst.Mydumper.validate(p, join(at, "mydumper"))
	}
	if inst.Loader != nil {
		inst.Loader.validate(p, join(at, "loader"))
	}
	for field, n := range map[string]int{"syncer-thread": inst.SyncerThread, "mydumper-thread": inst.MydumperThread, "loader-thread": inst.LoaderThread} {
		if n < 0 {
			p.add(join(at, field), n, "must not be negative (0 = use the settings' own value)")
		}
	}
}

// SubTaskConfigs validates the task and splits it into one SubTaskConfig per
// mysql-instances entry, in order. Each subtask inherits name, task-mode,
// target-database, meta-schema and case-sensitive, takes its instance's meta
// and gets copies (never shared slices or maps) of the rules and configs its
// instance names; pieces it does not name get the defaults. A rule name that
// does not resolve is reported by Validate before any split.
func (c *TaskConfig) SubTaskConfigs() ([]*SubTaskConfig, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	out := make([]*SubTaskConfig, 0, len(c.MySQLInstances))
	for i := range c.MySQLInstances {
		inst := &c.MySQLInstances[i]
		st := NewSubTaskConfig()
		st.Name = c.Name
		st.SourceID = inst.SourceID
		st.TaskMode = c.TaskMode
		if inst.Meta != nil {
			st.Meta = *inst.Meta
		}
		st.TargetDatabase = c.TargetDatabase
		st.MetaSchema = c.MetaSchema
		st.CaseSensitive = c.CaseSensitive
		st.ShardMode = c.shardMode()
		st.StrictOptimisticShardMode = c.StrictOptimisticShardMode
		st.OnlineDDL = c.OnlineDDL || c.OnlineDDLScheme != ""
		st.ShadowTableRules, st.TrashTableRules = slices.Clone(c.ShadowTableRules), slices.Clone(c.TrashTableRules)
		st.IgnoreCheckingItems = slices.Clone(c.IgnoreCheckingItems)
		if strings.EqualFold(strings.TrimSpace(c.CollationCompatible), CollationStrict) {
			st.CollationCompatible = CollationStrict
		}
		if inst.BAListName != "" {
			st.BAList = c.BAList[inst.BAListName].clone()
		}
		for _, name := range inst.RouteRules {
			st.RouteRules = append(st.RouteRules, c.Routes[name].clone())
		}
		for _, name := range inst.FilterRules {
			r := c.Filters[name].clone()
			r.Name = name
			st.FilterRules = append(st.FilterRules, r)
		}
		for _, name := range inst.ExpressionFilters {
			r := c.ExprFilter[name]
			r.Name = name
			st.ExprFilter = append(st.ExprFilter, r)
		}
		switch {
		case inst.SyncerConfigName != "":
			st.Syncer = c.Syncers[inst.SyncerConfigName]
		case inst.Syncer != nil:
			st.Syncer = *inst.Syncer
		}
		switch {
		case inst.MydumperConfigName != "":
			st.Mydumper = c.Mydumpers[inst.MydumperConfigName]
		case inst.Mydumper != nil:
			st.Mydumper = *inst.Mydumper
		}
		switch {
		case inst.LoaderConfigName != "":
			st.Loader = c.Loaders[inst.LoaderConfigName]
		case inst.Loader != nil:
			st.Loader = *inst.Loader
		}
		// DM's per-instance thread fields win over the settings they override.
		if inst.SyncerThread > 0 {
			st.Syncer.WorkerCount = inst.SyncerThread
		}
		if inst.MydumperThread > 0 {
			st.Mydumper.Threads = inst.MydumperThread
		}
		if inst.LoaderThread > 0 {
			st.Loader.PoolSize = inst.LoaderThread
		}
		if st.Loader.CleanupDumpFile == nil && c.CleanDumpFile != nil {
			st.Loader.CleanupDumpFile = clonePtr(c.CleanDumpFile)
		} else {
			st.Loader.CleanupDumpFile = clonePtr(st.Loader.CleanupDumpFile)
		}
		if inst.ValidatorConfigName != "" {
			st.Validator = c.Validators[inst.ValidatorConfigName]
		}
		st.Adjust()
		if err := st.Validate(); err != nil {
			return nil, fmt.Errorf("config: task %s: subtask for mysql-instances[%d] (source %s): %w", c.Name, i, inst.SourceID, err)
		}
		out = append(out, st)
	}
	return out, nil
}

// shardMode is the task's shard mode with is-sharding: true read as
// pessimistic, in lower case.
func (c *TaskConfig) shardMode() string {
	if m := strings.ToLower(strings.TrimSpace(c.ShardMode)); m != "" {
		return m
	}
	if c.IsSharding {
		return ShardPessimistic
	}
	return ""
}
