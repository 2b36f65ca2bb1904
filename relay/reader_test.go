package relay

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/go-mysql-org/go-mysql/replication"

	"github.com/dmworker/dm-worker/pkg/binlog"
	"github.com/dmworker/dm-worker/pkg/errs"
	"github.com/dmworker/dm-worker/tests/mariadbtest"
	"github.com/dmworker/dm-worker/tests/testutil"
)

// nextOf reads events until one of type typ, failing after d.
func nextOf(t *testing.T, s binlog.Streamer, typ replication.EventType, d time.Duration) *replication.BinlogEvent {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), d)
	defer cancel()
	for {
		ev, err := s.GetEvent(ctx)
		if err != nil {
			t.Fatalf("waiting for a %s event: %v", typ, err)
		}
		if ev.Header.EventType == typ {
			return ev
		}
	}
}

func TestReaderPositionGTIDAndTail(t *testing.T) {
	src := startSource(t, mariadbtest.Options{FastCommit: true})
	dir := t.TempDir()
	r := newRelay(t, dir, sourceConfig(src))
	startRun(t, r)
	workload(t, src, 3000, 8)
	file, pos, gtid := src.MasterStatus(t)
	src.Exec(t, "INSERT INTO db.t VALUES (-1, 1, 'after-mark')")
	waitCaughtUp(t, r, src)

	t.Run("position", func(t *testing.T) {
		rd := r.NewReader("by-position")
		defer rd.Close()
		s, err := rd.Open(t.Context(), binlog.Location{Name: file, Pos: pos})
		if err != nil {
			t.Fatal(err)
		}
		rot := nextOf(t, s, replication.ROTATE_EVENT, time.Second)
		if re := rot.Event.(*replication.RotateEvent); string(re.NextLogName) != file || re.Position != uint64(pos) {
			t.Fatalf("first rotate = %s:%d, want %s:%d", re.NextLogName, re.Position, file, pos)
		}
		g := nextOf(t, s, replication.MARIADB_GTID_EVENT, time.Second)
		if g.Header.LogPos-g.Header.EventSize != pos {
			t.Fatalf("first transaction starts at %d, want %d", g.Header.LogPos-g.Header.EventSize, pos)
		}
	})
	t.Run("gtid", func(t *testing.T) {
		rd := r.NewReader("by-gtid")
		defer rd.Close()
		s, err := rd.Open(t.Context(), binlog.Location{GTID: gtid})
		if err != nil {
			t.Fatal(err)
		}
		g := nextOf(t, s, replication.MARIADB_GTID_EVENT, time.Second).Event.(*replication.MariadbGTIDEvent)
		want, err := parseGTIDSet(true, gtid)
		if err != nil {
			t.Fatal(err)
		}
		if d := want.domains[0]; g.GTID.SequenceNumber != d.seq+1 {
			t.Fatalf("first GTID = %d, want %d (after %s)", g.GTID.SequenceNumber, d.seq+1, gtid)
		}
	})
	t.Run("tail", func(t *testing.T) {
		rd := r.NewReader("tail")
		defer rd.Close()
		cur := r.Written()
		s, err := rd.Open(t.Context(), cur)
		if err != nil {
			t.Fatal(err)
		}
		nextOf(t, s, replication.FORMAT_DESCRIPTION_EVENT, time.Second)
		for i := range 5 {
			got := make(chan time.Time, 1)
			go func() {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				for {
					ev, err := s.GetEvent(ctx)
					if err != nil {
						close(got)
						return
					}
					if ev.Header.EventType == replication.XID_EVENT {
						got <- time.Now()
						return
					}
				}
			}()
			written := r.Notify()
			src.Exec(t, fmt.Sprintf("INSERT INTO db.t VALUES (%d, 1, 'tail')", -10-i))
			<-written
			flushed := time.Now()
			at, ok := <-got
			if !ok {
				t.Fatal("the reader did not see the new transaction")
			}
			if lag := at.Sub(flushed); lag > 100*time.Millisecond {
				t.Fatalf("the reader saw the transaction %v after the writer flushed it; want within 100ms", lag)
			}
		}
	})
	t.Run("purged position", func(t *testing.T) {
		rd := r.NewReader("old")
		defer rd.Close()
		_, err := rd.Open(t.Context(), binlog.Location{Name: "mariadb-bin.000000", Pos: 4})
		if errs.Code(err) != CodePositionPurged {
			t.Fatalf("open before the oldest file: %v, want code %s", err, CodePositionPurged)
		}
	})
}

