package mariadbtest

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/dmworker/dm-worker/tests/testutil"
)

const (
	// startTimeout bounds the wait for a server to accept connections. Generous: under -race
	// on a two-core machine many tests start servers at once.
	startTimeout = 2 * time.Minute
	// stopTimeout bounds a clean shutdown.
	stopTimeout = time.Minute
	// portAttempts is how often Start picks a new port when another process took the one it chose.
	portAttempts = 5
	// adminIdleConns is how many idle connections the pool behind Exec keeps.
	adminIdleConns = 2
	// logTailLines is how much of the error log goes into a failure message.
	logTailLines = 40
)

// serverIDs hands out server_id values (100 + n) that are unique within this test process.
var serverIDs atomic.Uint32

// Instance is one mariadbd process with its own directory and port. Its methods may be called
// from several goroutines.
type Instance struct {
	bins     binaries
	opts     Options
	dir      string
	port     int
	serverID uint32
	admin    *sql.DB // root pool behind Exec, QueryString and MasterStatus; closed in Cleanup
	tlsName  string  // go-sql-driver TLS config of the harness's connections; "" without Options.TLS

	mu   sync.Mutex
	proc *serverProcess // the current (or last) server process; nil before the first start
}

// StartSource starts an instance with the binary log on, ready to be a DM source.
func StartSource(tb testing.TB) *Instance {
	tb.Helper()
	return Start(tb, Options{Name: "source", Binlog: true})
}

// StartTarget starts an instance with the binary log off, ready to be a DM target.
func StartTarget(tb testing.TB) *Instance {
	tb.Helper()
	return Start(tb, Options{Name: "target"})
}

// Start starts a new instance and waits until root can connect over TCP. The instance is
// killed and its directory removed in tb's Cleanup. The test fails, with the tail of the
// server's error log, when the server does not come up; it is skipped (or fails when CI=true)
// when MariaDB is not installed.
func Start(tb testing.TB, opts Options) *Instance {
	tb.Helper()
	if err := opts.validate(); err != nil {
		tb.Fatal(err)
	}
	if opts.Name == "" {
		opts.Name = "mariadb"
	}
	bins := requireBinaries(tb)
	template := templates.dataDir(tb, bins)
	began := time.Now()

	dir, err := os.MkdirTemp("", "mariadbtest-"+dirLabel(opts.Name)+"-")
	if err != nil {
		tb.Fatalf("mariadbtest: create directory for %q: %v", opts.Name, err)
	}
	i := &Instance{bins: bins, opts: opts, dir: dir, serverID: opts.ServerID}
	if i.serverID == 0 {
		i.serverID = 100 + serverIDs.Add(1)
	}
	tb.Cleanup(func() { i.cleanup(tb) })
	if i.tlsName, err = registerTLS(opts); err != nil {
		tb.Fatal(err)
	}
	if i.tlsName != "" {
		tb.Cleanup(func() { mysql.DeregisterTLSConfig(i.tlsName) })
	}

	copyBegan := time.Now()
	if err := copyDir(template, dataDir(dir)); err != nil {
		tb.Fatalf("mariadbtest: copy template data directory for %q: %v", opts.Name, err)
	}
	if err := os.Mkdir(tmpDir(dir), 0o700); err != nil {
		tb.Fatalf("mariadbtest: create tmpdir for %q: %v", opts.Name, err)
	}
	copied := time.Since(copyBegan)

	for attempt := 1; ; attempt++ {
		if i.port, err = testutil.FreePort(); err != nil {
			tb.Fatalf("mariadbtest: %v", err)
		}
		err = i.launch(tb.Context())
		if err == nil {
			break
		}
		if !errors.Is(err, errPortTaken) || attempt == portAttempts {
			tb.Fatalf("mariadbtest: instance %q in %s did not come up: %v\n%s",
				opts.Name, dir, err, i.failureDetails())
		}
		tb.Logf("mariadbtest: port %d of instance %q was taken by another process; trying another", i.port, opts.Name)
	}
	if i.admin, err = sql.Open("mysql", i.DSN("")); err != nil {
		tb.Fatalf("mariadbtest: open pool for %q: %v", opts.Name, err)
	}
	i.admin.SetMaxIdleConns(adminIdleConns)
	tb.Logf("mariadbtest: %s (server_id %d, binlog %v) ready on 127.0.0.1:%d in %v (data copy %v), dir %s",
		opts.Name, i.serverID, opts.Binlog, i.port, time.Since(began).Round(time.Millisecond), copied.Round(time.Millisecond), dir)
	return i
}

