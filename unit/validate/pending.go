package validate

import (
	"encoding/json"
	"sync"
	"time"

	"github.com/dmworker/dm-worker/pkg/binlog"
	"github.com/dmworker/dm-worker/pkg/rowimage"
)

// entry is one row key whose newest change has not been judged yet.
type entry struct {
	id    string // source table + key, the map key
	table *rowimage.Table
	key   []any
	want  []any // newest row image; nil when the newest change deleted the row
	// loc is the end of the rows event of the newest change: the sync unit
	// has written that change once its applied location reaches loc.
	loc binlog.Location
	// since is the transaction boundary before the oldest unjudged change,
	// and sinceTime that change's event time: the checkpoint and the lag.
	since     binlog.Location
	sinceTime time.Time
	// version counts changes, so a verdict on an older image is ignored.
	version  uint64
	inFlight bool
	// firstFail is when a conclusive check first found a mismatch (zero
	// while none did); the row becomes a validation error once it has
	// failed for row-error-delay.
	firstFail time.Time
	// nextTry and after gate a recheck: not before nextTry, and not before
	// the validator has read up to after (the sync unit's read location at
	// the failed check), so the recheck sees every change the target might
	// already hold.
	nextTry time.Time
	after   binlog.Location
	// retrying: the entry waits in pendingSet.retries; parked: it waits for
	// the reader to pass after, so it does not count against the limit.
	retrying, parked bool
}

// queued is a change waiting for the sync unit to pass loc.
type queued struct {
	e       *entry
	version uint64
	loc     binlog.Location
}

// pendingSet holds the unjudged rows: at most limit of them, the reader
// waits (back-pressure) when it is full. Rows parked until the reader has
// read further do not count, else a full set of them would wait for a
// reader that waits for them; they are at most the keys the sync unit has
// read beyond the validator. All methods are safe for concurrent use.
type pendingSet struct {
	mu    sync.Mutex
	space *sync.Cond // signalled when rows leave
	limit int
	rows  map[string]*entry
	// queue holds changes in binlog order; retries the rows whose check
	// failed and wait for a recheck.
	queue   []queued
	retries []*entry
	parked  int
	closed  bool
}

func newPendingSet(limit int) *pendingSet {
	p := &pendingSet{limit: limit, rows: map[string]*entry{}}
	p.space = sync.NewCond(&p.mu)
	return p
}

// change is one row change read from the binlog.
type change struct {
	id        string
	table     *rowimage.Table
	key, want []any
	loc       binlog.Location
	since     binlog.Location
	time      time.Time
}

// add records changes (one rows event's), waiting while the set is full.
// It returns false when the set was closed meanwhile.
func (p *pendingSet) add(cs []change) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	for len(p.rows)-p.parked >= p.limit && !p.closed {
		p.space.Wait()
	}
	if p.closed {
		return false
	}
	for _, c := range cs {
		e, ok := p.rows[c.id]
		if !ok {
			e = &entry{id: c.id, since: c.since, sinceTime: c.time}
			p.rows[c.id] = e
		}
		e.table, e.key, e.want, e.loc = c.table, c.key, c.want, c.loc
		e.version++
		e.firstFail, e.nextTry, e.after = time.Time{}, time.Time{}, binlog.Location{}
		p.unparkLocked(e)
		p.queue = append(p.queue, queued{e: e, version: e.version, loc: c.loc})
	}
	return true
}

// close wakes a waiting add, which then returns false.
func (p *pendingSet) close() {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	p.space.Broadcast()
}

// remove drops e when its version is still v (a newer change keeps it).
func (p *pendingSet) removeLocked(e *entry, v uint64) {
	if e.version != v || p.rows[e.id] != e {
		return
	}
	p.deleteLocked(e)
	p.space.Signal()
}

// deleteLocked drops e from the set.
func (p *pendingSet) deleteLocked(e *entry) {
	p.unparkLocked(e)
	delete(p.rows, e.id)
}

// unparkLocked makes e count against the limit again.
func (p *pendingSet) unparkLocked(e *entry) {
	if e.parked {
		e.parked = false
		p.parked--
	}
}

// dropTables forgets the rows of the named source tables (and of every
// table of the named databases): a DDL removed or moved their rows.
func (p *pendingSet) dropTables(tables map[string]bool, dbs map[string]bool) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, e := range p.rows {
		if tables[e.table.Source.String()] || dbs[e.table.Source.Schema] {
			p.deleteLocked(e)
			n++
		}
	}
	if n > 0 {
		p.space.Broadcast()
	}
	return n
}

