package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/dmworker/dm-worker/config"
	"github.com/dmworker/dm-worker/ha/shardddl"
)

// shardDDLUnlockJSON is the --output json document of "shard-ddl-lock
// unlock": what was asked and the lock as it is after the unlock (null
// when it is gone: force-removed, or every member had acknowledged).
type shardDDLUnlockJSON struct {
	ID          string             `json:"id"`
	Owner       string             `json:"owner,omitempty"`
	ForceRemove bool               `json:"force-remove"`
	Lock        *shardddl.LockInfo `json:"lock"`
}

// shardDDLLockUnlock resolves a stuck lock through shardddl.Unlock, one
// etcd transaction made by dmctl itself (no worker picks up a request):
// an undecided lock is decided with the members that reached its DDLs (the
// others skip them when they reach them), a decided one moves to another
// --owner source while the owner has not begun, and --force-remove removes
// it with nobody running the DDLs.
func shardDDLLockUnlock(ctx context.Context, e *env, cmd *command, args []string) error {
	fs := newFlags(cmd)
	owner := fs.String("owner", "", "source whose member table runs the DDLs (default: the first table that reached them; on a decided lock: move the execution to this source)")
	force := fs.Bool("force-remove", false, "remove the lock: nobody runs its DDLs, every member that has not acknowledged skips them")
	pos, err := parseArgs(cmd, fs, args, "LOCK")
	if err != nil {
		return err
	}
	id := pos[0]
	task, _, err := shardddl.ParseLockID(id)
	if err != nil {
		return usagef(cmd, "%v; copy the id from `dmctl shard-ddl-lock`", err)
	}
	if err := config.ValidateName("task", task); err != nil {
		return usagef(cmd, "lock %q: %v; copy the id from `dmctl shard-ddl-lock`", id, err)
	}
	if *owner != "" {
		if err := config.ValidateName("source", *owner); err != nil {
			return err
		}
		if *force {
			return usagef(cmd, "--owner and --force-remove exclude each other: a force-removed lock runs its DDLs nowhere")
		}
	}
	cli, err := e.etcdClient(ctx)
	if err != nil {
		return err
	}
	if err := shardddl.Unlock(ctx, cli, e.opts.prefix, id, *owner, *force); err != nil {
		return unlockError(id, task, err)
	}

	res := shardDDLUnlockJSON{ID: id, Owner: *owner, ForceRemove: *force}
	if !*force { // a force-removed lock is gone
		res.Lock = e.readBackLock(ctx, cmd, id, task)
	}
	return e.emit(res, func(w io.Writer) error { return printUnlock(w, &res) })
}

// readBackLock reads lock id of task after its unlock succeeded, to show
// its new owner and members; nil when it is gone. A failed read is a
// warning on stderr: the unlock itself is done.
func (e *env) readBackLock(ctx context.Context, cmd *command, id, task string) *shardddl.LockInfo {
	locks, err := shardddl.Locks(ctx, e.cli, e.opts.prefix, task)
	if i := slices.IndexFunc(locks, func(l shardddl.LockInfo) bool { return l.ID == id }); i >= 0 {
		return &locks[i] // another group's bad key does not matter here
	}
	if err != nil {
		fmt.Fprintf(e.stderr, "dmctl %s: warning: lock %s was unlocked, but reading it back failed: %v; see `dmctl shard-ddl-lock %s`\n",
			cmd.name, id, err, task)
	}
	return nil
}

// unlockError adds what the operator can do to a refused unlock.
func unlockError(id, task string, err error) error {
	switch {
	case errors.Is(err, shardddl.ErrNoLock):
		return fmt.Errorf("%w; list the locks with `dmctl shard-ddl-lock %s`", err, task)
	case errors.Is(err, shardddl.ErrConflict):
		return fmt.Errorf("%w. Lock %s cannot be decided while its members differ: resolve the conflict first "+
			"(`dmctl task handle-error %s replace --source SOURCE --sql ...` on the differing table's source), "+
			"or --force-remove it", err, id, task)
	}
	return err
}

func printUnlock(w io.Writer, res *shardDDLUnlockJSON) error {
	var b strings.Builder
	l := res.Lock
	switch {
	case res.ForceRemove && l != nil && l.Mode == shardddl.ModeOptimistic:
		fmt.Fprintf(&b, "lock %s force-removed: its conflicting and undecided DDLs are dropped (their tables skip them) "+
			"and an outstanding target change is taken as done; the tables still differ (%s)\n", res.ID, l.State)
	case res.ForceRemove:
		fmt.Fprintf(&b, "lock %s force-removed: nobody runs its DDLs; every member that had not acknowledged skips them when it reaches them\n", res.ID)
	case l == nil:
		fmt.Fprintf(&b, "lock %s unlocked; it is already resolved (every member acknowledged)\n", res.ID)
	case l.Mode == shardddl.ModeOptimistic:
		fmt.Fprintf(&b, "lock %s unlocked (%s): source %s runs the target change %s\n", res.ID, l.State, l.Owner, strings.Join(l.DDLs, "; "))
	default:
		fmt.Fprintf(&b, "lock %s unlocked (%s): source %s runs %s; the other synced members skip them after it\n",
			res.ID, l.State, l.Owner, strings.Join(l.DDLs, "; "))
		if len(l.Unsynced) > 0 {
			names := make([]string, len(l.Unsynced))
			for i, m := range l.Unsynced {
				names[i] = m.Source + " " + m.Table
			}
			fmt.Fprintf(&b, "members that had not reached them skip them when they do: %s\n", strings.Join(names, ", "))
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}
