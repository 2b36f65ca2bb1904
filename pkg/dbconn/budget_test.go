package dbconn

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-mysql-org/go-mysql/client"

	"github.com/dmworker/dm-worker/config"
	"github.com/dmworker/dm-worker/pkg/errs"
	"github.com/dmworker/dm-worker/tests/mariadbtest"
	"github.com/dmworker/dm-worker/tests/testutil"
)

// budgetServer is a MariaDB with max_connections=10 and a user without
// SUPER (which MariaDB lets past max_connections by one), for the budget's
// tests.
type budgetServer struct {
	i  *mariadbtest.Instance
	db config.DBConfig
}

const budgetMaxConnections = 10

func startBudgetServer(t *testing.T) *budgetServer {
	t.Helper()
	i := mariadbtest.Start(t, mariadbtest.Options{Name: "budget", FastCommit: true,
		ExtraConfig: []string{"max_connections=" + strconv.Itoa(budgetMaxConnections)}})
	i.Exec(t, "CREATE USER 'app'@'127.0.0.1' IDENTIFIED BY 'app-pw'")
	i.Exec(t, "GRANT SELECT, INSERT, UPDATE, DELETE, CREATE, DROP ON *.* TO 'app'@'127.0.0.1'")
	i.Exec(t, "CREATE DATABASE budget")
	return &budgetServer{i: i, db: config.DBConfig{Host: i.Host(), Port: i.Port(), User: "app", Password: "app-pw"}}
}

// open opens a budgeted pool of task owner with maxOpen connections,
// closed at the end of the test.
func (s *budgetServer) open(t *testing.T, b *Budget, owner string, maxOpen int) *sql.DB {
	t.Helper()
	ep, err := NewEndpoint(s.db, TargetRef(owner))
	if err != nil {
		t.Fatal(err)
	}
	cfg := ep.DriverConfig()
	cfg.InterpolateParams = true
	cfg.MultiStatements = true
	db, err := b.Open(ep, cfg, owner, maxOpen)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	return db
}

// hog holds n connections of the app user (not budgeted) until release.
func (s *budgetServer) hog(t *testing.T, n int) (release func()) {
	t.Helper()
	ep, err := NewEndpoint(s.db, TargetRef("hog"))
	if err != nil {
		t.Fatal(err)
	}
	db, err := ep.Open(ep.DriverConfig())
	if err != nil {
		t.Fatal(err)
	}
	conns := make([]*sql.Conn, 0, n)
	for range n {
		c, err := db.Conn(t.Context())
		if err == nil {
			err = c.PingContext(t.Context())
		}
		if err != nil {
			t.Fatalf("hog connection %d: %v", len(conns)+1, err)
		}
		conns = append(conns, c)
	}
	var once sync.Once
	release = func() {
		once.Do(func() {
			for _, c := range conns {
				_ = c.Close()
			}
			_ = db.Close()
		})
	}
	t.Cleanup(release)
	return release
}

// status reads a global status counter of the server.
func (s *budgetServer) status(t *testing.T, name string) int {
	t.Helper()
	n, err := strconv.Atoi(s.i.QueryString(t, "SELECT VARIABLE_VALUE FROM information_schema.GLOBAL_STATUS WHERE VARIABLE_NAME = ?", name))
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// hammer runs callers goroutines that each run rounds queries holding a
// connection for hold; it returns the errors.
func hammer(ctx context.Context, db *sql.DB, callers, rounds int, hold time.Duration) error {
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errl []error
	)
	q := fmt.Sprintf("SELECT SLEEP(%g)", hold.Seconds())
	for range callers {
		wg.Go(func() {
			for range rounds {
				if _, err := db.ExecContext(ctx, q); err != nil {
					mu.Lock()
					errl = append(errl, err)
					mu.Unlock()
					return
				}
			}
		})
	}
	wg.Wait()
	return errors.Join(errl...)
}

// stats returns the budget's one target.
func stats(t *testing.T, b *Budget) ServerStats {
	t.Helper()
	st := b.Stats()
	if len(st) != 1 {
		t.Fatalf("budget stats %+v, want one target", st)
	}
	return st[0]
}

