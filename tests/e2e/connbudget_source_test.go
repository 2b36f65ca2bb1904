package e2e

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/dmworker/dm-worker/pkg/dbconn"
	"github.com/dmworker/dm-worker/tests/mariadbtest"
	"github.com/dmworker/dm-worker/tests/testutil"
)

// Issue 23 part 3's acceptance: the worker's connections to a source are
// one bounded budget, so 200 tasks leave the source's connections to its
// other clients.

// Sizes of the source-side test.
const (
	csTasks = 200
	// csLimit is the worker's default source-connection-limit.
	csLimit = dbconn.DefaultSourceConnectionLimit
	// csWriters are the test's writer connections to the source, for
	// csWrites: every task reads the whole relay, so 200 tasks decode
	// each event 200 times (16 writers for 20s, 26k transactions, took
	// more than 3 minutes to catch up on two busy cores).
	csWriters = 4
	// csWrites is how long they write; csConverge bounds everything from
	// the first task's creation to every database being equal.
	csWrites   = 8 * time.Second
	csConverge = 3 * time.Minute
)

// csSource are the accounts of the source: the worker's, without SUPER
// (MariaDB lets SUPER past max_connections by one), and a probe with no
// privilege standing for any other client.
const (
	csUser, csPassword       = "dmw", "dmw-pw"
	csProbeUser, csProbePass = "probe", "probe-pw"
)

// csSample is what one look at the source and the worker saw.
type csSample struct {
	at time.Time
	// worker and binlog are the worker's threads on the source
	// (PROCESSLIST of its user) and those of them that are binlog dumps.
	worker, binlog, threadsConnected int
	// probe is the probe client's failure to connect, nil when it could.
	probe error
	// status is the worker's source-connections, nil when unread.
	status *dbconn.SourceConnections
}

// csWatch samples the source every 250ms until stopped.
type csWatch struct {
	stop func()

	mu      sync.Mutex
	samples []csSample // guarded by mu
}

func (cw *csWatch) all() []csSample {
	cw.mu.Lock()
	defer cw.mu.Unlock()
	return append([]csSample(nil), cw.samples...)
}

// csWatchSource starts sampling src (over admin, a pool of its own) and
// the worker's status.
func csWatchSource(t *testing.T, src *mariadbtest.Instance, w *workerProc) *csWatch {
	t.Helper()
	admin := src.DB(t)
	admin.SetMaxOpenConns(1)
	probeCfg := mysql.NewConfig()
	probeCfg.User, probeCfg.Passwd, probeCfg.Net, probeCfg.Addr = csProbeUser, csProbePass, "tcp", src.Host()+":"+strconv.Itoa(src.Port())
	probeCfg.Timeout = 5 * time.Second
	ctx, cancel := context.WithCancel(context.Background())
	cw := &csWatch{}
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			s := csSample{at: time.Now(), worker: -1}
			qctx, qcancel := context.WithTimeout(ctx, 5*time.Second)
			err := admin.QueryRowContext(qctx, "SELECT COUNT(*), COALESCE(SUM(COMMAND = 'Binlog Dump'), 0), "+
				"(SELECT VARIABLE_VALUE FROM information_schema.GLOBAL_STATUS WHERE VARIABLE_NAME = 'Threads_connected') "+
				"FROM information_schema.PROCESSLIST WHERE USER = ?", csUser).Scan(&s.worker, &s.binlog, &s.threadsConnected)
			if err != nil && ctx.Err() == nil {
				s.probe = fmt.Errorf("the admin connection's sample: %w", err)
			}
			if s.probe == nil {
				s.probe = csProbe(qctx, probeCfg)
			}
			qcancel()
			if res, err := httpDo(http.MethodGet, w.url("/api/v1/status"), ""); err == nil && res.code == http.StatusOK {
				var st cbStatus
				if json.Unmarshal([]byte(res.body), &st) == nil {
					s.status = st.SourceConns
				}
			}
			if ctx.Err() != nil {
				return
			}
			cw.mu.Lock()
			cw.samples = append(cw.samples, s)
			cw.mu.Unlock()
			select {
			case <-ctx.Done():
				return
			case <-time.After(250 * time.Millisecond):
			}
		}
	})
	var once sync.Once
	cw.stop = func() { once.Do(func() { cancel(); wg.Wait() }) }
	t.Cleanup(cw.stop)
	return cw
}

