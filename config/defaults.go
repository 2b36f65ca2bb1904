package config

import (
	"os"
	"path/filepath"
	"strings"
	"time"
)

// Defaults of DESIGN.md §4, in one place.
//
// Two mechanisms apply them, and both live in this file:
//
//   - NewXxxConfig returns a config pre-filled with every default. Parse
//     decodes over it, so a field the input does not mention keeps its
//     default and a field it sets explicitly (even to false or 0) wins. This
//     is the only way a default of true (checker.check-enable) or a default
//     for a field where 0 is meaningful (purge.expires, purge.remain-space)
//     is applied.
//   - Adjust fills fields that are still zero although zero is not a valid
//     value for them (ports, worker counts, durations, ...), and normalises
//     case-insensitive enumerations (flavor, task-mode, filter action,
//     validator mode, sink type, log level/format) to their canonical
//     spelling. Adjust is idempotent and is called by every Parse; call it
//     yourself on configs built in code.
const (
	DefaultPort                    = 3306
	DefaultPurgeInterval           = 3600 // seconds
	DefaultPurgeExpires            = 0    // hours; 0 = never purge by age
	DefaultPurgeRemainSpace        = 15   // GB
	DefaultCheckEnable             = true
	DefaultBackoffMin              = time.Second
	DefaultBackoffMax              = 5 * time.Minute
	DefaultSyncerWorkerCount       = 16
	DefaultSyncerBatch             = 100
	DefaultCheckpointFlushInterval = 30 // seconds
	DefaultMydumperThreads         = 4
	DefaultMydumperRows            = 10000
	DefaultLoaderPoolSize          = 16
	DefaultValidatorMode           = ValidationNone
	DefaultValidatorWorkerCount    = 4
	DefaultRowErrorDelay           = 30 * time.Minute
	DefaultMetaSchema              = "dm_meta"
	MinBinlogPos                   = 4 // the first event after the binlog file header
	DefaultFileRotateSize          = ByteSize(64 << 20)
	DefaultWebhookTimeout          = 10 * time.Second
	DefaultWebhookBatch            = 500
	DefaultStreamFormat            = FormatDebezium
	DefaultKafkaPartitionBy        = KafkaPartitionByKey
	DefaultEtcdEndpoint            = "http://127.0.0.1:2379"
	DefaultEtcdPrefix              = "/dm"
	DefaultStatusAddr              = "127.0.0.1:8262"
	DefaultDataDir                 = "./data"
	DefaultKeepaliveTTL            = 10 * time.Second
	DefaultLogLevel                = "info"
	DefaultLogFormat               = "text"
	// DefaultWorkerName is the worker name when the host name gives no valid
	// name.
	DefaultWorkerName = "dm-worker"
)

// NewSourceConfig returns a SourceConfig holding every default.
func NewSourceConfig() *SourceConfig {
	c := &SourceConfig{
		From: DBConfig{Port: DefaultPort},
		Purge: PurgeConfig{
			Interval:    DefaultPurgeInterval,
			Expires:     DefaultPurgeExpires,
			RemainSpace: DefaultPurgeRemainSpace,
		},
		Checker: CheckerConfig{CheckEnable: DefaultCheckEnable},
	}
	c.Adjust()
	return c
}

// Adjust fills zero-valued fields with defaults and normalises enumerations.
// purge.interval 0 becomes 3600 (a zero interval means nothing); purge.expires
// and purge.remain-space keep an explicit 0 (it disables that purge trigger);
// checker.check-enable is never changed (see NewSourceConfig).
func (c *SourceConfig) Adjust() {
	c.Flavor = strings.ToLower(c.Flavor)
	c.From.adjust()
	if c.Purge.Interval == 0 {
		c.Purge.Interval = DefaultPurgeInterval
	}
	if c.Checker.BackoffMin.Duration == 0 {
		c.Checker.BackoffMin.Duration = DefaultBackoffMin
	}
	if c.Checker.BackoffMax.Duration == 0 {
		c.Checker.BackoffMax.Duration = DefaultBackoffMax
	}
	if len(c.Filters) == 0 {
		c.Filters = nil
	}
	for i := range c.Filters {
		c.Filters[i].adjust()
	}
}

func (c *DBConfig) adjust() {
	if c.Port == 0 {
		c.Port = DefaultPort
	}
}

// adjust sets binlog-pos to 4 when a binlog-name is given without a position.
func (m *Meta) adjust() {
	if m.BinlogName != "" && m.BinlogPos == 0 {
		m.BinlogPos = MinBinlogPos
	}
}

// NewSubTaskConfig returns a SubTaskConfig holding every default.
func NewSubTaskConfig() *SubTaskConfig {
	c := &SubTaskConfig{}
	c.Adjust()
	return c
}

