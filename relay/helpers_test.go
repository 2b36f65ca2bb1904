package relay

import (
	"bufio"
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
	"go.uber.org/zap/zaptest"

	"github.com/go-mysql-org/go-mysql/replication"

	"github.com/dmworker/dm-worker/config"
	"github.com/dmworker/dm-worker/pkg/binlog"
	"github.com/dmworker/dm-worker/tests/mariadbtest"
	"github.com/dmworker/dm-worker/tests/testutil"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// rowsTotal is how many rows the heavy workloads change; raise it (e.g. to
// 200000) for a longer soak.
const rowsTotal = 20000

// rowsMatch is the size of the relay-equals-source workload: the issue's
// 200k rows of mixed INSERT/UPDATE/DELETE.
const rowsMatch = 200000

func startSource(t *testing.T, opts mariadbtest.Options) *mariadbtest.Instance {
	t.Helper()
	opts.Binlog = true
	if opts.Name == "" {
		opts.Name = "source"
	}
	if opts.MaxBinlogSize == 0 {
		opts.MaxBinlogSize = 64 << 10
	}
	return mariadbtest.Start(t, opts)
}

func sourceConfig(inst *mariadbtest.Instance) *config.SourceConfig {
	return &config.SourceConfig{
		SourceID: "mysql-01",
		From:     config.DBConfig{Host: inst.Host(), Port: inst.Port(), User: mariadbtest.SourceUser, Password: mariadbtest.SourcePassword},
	}
}

func newRelay(t *testing.T, dir string, src *config.SourceConfig) *Relay {
	t.Helper()
	r, err := New(Config{Dir: dir, Source: src, Worker: "w1", Logger: zaptest.NewLogger(t), Metrics: NewMetrics(),
		BackoffMin: 50 * time.Millisecond, BackoffMax: 500 * time.Millisecond, MaxRetries: -1})
	if err != nil {
		t.Fatalf("relay.New: %v", err)
	}
	t.Cleanup(func() {
		if err := r.Close(); err != nil {
			t.Errorf("close relay: %v", err)
		}
	})
	return r
}

// running is a Run in the background.
type running struct {
	cancel context.CancelFunc
	done   chan error
}

func startRun(t *testing.T, r *Relay) *running {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	rn := &running{cancel: cancel, done: make(chan error, 1)}
	go func() { rn.done <- r.Run(ctx) }()
	t.Cleanup(func() { rn.stop(t) })
	return rn
}

// stop cancels the Run and waits for it; a second stop does nothing.
func (rn *running) stop(t *testing.T) {
	t.Helper()
	rn.cancel()
	select {
	case err, ok := <-rn.done:
		if ok && err != nil {
			t.Errorf("relay Run: %v", err)
		}
		if ok {
			close(rn.done)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("relay Run did not return within 30s of cancellation")
	}
}

// waitCaughtUp waits until the relay has written everything the source
// has and the source stays quiet for a moment (MariaDB writes
// Binlog_checkpoint events in the background after a rotation).
func waitCaughtUp(t *testing.T, r *Relay, inst *mariadbtest.Instance) {
	t.Helper()
	var last binlog.Location
	stableSince := time.Now()
	testutil.Eventually(t, 60*time.Second, "the relay to catch up with the source", func() error {
		file, pos, _ := inst.MasterStatus(t)
		cur := binlog.Location{Name: file, Pos: pos}
		if cur != last {
			last, stableSince = cur, time.Now()
		}
		w := r.Written()
		// The source appends Binlog_checkpoint events a while after the
		// last commit (when InnoDB has made older binlogs' transactions
		// durable), so the end counts only once it stayed put for a while.
		stable := time.Since(stableSince)
		if w.Name == cur.Name && w.Pos == cur.Pos && stable > 2*time.Second {
			return nil
		}
		return fmt.Errorf("relay written up to %s:%d (error: %v), source at %s:%d for %s",
			w.Name, w.Pos, r.Err(), cur.Name, cur.Pos, stable.Round(time.Millisecond))
	})
}

// workload changes about rows rows of db.t in transactions of mixed
// inserts, updates and deletes, plus a DDL now and then.
func workload(t *testing.T, inst *mariadbtest.Instance, rows int, seed uint64) {
	t.Helper()
	inst.Exec(t, "CREATE DATABASE IF NOT EXISTS db")
	inst.Exec(t, "CREATE TABLE IF NOT EXISTS db.t (id INT PRIMARY KEY, v INT, s VARCHAR(64))")
	db := inst.DB(t)
	rng := rand.New(rand.NewPCG(seed, 7))
	next := int(seed % 1000 * 1_000_000)
	for done := 0; done < rows; {
		tx, err := db.BeginTx(t.Context(), nil)
		if err != nil {
			t.Fatalf("begin: %v", err)
		}
		var b strings.Builder
		b.WriteString("INSERT INTO db.t VALUES ")
		for i := range 50 {
			if i > 0 {
				b.WriteByte(',')
			}
			fmt.Fprintf(&b, "(%d,%d,'row-%d')", next, rng.IntN(1000), next)
			next++
		}
		mustExec(t, tx.ExecContext, b.String())
		mustExec(t, tx.ExecContext, "UPDATE db.t SET v = v + 1 WHERE id BETWEEN ? AND ?", next-50, next-30)
		mustExec(t, tx.ExecContext, "DELETE FROM db.t WHERE id BETWEEN ? AND ?", next-10, next-1)
		if err := tx.Commit(); err != nil {
			t.Fatalf("commit: %v", err)
		}
		done += 50 + 21 + 10
		if rng.IntN(40) == 0 {
			inst.Exec(t, fmt.Sprintf("ALTER TABLE db.t COMMENT 'c%d'", next))
		}
	}
}

func mustExec(t *testing.T, exec func(context.Context, string, ...any) (sql.Result, error), q string, args ...any) {
	t.Helper()
	if _, err := exec(t.Context(), q, args...); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
}

// rawEvent is one event of a binlog file.
type rawEvent struct {
	file string
	pos  uint32 // end position
	typ  replication.EventType
	raw  []byte
}

// fileEvents returns the events of a binlog file after its format
// description event, up to the last complete one.
func fileEvents(t *testing.T, path string) []rawEvent {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatalf("open %s: %v", path, err)
	}
	defer func() { _ = f.Close() }()
	br := bufio.NewReader(f)
	if _, err := io.CopyN(io.Discard, br, magicSize); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	var buf bytes.Buffer
	var out []rawEvent
	first := true
	for {
		h, raw, err := readEvent(br, &buf)
		if errors.Is(err, io.EOF) || errors.Is(err, errPartial) {
			return out
		}
		if err != nil {
			t.Fatalf("read %s: %v", path, err)
		}
		if first {
			first = false
			if h.Type != replication.FORMAT_DESCRIPTION_EVENT {
				t.Fatalf("%s does not start with a format description event", path)
			}
			continue
		}
		out = append(out, rawEvent{file: filepath.Base(path), pos: h.LogPos, typ: h.Type, raw: bytes.Clone(raw)})
	}
}

// sourceBinlogs returns the events of every binlog file of inst.
func sourceBinlogs(t *testing.T, inst *mariadbtest.Instance) []rawEvent {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(inst.Dir(), "mariadb-bin.[0-9]*"))
	if err != nil {
		t.Fatal(err)
	}
	var out []rawEvent
	for _, f := range sortedBinlogs(files) {
		out = append(out, fileEvents(t, f)...)
	}
	return out
}

