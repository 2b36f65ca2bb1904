package worker

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"github.com/dmworker/dm-worker/config"
	"github.com/dmworker/dm-worker/pkg/binlog"
	"github.com/dmworker/dm-worker/pkg/stage"
	"github.com/dmworker/dm-worker/tests/mariadbtest"
	"github.com/dmworker/dm-worker/tests/testutil"
)

// relayDirSize is the total size of the files under dir.
func relayDirSize(t *testing.T, dir string) int64 {
	t.Helper()
	var n int64
	err := filepath.Walk(dir, func(_ string, info os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		if info.Mode().IsRegular() && !strings.HasSuffix(info.Name(), ".meta") && !strings.HasSuffix(info.Name(), ".index") {
			n += info.Size()
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// relayDirKeepsSize fails t when the files under dir grow from size bytes
// within d.
func relayDirKeepsSize(t *testing.T, dir string, size int64, d time.Duration) {
	t.Helper()
	testutil.Consistently(t, d, "relay files keep their size while Paused", func() error {
		if n := relayDirSize(t, dir); n != size {
			return fmt.Errorf("grew from %d to %d bytes", size, n)
		}
		return nil
	})
}

func TestFileRelayStages(t *testing.T) {
	src := mariadbtest.Start(t, mariadbtest.Options{Name: "source", Binlog: true, FastCommit: true, MaxBinlogSize: 16 << 10})
	src.Exec(t, "CREATE DATABASE db")
	src.Exec(t, "CREATE TABLE db.t (id INT PRIMARY KEY, s VARCHAR(200))")
	cfg := &config.SourceConfig{SourceID: "mysql-01", From: config.DBConfig{
		Host: src.Host(), Port: src.Port(), User: mariadbtest.SourceUser, Password: mariadbtest.SourcePassword}}
	dir := t.TempDir()
	factory := NewRelayFactory(dir, RelayOptions{Worker: "w1", MasterStatusInterval: 50 * time.Millisecond})
	rh, err := factory(t.Context(), cfg, zaptest.NewLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	h := rh.(*FileRelay)
	defer h.Close()
	if h.Stage() != stage.New {
		t.Fatalf("stage = %s, want New", h.Stage())
	}
	ctx := t.Context()
	if err := h.Start(ctx); err != nil {
		t.Fatal(err)
	}
	insert := func(from, to int) {
		for i := from; i < to; i++ {
			src.Exec(t, "INSERT INTO db.t VALUES (?, REPEAT('x', 200))", i)
		}
	}
	caughtUp := func() error {
		file, pos, _ := src.MasterStatus(t)
		master := binlog.Location{Name: file, Pos: pos}.String()
		if st := h.Status(); st.RelayBinlog != master || st.MasterBinlog != st.RelayBinlog {
			return fmt.Errorf("source at %s; relay at %s, its master at %s", master, st.RelayBinlog, st.MasterBinlog)
		}
		return nil
	}
	insert(0, 100)
	testutil.Eventually(t, 30*time.Second, "relay to catch up while Running", caughtUp)
	st := h.Status()
	if st.Stage != stage.Running || st.RelayDir != dir || st.RelayBinlogGTID == "" || len(st.Errors) != 0 {
		t.Fatalf("status = %+v", st)
	}

	if err := h.Pause(ctx); err != nil {
		t.Fatal(err)
	}
	if h.Stage() != stage.Paused || !h.ExplicitlyPaused() {
		t.Fatalf("after Pause: stage %s, explicit %v", h.Stage(), h.ExplicitlyPaused())
	}
	if err := h.AutoResume(ctx); err == nil {
		t.Fatal("AutoResume resumed an explicitly paused relay")
	}
	size := relayDirSize(t, dir)
	insert(100, 300)
	// Paused: nothing may grow. Give a running relay ample time to show up.
	relayDirKeepsSize(t, dir, size, 500*time.Millisecond)

	if err := h.Resume(ctx); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 30*time.Second, "relay to catch up after Resume", caughtUp)

	// A reader blocks purging its file: 409 purge-forbidden naming it.
	rd := h.NewReader("sync-task1")
	defer rd.Close()
	if _, err := rd.Open(ctx, binlog.Location{Name: "mariadb-bin.000002", Pos: 4}); err != nil {
		t.Fatal(err)
	}
	_, err = h.Purge(ctx, PurgeRequest{Filename: "mariadb-bin.000003"})
	var apiErr *APIError
	if !errors.As(err, &apiErr) || apiErr.Status != http.StatusConflict || apiErr.Code != CodePurgeForbidden || !strings.Contains(apiErr.Message, "sync-task1") {
		t.Fatalf("purge past a reader: %v, want 409 purge-forbidden naming sync-task1", err)
	}
	purged, err := h.Purge(ctx, PurgeRequest{Inactive: true})
	if err != nil || len(purged) != 1 || purged[0] != "mariadb-bin.000001" {
		t.Fatalf("purge inactive = %v, %v; want [mariadb-bin.000001]", purged, err)
	}

	h.Close()
	if h.Stage() != stage.Stopped {
		t.Fatalf("after Close: stage %s", h.Stage())
	}
	if err := h.Resume(context.Background()); err == nil {
		t.Fatal("Resume after Close succeeded")
	}
}

// A relay whose source is gone pauses with a resumable error once its
// retries run out, and AutoResume brings it back.
func TestFileRelayPausesOnResumableError(t *testing.T) {
	src := mariadbtest.Start(t, mariadbtest.Options{Name: "source", Binlog: true, FastCommit: true})
	cfg := &config.SourceConfig{SourceID: "mysql-01", From: config.DBConfig{
		Host: src.Host(), Port: src.Port(), User: mariadbtest.SourceUser, Password: mariadbtest.SourcePassword}}
	factory := NewRelayFactory(t.TempDir(), RelayOptions{Worker: "w1", BackoffMin: 20 * time.Millisecond, BackoffMax: 50 * time.Millisecond, MaxRetries: 3})
	rh, err := factory(t.Context(), cfg, zaptest.NewLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	h := rh.(*FileRelay)
	defer h.Close()
	if err := h.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, 30*time.Second, "relay to write", func() bool { return h.Status().RelayBinlog != "" })
	src.Stop(t)
	testutil.Eventually(t, 60*time.Second, "relay to pause with the error", func() error {
		if got := h.Stage(); got != stage.Paused {
			return fmt.Errorf("relay %s", got)
		}
		return nil
	})
	res := h.Result()
	if !res.Resumable() || h.ExplicitlyPaused() || len(h.Status().Errors) == 0 {
		t.Fatalf("result %+v, explicit %v; want a resumable error", res, h.ExplicitlyPaused())
	}
	src.Restart(t)
	if err := h.AutoResume(t.Context()); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 30*time.Second, "relay to run again", func() error {
		if st, res := h.Status(), h.Result(); h.Stage() != stage.Running || res != nil || len(st.Errors) != 0 {
			return fmt.Errorf("relay %s, result %+v, errors %v", h.Stage(), res, st.Errors)
		}
		return nil
	})
}