// Adjust fills zero-valued fields with defaults and normalises enumerations
// (task-mode, filter actions and events, validator mode).
func (c *SubTaskConfig) Adjust() {
	c.TaskMode = strings.ToLower(c.TaskMode)
	c.Meta.adjust()
	c.TargetDatabase.adjust()
	if c.MetaSchema == "" {
		c.MetaSchema = DefaultMetaSchema
	}
	c.BAList.adjust()
	if len(c.RouteRules) == 0 {
		c.RouteRules = nil
	}
	if len(c.FilterRules) == 0 {
		c.FilterRules = nil
	}
	for i := range c.FilterRules {
		c.FilterRules[i].adjust()
	}
	c.Syncer.adjust()
	c.Mydumper.adjust()
	c.Loader.adjust()
	c.Validator.adjust()
}

// adjust turns empty lists into nil so that a config decoded from "[]" equals
// one where the list is absent.
func (b *BAList) adjust() {
	if len(b.DoDBs) == 0 {
		b.DoDBs = nil
	}
	if len(b.DoTables) == 0 {
		b.DoTables = nil
	}
	if len(b.IgnoreDBs) == 0 {
		b.IgnoreDBs = nil
	}
	if len(b.IgnoreTables) == 0 {
		b.IgnoreTables = nil
	}
}

// adjust spells the action canonically ("ignore" → "Ignore") and lowercases
// the events.
func (r *FilterRule) adjust() {
	switch {
	case strings.EqualFold(r.Action, FilterIgnore):
		r.Action = FilterIgnore
	case strings.EqualFold(r.Action, FilterDo):
		r.Action = FilterDo
	case strings.EqualFold(r.Action, FilterError):
		r.Action = FilterError
	}
	if len(r.Events) == 0 {
		r.Events = nil
	}
	for i, e := range r.Events {
		e = strings.ToLower(e)
		if alias, ok := filterEventAliases[e]; ok {
			e = alias
		}
		r.Events[i] = e
	}
	if len(r.SQLPattern) == 0 {
		r.SQLPattern = nil
	}
}

func (c *SyncerConfig) adjust() {
	if c.WorkerCount == 0 {
		c.WorkerCount = DefaultSyncerWorkerCount
	}
	if c.Batch == 0 {
		c.Batch = DefaultSyncerBatch
	}
	if c.CheckpointFlushInterval == 0 {
		c.CheckpointFlushInterval = DefaultCheckpointFlushInterval
	}
}

func (c *MydumperConfig) adjust() {
	if c.Threads == 0 {
		c.Threads = DefaultMydumperThreads
	}
	if c.Rows == 0 {
		c.Rows = DefaultMydumperRows
	}
}

func (c *LoaderConfig) adjust() {
	if c.PoolSize == 0 {
		c.PoolSize = DefaultLoaderPoolSize
	}
}

func (c *ValidatorConfig) adjust() {
	c.Mode = strings.ToLower(c.Mode)
	if c.Mode == "" {
		c.Mode = DefaultValidatorMode
	}
	if c.WorkerCount == 0 {
		c.WorkerCount = DefaultValidatorWorkerCount
	}
	if c.RowErrorDelay.Duration == 0 {
		c.RowErrorDelay.Duration = DefaultRowErrorDelay
	}
}

// NewTaskConfig returns a TaskConfig holding every default.
func NewTaskConfig() *TaskConfig {
	c := &TaskConfig{}
	c.Adjust()
	return c
}

// Adjust fills zero-valued fields with defaults, in the task and in every
// named rule and config, and normalises enumerations.
func (c *TaskConfig) Adjust() {
	c.TaskMode = strings.ToLower(c.TaskMode)
	if c.MetaSchema == "" {
		c.MetaSchema = DefaultMetaSchema
	}
	c.TargetDatabase.adjust()
	if len(c.MySQLInstances) == 0 {
		c.MySQLInstances = nil
	}
	for i := range c.MySQLInstances {
		inst := &c.MySQLInstances[i]
		if inst.Meta != nil {
			inst.Meta.adjust()
		}
		if len(inst.RouteRules) == 0 {
			inst.RouteRules = nil
		}
		if len(inst.FilterRules) == 0 {
			inst.FilterRules = nil
		}
		if inst.Syncer != nil {
			inst.Syncer.adjust()
		}
		if inst.Mydumper != nil {
			inst.Mydumper.adjust()
		}
		if inst.Loader != nil {
			inst.Loader.adjust()
		}
	}
	c.BAList = adjustMap(c.BAList, (*BAList).adjust)
	c.Routes = adjustMap(c.Routes, nil)
	c.Filters = adjustMap(c.Filters, (*FilterRule).adjust)
	c.Syncers = adjustMap(c.Syncers, (*SyncerConfig).adjust)
	c.Mydumpers = adjustMap(c.Mydumpers, (*MydumperConfig).adjust)
	c.Loaders = adjustMap(c.Loaders, (*LoaderConfig).adjust)
	c.Validators = adjustMap(c.Validators, (*ValidatorConfig).adjust)
}