func sortedBinlogs(paths []string) []string {
	out := append([]string(nil), paths...)
	for i := range out {
		for j := i + 1; j < len(out); j++ {
			if (binlog.Location{Name: filepath.Base(out[j])}).Compare(binlog.Location{Name: filepath.Base(out[i])}) < 0 {
				out[i], out[j] = out[j], out[i]
			}
		}
	}
	return out
}

// relayBinlogs returns the events of every relay file in order.
func relayBinlogs(t *testing.T, dir string) []rawEvent {
	t.Helper()
	files, err := allFiles(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []rawEvent
	for _, f := range files {
		out = append(out, fileEvents(t, f.Path)...)
	}
	return out
}

// sameEvents fails unless got equals want event for event, byte for byte.
func sameEvents(t *testing.T, got, want []rawEvent) {
	t.Helper()
	n := min(len(got), len(want))
	for i := range n {
		g, w := got[i], want[i]
		if g.file != w.file || g.pos != w.pos || !bytes.Equal(g.raw, w.raw) {
			t.Fatalf("event %d differs: relay %s:%d %s, source %s:%d %s", i, g.file, g.pos, g.typ, w.file, w.pos, w.typ)
		}
	}
	if len(got) != len(want) {
		extra := want[n:]
		if len(got) > n {
			extra = got[n:]
		}
		var desc []string
		for _, e := range extra[:min(len(extra), 5)] {
			desc = append(desc, fmt.Sprintf("%s:%d %s", e.file, e.pos, e.typ))
		}
		t.Fatalf("relay has %d events, source %d; first unmatched: %v", len(got), len(want), desc)
	}
}

// checkMariadbBinlog runs mariadb-binlog over every relay file.
func checkMariadbBinlog(t *testing.T, dir string) {
	t.Helper()
	prog := mariadbtest.Program(t, "mariadb-binlog")
	files, err := allFiles(dir)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errCh := make(chan error, len(files))
	sem := make(chan struct{}, 4)
	for _, f := range files {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			var stderr bytes.Buffer
			cmd := exec.Command(prog, "--no-defaults", f.Path)
			cmd.Stdout = io.Discard
			cmd.Stderr = &stderr
			if err := cmd.Run(); err != nil || strings.Contains(strings.ToUpper(stderr.String()), "ERROR") {
				errCh <- fmt.Errorf("mariadb-binlog %s: %v: %s", f.Path, err, stderr.String())
			}
		}()
	}
	wg.Wait()
	close(errCh)
	for err := range errCh {
		t.Error(err)
	}
}

func chtimes(path string, at time.Time) error { return os.Chtimes(path, at, at) }
