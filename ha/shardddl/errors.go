package shardddl

import (
	"errors"
	"fmt"
)

// Sentinel errors, matched with errors.Is.
var (
	// ErrMalformed marks a value under P/shardddl/ that does not decode; the
	// error names the key. Fix or delete the key (`etcdctl del KEY`).
	ErrMalformed = errors.New("shardddl: malformed value")
	// ErrBadKey marks a key under P/shardddl/ that is not of the layout.
	ErrBadKey = errors.New("shardddl: bad key")
	// ErrBadLockID marks a lock id that is not <task>-`<db>`.`<table>`.
	ErrBadLockID = errors.New("shardddl: bad lock id")
	// ErrNotMember marks a report or acknowledgement for a table that is not
	// in its source's share of the group.
	ErrNotMember = errors.New("shardddl: table is not a member of the sharding group")
	// ErrNotReported marks a step for a table that has no info.
	ErrNotReported = errors.New("shardddl: table has reported no DDL")
	// ErrWrongRole marks a step the table's state does not allow (Done by a
	// table that does not own the lock, Ack before the owner is done, a new
	// DDL while the previous one is decided and unresolved).
	ErrWrongRole = errors.New("shardddl: step not allowed in the table's state")
	// ErrNoLock marks an unlock of a lock that does not exist.
	ErrNoLock = errors.New("shardddl: no such lock")
	// ErrConflict marks an unlock (without --force-remove) of a lock whose
	// members reached different DDLs.
	ErrConflict = errors.New("shardddl: members reached different DDLs")
	// errRetry is returned by a step whose transaction found the group
	// changed; the step is decided again from a fresh read.
	errRetry = errors.New("shardddl: the group changed meanwhile")
)

func malformed(key string, err error) error {
	return fmt.Errorf("%w: key %s: %w; fix or delete the key", ErrMalformed, key, err)
}
