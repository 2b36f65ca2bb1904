package relay

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"github.com/dmworker/dm-worker/config"
	"github.com/dmworker/dm-worker/pkg/errs"
	"github.com/dmworker/dm-worker/tests/mariadbtest"
	"github.com/dmworker/dm-worker/tests/testutil"
)

// The relay's files are the source's binlog, event for event, and parse
// with mariadb-binlog.
func TestRelayMatchesSource(t *testing.T) {
	src := startSource(t, mariadbtest.Options{FastCommit: true})
	dir := t.TempDir()
	r := newRelay(t, dir, sourceConfig(src))
	rn := startRun(t, r)
	workload(t, src, rowsMatch, 1)
	waitCaughtUp(t, r, src)
	rn.stop(t)

	subs, err := readIndex(dir)
	if err != nil || len(subs) != 1 || !strings.HasPrefix(subs[0].Name, "mariadb-") || !strings.HasSuffix(subs[0].Name, ".000001") {
		t.Fatalf("index = %v, %v; want one mariadb-<server-id>-<domain>.000001 subdirectory", subs, err)
	}
	got, want := relayBinlogs(t, dir), sourceBinlogs(t, src)
	if len(want) < 1000 {
		t.Fatalf("only %d source events; the workload is too small to test anything", len(want))
	}
	sameEvents(t, got, want)
	checkMariadbBinlog(t, dir)
	checkModes(t, dir)

	m, ok, err := readMeta(filepath.Join(dir, subs[0].Name))
	if err != nil || !ok {
		t.Fatalf("meta: %v %v", ok, err)
	}
	// The source may still add a Binlog_checkpoint event after the relay
	// stopped (MariaDB writes it in the background), so the meta is checked
	// against what the relay wrote, and its GTID against the source's.
	w := r.Written()
	_, _, gtid := src.MasterStatus(t)
	if m.BinlogName != w.Name || m.BinlogPos != w.Pos || m.BinlogGTID != gtid || w.GTID != gtid {
		t.Fatalf("meta = %+v, want %s %s", m, w, gtid)
	}
	if last := got[len(got)-1]; last.file != m.BinlogName || last.pos != m.BinlogPos {
		t.Fatalf("meta = %+v, but the relay ends at %s:%d", m, last.file, last.pos)
	}
}

// Killing the writer at random moments during heavy writes, and tearing
// the last file as a crash would, loses and duplicates nothing.
func TestRelayCrashRecovery(t *testing.T) {
	src := startSource(t, mariadbtest.Options{FastCommit: true})
	dir := t.TempDir()
	cfg := sourceConfig(src)
	writes := make(chan struct{})
	go func() {
		defer close(writes)
		workload(t, src, rowsTotal, 2)
	}()
	rng := rand.New(rand.NewPCG(3, 4))
	for i := range 10 {
		r := newRelay(t, dir, cfg)
		rn := startRun(t, r)
		select {
		case <-time.After(time.Duration(50+rng.IntN(400)) * time.Millisecond):
		case <-writes:
		}
		rn.stop(t)
		if err := r.Close(); err != nil {
			t.Fatal(err)
		}
		tearLastFile(t, dir, rng, i)
	}
	<-writes
	r := newRelay(t, dir, cfg)
	rn := startRun(t, r)
	waitCaughtUp(t, r, src)
	rn.stop(t)
	sameEvents(t, relayBinlogs(t, dir), sourceBinlogs(t, src))
	checkMariadbBinlog(t, dir)
}