// adjustMap applies adjust to every value of m and turns an empty map into nil.
func adjustMap[V any](m map[string]V, adjust func(*V)) map[string]V {
	if len(m) == 0 {
		return nil
	}
	if adjust != nil {
		for k, v := range m {
			adjust(&v)
			m[k] = v
		}
	}
	return m
}

// NewStreamConfig returns a StreamConfig holding every default.
func NewStreamConfig() *StreamConfig {
	c := &StreamConfig{}
	c.Adjust()
	return c
}

// Adjust fills zero-valued fields with defaults (start binlog-pos, format,
// file sink rotate-size, webhook timeout and batch, kafka partition-by) and
// lowercases the format, the sink type, kafka's partition-by and SASL
// mechanism.
func (c *StreamConfig) Adjust() {
	c.BAList.adjust()
	c.Start.adjust()
	c.EventFormat = strings.ToLower(c.EventFormat)
	if c.EventFormat == "" {
		c.EventFormat = DefaultStreamFormat
	}
	c.Sink.Type = strings.ToLower(c.Sink.Type)
	if f := c.Sink.File; f != nil && f.RotateSize == 0 {
		f.RotateSize = DefaultFileRotateSize
	}
	if w := c.Sink.Webhook; w != nil {
		if w.Timeout.Duration == 0 {
			w.Timeout.Duration = DefaultWebhookTimeout
		}
		if w.Batch == 0 {
			w.Batch = DefaultWebhookBatch
		}
		if len(w.Headers) == 0 {
			w.Headers = nil
		}
	}
	if k := c.Sink.Kafka; k != nil {
		k.PartitionBy = strings.ToLower(k.PartitionBy)
		if k.PartitionBy == "" {
			k.PartitionBy = DefaultKafkaPartitionBy
		}
		if len(k.Brokers) == 0 {
			k.Brokers = nil
		}
		if k.SASL != nil {
			k.SASL.Mechanism = strings.ToLower(k.SASL.Mechanism)
		}
	}
}

// NewWorkerConfig returns a WorkerConfig holding every default; Name is the
// sanitized host name (see Adjust).
func NewWorkerConfig() *WorkerConfig {
	c := &WorkerConfig{}
	c.Adjust()
	return c
}

// Adjust fills zero-valued fields with defaults and lowercases log-level and
// log-format:
//   - name: the host name made valid by SanitizeName ("dm-worker" when that
//     leaves nothing);
//   - etcd-endpoints: http://127.0.0.1:2379; etcd-prefix: /dm;
//   - status-addr: 127.0.0.1:8262; advertise-addr: status-addr;
//   - data-dir: ./data; relay-dir: <data-dir>/relay (filepath.Join, so
//     "data/relay" by default);
//   - keepalive-ttl: 10s; log-level: info; log-format: text.
func (c *WorkerConfig) Adjust() {
	if c.Name == "" {
		c.Name = defaultWorkerName()
	}
	if len(c.EtcdEndpoints) == 0 {
		c.EtcdEndpoints = []string{DefaultEtcdEndpoint}
	}
	if c.EtcdPrefix == "" {
		c.EtcdPrefix = DefaultEtcdPrefix
	}
	if c.StatusAddr == "" {
		c.StatusAddr = DefaultStatusAddr
	}
	if c.AdvertiseAddr == "" {
		c.AdvertiseAddr = c.StatusAddr
	}
	if c.DataDir == "" {
		c.DataDir = DefaultDataDir
	}
	if c.RelayDir == "" {
		c.RelayDir = filepath.Join(c.DataDir, "relay")
	}
	if c.KeepaliveTTL.Duration == 0 {
		c.KeepaliveTTL.Duration = DefaultKeepaliveTTL
	}
	c.LogLevel = strings.ToLower(c.LogLevel)
	if c.LogLevel == "" {
		c.LogLevel = DefaultLogLevel
	}
	c.LogFormat = strings.ToLower(c.LogFormat)
	if c.LogFormat == "" {
		c.LogFormat = DefaultLogFormat
	}
}

// defaultWorkerName is the host name made valid, or DefaultWorkerName.
func defaultWorkerName() string {
	host, err := os.Hostname()
	if err != nil {
		return DefaultWorkerName
	}
	if n := SanitizeName(host); n != "" {
		return n
	}
	return DefaultWorkerName
}