func TestBudget(t *testing.T) {
	s := startBudgetServer(t)
	t.Run("TooManyConnectionsIsBackPressure", s.testTooManyConnections)
	t.Run("IdlePoolReleasesToWaitingPool", s.testIdlePoolReleases)
	t.Run("BusyPoolSharesWithNewPool", s.testBusyPoolShares)
	t.Run("ConnectionsAreReusedNotRedialed", s.testReuse)
	t.Run("WaitBoundIsResumableError", s.testWaitBound)
	t.Run("SourceKindNamesSourceSettings", s.testSourceKind)
	t.Run("FlavorLearnedOncePerServer", s.testFlavorOnce)
	t.Run("SourceStatusAndBinlogReaders", s.testSourceStatus)
	t.Run("GoMySQLRefusalIsTooManyConnections", s.testGoMySQLRefusal)
	t.Run("ReservedGroupsDoNotDeadlock", s.testReserve)
}

// testTooManyConnections: with a budget above the server's max_connections
// and another client holding most of them, "Too many connections" makes
// callers wait and retry, never fail; the limit drops, and the wait shows
// in the task's status.
func (s *budgetServer) testTooManyConnections(t *testing.T) {
	b := NewBudget(BudgetOptions{Limit: 64, RaiseEvery: 300 * time.Millisecond})
	release := s.hog(t, budgetMaxConnections-3)
	db := s.open(t, b, "t1", 20)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- hammer(ctx, db, 12, 10, 20*time.Millisecond) }()
	testutil.Eventually(t, 20*time.Second, "the task's callers wait", func() error {
		st := b.OwnerStatus("t1")
		if st == nil || st.TaskWaiting == 0 || st.WaitingSince == nil {
			return fmt.Errorf("status %+v", st)
		}
		return nil
	})
	if err := <-done; err != nil {
		t.Fatalf("callers failed; want them to wait and retry: %v", err)
	}
	st := stats(t, b)
	t.Logf("after the run: %+v", st)
	if st.Refusals == 0 || st.EffectiveLimit >= 64 {
		t.Errorf("stats %+v: want refusals and a lowered limit", st)
	}
	release()
	// Once the other client is gone the callers use what the server has.
	if err := hammer(ctx, db, 8, 5, 10*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if st := b.OwnerStatus("t1"); st.TaskWaiting != 0 || st.WaitingSince != nil || st.Limit != 64 {
		t.Errorf("status after the run %+v: want no waiting caller, limit 64", st)
	}
}

// testIdlePoolReleases: a pool holding every token idle gives them up to a
// caller of another pool at once.
func (s *budgetServer) testIdlePoolReleases(t *testing.T) {
	b := NewBudget(BudgetOptions{Limit: 4})
	idle := s.open(t, b, "idle", 10)
	busy := s.open(t, b, "busy", 10)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	if err := hammer(ctx, idle, 6, 2, 50*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if st := idle.Stats(); st.Idle != 4 {
		t.Fatalf("idle pool %+v, want the 4 connections of the budget idle", st)
	}
	began := time.Now()
	if err := hammer(ctx, busy, 4, 3, 10*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	took := time.Since(began)
	t.Logf("the busy pool ran its queries in %s; idle pool %+v; budget %+v", took, idle.Stats(), stats(t, b))
	if took > 3*time.Second {
		t.Errorf("the busy pool took %s; the idle pool's connections should have been released at once", took)
	}
	if st := idle.Stats(); st.OpenConnections != 0 {
		t.Errorf("idle pool %+v, want its connections closed", st)
	}
}

// testBusyPoolShares: a pool busy with more callers than the limit gives
// connections to a new pool within about a second, and the budget never
// holds more than its limit.
func (s *budgetServer) testBusyPoolShares(t *testing.T) {
	b := NewBudget(BudgetOptions{Limit: 4})
	hog := s.open(t, b, "hog", 10)
	late := s.open(t, b, "late", 10)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var over atomic.Int64
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			case <-time.After(5 * time.Millisecond):
			}
			for _, st := range b.Stats() {
				if st.Open > st.Limit {
					over.Store(int64(st.Open))
				}
			}
		}
	})
	hogDone := make(chan error, 1)
	go func() { hogDone <- hammer(ctx, hog, 8, 40, 20*time.Millisecond) }()
	testutil.WaitFor(t, 10*time.Second, "the first pool holds every token", func() bool { return stats(t, b).Open == 4 })
	began := time.Now()
	if err := hammer(ctx, late, 2, 5, 10*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	took := time.Since(began)
	if err := <-hogDone; err != nil {
		t.Fatal(err)
	}
	close(stop)
	wg.Wait()
	t.Logf("the late pool ran its queries in %s while the first one was busy", took)
	if took > 5*time.Second {
		t.Errorf("the late pool took %s", took)
	}
	if n := over.Load(); n != 0 {
		t.Errorf("the budget held %d connections, over its limit 4", n)
	}
}

