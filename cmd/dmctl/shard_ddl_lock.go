package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/dmworker/dm-worker/config"
	"github.com/dmworker/dm-worker/ha/shardddl"
)

// shardDDLLockCommands list and unlock the shard DDL locks, pessimistic and
// optimistic, that the workers coordinate under P/shardddl/ (package
// ha/shardddl).
func shardDDLLockCommands() []command {
	return []command{{
		name:  "shard-ddl-lock",
		args:  "[TASK]",
		short: "list the shard DDL locks of a task (of every task without TASK): owner, state, DDLs, synced and unsynced members, conflict",
		run:   shardDDLLockList,
	}, {
		name:  "shard-ddl-lock unlock",
		args:  "LOCK [--owner SOURCE] [--force-remove]",
		short: "resolve a stuck shard DDL lock: decide it now (the --owner source's table runs the DDLs), or --force-remove it (nobody runs them)",
		run:   shardDDLLockUnlock,
	}}
}

// shardDDLLockListJSON is the --output json document of "shard-ddl-lock"
// (DESIGN.md §5, each lock with its state besides).
type shardDDLLockListJSON struct {
	Locks []shardddl.LockInfo `json:"locks"`
	// Errors name the keys that could not be read; their locks are left
	// out of Locks.
	Errors []string `json:"errors,omitempty"`
}

// etcdClient connects to etcd on first use and returns the raw client, for
// the packages that take one (ha/shardddl).
func (e *env) etcdClient(ctx context.Context) (*clientv3.Client, error) {
	if _, err := e.store(ctx); err != nil {
		return nil, err
	}
	return e.cli, nil
}

func shardDDLLockList(ctx context.Context, e *env, cmd *command, args []string) error {
	pos, err := parseAllArgs(cmd, newFlags(cmd), args)
	if err != nil {
		return err
	}
	task := ""
	switch len(pos) {
	case 0:
	case 1:
		task = pos[0]
		if err := config.ValidateName("task", task); err != nil {
			return err
		}
	default:
		return usagef(cmd, "takes at most one TASK, got %d argument(s) %q", len(pos), pos)
	}
	cli, err := e.etcdClient(ctx)
	if err != nil {
		return err
	}
	locks, err := shardddl.Locks(ctx, cli, e.opts.prefix, task)
	var bad *shardddl.GroupErrors
	if err != nil && !errors.As(err, &bad) {
		return err
	}
	doc := shardDDLLockListJSON{Locks: make([]shardddl.LockInfo, 0, len(locks))}
	for _, l := range locks {
		if l.DDLs == nil {
			l.DDLs = []string{}
		}
		doc.Locks = append(doc.Locks, l)
	}
	if bad != nil {
		for _, ge := range bad.Errors {
			doc.Errors = append(doc.Errors, ge.Error())
		}
	}
	if err := e.emit(doc, func(w io.Writer) error { return printShardDDLLocks(w, task, doc.Locks) }); err != nil {
		return err
	}
	if bad != nil {
		return fmt.Errorf("%d key(s) under %s/shardddl/ could not be read, their locks are not listed (the others are): %w",
			len(bad.Errors), e.opts.prefix, err)
	}
	return nil
}

// printShardDDLLocks writes one row per lock, then one row per member of
// each lock, then each lock's conflict.
func printShardDDLLocks(w io.Writer, task string, locks []shardddl.LockInfo) error {
	if len(locks) == 0 {
		of := "of any task"
		if task != "" {
			of = "of task " + task
		}
		_, err := fmt.Fprintf(w, "no shard DDL lock %s\n", of)
		return err
	}
	var rows, members [][]string
	var notes []string
	for _, l := range locks {
		rows = append(rows, []string{l.ID, l.Mode, l.Target, l.Owner, l.State,
			strconv.Itoa(len(l.Synced)), strconv.Itoa(len(l.Unsynced)), strings.Join(l.DDLs, "; ")})
		for _, m := range l.Synced {
			members = append(members, []string{l.ID, "synced", m.Source, m.Table})
		}
		for _, m := range l.Unsynced {
			members = append(members, []string{l.ID, "unsynced", m.Source, m.Table})
		}
		if l.Conflict != "" {
			notes = append(notes, fmt.Sprintf("conflict: %s", l.Conflict))
		}
	}
	if err := table(w, []string{"ID", "MODE", "TARGET", "OWNER", "STATE", "SYNCED", "UNSYNCED", "DDLS"}, rows); err != nil {
		return err
	}
	fmt.Fprintln(w)
	if err := table(w, []string{"LOCK", "MEMBER", "SOURCE", "TABLE"}, members); err != nil {
		return err
	}
	for _, n := range notes {
		if _, err := fmt.Fprintln(w, n); err != nil {
			return err
		}
	}
	return nil
}
