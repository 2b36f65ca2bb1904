package shardddl

import (
	"fmt"
	"net/url"
	"strings"

	"github.com/dmworker/dm-worker/config"
)

// Key layout under the cluster prefix P (DESIGN.md §3, P/shardddl/...). A
// sharding group is one task and one target table; all its keys share the
// group prefix, so that one range read sees the whole group at one revision
// and one range comparison guards it:
//
//	P/shardddl/{task}/{target-schema}/{target-table}/share/{source}
//	P/shardddl/{task}/{target-schema}/{target-table}/info/{source}/{schema}/{table}
//	P/shardddl/{task}/{target-schema}/{target-table}/lock
//	P/shardddl/{task}/{target-schema}/{target-table}/unlock
//	P/shardddl/{task}/{target-schema}/{target-table}/version
//	P/shardddl/{task}/{target-schema}/{target-table}/opt/table/{source}/{schema}/{table}
//	P/shardddl/{task}/{target-schema}/{target-table}/opt/joined
//	P/shardddl/{task}/{target-schema}/{target-table}/opt/exec
//
// The opt/ keys are optimistic mode's (optimistic_types.go); a group uses
// either the info and lock keys or the opt/ keys, never both.
//
// Schema and table names are path-escaped (url.PathEscape), so a name with
// '/' or '%' stays one segment; task and source names follow
// config.NamePattern and need no escaping.
const (
	kindRoot  = "/shardddl/"
	segShare  = "share"
	segInfo   = "info"
	segLock   = "lock"
	segUnlock = "unlock"
	// segVersion is put by every transaction that changes a share or
	// deletes a key of the group, so that "no key of the group has a mod
	// revision above the read, and the version key has the one read" means
	// the group is exactly as read (see group.guards).
	segVersion = "version"
	lockIDSep  = "-"
	segOpt     = "opt"
	// Kinds of the opt/ keys in groupKey.Kind.
	kindOptTable  = "opt/table"
	kindOptJoined = "opt/joined"
	kindOptExec   = "opt/exec"
)

// keys builds and parses the keys of one cluster prefix (no trailing slash).
type keys struct{ prefix string }

// root is P/shardddl/.
func (k keys) root() string { return k.prefix + kindRoot }

// task is P/shardddl/{task}/, every group of a task.
func (k keys) task(task string) string { return k.root() + task + "/" }

// group is P/shardddl/{task}/{schema}/{table}/.
func (k keys) group(task string, target Table) string {
	return k.task(task) + escape(target.Schema) + "/" + escape(target.Name) + "/"
}

// share is the key of source's share of the group.
func (k keys) share(task string, target Table, source string) string {
	return k.group(task, target) + segShare + "/" + source
}

// info is the key of one upstream table's info.
func (k keys) info(task string, target Table, m Member) string {
	return k.group(task, target) + segInfo + "/" + m.Source + "/" + escape(m.Schema) + "/" + escape(m.Name)
}

// lock is the key of the group's lock decision.
func (k keys) lock(task string, target Table) string { return k.group(task, target) + segLock }

// sourceInfos is the prefix of every info of source in the group.
func (k keys) sourceInfos(task string, target Table, source string) string {
	return k.group(task, target) + segInfo + "/" + source + "/"
}

// groupKey says what one key under P/shardddl/ is.
type groupKey struct {
	Task   string
	Target Table
	Kind   string // segShare, segInfo, segLock, segUnlock, segVersion or a kindOpt*
	Source string // share and info
	Table  Table  // info: the upstream table
}

// parse splits a key under P/shardddl/.
func (k keys) parse(key string) (groupKey, error) {
	rest, ok := strings.CutPrefix(key, k.root())
	if !ok {
		return groupKey{}, fmt.Errorf("%w: %q is not under %s", ErrBadKey, key, k.root())
	}
	parts := strings.Split(rest, "/")
	if len(parts) < 4 {
		return groupKey{}, fmt.Errorf("%w: %q has no {task}/{schema}/{table}/{kind} after %s", ErrBadKey, key, k.root())
	}
	var gk groupKey
	gk.Task = parts[0]
	if err := config.ValidateName("task", gk.Task); err != nil {
		return groupKey{}, fmt.Errorf("%w: key %s: %w", ErrBadKey, key, err)
	}
	var err error
	if gk.Target, err = unescapeTable(key, parts[1], parts[2]); err != nil {
		return groupKey{}, err
	}
	gk.Kind = parts[3]
	switch {
	case (gk.Kind == segLock || gk.Kind == segUnlock || gk.Kind == segVersion) && len(parts) == 4:
		return gk, nil
	case gk.Kind == segOpt && len(parts) == 5 && (parts[4] == "joined" || parts[4] == "exec"):
		gk.Kind = segOpt + "/" + parts[4]
		return gk, nil
	case gk.Kind == segOpt && len(parts) == 8 && parts[4] == "table":
		gk.Kind, gk.Source = kindOptTable, parts[5]
		if gk.Table, err = unescapeTable(key, parts[6], parts[7]); err != nil {
			return groupKey{}, err
		}
	case gk.Kind == segShare && len(parts) == 5:
		gk.Source = parts[4]
	case gk.Kind == segInfo && len(parts) == 7:
		gk.Source = parts[4]
		if gk.Table, err = unescapeTable(key, parts[5], parts[6]); err != nil {
			return groupKey{}, err
		}
	default:
		return groupKey{}, fmt.Errorf("%w: %q is not share/{source}, info/{source}/{schema}/{table}, lock, unlock, version, "+
			"opt/table/{source}/{schema}/{table}, opt/joined or opt/exec", ErrBadKey, key)
	}
	if err := config.ValidateName("source", gk.Source); err != nil {
		return groupKey{}, fmt.Errorf("%w: key %s: %w", ErrBadKey, key, err)
	}
	return gk, nil
}

func escape(name string) string { return url.PathEscape(name) }

func unescapeTable(key, schema, table string) (Table, error) {
	s, err1 := url.PathUnescape(schema)
	t, err2 := url.PathUnescape(table)
	if err1 != nil || err2 != nil || s == "" || t == "" {
		return Table{}, fmt.Errorf("%w: %q: %q/%q is not an escaped schema/table", ErrBadKey, key, schema, table)
	}
	return Table{Schema: s, Name: t}, nil
}
