package dump

import "sync"

// job is one unit of a worker's work: a table to split into chunks, or a
// chunk to write.
type job struct {
	table *tableState // set for a table job
	chunk chunkJob    // set otherwise
}

// queue hands jobs to the workers. A table job pushes its table's chunk
// jobs while it runs, so one big table is written by every worker; the
// queue ends when every job pushed is done, or when it is aborted.
type queue struct {
	mu   sync.Mutex
	cond *sync.Cond
	// guarded by mu:
	jobs    []job // FIFO
	pending int   // jobs pushed and not yet done
	aborted bool
}

func newQueue() *queue {
	q := &queue{}
	q.cond = sync.NewCond(&q.mu)
	return q
}

// push adds a job.
func (q *queue) push(j job) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.jobs = append(q.jobs, j)
	q.pending++
	q.cond.Signal()
}

// pop waits for a job; false when the queue has ended. The caller calls
// done after the job (and any jobs it pushed) are pushed.
func (q *queue) pop() (job, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for len(q.jobs) == 0 && q.pending > 0 && !q.aborted {
		q.cond.Wait()
	}
	if q.aborted || len(q.jobs) == 0 {
		return job{}, false
	}
	j := q.jobs[0]
	q.jobs[0] = job{}
	q.jobs = q.jobs[1:]
	return j, true
}

// done marks a popped job finished.
func (q *queue) done() {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.pending--
	if q.pending == 0 {
		q.cond.Broadcast()
	}
}

// abort ends the queue for every worker.
func (q *queue) abort() {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.aborted = true
	q.cond.Broadcast()
}
