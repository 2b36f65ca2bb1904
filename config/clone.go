package config

import (
	"bytes"
	"encoding/json"
	"maps"
	"slices"
)

// Clone returns a deep copy.
func (c *SourceConfig) Clone() *SourceConfig {
	r := *c
	r.From = c.From.clone()
	r.Filters = cloneFilters(c.Filters)
	r.Notes = c.Notes.clone()
	return &r
}

// Clone returns a deep copy: no slice or map is shared with c.
func (c *SubTaskConfig) Clone() *SubTaskConfig {
	r := *c
	r.TargetDatabase = c.TargetDatabase.clone()
	r.BAList = c.BAList.clone()
	r.RouteRules = cloneRoutes(c.RouteRules)
	r.FilterRules = cloneFilters(c.FilterRules)
	r.ExprFilter = slices.Clone(c.ExprFilter)
	r.ShadowTableRules, r.TrashTableRules = slices.Clone(c.ShadowTableRules), slices.Clone(c.TrashTableRules)
	r.IgnoreCheckingItems = slices.Clone(c.IgnoreCheckingItems)
	r.Loader.CleanupDumpFile = clonePtr(c.Loader.CleanupDumpFile)
	r.Notes = c.Notes.clone()
	return &r
}

// Clone returns a deep copy: no slice, map or pointer is shared with c.
func (c *StreamConfig) Clone() *StreamConfig {
	r := *c
	r.BAList = c.BAList.clone()
	r.Sink = c.Sink.clone()
	r.Filters = maps.Clone(c.Filters)
	r.Notes = c.Notes.clone()
	return &r
}

// Clone returns a deep copy: no slice, map or pointer is shared with c.
func (c *TaskConfig) Clone() *TaskConfig {
	r := *c
	r.TargetDatabase = c.TargetDatabase.clone()
	if c.MySQLInstances != nil {
		r.MySQLInstances = make([]MySQLInstance, len(c.MySQLInstances))
		for i, inst := range c.MySQLInstances {
			r.MySQLInstances[i] = inst.clone()
		}
	}
	r.BAList = cloneMap(c.BAList, BAList.clone)
	r.Routes = cloneMap(c.Routes, RouteRule.clone)
	r.CleanDumpFile = clonePtr(c.CleanDumpFile)
	r.Filters = cloneMap(c.Filters, FilterRule.clone)
	r.ExprFilter = maps.Clone(c.ExprFilter)
	r.Syncers = maps.Clone(c.Syncers)
	r.Mydumpers = maps.Clone(c.Mydumpers)
	r.Loaders = maps.Clone(c.Loaders)
	r.Validators = maps.Clone(c.Validators)
	r.Notes = c.Notes.clone()
	return &r
}

// Clone returns a deep copy.
func (c *WorkerConfig) Clone() *WorkerConfig {
	r := *c
	r.EtcdEndpoints = slices.Clone(c.EtcdEndpoints)
	return &r
}

func (c DBConfig) clone() DBConfig {
	c.Session = maps.Clone(c.Session)
	c.Security = c.Security.clone()
	return c
}

func (b BAList) clone() BAList {
	return BAList{
		DoDBs:        slices.Clone(b.DoDBs),
		DoTables:     slices.Clone(b.DoTables),
		IgnoreDBs:    slices.Clone(b.IgnoreDBs),
		IgnoreTables: slices.Clone(b.IgnoreTables),
	}
}

func (r FilterRule) clone() FilterRule {
	r.Events = slices.Clone(r.Events)
	r.SQLPattern = slices.Clone(r.SQLPattern)
	return r
}

func cloneRoutes(rules []RouteRule) []RouteRule {
	if rules == nil {
		return nil
	}
	out := make([]RouteRule, len(rules))
	for i, r := range rules {
		out[i] = r.clone()
	}
	return out
}

func cloneFilters(rules []FilterRule) []FilterRule {
	if rules == nil {
		return nil
	}
	out := make([]FilterRule, len(rules))
	for i, r := range rules {
		out[i] = r.clone()
	}
	return out
}

func (m MySQLInstance) clone() MySQLInstance {
	if m.Meta != nil {
		meta := *m.Meta
		m.Meta = &meta
	}
	m.RouteRules = slices.Clone(m.RouteRules)
	m.FilterRules = slices.Clone(m.FilterRules)
	m.ExpressionFilters = slices.Clone(m.ExpressionFilters)
	m.Syncer = clonePtr(m.Syncer)
	m.Mydumper = clonePtr(m.Mydumper)
	m.Loader = clonePtr(m.Loader)
	return m
}

// clonePtr copies the value p points to (a struct without slices or maps).
func clonePtr[T any](p *T) *T {
	if p == nil {
		return nil
	}
	v := *p
	return &v
}

func (s SinkConfig) clone() SinkConfig {
	if s.File != nil {
		f := *s.File
		s.File = &f
	}
	if s.Webhook != nil {
		w := *s.Webhook
		w.Headers = maps.Clone(w.Headers)
		s.Webhook = &w
	}
	s.NATS = clonePtr(s.NATS)
	if s.Kafka != nil {
		k := *s.Kafka
		k.Brokers = slices.Clone(k.Brokers)
		k.SASL = clonePtr(k.SASL)
		k.TLS = k.TLS.clone()
		s.Kafka = &k
	}
	return s
}

func cloneMap[V any](m map[string]V, clone func(V) V) map[string]V {
	if m == nil {
		return nil
	}
	out := make(map[string]V, len(m))
	for k, v := range m {
		out[k] = clone(v)
	}
	return out
}

// Equal reports whether c and o describe the same subtask: they encode to the
// same JSON (the form stored in etcd), so an empty list equals an absent one.
// The worker uses it to detect a config change.
func (c *SubTaskConfig) Equal(o *SubTaskConfig) bool { return jsonEqual(c, o) }

// Equal reports whether c and o encode to the same JSON.
func (c *SourceConfig) Equal(o *SourceConfig) bool { return jsonEqual(c, o) }

// Equal reports whether c and o encode to the same JSON.
func (c *StreamConfig) Equal(o *StreamConfig) bool { return jsonEqual(c, o) }

// Equal reports whether c and o encode to the same JSON.
func (c *TaskConfig) Equal(o *TaskConfig) bool { return jsonEqual(c, o) }

// jsonEqual compares two configs by their JSON encoding; nil equals only nil.
func jsonEqual[T any](a, b *T) bool {
	if a == nil || b == nil {
		return a == b
	}
	ja, errA := json.Marshal(a)
	jb, errB := json.Marshal(b)
	// The config types hold only strings, numbers, bools, slices, maps and
	// the unit types, whose encoding cannot fail; treat a failure as "changed".
	return errA == nil && errB == nil && bytes.Equal(ja, jb)
}
