package e2e

import (
	"bufio"
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dmworker/dm-worker/tests/mariadbtest"
	"github.com/dmworker/dm-worker/tests/testutil"
)

// Issue 12's "Endpoint change" acceptance: with GTID on, the bound source's
// `from` is switched to a native GTID replica of it while three streams
// run. The source worker restarts once (one restart procedure, logged),
// every stream is stopped and saved, then started again from the same GTID
// set on the replica, and the events applied to empty copies reproduce the
// source across the switch.

// failoverStreams are the streams of the endpoint-change test and the
// tables each selects. No table with a FLOAT column: the FLOAT encoding is
// another test's concern.
var failoverStreams = []struct {
	name   string
	tables []string // "db.table", keys of streamTablesAll
}{
	{"fo-accounts", []string{crashDB + ".accounts"}},
	{"fo-users", []string{crashDB + ".users"}},
	{"fo-both", []string{crashDB + ".accounts", crashDB + ".users"}},
}

// restartMsg is what the worker logs when the bound source's config
// changed (worker/bound_reconcile.go).
const restartMsg = "bound source or its config changed; restarting the source worker"

// TestStreamEndpointChangeFailover switches the source's `from` to a GTID
// replica of it while three file streams run a workload's changes.
//
// The writes stop for the switch itself: the replica must hold every GTID a
// stream saved before the streams ask it for the binlog after that set (a
// replica behind the saved set would refuse the dump, which is a failover
// the operator must not do). They stop, the replica catches up
// (MASTER_GTID_WAIT), `dmctl source update` points `from` at the replica,
// and once every stream reads the replica's binlog the workload writes to
// the primary again, the replica replicating it.
func TestStreamEndpointChangeFailover(t *testing.T) {
	primary := mariadbtest.Start(t, mariadbtest.Options{Name: "fo-primary", Binlog: true, FastCommit: true})
	replica := mariadbtest.Start(t, mariadbtest.Options{Name: "fo-replica", Binlog: true, FastCommit: true})
	cp := mariadbtest.Start(t, mariadbtest.Options{Name: "fo-copy", FastCommit: true})
	startNativeReplica(t, primary, replica)

	r := &replication{t: t, src: primary, tgt: cp, c: newEtcdCluster(t)}
	r.srcDB, r.tgtDB = primary.DB(t), cp.DB(t)
	r.wopts = workerOptions{name: replWorker, endpoints: r.c.endpoints, prefix: r.c.prefix, dataDir: t.TempDir(),
		args: []string{"--log-format", "json"}}
	e := &streamEnv{replication: r, copyDB: copyPool(t, cp)}
	primary.Exec(t, "CREATE DATABASE "+crashDB)
	for _, tb := range crashTables {
		primary.Exec(t, tb.ddl)
	}
	replicaDB := replica.DB(t)
	waitReplicaHas(t, replicaDB, primaryGTID(t, primary))

	r.w = startWorker(t, r.wopts)
	r.c.waitWorkerAlive(replWorker)
	r.c.ok("source", "create", gtidSourceFile(t, primary.Port()), "--worker", replWorker)
	dirs := map[string]string{}
	for _, s := range failoverStreams {
		dirs[s.name] = t.TempDir()
		e.c.ok("stream", "create", writeFile(t, s.name+".yaml", fmt.Sprintf(`name: %s
source-id: %s
block-allow-list: {do-tables: [%s]}
format: debezium
sink: %s
`, s.name, replSource, tableRefs(s.tables), fileSink(dirs[s.name]))))
	}
	names := make([]string, len(failoverStreams))
	for i, s := range failoverStreams {
		names[i] = s.name
		e.waitStream(s.name, 30*time.Second, "streaming", streamDoc.streaming)
	}

	// Before the switch: a workload on the primary, read from the primary.
	wl := startWorkload(t, e.srcDB, 2)
	wl.waitCommits(t, 30*time.Second, 400)
	if err := wl.stop(); err != nil {
		t.Fatalf("workload before the switch: %v", err)
	}
	t.Logf("workload before the switch: %s", wl)
	gtid := primaryGTID(t, primary)
	waitReplicaHas(t, replicaDB, gtid)
	e.waitCaughtUp(30*time.Second, names...)
	for _, n := range names {
		if d, err := e.stream(n); err != nil || d.CheckpointGTID != gtid {
			t.Fatalf("stream %s before the switch: %v (%v); want checkpoint-gtid %q, the primary's gtid_binlog_pos", n, d, err, gtid)
		}
	}

	// The switch.
	logBefore := len(readWorkerLog(t, e.w.logFile))
	switched := time.Now()
	e.c.ok("source", "update", gtidSourceFile(t, replica.Port()))
	var restarted map[string]logLine
	testutil.Eventually(t, 30*time.Second, "every stream reads the binlog again after the restart", func() error {
		lines := readWorkerLog(t, e.w.logFile)
		i := slices.IndexFunc(lines, func(l logLine) bool { return l.Msg == restartMsg })
		if i < 0 {
			return fmt.Errorf("no %q in the worker's log", restartMsg)
		}
		restarted = map[string]logLine{}
		for _, l := range lines[i:] {
			if l.Msg == "stream reads binlog" {
				restarted[l.Stream] = l
			}
		}
		if len(restarted) < len(names) {
			return fmt.Errorf("after the restart only %d of %d streams read the binlog: %v", len(restarted), len(names), restarted)
		}
		return nil
	})
	for _, n := range names {
		e.waitStream(n, 30*time.Second, "streaming after the switch", streamDoc.streaming)
	}
	t.Logf("the streams read the replica's binlog %s after dmctl source update", time.Since(switched).Round(time.Millisecond))
	for _, n := range names {
		if l := restarted[n]; l.GTID != gtid {
			t.Errorf("stream %s restarted from GTID set %q (log: %s); want %q, the set it saved", n, l.GTID, l.raw, gtid)
		}
	}
	// The streams of a source share one reader (pkg/binlog/fanout): one
	// dump at least, on the new endpoint.
	if n := binlogDumps(t, replicaDB); n < 1 {
		t.Errorf("the replica serves %d binlog dumps, want the streams' shared one at least: the streams do not read the new endpoint", n)
	}

	// After the switch: the workload goes on on the primary; the replica
	// replicates it and the streams read it there.
	wl2 := startWorkload(t, e.srcDB, 2)
	wl2.waitCommits(t, 30*time.Second, 400)
	if err := wl2.stop(); err != nil {
		t.Fatalf("workload after the switch: %v", err)
	}
	t.Logf("workload after the switch: %s", wl2)
	gtid2 := primaryGTID(t, primary)
	waitReplicaHas(t, replicaDB, gtid2)
	waitCaughtUpWith(e, replica, gtid2, 30*time.Second, names...)
	testutil.Eventually(t, 10*time.Second, "the primary serves only the replica's binlog dump, no stream's", func() error {
		if n := binlogDumps(t, r.srcDB); n != 1 {
			return fmt.Errorf("the primary serves %d binlog dumps", n)
		}
		return nil
	})

	checkRestartLog(t, readWorkerLog(t, e.w.logFile)[logBefore:], readWorkerLog(t, e.w.logFile), names)
	for _, s := range failoverStreams {
		e.verifyAppliedTables(strings.ReplaceAll(s.name, "-", "_"), e.readFile(dirs[s.name], s.name), s.tables)
	}
}

