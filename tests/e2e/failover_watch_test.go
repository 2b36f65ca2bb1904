package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/dmworker/dm-worker/ha"
)

// foMonitor watches the bound keys for a whole test: every revision of
// P/source/bound/ (an etcd watch from the first read on) and a read of
// them every 100 ms. A source bound to two workers in one revision or one
// read is a problem check reports.
type foMonitor struct {
	t      *testing.T
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu       sync.Mutex
	state    map[string]string // worker → source, per the watch
	events   []foBindEvent     // every change the watch saw
	problems []string
	samples  int
}

// foBindEvent is one change of a bound key seen by the watch.
type foBindEvent struct {
	at     time.Time
	rev    int64
	worker string
	source string // "" = the key was deleted
}

// monitor starts watching the fleet's bound keys until the test ends.
func (f *foFleet) monitor() *foMonitor {
	f.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	bs, rev, err := foReadBounds(ctx, f.c.direct, f.c.prefix)
	if err != nil {
		cancel()
		f.t.Fatal(err)
	}
	m := &foMonitor{t: f.t, cancel: cancel, state: map[string]string{}}
	for w, b := range bs {
		m.state[w] = b.Source
	}
	kp := ha.Keys{Prefix: f.c.prefix}.BoundPrefix()
	wch := f.c.direct.Watch(ctx, kp, clientv3.WithPrefix(), clientv3.WithRev(rev+1))
	m.wg.Add(2)
	go func() {
		defer m.wg.Done()
		m.watch(wch, kp)
	}()
	go func() {
		defer m.wg.Done()
		m.sample(ctx, f.c.direct, f.c.prefix)
	}()
	f.t.Cleanup(m.stop)
	return m
}

// watch applies the watch's events revision by revision and checks the
// state after each revision.
func (m *foMonitor) watch(wch clientv3.WatchChan, kp string) {
	for resp := range wch {
		if err := resp.Err(); err != nil {
			m.problem(fmt.Sprintf("the watch of the bound keys failed: %v", err))
			return
		}
		now := time.Now()
		m.mu.Lock()
		for i, ev := range resp.Events {
			e := foBindEvent{at: now, rev: ev.Kv.ModRevision, worker: strings.TrimPrefix(string(ev.Kv.Key), kp)}
			if ev.Type == clientv3.EventTypePut {
				var b foBound
				if err := json.Unmarshal(ev.Kv.Value, &b); err != nil {
					m.problems = append(m.problems, fmt.Sprintf("rev %d: %s: %v", e.rev, ev.Kv.Key, err))
				}
				e.source = b.Source
				m.state[e.worker] = b.Source
			} else {
				delete(m.state, e.worker)
			}
			m.events = append(m.events, e)
			// Check once every event of a revision (one transaction) is in.
			if i == len(resp.Events)-1 || resp.Events[i+1].Kv.ModRevision != e.rev {
				if p := foDoubleBound(m.state); p != "" {
					m.problems = append(m.problems, fmt.Sprintf("watch, rev %d at %s: %s", e.rev, now.Format("15:04:05.000"), p))
				}
			}
		}
		m.mu.Unlock()
	}
}

// sample reads the bound keys every 100 ms and checks each read.
func (m *foMonitor) sample(ctx context.Context, cli *clientv3.Client, prefix string) {
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		bs, rev, err := foReadBounds(ctx, cli, prefix)
		if err != nil {
			continue // ctx done, or etcd busy: the watch still sees every revision
		}
		state := make(map[string]string, len(bs))
		for w, b := range bs {
			state[w] = b.Source
		}
		m.mu.Lock()
		m.samples++
		if p := foDoubleBound(state); p != "" {
			m.problems = append(m.problems, fmt.Sprintf("read every 100ms, rev %d: %s", rev, p))
		}
		m.mu.Unlock()
	}
}

func (m *foMonitor) problem(p string) {
	m.mu.Lock()
	m.problems = append(m.problems, p)
	m.mu.Unlock()
}

// foDoubleBound describes the sources bound to more than one worker in
// state (worker → source); "" when none is.
func foDoubleBound(state map[string]string) string {
	by := map[string][]string{}
	for w, s := range state {
		by[s] = append(by[s], w)
	}
	var out []string
	for s, ws := range by {
		if len(ws) > 1 {
			slices.Sort(ws)
			out = append(out, fmt.Sprintf("source %s bound to %v at once", s, ws))
		}
	}
	slices.Sort(out)
	return strings.Join(out, "; ")
}

// stop ends the watch and the reads.
func (m *foMonitor) stop() {
	m.cancel()
	m.wg.Wait()
}

// check stops the monitor and fails the test for every problem seen.
func (m *foMonitor) check() {
	m.t.Helper()
	m.stop()
	m.mu.Lock()
	defer m.mu.Unlock()
	m.t.Logf("bindings monitor: %d changes watched, %d reads every 100ms", len(m.events), m.samples)
	for _, p := range m.problems {
		m.t.Errorf("bindings: %s", p)
	}
}

// waitMove waits up to d until the watch sees source bound to a worker
// other than from after since, and returns that worker and when the watch
// saw it.
func (m *foMonitor) waitMove(source, from string, since time.Time, d time.Duration) (string, time.Time) {
	m.t.Helper()
	deadline := time.Now().Add(d)
	for {
		m.mu.Lock()
		for _, e := range m.events {
			if e.at.After(since) && e.source == source && e.worker != from {
				m.mu.Unlock()
				return e.worker, e.at
			}
		}
		state := fmt.Sprint(m.state)
		m.mu.Unlock()
		if time.Now().After(deadline) {
			m.t.Fatalf("source %s not bound to another worker than %s within %s of the failure; bindings %s", source, from, d, state)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// foConnsTo counts the TCP connections process pid holds to loopback port
// port: the sockets among its open files whose remote port is port (from
// /proc). A process without one cannot write to the server on port.
func foConnsTo(pid, port int) (int, error) {
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if os.IsNotExist(err) {
		return 0, nil // the process is gone
	}
	if err != nil {
		return 0, err
	}
	inodes := map[string]bool{}
	for _, fd := range fds {
		l, err := os.Readlink(filepath.Join(fmt.Sprintf("/proc/%d/fd", pid), fd.Name()))
		if err == nil && strings.HasPrefix(l, "socket:[") {
			inodes[strings.TrimSuffix(strings.TrimPrefix(l, "socket:["), "]")] = true
		}
	}
	n := 0
	for _, table := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		k, err := foCountSockets(table, port, inodes)
		if err != nil {
			return 0, err
		}
		n += k
	}
	return n, nil
}

// foCountSockets counts the non-listening sockets of table (a
// /proc/net/tcp file) with remote port port whose inode is in inodes.
func foCountSockets(table string, port int, inodes map[string]bool) (int, error) {
	f, err := os.Open(table)
	if os.IsNotExist(err) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	defer f.Close()
	n := 0
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// sl local_address rem_address st tx:rx tr:when retrnsmt uid timeout inode
		fields := strings.Fields(sc.Text())
		if len(fields) < 10 || fields[0] == "sl" || fields[3] == "0A" {
			continue
		}
		_, hexPort, ok := strings.Cut(fields[2], ":")
		if p, err := strconv.ParseUint(hexPort, 16, 32); ok && err == nil && int(p) == port && inodes[fields[9]] {
			n++
		}
	}
	return n, sc.Err()
}