// A second server, a replica of the first, takes over: the relay starts a
// new subdirectory with the next suffix and a GTID reader crosses into it.
func TestRelayFailoverNewSubdir(t *testing.T) {
	a := startSource(t, mariadbtest.Options{Name: "primary", FastCommit: true})
	b := startSource(t, mariadbtest.Options{Name: "replica", FastCommit: true})
	b.Exec(t, fmt.Sprintf("CHANGE MASTER TO MASTER_HOST='127.0.0.1', MASTER_PORT=%d, MASTER_USER='root', MASTER_USE_GTID=slave_pos", a.Port()))
	b.Exec(t, "START SLAVE")
	t.Cleanup(func() {})
	dir := t.TempDir()
	ra := newRelay(t, dir, sourceConfig(a))
	rn := startRun(t, ra)
	workload(t, a, 1000, 9)
	waitCaughtUp(t, ra, a)
	rn.stop(t)
	_, _, gtidA := a.MasterStatus(t)
	testutil.Eventually(t, 30*time.Second, "the replica to catch up", func() error {
		if pos := b.QueryString(t, "SELECT @@gtid_slave_pos"); pos != gtidA {
			return fmt.Errorf("replica at GTID %q, primary at %q", pos, gtidA)
		}
		return nil
	})
	b.Exec(t, "STOP SLAVE")
	b.Exec(t, "INSERT INTO db.t VALUES (-100, 1, 'on-the-new-primary')")

	rb := newRelay(t, dir, sourceConfig(b))
	startRun(t, rb)
	waitCaughtUp(t, rb, b)
	subs, err := readIndex(dir)
	if err != nil || len(subs) != 2 || subs[1].Suffix != 2 || subs[0].UUID == subs[1].UUID {
		t.Fatalf("subdirectories = %v, %v; want two, the second with suffix 2", subs, err)
	}
	if files, _ := listFiles(filepath.Join(dir, subs[1].Name)); len(files) == 0 {
		t.Fatal("the new subdirectory has no file")
	}

	rd := rb.NewReader("crossing")
	defer rd.Close()
	s, err := rd.Open(t.Context(), binlog.Location{GTID: "0-1-0"})
	if err != nil {
		t.Fatal(err)
	}
	var seen []uint64
	for {
		ev := nextOf(t, s, replication.MARIADB_GTID_EVENT, 5*time.Second).Event.(*replication.MariadbGTIDEvent)
		if n := len(seen); n > 0 && ev.GTID.SequenceNumber != seen[n-1]+1 {
			t.Fatalf("GTID %d follows %d: gap or duplicate across the subdirectories", ev.GTID.SequenceNumber, seen[n-1])
		}
		seen = append(seen, ev.GTID.SequenceNumber)
		if ev.GTID.ServerID == b.ServerID() {
			break // the transaction written on the new primary
		}
	}
	checkMariadbBinlog(t, dir)
}

func TestPurge(t *testing.T) {
	src := startSource(t, mariadbtest.Options{FastCommit: true, MaxBinlogSize: 16 << 10})
	dir := t.TempDir()
	r := newRelay(t, dir, sourceConfig(src))
	rn := startRun(t, r)
	workload(t, src, 3000, 10)
	waitCaughtUp(t, r, src)
	rn.stop(t)
	files, err := allFiles(dir)
	if err != nil || len(files) < 8 {
		t.Fatalf("%d relay files (%v); the test needs at least 8", len(files), err)
	}
	names := func(fs []relayFile) []string {
		var out []string
		for _, f := range fs {
			out = append(out, f.Name)
		}
		return out
	}

	rd := r.NewReader("sync-task1")
	if _, err := rd.Open(t.Context(), binlog.Location{Name: files[3].Name, Pos: 4}); err != nil {
		t.Fatal(err)
	}
	purge := func(req PurgeRequest) ([]string, error) { return r.Purge(t.Context(), req) }
	// Refused: would remove files[3] and files[4], which the reader needs.
	_, err = purge(PurgeRequest{Filename: files[5].Name})
	var forbidden *PurgeForbiddenError
	if !errors.As(err, &forbidden) || forbidden.Blocker != "reader sync-task1" || forbidden.File != files[3].Name {
		t.Fatalf("purge up to %s: %v, want forbidden by reader sync-task1 at %s", files[5].Name, err, files[3].Name)
	}
	if got, err := purge(PurgeRequest{Filename: files[1].Name}); err != nil || fmt.Sprint(got) != fmt.Sprint(names(files[:1])) {
		t.Fatalf("purge up to %s = %v, %v; want %v", files[1].Name, got, err, names(files[:1]))
	}
	if got, err := purge(PurgeRequest{Inactive: true}); err != nil || fmt.Sprint(got) != fmt.Sprint(names(files[1:3])) {
		t.Fatalf("purge inactive = %v, %v; want %v", got, err, names(files[1:3]))
	}
	rd.Close()

	// A blocker from outside (a paused subtask) at files[5].
	r.AddBlocker(func() (string, binlog.Location, bool) {
		return "subtask task2", binlog.Location{Name: files[5].Name, Pos: 4}, true
	})
	cut := time.Now()
	for i, f := range files[3:] {
		old := cut.Add(-time.Duration(len(files)-i) * time.Hour)
		if i >= 4 {
			old = cut.Add(time.Hour)
		}
		if err := chtimes(f.Path, old); err != nil {
			t.Fatal(err)
		}
	}
	// files[3..6] are older than cut, but files[5] is needed by the blocker.
	_, err = purge(PurgeRequest{Time: &cut})
	if !errors.As(err, &forbidden) || forbidden.Blocker != "subtask task2" || forbidden.File != files[5].Name {
		t.Fatalf("purge by time: %v, want forbidden by subtask task2 at %s", err, files[5].Name)
	}
	early := cut.Add(-time.Duration(len(files)-1)*time.Hour + 30*time.Minute)
	if got, err := purge(PurgeRequest{Time: &early}); err != nil || fmt.Sprint(got) != fmt.Sprint(names(files[3:5])) {
		t.Fatalf("purge by time %v = %v, %v; want %v", early, got, err, names(files[3:5]))
	}
	if got, err := purge(PurgeRequest{Inactive: true}); err != nil || len(got) != 0 {
		t.Fatalf("purge inactive with the blocker at %s = %v, %v; want nothing", files[5].Name, got, err)
	}
	if _, err := purge(PurgeRequest{Filename: "mariadb-bin.999999"}); !errors.Is(err, ErrFileNotFound) {
		t.Fatalf("purge up to a missing file: %v", err)
	}
	left, err := allFiles(dir)
	if err != nil || fmt.Sprint(names(left)) != fmt.Sprint(names(files[5:])) {
		t.Fatalf("files left = %v, %v; want %v", names(left), err, names(files[5:]))
	}
}