// tearLastFile simulates a crash: half of a transaction at the end of the
// last file (every other time) and a meta that lags behind the file.
func tearLastFile(t *testing.T, dir string, rng *rand.Rand, i int) {
	t.Helper()
	files, err := allFiles(dir)
	if err != nil || len(files) == 0 {
		return
	}
	last := files[len(files)-1]
	evs := fileEvents(t, last.Path)
	if i%2 == 0 && len(evs) > 4 {
		// Append the first events of a transaction plus a torn event.
		var tail []byte
		for _, e := range evs[len(evs)-4 : len(evs)-1] {
			tail = append(tail, e.raw...)
		}
		tail = append(tail, evs[len(evs)-1].raw[:len(evs[len(evs)-1].raw)/2]...)
		f, err := os.OpenFile(last.Path, os.O_WRONLY|os.O_APPEND, 0)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.Write(tail); err != nil {
			t.Fatal(err)
		}
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if rng.IntN(2) == 0 {
		// A meta from an older state.
		if err := writeMeta(filepath.Join(dir, last.Sub), Meta{BinlogName: last.Name, BinlogPos: 4}); err != nil {
			t.Fatal(err)
		}
	}
}

// When the source restarts, the relay reports the error and reconnects by
// itself.
func TestRelayReconnectsAfterSourceRestart(t *testing.T) {
	src := startSource(t, mariadbtest.Options{FastCommit: true})
	dir := t.TempDir()
	r := newRelay(t, dir, sourceConfig(src))
	rn := startRun(t, r)
	workload(t, src, 2000, 5)
	waitCaughtUp(t, r, src)
	src.Kill(t)
	testutil.WaitFor(t, 30*time.Second, "the relay to report the lost source", func() bool { return r.Err() != nil })
	src.Restart(t)
	workload(t, src, 2000, 6)
	waitCaughtUp(t, r, src)
	testutil.Eventually(t, 10*time.Second, "the error to clear", r.Err)
	rn.stop(t)
	sameEvents(t, relayBinlogs(t, dir), sourceBinlogs(t, src))
}

// A transaction far larger than flushSize streams to the relay file: the
// writer's memory stays bounded, readers never see it half written, a stop
// in its middle leaves a tail that recovery cuts, and the relay ends equal
// to the source.
func TestRelayLargeTransactionStreams(t *testing.T) {
	src := startSource(t, mariadbtest.Options{FastCommit: true})
	src.Exec(t, "CREATE DATABASE db")
	src.Exec(t, "CREATE TABLE db.big (id INT PRIMARY KEY, s VARCHAR(1000))")
	dir := t.TempDir()
	cfg := sourceConfig(src)
	r := newRelay(t, dir, cfg)
	rn := startRun(t, r)
	waitCaughtUp(t, r, src)

	// About 60 MB of row events in one transaction.
	const rows = 60000
	db := src.DB(t)
	bigTxn := func(from int) error {
		_, err := db.ExecContext(t.Context(),
			fmt.Sprintf("INSERT INTO db.big SELECT seq, REPEAT('x', 1000) FROM db.seq_%d_to_%d", from, from+rows-1))
		return err
	}
	committed := make(chan error, 1)
	go func() { committed <- bigTxn(1) }()
	// Stop the relay while the transaction is only partly in the file: the
	// file is longer than what readers are allowed to read.
	spilled := func() error {
		r.mu.Lock()
		active := r.active
		r.mu.Unlock()
		if active.name == "" {
			return errors.New("no active relay file")
		}
		st, err := os.Stat(filepath.Join(dir, active.sub, active.name))
		if err != nil {
			return err
		}
		if st.Size() <= active.size {
			return fmt.Errorf("%s holds %d bytes, readers may read %d: nothing beyond", active.name, st.Size(), active.size)
		}
		return nil
	}
	testutil.Eventually(t, 60*time.Second, "part of the large transaction in the relay file", spilled)
	rn.stop(t)
	if err := <-committed; err != nil {
		t.Fatal(err)
	}

	r = newRelay(t, dir, cfg)
	rn = startRun(t, r)
	if err := bigTxn(rows + 1); err != nil {
		t.Fatal(err)
	}
	waitCaughtUp(t, r, src)
	rn.stop(t)
	sameEvents(t, relayBinlogs(t, dir), sourceBinlogs(t, src))
	checkMariadbBinlog(t, dir)
	if peak := r.pendingPeak.Load(); peak > 2*flushSize {
		t.Errorf("the writer held %d bytes unwritten, want at most about flushSize (%d)", peak, flushSize)
	}
}

// A source that refuses every connection fails resumably: Run retries with
// backoff and gives up after MaxRetries failures in a row, returning the
// last one.
func TestRelayGivesUpAfterMaxRetries(t *testing.T) {
	src := &config.SourceConfig{SourceID: "mysql-01", Flavor: config.FlavorMariaDB,
		From: config.DBConfig{Host: "127.0.0.1", Port: testutil.MustFreePort(t), User: "nobody"}}
	m := NewMetrics()
	r, err := New(Config{Dir: t.TempDir(), Source: src, Worker: "w1", Logger: zaptest.NewLogger(t), Metrics: m,
		BackoffMin: 10 * time.Millisecond, BackoffMax: 20 * time.Millisecond, MaxRetries: 3})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := r.Close(); err != nil {
			t.Errorf("close relay: %v", err)
		}
	})
	done := make(chan error, 1)
	go func() { done <- r.Run(t.Context()) }()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "giving up after 3 failures in a row") || !errs.IsResumable(err) {
			t.Fatalf("Run = %v, want it to give up after 3 resumable failures", err)
		}
		if r.Err() == nil {
			t.Fatal("Err is nil after Run gave up; want the last failure")
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Run did not give up within 30s")
	}
}