// errPortTaken is returned by launch when mariadbd could not bind its port.
var errPortTaken = errors.New("mariadbtest: port already in use")

// launch writes my.cnf, starts mariadbd on i.port and waits until it accepts connections,
// for at most startTimeout. On failure the server is not running.
func (i *Instance) launch(ctx context.Context) error {
	logStart := fileSize(errorLogPath(i.dir))
	proc, err := launchServer(i.bins, serverConfig{opts: i.opts, serverID: i.serverID, dir: i.dir, port: i.port, asRoot: os.Geteuid() == 0})
	if err != nil {
		return err
	}
	i.mu.Lock()
	i.proc = proc
	i.mu.Unlock()

	ctx, cancel := context.WithTimeout(ctx, startTimeout)
	defer cancel()
	err = waitReady(ctx, proc, i.DSN(""))
	if err == nil {
		return nil
	}
	err = errors.Join(err, proc.kill())
	if log, rerr := os.ReadFile(errorLogPath(i.dir)); rerr == nil && logStart <= int64(len(log)) &&
		strings.Contains(string(log[logStart:]), "Address already in use") {
		return fmt.Errorf("%w: %d: %w", errPortTaken, i.port, err)
	}
	return err
}

// launchServer writes cfg's my.cnf and starts mariadbd on it without waiting for it.
func launchServer(bins binaries, cfg serverConfig) (*serverProcess, error) {
	if err := os.WriteFile(cnfPath(cfg.dir), []byte(cfg.render()), 0o600); err != nil {
		return nil, fmt.Errorf("mariadbtest: write my.cnf: %w", err)
	}
	return startServerProcess(bins.mariadbd, []string{"--defaults-file=" + cnfPath(cfg.dir)}, outputPath(cfg.dir))
}

// waitReady polls dsn until a ping succeeds, the process exits or ctx ends.
func waitReady(ctx context.Context, proc *serverProcess, dsn string) error {
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		return fmt.Errorf("open %s: %w", dsn, err)
	}
	defer db.Close()
	db.SetMaxIdleConns(0)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	var lastErr error
	for {
		pingCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
		lastErr = db.PingContext(pingCtx)
		cancel()
		if lastErr == nil {
			return nil
		}
		select {
		case <-proc.done:
			return fmt.Errorf("mariadbd exited during start-up: %v", proc.waitErr)
		case <-ctx.Done():
			return fmt.Errorf("mariadbd did not accept connections: %w (last error: %v)", context.Cause(ctx), lastErr)
		case <-tick.C:
		}
	}
}

// current returns the current server process, nil before the first start.
func (i *Instance) current() *serverProcess {
	i.mu.Lock()
	defer i.mu.Unlock()
	return i.proc
}

// Host is the address the server listens on: always 127.0.0.1.
func (i *Instance) Host() string { return "127.0.0.1" }

// Port is the server's TCP port; it stays the same across Restart.
func (i *Instance) Port() int { return i.port }

// Dir is the instance directory: data/, tmp/, my.cnf, error.log, binlogs (mariadb-bin.*).
func (i *Instance) Dir() string { return i.dir }

// ServerID is the server's server_id.
func (i *Instance) ServerID() uint32 { return i.serverID }

// Name is Options.Name.
func (i *Instance) Name() string { return i.opts.Name }

// Running reports whether the server process is alive.
func (i *Instance) Running() bool {
	p := i.current()
	return p != nil && !p.exited()
}

