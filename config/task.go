package config

// MySQLInstance is one source's entry in a DM task file; its rule fields
// name entries of the task file's named maps.
type MySQLInstance struct {
	SourceID            string   `json:"source-id"`
	Meta                *Meta    `json:"meta,omitempty"`
	BAListName          string   `json:"block-allow-list,omitempty"`
	RouteRules          []string `json:"route-rules,omitempty"`
	FilterRules         []string `json:"filter-rules,omitempty"`
	SyncerConfigName    string   `json:"syncer-config-name,omitempty"`
	MydumperConfigName  string   `json:"mydumper-config-name,omitempty"`
	LoaderConfigName    string   `json:"loader-config-name,omitempty"`
	ValidatorConfigName string   `json:"validator-config-name,omitempty"`
}

// TaskConfig is a DM task file as given to `dmctl task start`.
type TaskConfig struct {
	Name           string                     `json:"name"`
	TaskMode       string                     `json:"task-mode"`
	MetaSchema     string                     `json:"meta-schema,omitempty"`
	CaseSensitive  bool                       `json:"case-sensitive,omitempty"`
	TargetDatabase DBConfig                   `json:"target-database"`
	MySQLInstances []MySQLInstance            `json:"mysql-instances"`
	BAList         map[string]BAList          `json:"block-allow-list,omitempty"`
	Routes         map[string]RouteRule       `json:"routes,omitempty"`
	Filters        map[string]FilterRule      `json:"filters,omitempty"`
	Syncers        map[string]SyncerConfig    `json:"syncers,omitempty"`
	Mydumpers      map[string]MydumperConfig  `json:"mydumpers,omitempty"`
	Loaders        map[string]LoaderConfig    `json:"loaders,omitempty"`
	Validators     map[string]ValidatorConfig `json:"validators,omitempty"`
}