// csProbe connects as a fresh client and closes the connection.
func csProbe(ctx context.Context, cfg *mysql.Config) error {
	conn, err := mysql.NewConnector(cfg)
	if err != nil {
		return err
	}
	db := sql.OpenDB(conn)
	defer db.Close()
	if err := db.PingContext(ctx); err != nil {
		return fmt.Errorf("a fresh client cannot connect to the source: %w", err)
	}
	return nil
}

// TestManyTasksShareSourceConnections runs 200 incremental tasks of one
// source, through the relay, on a source with MariaDB's default
// max_connections (151) and no flavor in the source config (the worker
// detects it). Within 3 minutes every task must run and every database
// equal the source; the worker's connections to the source must never be
// more than its budget (16) plus its binlog readers (the relay's one); a
// fresh client must always be able to log in; status and metrics show
// the source's connections.
func TestManyTasksShareSourceConnections(t *testing.T) {
	src := mariadbtest.Start(t, mariadbtest.Options{Name: "cs-source", Binlog: true, FastCommit: true,
		ExtraConfig: []string{"max_connections=151"}}) // MariaDB's default; the harness raises it
	tgt := mariadbtest.Start(t, mariadbtest.Options{Name: "cs-target", FastCommit: true})
	for _, q := range []string{
		"CREATE USER '" + csUser + "'@'127.0.0.1' IDENTIFIED BY '" + csPassword + "'",
		"GRANT SELECT, RELOAD, REPLICATION SLAVE, REPLICATION CLIENT ON *.* TO '" + csUser + "'@'127.0.0.1'",
		"CREATE USER '" + csProbeUser + "'@'127.0.0.1' IDENTIFIED BY '" + csProbePass + "'",
	} {
		src.Exec(t, q)
	}
	srcDB, tgtDB := src.DB(t), tgt.DB(t)
	srcDB.SetMaxOpenConns(csWriters + 2)
	tgtDB.SetMaxOpenConns(2)
	c := newEtcdCluster(t)
	w := startWorker(t, workerOptions{name: "w1", endpoints: c.endpoints, prefix: c.prefix, args: []string{"--keepalive-ttl", "10s"}})
	c.waitWorkerAlive("w1")

	watch := csWatchSource(t, src, w)
	// Checked also when the run fails: the samples say why.
	defer func() {
		watch.stop()
		csCheckSamples(t, watch.all())
	}()
	created := time.Now()
	set := cbSet{tasks: csTasks, from: `{host: 127.0.0.1, port: %d, user: ` + csUser + `, password: ` + csPassword + `}`}
	set.start(t, c, src, tgt)
	t.Logf("%d tasks created in %s", csTasks, time.Since(created).Round(time.Millisecond))
	// The bound counts from the last task's creation: writing 200 tasks
	// with dmctl is dmctl's and etcd's time (over two minutes on one busy
	// core), not the worker's.
	began := time.Now()
	set.createTables(t, src, tgtDB, csConverge-time.Since(began))
	t.Logf("every task created its table on the target %s after the last task's creation", time.Since(began).Round(time.Millisecond))
	commits := set.write(t, srcDB, csWriters, csWrites)
	t.Logf("writers stopped after %s: %d transactions on %d databases", csWrites, commits, csTasks)
	set.waitEqual(t, srcDB, tgtDB, csConverge-time.Since(began))
	converged := time.Since(began)
	t.Logf("every database equal %s after the last task's creation", converged.Round(time.Millisecond))
	csWaitRunning(t, w, csConverge-time.Since(began))
	t.Logf("every task Running in Sync without errors %s after the last task's creation", time.Since(began).Round(time.Millisecond))
	csCheckAfter(t, w, src)
}

// csWaitRunning waits up to d until status shows every subtask Running in
// Sync without errors.
func csWaitRunning(t *testing.T, w *workerProc, d time.Duration) {
	t.Helper()
	testutil.Eventually(t, max(d, time.Second), "every subtask Running in Sync without errors", func() error {
		res, err := httpDo(http.MethodGet, w.url("/api/v1/status"), "")
		if err != nil {
			return err
		}
		var st cbStatus
		if err := json.Unmarshal([]byte(res.body), &st); err != nil {
			return err
		}
		if len(st.Subtasks) != csTasks {
			return fmt.Errorf("%d subtasks, want %d", len(st.Subtasks), csTasks)
		}
		for _, s := range st.Subtasks {
			if s.Stage != "Running" || s.Unit != "Sync" || len(s.Errors) > 0 {
				return fmt.Errorf("subtask %s: stage %s unit %s errors %+v", s.Name, s.Stage, s.Unit, s.Errors)
			}
		}
		return nil
	})
}

