package scheduler

import "slices"

// queue holds the queued jobs in order (priority, then age). It is
// rebuilt from the job-state bucket at start, which is what makes it
// durable; in memory it is a sorted slice, so inserting or removing one of
// 100,000 jobs moves pointers, not jobs.
type queue struct {
	jobs []*QueuedJob
}

func (q *queue) find(j *QueuedJob) (int, bool) {
	return slices.BinarySearchFunc(q.jobs, j, queueLess)
}

// add inserts j; the caller makes sure it is not queued already.
func (q *queue) add(j *QueuedJob) {
	i, _ := q.find(j)
	q.jobs = slices.Insert(q.jobs, i, j)
}

// remove deletes the job with id; old, if known, is found by binary search.
func (q *queue) remove(id string, old *QueuedJob) {
	if old != nil {
		if i, ok := q.find(old); ok && q.jobs[i].ID == id {
			q.jobs = slices.Delete(q.jobs, i, i+1)
			return
		}
	}
	if i := slices.IndexFunc(q.jobs, func(j *QueuedJob) bool { return j.ID == id }); i >= 0 {
		q.jobs = slices.Delete(q.jobs, i, i+1)
	}
}

func (q *queue) len() int { return len(q.jobs) }
