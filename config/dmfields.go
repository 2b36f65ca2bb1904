package config

import (
	"encoding/json"
	"reflect"
	"strings"
)

// dmFieldRules says, per Go type, what the decode engine does with a field
// of DM's task, source and subtask formats (pingcap/tiflow dm/config) that
// the type does not have. Fields DM defines that this worker acts on are
// fields of the types themselves; see docs/design.md "Decoding DM's files"
// for the decisions.
var dmFieldRules = map[reflect.Type]map[string]fieldRule{
	reflect.TypeFor[TaskConfig](): {
		// Old name of block-allow-list (DM v1).
		"black-white-list": {action: rename, to: "block-allow-list"},
		// Deprecated in DM, which refuses non-empty column mappings itself.
		"column-mappings": {action: refuseIf, refuse: nonEmpty,
			why: "column mapping is deprecated in DM and not supported here; remove column-mappings"},
		"timezone":                  ignored, // timestamps are written in UTC sessions, which is exact
		"enable-heartbeat":          ignored,
		"heartbeat-update-interval": ignored,
		"heartbeat-report-interval": ignored,
		// DDL is parsed in the sql_mode its query event carries (ANSI_QUOTES
		// included), as DM discovers it; DM no longer reads this field.
		"ansi-quotes":  ignored,
		"experimental": ignored,
	},
	reflect.TypeFor[MySQLInstance](): {
		"black-white-list": {action: rename, to: "block-allow-list"},
		"column-mapping-rules": {action: refuseIf, refuse: nonEmpty,
			why: "column mapping is deprecated in DM and not supported here; remove column-mapping-rules"},
	},
	reflect.TypeFor[Security](): {
		"ssl-ca-bytes":    inlineCert,
		"ssl-key-bytes":   inlineCert,
		"ssl-cert-bytes":  inlineCert,
		"ssl-ca-base64":   inlineCert,
		"ssl-key-base64":  inlineCert,
		"ssl-cert-base64": inlineCert,
	},
	reflect.TypeFor[MydumperConfig](): {
		"mydumper-path":  ignored,
		"chunk-filesize": ignored,
		"statement-size": ignored,
		"skip-tz-utc":    ignored,
		"extra-args":     ignored,
	},
	reflect.TypeFor[LoaderConfig](): {
		"sorting-dir-physical":  ignored,
		"import-mode":           ignored,
		"on-duplicate":          ignored,
		"on-duplicate-logical":  ignored,
		"on-duplicate-physical": ignored,
		"disk-quota-physical":   ignored,
		"checksum-physical":     ignored,
		"analyze":               ignored,
		"range-concurrency":     ignored,
		"compress-kv-pairs":     ignored,
		"pd-addr":               ignored,
		"security":              ignored,
	},
	reflect.TypeFor[SyncerConfig](): {
		"meta-file":          ignored,
		"queue-size":         ignored,
		"compact":            ignored, // batches are compacted where exact anyway
		"multiple-rows":      ignored,
		"max-retry":          ignored,
		"auto-fix-gtid":      ignored,
		"enable-gtid":        ignored, // the source's enable-gtid decides
		"disable-detect":     ignored,
		"safe-mode-duration": ignored,
		"enable-ansi-quotes": ignored, // as ansi-quotes: each DDL's own sql_mode decides
	},
	reflect.TypeFor[ValidatorConfig](): {
		"validate-interval":     ignored,
		"check-interval":        ignored,
		"meta-flush-interval":   ignored,
		"batch-query-size":      ignored,
		"max-pending-row-size":  ignored,
		"max-pending-row-count": ignored,
	},
	reflect.TypeFor[SourceConfig](): {
		// enable: false stops every task of the source in DM.
		"enable": {action: refuseIf, refuse: isFalse,
			why: "enable: false (keep every task of the source stopped) is not supported; remove it and pause the tasks with `dmctl task pause`"},
		"auto-fix-gtid": ignored,
		"relay-dir":     ignored, // the worker's --relay-dir decides
		"meta-dir":      ignored,
		"charset":       ignored,
		"tracer":        ignored,
	},
	reflect.TypeFor[CheckerConfig](): {
		"backoff-rollback": ignored,
		"check-interval":   ignored,
		"backoff-jitter":   ignored,
		"backoff-factor":   ignored,
	},
}

var (
	ignored    = fieldRule{action: ignore}
	inlineCert = fieldRule{action: refuseIf, refuse: nonEmpty, secret: true,
		why: "inline certificates are not supported; write the PEM into a file and name it in ssl-ca, ssl-cert or ssl-key"}
)

// nonEmpty reports whether a decoded JSON value asks for something: a
// non-empty string, list or object, true, or a non-zero number.
func nonEmpty(v any) bool {
	switch x := v.(type) {
	case nil:
		return false
	case string:
		return strings.TrimSpace(x) != ""
	case bool:
		return x
	case json.Number:
		f, err := x.Float64()
		return err != nil || f != 0
	case []any:
		return len(x) > 0
	case map[string]any:
		return len(x) > 0
	}
	return true
}

// isFalse reports whether v is the boolean false.
func isFalse(v any) bool {
	b, ok := v.(bool)
	return ok && !b
}

// isNot returns a predicate refusing every value but the given strings
// (case-insensitive).
func isNot(allowed ...string) func(any) bool {
	return func(v any) bool {
		if v == nil {
			return false
		}
		s, ok := v.(string)
		if !ok {
			return true
		}
		for _, a := range allowed {
			if strings.EqualFold(strings.TrimSpace(s), a) {
				return false
			}
		}
		return true
	}
}