// csCheckSamples checks every sample: the worker's threads on the source
// within its budget plus its binlog readers, a probe that connected, and a
// status within the limit.
func csCheckSamples(t *testing.T, samples []csSample) {
	t.Helper()
	if len(samples) < 10 {
		t.Fatalf("%d samples of the source; want at least 10", len(samples))
	}
	var peakWorker, peakBinlog, peakThreads, peakOpen, peakWaiting, probeFailures int
	for _, s := range samples {
		peakWorker, peakBinlog, peakThreads = max(peakWorker, s.worker), max(peakBinlog, s.binlog), max(peakThreads, s.threadsConnected)
		if s.worker > csLimit+s.binlog {
			t.Errorf("%s: the worker held %d connections to the source, %d of them binlog dumps; want at most the limit %d + the binlog readers",
				s.at.Format(time.StampMilli), s.worker, s.binlog, csLimit)
		}
		if s.binlog > 1 {
			t.Errorf("%s: %d binlog dumps of the worker on the source; want the relay's only", s.at.Format(time.StampMilli), s.binlog)
		}
		if s.probe != nil {
			probeFailures++
			t.Errorf("%s: %v", s.at.Format(time.StampMilli), s.probe)
		}
		if st := s.status; st != nil {
			peakOpen, peakWaiting = max(peakOpen, st.Open), max(peakWaiting, st.Waiting)
			if st.Open > st.Limit || st.Limit != csLimit {
				t.Errorf("%s: status source-connections %+v: want at most the limit %d open", s.at.Format(time.StampMilli), *st, csLimit)
			}
		}
	}
	t.Logf("%d samples over %s: the worker's threads on the source at most %d (binlog dumps %d), Threads_connected at most %d, "+
		"status open at most %d, waiting at most %d; %d probe failures",
		len(samples), samples[len(samples)-1].at.Sub(samples[0].at).Round(time.Second), peakWorker, peakBinlog, peakThreads,
		peakOpen, peakWaiting, probeFailures)
}

// csCheckAfter checks what the run left: status and metrics of the
// source's connections, one binlog reader (the relay), and no subtask
// paused or refused on the way.
func csCheckAfter(t *testing.T, w *workerProc, src *mariadbtest.Instance) {
	t.Helper()
	var st cbStatus
	res := get(t, w, "/api/v1/status")
	if err := json.Unmarshal([]byte(res.body), &st); err != nil {
		t.Fatalf("GET /api/v1/status: %v %s", err, res.body)
	}
	addr := src.Host() + ":" + strconv.Itoa(src.Port())
	if sc := st.SourceConns; sc == nil || sc.Source != addr || sc.Limit != csLimit || sc.BinlogReaders != 1 || sc.Open > csLimit {
		t.Errorf("status source-connections %+v; want source %s, limit %d, 1 binlog reader (the relay)", sc, addr, csLimit)
	} else {
		t.Logf("status source-connections after the run: %+v", *sc)
	}
	if n := src.QueryString(t, "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE COMMAND = 'Binlog Dump'"); n != "1" {
		t.Errorf("%s binlog readers on the source, want 1 (the relay)", n)
	}
	metrics := get(t, w, "/metrics").body
	for _, want := range []string{
		fmt.Sprintf("dm_worker_source_connections_limit{source=%q} %d", addr, csLimit),
		fmt.Sprintf("dm_worker_source_connections_binlog_readers{source=%q} 1", addr),
		fmt.Sprintf("dm_worker_source_connections_open{source=%q}", addr),
		fmt.Sprintf("dm_worker_source_connections_refused_total{source=%q}", addr),
	} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics has no %q", want)
		}
	}
	for _, line := range strings.Split(metrics, "\n") {
		if strings.HasPrefix(line, "dm_worker_auto_resumes_total") || strings.HasPrefix(line, "dm_worker_source_connections_") {
			t.Log(line)
		}
	}
	logText, err := os.ReadFile(w.logFile)
	if err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{"subtask failed", "auto-resumed", "Too many connections", "detect the server's flavor"} {
		if n := strings.Count(string(logText), bad); n > 0 {
			t.Errorf("the worker log has %d lines with %q; want none (no pause/resume)", n, bad)
		}
	}
	t.Logf("connections the source accepted in all: %s",
		src.QueryString(t, "SELECT VARIABLE_VALUE FROM information_schema.GLOBAL_STATUS WHERE VARIABLE_NAME = 'Connections'"))
}
