package errs

import (
	"context"
	"database/sql/driver"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"syscall"
	"testing"
	"time"

	gomysql "github.com/go-mysql-org/go-mysql/mysql"
	"github.com/go-sql-driver/mysql"

	"github.com/dmworker/dm-worker/tests/testutil"
)

// refusedDialError dials a loopback port nobody listens on and returns the
// real error the network stack gives.
func refusedDialError(t *testing.T) error {
	t.Helper()
	addr := testutil.FreeAddr(t)
	conn, err := net.DialTimeout("tcp", addr, time.Second)
	if err == nil {
		_ = conn.Close()
		t.Fatalf("dial %s succeeded after its listener closed", addr)
	}
	return err
}

func TestIsResumable(t *testing.T) {
	refused := refusedDialError(t)
	tests := []struct {
		name string
		err  error
		want bool
	}{
		{"nil", nil, false},
		{"plain", errors.New("boom"), false},
		{"lock wait timeout", &mysql.MySQLError{Number: 1205, Message: "Lock wait timeout exceeded"}, true},
		{"deadlock", &mysql.MySQLError{Number: 1213}, true},
		{"too many connections", &mysql.MySQLError{Number: 1040}, true},
		{"server shutdown", &mysql.MySQLError{Number: 1053}, true},
		{"normal shutdown", &mysql.MySQLError{Number: 1077}, true},
		{"got signal", &mysql.MySQLError{Number: 1078}, true},
		{"shutdown complete", &mysql.MySQLError{Number: 1079}, true},
		{"forcing close", &mysql.MySQLError{Number: 1080}, true},
		{"cr connection error", &mysql.MySQLError{Number: 2002}, true},
		{"cr conn host error", &mysql.MySQLError{Number: 2003}, true},
		{"server gone", &mysql.MySQLError{Number: 2006}, true},
		{"server lost", &mysql.MySQLError{Number: 2013}, true},
		{"syntax error", &mysql.MySQLError{Number: 1064}, false},
		{"duplicate key", fmt.Errorf("insert: %w", &mysql.MySQLError{Number: 1062}), false},
		{"go-mysql deadlock", fmt.Errorf("exec: %w", &gomysql.MyError{Code: 1213}), true},
		{"go-mysql unknown table", &gomysql.MyError{Code: 1146}, false},
		{"bad conn", fmt.Errorf("query: %w", driver.ErrBadConn), true},
		{"invalid conn", mysql.ErrInvalidConn, true},
		{"refused errno", syscall.ECONNREFUSED, true},
		{"reset errno", &os.SyscallError{Syscall: "read", Err: syscall.ECONNRESET}, true},
		{"broken pipe", fmt.Errorf("write: %w", syscall.EPIPE), true},
		{"real refused dial", refused, true},
		{"op error", &net.OpError{Op: "read", Net: "tcp", Err: errors.New("weird")}, true},
		{"dns error", &net.DNSError{Err: "no such host", Name: "x"}, true},
		{"eof", io.EOF, true},
		{"unexpected eof", fmt.Errorf("read packet: %w", io.ErrUnexpectedEOF), true},
		{"deadline", fmt.Errorf("dial: %w", context.DeadlineExceeded), true},
		{"canceled", context.Canceled, false},
		{"canceled inside op error", &net.OpError{Op: "dial", Net: "tcp", Err: context.Canceled}, false},
		{"coded resumable over plain", New("x", true, "retry me: %w", errors.New("boom")), true},
		{"coded not resumable over deadlock", New("x", false, "give up: %w", &mysql.MySQLError{Number: 1213}), false},
		{"outermost coded wins", New("outer", false, "outer: %w", New("inner", true, "inner")), false},
		{"wrap keeps cause class", Wrap(driver.ErrBadConn, "sync-exec", "execute batch"), true},
		{"wrap of not resumable", Wrap(errors.New("unsupported ddl"), "sync-ddl", "apply ddl"), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := IsResumable(tt.err); got != tt.want {
				t.Fatalf("IsResumable(%v) = %v, want %v", tt.err, got, tt.want)
			}
		})
	}
}

func TestCode(t *testing.T) {
	inner := New("inner", true, "inner failed")
	tests := []struct {
		name string
		err  error
		want string
	}{
		{"nil", nil, ""},
		{"plain", errors.New("boom"), CodeInternal},
		{"coded", New("bad-config", false, "bad"), "bad-config"},
		{"wrapped by fmt", fmt.Errorf("ctx: %w", New("bad-config", false, "bad")), "bad-config"},
		{"outermost wins", Wrap(inner, "outer", "outer"), "outer"},
		{"inner reachable through fmt", fmt.Errorf("x: %w", inner), "inner"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Code(tt.err); got != tt.want {
				t.Fatalf("Code(%v) = %q, want %q", tt.err, got, tt.want)
			}
		})
	}
}

func TestWrapAndNewKeepCause(t *testing.T) {
	cause := &mysql.MySQLError{Number: 1213, Message: "Deadlock found"}
	tests := []struct {
		name    string
		err     error
		wantMsg string
	}{
		{"new with %w", New("sync-exec", true, "execute on `db`.`t`: %w", cause), "execute on `db`.`t`: Error 1213: Deadlock found"},
		{"wrap", Wrap(cause, "sync-exec", "execute on %s", "`db`.`t`"), "execute on `db`.`t`: Error 1213: Deadlock found"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.err.Error() != tt.wantMsg {
				t.Fatalf("Error() = %q, want %q", tt.err.Error(), tt.wantMsg)
			}
			var got *mysql.MySQLError
			if !errors.As(tt.err, &got) || got != cause {
				t.Fatalf("errors.As did not reach the cause through %v", tt.err)
			}
		})
	}
	if Wrap(nil, "x", "y") != nil {
		t.Fatal("Wrap(nil) is not nil")
	}
}

func TestEntryJSON(t *testing.T) {
	now := time.Date(2026, 1, 2, 15, 4, 5, 0, time.UTC)
	tests := []struct {
		name string
		err  error
		want string
	}{
		{"coded", New("task-mode-unsupported", false, "no dump unit"),
			`{"code":"task-mode-unsupported","message":"no dump unit","resumable":false,"time":"2026-01-02T15:04:05Z"}`},
		{"classified", fmt.Errorf("read binlog: %w", io.ErrUnexpectedEOF),
			`{"code":"internal","message":"read binlog: unexpected EOF","resumable":true,"time":"2026-01-02T15:04:05Z"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, err := json.Marshal(Entry(tt.err, now))
			if err != nil {
				t.Fatalf("marshal: %v", err)
			}
			if string(b) != tt.want {
				t.Fatalf("got %s, want %s", b, tt.want)
			}
		})
	}
}
