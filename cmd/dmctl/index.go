package main

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/dmworker/dm-worker/ha"
)

// nameIndex maps a task or stream name to the sorted sources that hold at
// least one of its keys.
type nameIndex map[string][]string

// names returns the indexed names, sorted.
func (ix nameIndex) names() []string { return slices.Sorted(maps.Keys(ix)) }

// scanIndex lists (keys only) every key under the given prefixes, each laid
// out as {prefix}{source}/{name}, and indexes them. Keys that do not have
// that shape are ignored: they are not the master's to interpret.
func scanIndex(ctx context.Context, st *ha.Store, prefixes ...string) (nameIndex, error) {
	seen := make(map[string]map[string]bool)
	for _, p := range prefixes {
		resp, err := st.Client().Get(ctx, p, clientv3.WithPrefix(), clientv3.WithKeysOnly())
		if err != nil {
			return nil, fmt.Errorf("list keys under %s: %w", p, err)
		}
		for _, kv := range resp.Kvs {
			source, name, ok := strings.Cut(strings.TrimPrefix(string(kv.Key), p), "/")
			if !ok || source == "" || name == "" || strings.Contains(name, "/") {
				continue
			}
			if seen[name] == nil {
				seen[name] = make(map[string]bool)
			}
			seen[name][source] = true
		}
	}
	ix := make(nameIndex, len(seen))
	for name, sources := range seen {
		ix[name] = slices.Sorted(maps.Keys(sources))
	}
	return ix, nil
}

// root returns the prefix of a per-source key kind across all sources.
// ha.Keys builds the per-source prefix as {root}{source}/, so the root is
// the prefix of the empty source name without its last "/".
func root(k ha.Keys, perSource func(k ha.Keys, source string) string) string {
	return strings.TrimSuffix(perSource(k, ""), "/")
}
