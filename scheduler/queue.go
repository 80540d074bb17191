package scheduler

import "slices"

// queue holds the queued jobs in order (priority, then age). It is
// rebuilt from the job-state bucket at start, which is what makes it
// durable; in memory it is a sorted slice, so inserting one of 100,000
// jobs moves pointers, not jobs.
//
// A removed job is only marked gone and stays in the slice until gone
// ones are half of it, then all are dropped at once: a placement takes
// its job out of a queue that may hold a backlog of tens of thousands,
// and moving all the jobs behind it each time would make every placement
// cost as much as the backlog is long. Whoever walks jobs skips the gone
// ones (the cycle knows a job by its entry's current QueuedJob).
type queue struct {
	jobs []*QueuedJob
	gone map[*QueuedJob]struct{}
}

// find returns where j is, or would be, in the order; a job of the same
// key (a gone version of it) may be there instead.
func (q *queue) find(j *QueuedJob) (int, bool) {
	return slices.BinarySearchFunc(q.jobs, j, queueLess)
}

// add inserts j; the caller makes sure it is not queued already.
func (q *queue) add(j *QueuedJob) {
	i, _ := q.find(j)
	q.jobs = slices.Insert(q.jobs, i, j)
}

// remove takes out the job with id; old, if known, is found by binary
// search.
func (q *queue) remove(id string, old *QueuedJob) {
	if old != nil {
		if i, ok := q.find(old); ok {
			// Versions of one job may share its key: find this one.
			for ; i < len(q.jobs) && queueLess(q.jobs[i], old) == 0; i++ {
				if q.jobs[i] == old {
					q.drop(old)
					return
				}
			}
		}
	}
	if i := slices.IndexFunc(q.jobs, func(j *QueuedJob) bool { return j.ID == id && !q.isGone(j) }); i >= 0 {
		q.drop(q.jobs[i])
	}
}

func (q *queue) isGone(j *QueuedJob) bool {
	_, gone := q.gone[j]
	return gone
}

// drop marks j gone, and drops every gone job once they are half the
// slice.
func (q *queue) drop(j *QueuedJob) {
	if q.gone == nil {
		q.gone = map[*QueuedJob]struct{}{}
	}
	q.gone[j] = struct{}{}
	if 2*len(q.gone) < len(q.jobs) {
		return
	}
	q.jobs = slices.DeleteFunc(q.jobs, q.isGone)
	clear(q.gone)
}

// len is how many jobs are queued.
func (q *queue) len() int { return len(q.jobs) - len(q.gone) }