// Stop shuts the server down cleanly (SIGTERM) and waits for it to exit; the test fails when
// the shutdown takes longer than a minute or the server exits with an error. Stopping a server
// that is not running does nothing.
func (i *Instance) Stop(tb testing.TB) {
	tb.Helper()
	p := i.current()
	if p == nil || p.exited() {
		return
	}
	if err := p.signal(syscall.SIGTERM); err != nil {
		tb.Fatalf("mariadbtest: stop %q: %v", i.opts.Name, err)
	}
	exitErr, err := p.wait(stopTimeout)
	if err != nil {
		tb.Fatalf("mariadbtest: stop %q: %v (killed)\n%s",
			i.opts.Name, errors.Join(err, p.kill()), i.failureDetails())
	}
	if exitErr != nil {
		tb.Fatalf("mariadbtest: stop %q: mariadbd exited with %v\n%s",
			i.opts.Name, exitErr, i.failureDetails())
	}
	i.dropIdleConns()
}

// Kill kills the server with SIGKILL, like a crash, and waits for it to exit. Killing a server
// that is not running does nothing.
func (i *Instance) Kill(tb testing.TB) {
	tb.Helper()
	p := i.current()
	if p == nil || p.exited() {
		return
	}
	if err := p.kill(); err != nil {
		tb.Fatalf("mariadbtest: kill %q: %v", i.opts.Name, err)
	}
	i.dropIdleConns()
}

// dropIdleConns closes the admin pool's connections to a server that is gone, so that the
// driver does not log about each dead connection it finds after a restart.
func (i *Instance) dropIdleConns() {
	i.admin.SetMaxIdleConns(0)
	i.admin.SetMaxIdleConns(adminIdleConns)
}

// Restart starts the server again on the same port, data and configuration after Stop or
// Kill, and waits until it accepts connections (after crash recovery when it was killed).
func (i *Instance) Restart(tb testing.TB) {
	tb.Helper()
	if i.Running() {
		tb.Fatalf("mariadbtest: restart %q: the server is still running; Stop or Kill it first", i.opts.Name)
	}
	began := time.Now()
	if err := i.launch(tb.Context()); err != nil {
		tb.Fatalf("mariadbtest: restart %q on port %d: %v\n%s",
			i.opts.Name, i.port, err, i.failureDetails())
	}
	tb.Logf("mariadbtest: %s restarted on 127.0.0.1:%d in %v", i.opts.Name, i.port, time.Since(began).Round(time.Millisecond))
}

// ErrorLogTail returns the last n lines of the server's error log.
func (i *Instance) ErrorLogTail(n int) string {
	return readTail(errorLogPath(i.dir), n)
}

// failureDetails is the tail of the error log and of the server's stdout and stderr (where
// mariadbd writes when it cannot even open its error log), for failure messages.
func (i *Instance) failureDetails() string {
	details := fmt.Sprintf("--- tail of %s ---\n%s", errorLogPath(i.dir), i.ErrorLogTail(logTailLines))
	if fileSize(outputPath(i.dir)) > 0 {
		details += fmt.Sprintf("\n--- tail of %s ---\n%s", outputPath(i.dir), readTail(outputPath(i.dir), 10))
	}
	return details
}

// cleanup kills the server, closes the pool and removes the directory.
func (i *Instance) cleanup(tb testing.TB) {
	if p := i.current(); p != nil {
		if err := p.kill(); err != nil {
			tb.Errorf("mariadbtest: cleanup of %q: %v", i.opts.Name, err)
		}
	}
	if i.admin != nil {
		if err := i.admin.Close(); err != nil {
			tb.Errorf("mariadbtest: cleanup of %q: close pool: %v", i.opts.Name, err)
		}
	}
	if tb.Failed() {
		tb.Logf("mariadbtest: the test failed; last words of %q:\n%s", i.opts.Name, i.failureDetails())
	}
	if err := os.RemoveAll(i.dir); err != nil {
		tb.Errorf("mariadbtest: cleanup of %q: %v", i.opts.Name, err)
	}
}