// testReuse: callers beyond the limit get the connections of their own
// pool handed over, not new dials; InterpolateParams and multi-statements
// pass through the budget's connections.
func (s *budgetServer) testReuse(t *testing.T) {
	b := NewBudget(BudgetOptions{Limit: 2})
	db := s.open(t, b, "reuse", 16)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	dials, prepares := s.status(t, "Connections"), s.status(t, "Com_stmt_prepare")
	if err := hammer(ctx, db, 16, 10, 5*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, "CREATE TABLE budget.r (id INT PRIMARY KEY); INSERT INTO budget.r VALUES (?), (?)", 1, 2); err != nil {
		t.Fatalf("multi-statement with interpolated arguments: %v", err)
	}
	dials = s.status(t, "Connections") - dials
	prepares = s.status(t, "Com_stmt_prepare") - prepares
	t.Logf("160 queries over %d new connections, %d prepared statements", dials, prepares)
	if dials > 4 {
		t.Errorf("%d connections dialed for 160 queries with a limit of 2; want them reused", dials)
	}
	if prepares != 0 {
		t.Errorf("%d statements prepared; want arguments interpolated (InterpolateParams)", prepares)
	}
	if st := stats(t, b); st.Open > 2 {
		t.Errorf("budget %+v over its limit", st)
	}
}

// testWaitBound: a caller that cannot get a connection within MaxWait
// gets a resumable error naming the target, the limit and the fix.
func (s *budgetServer) testWaitBound(t *testing.T) {
	b := NewBudget(BudgetOptions{Limit: 1, MaxWait: time.Second})
	db := s.open(t, b, "t9", 4)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	held, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	_, err = db.ExecContext(ctx, "SELECT 1")
	if err == nil {
		t.Fatal("a second connection with a limit of 1 was granted")
	}
	if errs.Code(err) != CodeTargetConnections || !errs.IsResumable(err) {
		t.Errorf("error %v: want resumable %s", err, CodeTargetConnections)
	}
	for _, part := range []string{`task "t9"`, s.i.Host() + ":" + strconv.Itoa(s.i.Port()), "limit 1", "max_connections", "target-connection-limit", "worker-count"} {
		if !strings.Contains(err.Error(), part) {
			t.Errorf("error does not name %q: %v", part, err)
		}
	}
	if st := stats(t, b); st.Timeouts != 1 || st.Waiting != 0 {
		t.Errorf("stats %+v: want one timeout and nobody waiting", st)
	}
}