// due returns the rows to check now: changes the sync unit has applied
// (loc <= applied), and failed rows whose recheck time has come and whose
// after the reader has passed (read). They are marked in flight.
func (p *pendingSet) due(applied, read binlog.Location, now time.Time, max int) []job {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []job
	i := 0
	for ; i < len(p.queue) && len(out) < max; i++ {
		q := p.queue[i]
		if q.loc.Compare(applied) > 0 {
			break
		}
		if e := q.e; e.version == q.version && p.rows[e.id] == e && !e.inFlight && !e.retrying {
			out = append(out, p.takeLocked(e))
		}
	}
	p.queue = p.queue[i:]
	if len(p.queue) == 0 {
		p.queue = nil // let the backing array go
	}
	kept := p.retries[:0]
	for _, e := range p.retries {
		switch {
		case p.rows[e.id] != e || !e.retrying:
			p.unparkLocked(e)
			e.retrying = false
		case len(out) < max && !e.inFlight && !now.Before(e.nextTry) && e.after.Compare(read) <= 0 &&
			e.loc.Compare(applied) <= 0:
			e.retrying = false
			p.unparkLocked(e)
			out = append(out, p.takeLocked(e))
		default:
			kept = append(kept, e)
		}
	}
	clear(p.retries[len(kept):])
	p.retries = kept
	return out
}

// takeLocked marks e in flight and returns its job.
func (p *pendingSet) takeLocked(e *entry) job {
	e.inFlight = true
	return job{e: e, version: e.version, table: e.table, key: e.key, want: e.want, loc: e.loc}
}

// retryLocked puts e on the recheck list.
func (p *pendingSet) retryLocked(e *entry) {
	if !e.retrying {
		e.retrying = true
		p.retries = append(p.retries, e)
	}
}

// settled is a row that failed for row-error-delay: report it.
type settled struct {
	job    job
	kind   string
	target json.RawMessage
}

// settle records the verdicts of jobs: an equal row leaves the set; a
// mismatch waits for a recheck after retryEvery (and, when the check was
// not conclusive, until the reader has passed syncRead); a row whose
// conclusive mismatches have lasted delay is returned to be reported (it
// stays in flight until reported or release). A row changed meanwhile is
// rechecked with its newer image.
func (p *pendingSet) settle(jobs []job, results []rowResult, conclusive bool, syncRead binlog.Location,
	now time.Time, delay, retryEvery time.Duration) []settled {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []settled
	for i, j := range jobs {
		e := j.e
		if p.rows[e.id] != e {
			e.inFlight = false
			continue
		}
		if e.version != j.version {
			e.inFlight = false
			p.retryLocked(e)
			continue
		}
		res := results[i]
		if res.kind == "" {
			e.inFlight = false
			p.removeLocked(e, j.version)
			continue
		}
		if conclusive {
			if e.firstFail.IsZero() {
				e.firstFail = now
			}
			if now.Sub(e.firstFail) >= delay {
				out = append(out, settled{job: j, kind: res.kind, target: res.target})
				continue
			}
		} else if e.after = syncRead; !e.parked {
			e.parked = true
			p.parked++
		}
		e.inFlight = false
		e.nextTry = now.Add(retryEvery)
		p.retryLocked(e)
	}
	return out
}

// reported drops rows whose errors are stored; a row changed meanwhile is
// rechecked with its newer image.
func (p *pendingSet) reported(jobs []job) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, j := range jobs {
		e := j.e
		e.inFlight = false
		if p.rows[e.id] != e {
			continue
		}
		if e.version == j.version {
			p.removeLocked(e, j.version)
		} else {
			p.retryLocked(e)
		}
	}
}

// release returns jobs whose check failed to the set, to be checked again.
func (p *pendingSet) release(jobs []job) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, j := range jobs {
		j.e.inFlight = false
		if p.rows[j.e.id] == j.e {
			p.retryLocked(j.e)
		}
	}
}

// forget drops the rows of jobs whose table the target no longer has.
func (p *pendingSet) forget(jobs []job) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, j := range jobs {
		j.e.inFlight = false
		if p.rows[j.e.id] == j.e {
			p.deleteLocked(j.e)
		}
	}
	p.space.Broadcast()
}

// size is the number of unjudged rows.
func (p *pendingSet) size() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.rows)
}

// oldest returns the checkpoint the set allows (the oldest since of its
// rows; ok false when it is empty) and the event time of the oldest
// unjudged change.
func (p *pendingSet) oldest() (since binlog.Location, at time.Time, ok bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, e := range p.rows {
		if !ok || e.since.Compare(since) < 0 {
			since, ok = e.since, true
		}
		if at.IsZero() || e.sinceTime.Before(at) {
			at = e.sinceTime
		}
	}
	return since, at, ok
}
