package dbconn

import (
	"context"
	"errors"
	"time"

	gomysql "github.com/go-mysql-org/go-mysql/mysql"
	"github.com/go-sql-driver/mysql"
)

// Server error numbers of a lock conflict: InnoDB rolled the statement or
// the whole transaction back because of another transaction's locks.
const (
	ErLockWaitTimeout = 1205 // ER_LOCK_WAIT_TIMEOUT
	ErLockDeadlock    = 1213 // ER_LOCK_DEADLOCK
)

// ErrorNumber returns the server error number in err's chain (from
// go-sql-driver or go-mysql), 0 when there is none.
func ErrorNumber(err error) uint16 {
	var my *mysql.MySQLError
	if errors.As(err, &my) {
		return my.Number
	}
	var goMy *gomysql.MyError
	if errors.As(err, &goMy) {
		return goMy.Code
	}
	return 0
}

// IsLockConflict reports whether err is a deadlock or a lock wait timeout:
// the transaction lost a conflict with another one and may simply be run
// again.
func IsLockConflict(err error) bool {
	n := ErrorNumber(err)
	return n == ErLockDeadlock || n == ErLockWaitTimeout
}

// The one lock-conflict retry policy: LockConflictAttempts runs in all, the
// pause before the k-th retry k × LockConflictPause (so that two writers
// that deadlocked each other do not meet again at once).
const (
	LockConflictAttempts = 4
	LockConflictPause    = 100 * time.Millisecond
)

// RetryLockConflict runs tx, a whole transaction, again while it fails with
// a lock conflict, up to LockConflictAttempts runs in all; retried (may be
// nil) is told of each conflict before the pause. It returns tx's last
// error, or ctx's cause when ctx ends during a pause.
func RetryLockConflict(ctx context.Context, tx func() error, retried func(attempt int, err error)) error {
	for attempt := 1; ; attempt++ {
		err := tx()
		if err == nil || attempt >= LockConflictAttempts || !IsLockConflict(err) {
			return err
		}
		if retried != nil {
			retried(attempt, err)
		}
		t := time.NewTimer(time.Duration(attempt) * LockConflictPause)
		select {
		case <-ctx.Done():
			t.Stop()
			return context.Cause(ctx)
		case <-t.C:
		}
	}
}