// testSourceKind: a budget of sources bounds the connections the same way
// and its wait error names the source, source-connection-limit and the
// source-side fix, with its own code.
func (s *budgetServer) testSourceKind(t *testing.T) {
	b := NewBudget(BudgetOptions{Kind: Sources, MaxWait: time.Second})
	if b.Limit() != DefaultSourceConnectionLimit {
		t.Errorf("default limit %d, want %d", b.Limit(), DefaultSourceConnectionLimit)
	}
	b = NewBudget(BudgetOptions{Kind: Sources, Limit: 1, MaxWait: time.Second})
	ep, err := NewEndpoint(s.db, SourceRef("s1"))
	if err != nil {
		t.Fatal(err)
	}
	db, err := b.Open(ep, ep.DriverConfig(), "t1", 4)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	held, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	_, err = db.ExecContext(ctx, "SELECT 1")
	if errs.Code(err) != CodeSourceConnections || !errs.IsResumable(err) {
		t.Fatalf("error %v: want resumable %s", err, CodeSourceConnections)
	}
	for _, part := range []string{`source "s1"`, "the source " + ep.Addr(), "limit 1", "source's max_connections", "source-connection-limit", "mydumper threads"} {
		if !strings.Contains(err.Error(), part) {
			t.Errorf("error does not name %q: %v", part, err)
		}
	}
	if strings.Contains(err.Error(), "target") {
		t.Errorf("a source's error speaks of a target: %v", err)
	}
}

// testFlavorOnce: many callers asking a source's flavor at once make one
// connection to it, and later callers none; a configured flavor needs no
// connection.
func (s *budgetServer) testFlavorOnce(t *testing.T) {
	b := NewBudget(BudgetOptions{Kind: Sources, Limit: 4})
	ep, err := NewEndpoint(s.db, SourceRef("s1"))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	dials := s.status(t, "Connections")
	var wg sync.WaitGroup
	got := make([]string, 50)
	errl := make([]error, len(got))
	for i := range got {
		wg.Go(func() { got[i], errl[i] = b.Flavor(ctx, ep, "") })
	}
	wg.Wait()
	if err := errors.Join(errl...); err != nil {
		t.Fatal(err)
	}
	for i := range 10 {
		if _, err := b.Flavor(ctx, ep, ""); err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
	}
	if f, err := b.Flavor(ctx, ep, "MySQL"); err != nil || f != config.FlavorMySQL {
		t.Errorf("configured flavor: %q %v, want mysql", f, err)
	}
	dials = s.status(t, "Connections") - dials
	t.Logf("60 flavor lookups made %d connections", dials)
	for i, f := range got {
		if f != config.FlavorMariaDB {
			t.Fatalf("caller %d: flavor %q, want mariadb", i, f)
		}
	}
	if dials != 1 {
		t.Errorf("%d connections to learn the flavor, want 1", dials)
	}
	if st := stats(t, b); st.Open != 0 || st.Pools != 0 {
		t.Errorf("stats %+v: the flavor's connection should be closed", st)
	}
}

// testSourceStatus: the status of a source counts the budget's open, in
// use and idle connections and the binlog readers apart.
func (s *budgetServer) testSourceStatus(t *testing.T) {
	b := NewBudget(BudgetOptions{Kind: Sources, Limit: 3})
	ep, err := NewEndpoint(s.db, SourceRef("s1"))
	if err != nil {
		t.Fatal(err)
	}
	db, err := b.Open(ep, ep.DriverConfig(), "t1", 3)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	held, err := db.Conn(ctx)
	if err == nil {
		err = held.PingContext(ctx)
	}
	if err != nil {
		t.Fatal(err)
	}
	idle, err := db.Conn(ctx)
	if err == nil {
		err = idle.PingContext(ctx)
	}
	if err != nil {
		t.Fatal(err)
	}
	if err := idle.Close(); err != nil {
		t.Fatal(err)
	}
	r1, r2 := b.BinlogReader(ep.Addr()), b.BinlogReader(ep.Addr())
	st := b.ServerStatus(ep.Addr())
	want := SourceConnections{Source: ep.Addr(), Limit: 3, EffectiveLimit: 3, Open: 2, InUse: 1, Idle: 1, BinlogReaders: 2}
	if *st != want {
		t.Errorf("status %+v, want %+v", *st, want)
	}
	r1()
	r1() // done twice counts once
	if st := stats(t, b); st.BinlogReaders != 1 {
		t.Errorf("stats %+v: want 1 binlog reader", st)
	}
	r2()
	if err := held.Close(); err != nil {
		t.Fatal(err)
	}
	if st := b.ServerStatus(ep.Addr()); st.InUse != 0 || st.BinlogReaders != 0 || st.Open != 2 || st.Idle != 2 {
		t.Errorf("status after release %+v: want 2 open and idle, no reader", *st)
	}
}