// gtidSourceFile writes the source config with enable-gtid reading from
// the MariaDB at port.
func gtidSourceFile(t *testing.T, port int) string {
	t.Helper()
	return writeFile(t, "source.yaml", fmt.Sprintf(`source-id: %s
flavor: mariadb
enable-gtid: true
from: {host: 127.0.0.1, port: %d, user: root, password: ""}
checker: {check-enable: true, backoff-min: 200ms, backoff-max: 1s}
`, replSource, port))
}

// tableRefs is a YAML flow list of do-tables for "db.table" names.
func tableRefs(tables []string) string {
	refs := make([]string, len(tables))
	for i, n := range tables {
		db, tb, _ := strings.Cut(n, ".")
		refs[i] = fmt.Sprintf("{db-name: %s, tbl-name: %s}", db, tb)
	}
	return strings.Join(refs, ", ")
}

// startNativeReplica makes replica a MariaDB GTID replica of primary
// (MASTER_USE_GTID=slave_pos) from primary's current GTID position; the
// replica's binlog (log_slave_updates) carries the primary's GTIDs.
func startNativeReplica(t *testing.T, primary, replica *mariadbtest.Instance) {
	t.Helper()
	replica.Exec(t, "SET GLOBAL gtid_slave_pos = ?", primaryGTID(t, primary))
	replica.Exec(t, fmt.Sprintf("CHANGE MASTER TO MASTER_HOST='127.0.0.1', MASTER_PORT=%d, MASTER_USER='%s', MASTER_PASSWORD='', "+
		"MASTER_USE_GTID=slave_pos, MASTER_CONNECT_RETRY=1", primary.Port(), mariadbtest.RootUser))
	replica.Exec(t, "START SLAVE")
}

// primaryGTID is the primary's @@gtid_binlog_pos.
func primaryGTID(t *testing.T, in *mariadbtest.Instance) string {
	t.Helper()
	_, _, gtid := in.MasterStatus(t)
	return gtid
}

// waitReplicaHas waits until the replica executed gtid (MASTER_GTID_WAIT);
// on a timeout it fails with the replica's SHOW SLAVE STATUS errors.
func waitReplicaHas(t *testing.T, replica *sql.DB, gtid string) {
	t.Helper()
	if gtid == "" {
		return
	}
	ctx, cancel := context.WithTimeout(t.Context(), 40*time.Second)
	defer cancel()
	var res sql.NullInt64
	if err := replica.QueryRowContext(ctx, "SELECT MASTER_GTID_WAIT(?, 30)", gtid).Scan(&res); err != nil {
		t.Fatalf("MASTER_GTID_WAIT(%q) on the replica: %v", gtid, err)
	}
	if !res.Valid || res.Int64 != 0 {
		t.Fatalf("the replica did not reach GTID %q within 30s (MASTER_GTID_WAIT %v): %s", gtid, res, slaveErrors(t, replica))
	}
}

