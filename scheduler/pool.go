package scheduler

import (
	"context"
	"sync"
)

// pool runs the scheduler's actions (placements, releases, moves; launches
// on a pool of their own, terminates on a third) on a fixed number of
// workers, first come first served: a cycle hands over its plan without
// waiting, and no goroutine is made per job. A placement is written by one
// task and launched by another on the other pool, so placing a burst of
// jobs is held up neither by the clouds' launch calls nor by a backlog of
// launches; a terminate waits behind neither, nor holds up the input that
// asked for it.
type pool struct {
	mu     sync.Mutex
	cond   *sync.Cond
	tasks  []func(ctx context.Context)
	closed bool
	wg     sync.WaitGroup
	// pending counts tasks queued or running (for Busy).
	pending int
}

// start runs n workers until stop; their tasks get ctx.
func (p *pool) start(ctx context.Context, n int) {
	p.mu.Lock()
	if p.cond == nil {
		p.cond = sync.NewCond(&p.mu)
	}
	p.closed = false
	p.mu.Unlock()
	for range max(1, n) {
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			for {
				p.mu.Lock()
				for len(p.tasks) == 0 && !p.closed {
					p.cond.Wait()
				}
				if len(p.tasks) == 0 {
					p.mu.Unlock()
					return
				}
				task := p.tasks[0]
				p.tasks[0] = nil
				p.tasks = p.tasks[1:]
				p.mu.Unlock()
				if ctx.Err() == nil {
					task(ctx)
				}
				p.mu.Lock()
				p.pending--
				p.mu.Unlock()
			}
		}()
	}
}

// submit queues a task; false once the pool is stopping.
func (p *pool) submit(task func(ctx context.Context)) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed || p.cond == nil {
		return false
	}
	p.tasks = append(p.tasks, task)
	p.pending++
	p.cond.Signal()
	return true
}

// busy reports whether a task is queued or running.
func (p *pool) busy() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.pending > 0
}

// stop lets the workers finish what is queued (a task whose context has
// ended returns at once) and waits for them.
func (p *pool) stop() {
	p.mu.Lock()
	p.closed = true
	if p.cond != nil {
		p.cond.Broadcast()
	}
	p.mu.Unlock()
	p.wg.Wait()
}