// testGoMySQLRefusal: the refusal a binlog dump's go-mysql client gets
// from a server out of connections is recognised as back-pressure, as
// go-sql-driver's is.
func (s *budgetServer) testGoMySQLRefusal(t *testing.T) {
	addr := s.i.Host() + ":" + strconv.Itoa(s.i.Port())
	var conns []*client.Conn
	defer func() {
		for _, c := range conns {
			_ = c.Close()
		}
	}()
	var err error
	for range budgetMaxConnections + 2 {
		var c *client.Conn
		if c, err = client.Connect(addr, s.db.User, s.db.Password, ""); err != nil {
			break
		}
		conns = append(conns, c)
	}
	if err == nil {
		t.Fatalf("%d connections with max_connections=%d, none refused", len(conns), budgetMaxConnections)
	}
	if !IsTooManyConnections(err) {
		t.Errorf("refusal after %d connections %v (%T) is not Too many connections", len(conns), err, err)
	}
	if IsTooManyConnections(errors.New("Too many connections")) {
		t.Error("a bare error text counts as Too many connections; want the server's error number")
	}
}

// testReserve: callers that each need several connections at once (dumps:
// readers and a lock session) and start together get them one group
// after the other, within the limit; taking them one by one instead, each
// would hold part and wait for the rest from the others (the control
// half shows that wait).
func (s *budgetServer) testReserve(t *testing.T) {
	const limit, group, callers = 5, 3, 4
	// holdGroup takes group connections of db, all held at once after
	// ready is closed, for 100ms.
	holdGroup := func(ctx context.Context, b *Budget, db *sql.DB, reserve bool, ready <-chan struct{}, taken *sync.WaitGroup) error {
		release := func() {}
		if reserve {
			var err error
			if release, err = b.Reserve(ctx, db, group); err != nil {
				taken.Done()
				return err
			}
		}
		defer release()
		var conns []*sql.Conn
		defer func() {
			for _, c := range conns {
				_ = c.Close()
			}
		}()
		for i := range group {
			c, err := db.Conn(ctx)
			if err == nil {
				err = c.PingContext(ctx)
			}
			if err != nil {
				if i == 0 {
					taken.Done()
				}
				return err
			}
			conns = append(conns, c)
			if i == 0 {
				taken.Done()
				if !reserve {
					// Every caller holds its first connection before any
					// takes the rest: the worst case of callers starting
					// together, which reserving rules out.
					<-ready
				}
			}
		}
		release()
		time.Sleep(100 * time.Millisecond)
		return nil
	}
	run := func(reserve bool) (error, ServerStats) {
		b := NewBudget(BudgetOptions{Kind: Sources, Limit: limit, MaxWait: 3 * time.Second})
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		defer cancel()
		ready := make(chan struct{})
		var taken, wg sync.WaitGroup
		errl := make([]error, callers)
		taken.Add(callers)
		for i := range callers {
			db := s.open(t, b, fmt.Sprintf("dump%d", i), group+1)
			defer db.Close() // the next run has the server's connections
			wg.Go(func() { errl[i] = holdGroup(ctx, b, db, reserve, ready, &taken) })
		}
		if !reserve {
			taken.Wait()
		}
		close(ready)
		wg.Wait()
		return errors.Join(errl...), stats(t, b)
	}
	if err, st := run(false); errs.Code(err) != CodeSourceConnections {
		t.Errorf("groups taken one by one: %v (stats %+v); want them to wait for each other into the %s error", err, st, CodeSourceConnections)
	}
	began := time.Now()
	err, st := run(true)
	if err != nil {
		t.Fatalf("reserved groups: %v", err)
	}
	t.Logf("%d reserved groups of %d connections with a limit of %d in %s; stats %+v", callers, group, limit, time.Since(began).Round(time.Millisecond), st)
	if st.Open > limit || st.Waiting != 0 || st.Timeouts != 0 {
		t.Errorf("stats %+v: want at most %d connections (idle now), no one waiting or timed out", st, limit)
	}
}
