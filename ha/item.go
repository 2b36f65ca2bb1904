package ha

import (
	"context"
	"errors"
	"fmt"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/dmworker/dm-worker/config"
)

// One read serves every per-source named object (subtask, stream): the
// keys of one object, or of every object of a source, are read in one
// transaction and folded into one item per name.

// item is the per-name result of such a read (*SubTaskItem, *StreamItem).
type item interface {
	// addErr records a malformed key of the item; the item stays listed.
	addErr(err error)
}

// itemPart is one key kind of an item: P+kind+{source}/{name}.
type itemPart[P item] struct {
	// prefix is P+kind+{source}/; the key of a name is prefix+name.
	prefix func(k Keys, source string) string
	// fill decodes a present kv of this kind into the item.
	fill func(s *Store, it P, kv *mvccpb.KeyValue)
}

// part returns the itemPart whose values dec decodes and set stores in the
// item, with the kv's ModRevision; a decode error goes to the item's Err.
func part[P item, T any](prefix func(Keys, string) string, dec func(*Store, string, []byte) (T, error),
	set func(it P, v T, rev int64)) itemPart[P] {
	return itemPart[P]{prefix: prefix, fill: func(s *Store, it P, kv *mvccpb.KeyValue) {
		v, err := decodeKV(func(key string, value []byte) (T, error) { return dec(s, key, value) }, kv)
		if err != nil {
			it.addErr(err)
			return
		}
		set(it, v, kv.ModRevision)
	}}
}

// itemKind describes the keys of one kind of per-source named object.
type itemKind[P item] struct {
	what     string // "subtask", "stream": in errors
	nameKind string // "task", "stream": for name validation
	newItem  func(name string) P
	parts    []itemPart[P]
}

// getItems reads every key of kind under source in one transaction and
// returns the items by name, at the transaction's revision.
func getItems[P item](ctx context.Context, s *Store, kind *itemKind[P], source string) (map[string]P, int64, error) {
	if err := config.ValidateName("source", source); err != nil {
		return nil, 0, fmt.Errorf("ha: get %ss: %w", kind.what, err)
	}
	prefixes := make([]string, len(kind.parts))
	ops := make([]clientv3.Op, len(kind.parts))
	for i, p := range kind.parts {
		prefixes[i] = p.prefix(s.keys, source)
		ops[i] = clientv3.OpGet(prefixes[i], clientv3.WithPrefix())
	}
	kvs, rev, err := s.txn(ctx, "get "+kind.what+"s of source "+source, ops...)
	if err != nil {
		return nil, 0, err
	}
	items := make(map[string]P)
	for i, list := range kvs {
		for _, kv := range list {
			name := lastSegment(string(kv.Key), prefixes[i])
			it, ok := items[name]
			if !ok {
				it = kind.newItem(name)
				items[name] = it
			}
			kind.parts[i].fill(s, it, kv)
		}
	}
	return items, rev, nil
}

// getItem reads the keys of kind for one name in one transaction; the item
// is the zero P (nil) when none of them exists.
func getItem[P item](ctx context.Context, s *Store, kind *itemKind[P], source, name string) (it P, rev int64, err error) {
	if err := validateNames(source, kind.nameKind, name); err != nil {
		return it, 0, fmt.Errorf("ha: get %s: %w", kind.what, err)
	}
	ops := make([]clientv3.Op, len(kind.parts))
	for i, p := range kind.parts {
		ops[i] = clientv3.OpGet(p.prefix(s.keys, source) + name)
	}
	kvs, rev, err := s.txn(ctx, "get "+kind.what+" "+source+"/"+name, ops...)
	if err != nil {
		return it, 0, err
	}
	found := false
	for i, list := range kvs {
		for _, kv := range list {
			if !found {
				it, found = kind.newItem(name), true
			}
			kind.parts[i].fill(s, it, kv)
		}
	}
	return it, rev, nil
}

func (it *SubTaskItem) addErr(err error) { it.Err = errors.Join(it.Err, err) }

func (it *StreamItem) addErr(err error) { it.Err = errors.Join(it.Err, err) }
