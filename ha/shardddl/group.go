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
	unlock *unlockKV
	// version is the mod revision of the version key (0: absent).
	version int64
	// Optimistic mode's keys (optimistic_types.go).
	optTables map[Member]optTableKV
	optJoined *optJoinedKV
	optExec   *optExecKV
}

type unlockKV struct {
	key string
	rev int64
	v   UnlockValue
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
		shares: map[string]shareKV{}, infos: map[Member]infoKV{}, optTables: map[Member]optTableKV{}}
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
	case segUnlock:
		var v UnlockValue
		if err := decode(key, kv.Value, &v); err != nil {
			return err
		}
		g.unlock = &unlockKV{key: key, rev: kv.ModRevision, v: v}
	case segVersion:
		g.version = kv.ModRevision
	case kindOptTable:
		var v OptTableValue
		if err := decode(key, kv.Value, &v); err != nil {
			return err
		}
		if r := v.Report; r != nil && (r.After == nil || r.State == "") {
			return malformed(key, fmt.Errorf("an optimistic report needs a schema after and a state"))
		}
		g.optTables[Member{Source: gk.Source, Table: gk.Table}] = optTableKV{key: key, rev: kv.ModRevision, v: v}
	case kindOptJoined:
		var v OptJoinedValue
		if err := decode(key, kv.Value, &v); err != nil {
			return err
		}
		if v.Model == nil || v.Version < 1 {
			return malformed(key, fmt.Errorf("the joined schema needs a model and a version >= 1"))
		}
		g.optJoined = &optJoinedKV{key: key, rev: kv.ModRevision, v: v}
	case kindOptExec:
		var v OptExecValue
		if err := decode(key, kv.Value, &v); err != nil {
			return err
		}
		if v.From == nil || v.To == nil || len(v.DDLs) == 0 {
			return malformed(key, fmt.Errorf("a target change needs from, to and ddls"))
		}
		g.optExec = &optExecKV{key: key, rev: kv.ModRevision, v: v}
	}
	return nil
}

// optimistic is true when the group has optimistic mode's keys.
func (g *group) optimistic() bool {
	return g.optJoined != nil || g.optExec != nil || len(g.optTables) > 0
}

// optTableKey, optJoinedKey and optExecKey are the group's opt/ keys.
func (g *group) optTableKey(m Member) string {
	return g.prefix + segOpt + "/table/" + m.Source + "/" + escape(m.Schema) + "/" + escape(m.Name)
}
func (g *group) optJoinedKey() string { return g.prefix + segOpt + "/joined" }
func (g *group) optExecKey() string   { return g.prefix + segOpt + "/exec" }

// decode unmarshals a JSON value; an error names the key.
func decode(key string, value []byte, v any) error {
	if err := json.Unmarshal(value, v); err != nil {
		return malformed(key, err)
	}
	return nil
}

// guards are the comparisons that hold while the group is exactly as read:
// no key of the group was created or changed after the read (one range
// comparison over the group prefix), and the version key is the one read.
// Every transaction that deletes a key of the group puts the version key,
// so a deletion after the read fails the range comparison too; RemoveTask,
// which deletes the version key with the rest, fails the second. Two
// comparisons, whatever the group's size: etcd refuses a transaction of
// more than --max-txn-ops (128) comparisons, and a group of DM's headline
// shape has 1,024 tables.
func (g *group) guards() []clientv3.Cmp {
	return []clientv3.Cmp{
		clientv3.Compare(clientv3.ModRevision(g.prefix), "<", g.rev+1).WithPrefix(),
		clientv3.Compare(clientv3.ModRevision(g.prefix+segVersion), "=", g.version),
	}
}

// bumpVersion is the put of the version key that every transaction
// deleting a key of the group (or changing a share) carries.
func (g *group) bumpVersion(step string) clientv3.Op {
	return clientv3.OpPut(g.prefix+segVersion, fmt.Sprintf(`{"step":%q}`, step))
}

// keyRev is the comparison that key still has mod revision rev (0:
// absent).
func keyRev(key string, rev int64) clientv3.Cmp {
	return clientv3.Compare(clientv3.ModRevision(key), "=", rev)
}

// lockKey, unlockKey are the group's lock and unlock keys.
func (g *group) lockKey() string   { return g.prefix + segLock }
func (g *group) unlockKey() string { return g.prefix + segUnlock }

// infoKey is the key of m's info.
func (g *group) infoKey(m Member) string {
	return g.prefix + segInfo + "/" + m.Source + "/" + escape(m.Schema) + "/" + escape(m.Name)
}

// lockRev and unlockRev are the mod revisions read (0: absent).
func (g *group) lockRev() int64 {
	if g.lock == nil {
		return 0
	}
	return g.lock.rev
}

func (g *group) unlockRev() int64 {
	if g.unlock == nil {
		return 0
	}
	return g.unlock.rev
}

// skipAt returns the unlock's skip of m's DDL at seq, if any.
func (g *group) skipAt(m Member, seq int64) (Skip, bool) {
	if g.unlock == nil {
		return Skip{}, false
	}
	return g.unlock.v.skipAt(m, seq)
}

// skips are the unlock's skips (nil without an unlock key).
func (g *group) skips() []Skip {
	if g.unlock == nil {
		return nil
	}
	return g.unlock.v.Skips
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

func (g *group) sortedInfoMembers() []Member {
	out := make([]Member, 0, len(g.infos))
	for m := range g.infos {
		out = append(out, m)
	}
	slices.SortFunc(out, Member.compare)
	return out
}

// mustJSONOp is a put of v as JSON at key. The values of this package are
// plain structs of strings, numbers, booleans and slices, which always
// encode.
func mustJSONOp(key string, v any) clientv3.Op {
	data, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("shardddl: encode value of %s: %v", key, err))
	}
	return clientv3.OpPut(key, string(data))
}
