package shardddl

import (
	"context"
	"fmt"
	"slices"
	"strings"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/dmworker/dm-worker/config"
)

// ModePessimistic is LockInfo.Mode of a pessimistic lock (ModeOptimistic
// of an optimistic one).
const ModePessimistic = "pessimistic"

// Lock states of LockInfo.State.
const (
	LockWaiting   = "waiting"   // undecided: waits for the unsynced members
	LockConflict  = "conflict"  // undecided: members reached different DDLs
	LockDecided   = "decided"   // the owner is to run the DDLs
	LockExecuting = "executing" // the owner began running them
	LockDone      = "done"      // the owner ran them; members acknowledge
)

// LockInfo is one lock as `dmctl shard-ddl-lock` lists it (DESIGN.md §5).
type LockInfo struct {
	ID       string        `json:"id"`
	Task     string        `json:"task"`
	Mode     string        `json:"mode"`
	Target   string        `json:"target"`
	Owner    string        `json:"owner"`
	DDLs     []string      `json:"ddls"`
	Synced   []MemberTable `json:"synced"`
	Unsynced []MemberTable `json:"unsynced"`
	Conflict string        `json:"conflict"`
	State    string        `json:"state"`
}

// MemberTable is a member in LockInfo: its source and quoted upstream table.
type MemberTable struct {
	Source string `json:"source"`
	Table  string `json:"table"`
}

// Locks lists the locks of task (every task when task is ""): the decided
// ones and the groups where a member waits on a DDL, sorted by id. A group
// with a malformed key is left out and named in the error, which is then a
// *GroupErrors; the other locks are returned with it.
func Locks(ctx context.Context, cli *clientv3.Client, prefix, task string) ([]LockInfo, error) {
	k := newKeys(prefix)
	from := k.root()
	if task != "" {
		if err := config.ValidateName("task", task); err != nil {
			return nil, fmt.Errorf("shardddl: list locks: %w", err)
		}
		from = k.task(task)
	}
	resp, err := cli.Get(ctx, from, clientv3.WithPrefix())
	if err != nil {
		return nil, fmt.Errorf("shardddl: list locks under %s: %w", from, err)
	}
	groups := map[string]*group{}
	var order []string
	bad := &GroupErrors{}
	broken := map[string]bool{}
	for _, kv := range resp.Kvs {
		gk, err := k.parse(string(kv.Key))
		if err != nil {
			bad.Errors = append(bad.Errors, err)
			continue
		}
		gp := k.group(gk.Task, gk.Target)
		if broken[gp] {
			continue
		}
		g, ok := groups[gp]
		if !ok {
			g = newGroup(gk.Task, gk.Target, gp, resp.Header.Revision)
			groups[gp] = g
			order = append(order, gp)
		}
		if err := g.add(k, kv); err != nil {
			bad.Errors = append(bad.Errors, fmt.Errorf("lock %s left out: %w", LockID(gk.Task, gk.Target), err))
			broken[gp] = true
		}
	}
	var out []LockInfo
	for _, p := range order { // keys come sorted, so groups too
		if broken[p] {
			continue
		}
		if li, ok := groups[p].info(); ok {
			out = append(out, li)
		}
	}
	if len(bad.Errors) > 0 {
		return out, bad
	}
	return out, nil
}

// GroupErrors lists the keys Locks could not read.
type GroupErrors struct{ Errors []error }

func (e *GroupErrors) Error() string {
	parts := make([]string, len(e.Errors))
	for i, err := range e.Errors {
		parts[i] = err.Error()
	}
	return "shardddl: " + strings.Join(parts, "; ")
}

// Unwrap returns every error, so errors.Is sees ErrMalformed.
func (e *GroupErrors) Unwrap() []error { return e.Errors }

// info is the listing of g; false when no lock involves the group.
func (g *group) info() (LockInfo, bool) {
	if g.optimistic() {
		return g.optInfo()
	}
	li := LockInfo{ID: LockID(g.task, g.target), Task: g.task, Mode: ModePessimistic,
		Target: g.target.String(), Synced: []MemberTable{}, Unsynced: []MemberTable{}}
	if g.lock != nil {
		l := g.lock.v
		li.Owner, li.DDLs = l.Owner.Source, l.DDLs
		li.State = LockDecided
		switch {
		case l.Done:
			li.State = LockDone
		case l.Executing:
			li.State = LockExecuting
		}
		for _, s := range l.Members {
			li.Synced = append(li.Synced, MemberTable{Source: s.Source, Table: s.Table.String()})
		}
		for _, s := range g.skips() {
			if s.How == ResolvedUnlocked && slices.Equal(s.DDLs, l.DDLs) {
				li.Unsynced = append(li.Unsynced, MemberTable{Source: s.Source, Table: s.Table.String()})
			}
		}
		return li, true
	}
	p := g.analyze()
	if len(p.synced) == 0 {
		return LockInfo{}, false
	}
	li.Owner, li.DDLs, li.Conflict, li.State = p.owner.Source, p.first.v.DDLs, p.conflict, LockWaiting
	if p.conflict != "" {
		li.State = LockConflict
	}
	for _, m := range p.synced {
		li.Synced = append(li.Synced, MemberTable{Source: m.Source, Table: m.Table.String()})
	}
	for _, m := range p.unsynced {
		li.Unsynced = append(li.Unsynced, MemberTable{Source: m.Source, Table: m.Table.String()})
	}
	return li, true
}

// RemoveTask deletes every key of task under P/shardddl/ (the task was
// stopped for good on every source).
func RemoveTask(ctx context.Context, cli *clientv3.Client, prefix, task string) error {
	if err := config.ValidateName("task", task); err != nil {
		return fmt.Errorf("shardddl: remove task: %w", err)
	}
	from := newKeys(prefix).task(task)
	if _, err := cli.Delete(ctx, from, clientv3.WithPrefix()); err != nil {
		return fmt.Errorf("shardddl: remove the shard DDL state of task %s under %s: %w", task, from, err)
	}
	return nil
}
