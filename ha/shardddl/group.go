package shardddl

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// group is every key of one sharding group read at one revision: what each
// step decides from. Revisions are the keys' mod revisions.
type group struct {
	task   string
	target Table
	prefix string // the group prefix
	rev    int64  // revision of the read
	shares map[string]shareKV
	infos  map[Member]infoKV
	lock   *lockKV // nil when the group has no decided lock
}

type shareKV struct {
	key string
	rev int64
	v   ShareValue
}

type infoKV struct {
	key string
	rev int64
	v   InfoValue
}

type lockKV struct {
	key string
	rev int64
	v   LockValue
}

// readGroup reads the group of task and target in one range read.
func readGroup(ctx context.Context, cli *clientv3.Client, k keys, task string, target Table) (*group, error) {
	prefix := k.group(task, target)
	resp, err := cli.Get(ctx, prefix, clientv3.WithPrefix())
	if err != nil {
		return nil, fmt.Errorf("shardddl: read lock %s at %s: %w", LockID(task, target), prefix, err)
	}
	g := newGroup(task, target, prefix, resp.Header.Revision)
	for _, kv := range resp.Kvs {
		if err := g.add(k, kv); err != nil {
			return nil, err
		}
	}
	return g, nil
}

func newGroup(task string, target Table, prefix string, rev int64) *group {
	return &group{task: task, target: target, prefix: prefix, rev: rev,
		shares: map[string]shareKV{}, infos: map[Member]infoKV{}}
}

// add decodes one key-value of the group. A value that does not decode is
// an error naming the key: the group cannot be decided without it.
func (g *group) add(k keys, kv *mvccpb.KeyValue) error {
	key := string(kv.Key)
	gk, err := k.parse(key)
	if err != nil {
		return err
	}
	if gk.Task != g.task || gk.Target != g.target {
		return fmt.Errorf("%w: %q is not a key of lock %s", ErrBadKey, key, LockID(g.task, g.target))
	}
	switch gk.Kind {
	case segShare:
		var v ShareValue
		if err := decode(key, kv.Value, &v); err != nil {
			return err
		}
		v.Tables = sortTables(v.Tables)
		g.shares[gk.Source] = shareKV{key: key, rev: kv.ModRevision, v: v}
	case segInfo:
		var v InfoValue
		if err := decode(key, kv.Value, &v); err != nil {
			return err
		}
		if len(v.DDLs) == 0 || v.Seq < 1 {
			return malformed(key, fmt.Errorf("an info needs ddls and a seq >= 1, got %d ddl(s) at seq %d", len(v.DDLs), v.Seq))
		}
		g.infos[Member{Source: gk.Source, Table: gk.Table}] = infoKV{key: key, rev: kv.ModRevision, v: v}
	case segLock:
		var v LockValue
		if err := decode(key, kv.Value, &v); err != nil {
			return err
		}
		if len(v.Members) == 0 || len(v.DDLs) == 0 {
			return malformed(key, fmt.Errorf("a lock needs members and ddls"))
		}
		g.lock = &lockKV{key: key, rev: kv.ModRevision, v: v}
	}
	return nil
}

// decode unmarshals a JSON value; an error names the key.
func decode(key string, value []byte, v any) error {
	if err := json.Unmarshal(value, v); err != nil {
		return malformed(key, err)
	}
	return nil
}

// guards are the comparisons that hold while the group is exactly as read:
// no key of the group was created or changed after the read (one range
// comparison over the group prefix) and none was deleted (each key read
// still has its mod revision).
func (g *group) guards() []clientv3.Cmp {
	cmps := []clientv3.Cmp{clientv3.Compare(clientv3.ModRevision(g.prefix), "<", g.rev+1).WithPrefix()}
	for _, s := range g.sortedShares() {
		cmps = append(cmps, clientv3.Compare(clientv3.ModRevision(s.key), "=", s.rev))
	}
	for _, m := range g.sortedInfoMembers() {
		i := g.infos[m]
		cmps = append(cmps, clientv3.Compare(clientv3.ModRevision(i.key), "=", i.rev))
	}
	if g.lock != nil {
		cmps = append(cmps, clientv3.Compare(clientv3.ModRevision(g.lock.key), "=", g.lock.rev))
	}
	return cmps
}

// members are the upstream tables of every share, sorted.
func (g *group) members() []Member {
	var out []Member
	for src, s := range g.shares {
		for _, t := range s.v.Tables {
			out = append(out, Member{Source: src, Table: t})
		}
	}
	slices.SortFunc(out, Member.compare)
	return out
}

// isMember is true when m is in its source's share.
func (g *group) isMember(m Member) bool {
	s, ok := g.shares[m.Source]
	return ok && slices.Contains(s.v.Tables, m.Table)
}

func (g *group) sortedShares() []shareKV {
	out := make([]shareKV, 0, len(g.shares))
	for _, s := range g.shares {
		out = append(out, s)
	}
	slices.SortFunc(out, func(a, b shareKV) int { return compareStrings(a.key, b.key) })
	return out
}

func (g *group) sortedInfoMembers() []Member {
	out := make([]Member, 0, len(g.infos))
	for m := range g.infos {
		out = append(out, m)
	}
	slices.SortFunc(out, Member.compare)
	return out
}

// isEmpty is true when the group has no key at all.
func (g *group) isEmpty() bool { return len(g.shares) == 0 && len(g.infos) == 0 && g.lock == nil }

func compareStrings(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// jsonOp is a put of v as JSON at key.
func jsonOp(key string, v any) (clientv3.Op, error) {
	data, err := json.Marshal(v)
	if err != nil {
		return clientv3.Op{}, fmt.Errorf("shardddl: encode value of %s: %w", key, err)
	}
	return clientv3.OpPut(key, string(data)), nil
}