// slaveErrors is the replica's SHOW SLAVE STATUS running flags and errors.
func slaveErrors(t *testing.T, db *sql.DB) string {
	t.Helper()
	rows, err := db.Query("SHOW SLAVE STATUS")
	if err != nil {
		return err.Error()
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil || !rows.Next() {
		return fmt.Sprintf("SHOW SLAVE STATUS: no row (%v)", err)
	}
	vals := make([]sql.NullString, len(cols))
	ptrs := make([]any, len(cols))
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	if err := rows.Scan(ptrs...); err != nil {
		return err.Error()
	}
	var out []string
	for i, c := range cols {
		switch c {
		case "Slave_IO_Running", "Slave_SQL_Running", "Last_IO_Error", "Last_SQL_Error", "Gtid_IO_Pos":
			out = append(out, c+"="+vals[i].String)
		}
	}
	return strings.Join(out, ", ")
}

// binlogDumps counts the binlog dump connections the server of db serves.
func binlogDumps(t *testing.T, db *sql.DB) int {
	t.Helper()
	var n int
	if err := db.QueryRow("SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE COMMAND LIKE 'Binlog Dump%'").Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// waitCaughtUpWith waits until every stream in names acknowledged the
// whole binlog of in (its SHOW MASTER STATUS, read once) with checkpoint-gtid
// gtid.
func waitCaughtUpWith(e *streamEnv, in *mariadbtest.Instance, gtid string, d time.Duration, names ...string) {
	e.t.Helper()
	file, pos, _ := in.MasterStatus(e.t)
	want := fmt.Sprintf("%s:%d", file, pos)
	for _, n := range names {
		e.waitStream(n, d, fmt.Sprintf("checkpoint reaches %s's position %s with GTID set %q", in.Name(), want, gtid), func(s streamDoc) bool {
			return s.streaming() && s.Checkpoint == want && s.CheckpointGTID == gtid
		})
	}
}

// logLine is the part of one JSON line of the worker's log the test reads.
type logLine struct {
	Msg     string `json:"msg"`
	Stream  string `json:"stream"`
	GTID    string `json:"gtid"`
	Streams int    `json:"streams"`
	raw     string
}

// readWorkerLog reads the worker's JSON log (--log-format json).
func readWorkerLog(t *testing.T, path string) []logLine {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read the worker's log: %v", err)
	}
	var out []logLine
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 1<<20), 16<<20)
	for sc.Scan() {
		var l logLine
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			continue // a line being written, or not from zap
		}
		l.raw = sc.Text()
		out = append(out, l)
	}
	return out
}

// checkRestartLog checks the restart procedure in the log: since holds the
// lines from the switch on, all the whole log. The source worker restarted
// once; every stream was stopped once, then all were saved together
// ("stream tasks stopped and saved" of all of them), then each started and
// read the binlog once more.
func checkRestartLog(t *testing.T, since, all []logLine, names []string) {
	t.Helper()
	count := func(lines []logLine, msg, stream string) int {
		n := 0
		for _, l := range lines {
			if l.Msg == msg && (stream == "" || l.Stream == stream) {
				n++
			}
		}
		return n
	}
	if n := count(all, restartMsg, ""); n != 1 {
		t.Errorf("%q logged %d times, want once (one restart procedure)", restartMsg, n)
	}
	saved := slices.IndexFunc(since, func(l logLine) bool { return l.Msg == "stream tasks stopped and saved" })
	if saved < 0 {
		t.Fatalf("no \"stream tasks stopped and saved\" after the switch")
	}
	if since[saved].Streams != len(names) || count(since, "stream tasks stopped and saved", "") != 1 {
		t.Errorf("stopped and saved: %s, %d times; want all %d streams, once", since[saved].raw,
			count(since, "stream tasks stopped and saved", ""), len(names))
	}
	for _, n := range names {
		if c := count(since[:saved], "stream stopped", n); c != 1 {
			t.Errorf("stream %s: %d \"stream stopped\" before they were all saved, want 1", n, c)
		}
		if c := count(since[saved:], "stream stopped", n); c != 0 {
			t.Errorf("stream %s: stopped again %d times after the restart", n, c)
		}
		if c := count(since[:saved], "stream task running", n); c != 0 {
			t.Errorf("stream %s: started %d times before every stream was saved", n, c)
		}
		if c := count(since[saved:], "stream task running", n); c != 1 {
			t.Errorf("stream %s: started %d times after the restart, want once", n, c)
		}
		if c := count(all, "stream reads binlog", n); c != 2 {
			t.Errorf("stream %s: %d \"stream reads binlog\" in the whole run, want 2 (before and after the switch)", n, c)
		}
	}
}
