// Package clock is the one source of time for spotwise.
//
// Everything that reads the time or waits takes a Clock: the real clock in
// production, a Scaled clock when the simulated cloud runs faster than real
// time (--sim-speed), and a Fake clock in tests, advanced by hand.
package clock

import (
	"slices"
	"sync"
	"time"
)

// Clock tells the time and makes timers.
type Clock interface {
	Now() time.Time
	// NewTimer fires once after d of this clock's time.
	NewTimer(d time.Duration) Timer
	// AfterFunc calls f in its own goroutine after d of this clock's time.
	AfterFunc(d time.Duration, f func()) Timer
}

// Timer is a stoppable, resettable timer on some Clock.
type Timer interface {
	C() <-chan time.Time
	Stop() bool
	Reset(d time.Duration) bool
}

// Since is c.Now().Sub(t).
func Since(c Clock, t time.Time) time.Duration { return c.Now().Sub(t) }

// Real is the wall clock.
type Real struct{}

// Now returns time.Now().
func (Real) Now() time.Time { return time.Now() }

// NewTimer wraps time.NewTimer.
func (Real) NewTimer(d time.Duration) Timer { return realTimer{time.NewTimer(d)} }

// AfterFunc wraps time.AfterFunc.
func (Real) AfterFunc(d time.Duration, f func()) Timer { return realTimer{time.AfterFunc(d, f)} }

type realTimer struct{ t *time.Timer }

func (r realTimer) C() <-chan time.Time        { return r.t.C }
func (r realTimer) Stop() bool                 { return r.t.Stop() }
func (r realTimer) Reset(d time.Duration) bool { return r.t.Reset(d) }

// Scaled runs Speed times faster than the wall clock from an anchor: at wall
// time WallAnchor it reads SimAnchor. It lets the simulated cloud fast-forward
// (a 2-hour job finishes in a minute at 120x) while every component keeps
// reasoning in its own, consistent time.
type Scaled struct {
	wallAnchor time.Time
	simAnchor  time.Time
	speed      float64
}

// NewScaled returns a clock that reads sim at wall and runs speed times faster
// than the wall clock. speed must be positive.
func NewScaled(wall, sim time.Time, speed float64) *Scaled {
	if speed <= 0 {
		panic("clock: speed must be positive")
	}
	return &Scaled{wallAnchor: wall, simAnchor: sim, speed: speed}
}

// Speed is how many seconds of this clock pass per wall-clock second.
func (s *Scaled) Speed() float64 { return s.speed }

// Anchor returns the wall and simulated instants the clock is anchored at.
func (s *Scaled) Anchor() (wall, sim time.Time) { return s.wallAnchor, s.simAnchor }

// Now is the simulated time.
func (s *Scaled) Now() time.Time { return s.at(time.Now()) }

func (s *Scaled) at(wall time.Time) time.Time {
	return s.simAnchor.Add(time.Duration(float64(wall.Sub(s.wallAnchor)) * s.speed))
}

func (s *Scaled) wall(d time.Duration) time.Duration {
	return time.Duration(float64(d) / s.speed)
}

// NewTimer fires after d of simulated time.
func (s *Scaled) NewTimer(d time.Duration) Timer {
	st := &scaledTimer{s: s, c: make(chan time.Time, 1)}
	st.mu.Lock()
	st.start(d)
	st.mu.Unlock()
	return st
}

// AfterFunc calls f after d of simulated time.
func (s *Scaled) AfterFunc(d time.Duration, f func()) Timer {
	return scaledFunc{s: s, t: time.AfterFunc(s.wall(d), f)}
}

// scaledTimer is a channel timer on a Scaled clock. Like time.Timer since
// Go 1.23, Stop and Reset discard a fired value not yet received, so no
// receive after them sees a stale time; seq makes a callback already on its
// way when they run deliver nothing.
type scaledTimer struct {
	s *Scaled
	c chan time.Time

	mu  sync.Mutex
	t   *time.Timer
	seq uint64
	// done is set once the current arming has delivered its value or been
	// disarmed: nothing more will come of it.
	done bool
}

// start arms the timer; called with mu held.
func (st *scaledTimer) start(d time.Duration) {
	seq := st.seq
	st.done = false
	st.t = time.AfterFunc(st.s.wall(d), func() { st.fire(seq) })
}

func (st *scaledTimer) fire(seq uint64) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if seq != st.seq {
		return
	}
	st.done = true
	select {
	case st.c <- st.s.Now():
	default:
	}
}

// disarm stops the timer and discards any undelivered or unreceived value,
// reporting whether a value was kept from the receiver; called with mu held.
func (st *scaledTimer) disarm() bool {
	pending := st.t.Stop()
	st.seq++
	if !pending && !st.done {
		pending = true // the callback had started but will now deliver nothing
	}
	st.done = true
	select {
	case <-st.c:
		pending = true
	default:
	}
	return pending
}

func (st *scaledTimer) C() <-chan time.Time { return st.c }

func (st *scaledTimer) Stop() bool {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.disarm()
}

func (st *scaledTimer) Reset(d time.Duration) bool {
	st.mu.Lock()
	defer st.mu.Unlock()
	pending := st.disarm()
	st.start(d)
	return pending
}

// scaledFunc is an AfterFunc timer on a Scaled clock.
type scaledFunc struct {
	s *Scaled
	t *time.Timer
}

func (sf scaledFunc) C() <-chan time.Time        { return nil }
func (sf scaledFunc) Stop() bool                 { return sf.t.Stop() }
func (sf scaledFunc) Reset(d time.Duration) bool { return sf.t.Reset(sf.s.wall(d)) }

// Fake is a clock for tests: time stands still until Advance or Set moves it,
// and timers due by then fire in order of their deadlines.
type Fake struct {
	mu     sync.Mutex
	now    time.Time
	timers []*fakeTimer
}

// NewFake returns a fake clock reading t.
func NewFake(t time.Time) *Fake { return &Fake{now: t} }

// Now returns the fake time.
func (f *Fake) Now() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.now
}

// Advance moves the clock forward by d, firing every timer that falls due.
func (f *Fake) Advance(d time.Duration) { f.Set(f.Now().Add(d)) }

// Set moves the clock to t (never backwards), firing timers that fall due,
// each with the clock reading its own deadline.
func (f *Fake) Set(t time.Time) {
	for {
		f.mu.Lock()
		var next *fakeTimer
		for _, ft := range f.timers {
			if ft.active && !ft.when.After(t) && (next == nil || ft.when.Before(next.when)) {
				next = ft
			}
		}
		if next == nil {
			if t.After(f.now) {
				f.now = t
			}
			f.mu.Unlock()
			return
		}
		if next.when.After(f.now) {
			f.now = next.when
		}
		next.active = false
		// fire does not block, so it runs under mu: a Stop or Reset then
		// either prevents the fire or drains its value, never neither.
		next.fire(f.now)
		f.mu.Unlock()
	}
}

// Timers reports how many timers are waiting; tests use it to know that a
// component has gone to sleep before advancing the clock.
func (f *Fake) Timers() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, t := range f.timers {
		if t.active {
			n++
		}
	}
	return n
}

// NewTimer returns a timer that fires when the fake clock reaches now+d.
func (f *Fake) NewTimer(d time.Duration) Timer {
	return f.add(d, nil)
}

// AfterFunc calls fn in its own goroutine when the fake clock reaches now+d.
func (f *Fake) AfterFunc(d time.Duration, fn func()) Timer {
	return f.add(d, fn)
}

func (f *Fake) add(d time.Duration, fn func()) *fakeTimer {
	f.mu.Lock()
	defer f.mu.Unlock()
	ft := &fakeTimer{f: f, fn: fn, c: make(chan time.Time, 1), when: f.now.Add(d), active: true}
	f.timers = append(f.timers, ft)
	f.compact()
	if d <= 0 {
		ft.active = false
		ft.fire(f.now)
	}
	return ft
}

// compact drops fired and stopped timers; called with mu held.
func (f *Fake) compact() {
	if len(f.timers) < 64 {
		return
	}
	kept := f.timers[:0]
	for _, t := range f.timers {
		if t.active {
			kept = append(kept, t)
		}
	}
	for i := len(kept); i < len(f.timers); i++ {
		f.timers[i] = nil
	}
	f.timers = kept
}

type fakeTimer struct {
	f      *Fake
	fn     func()
	c      chan time.Time
	when   time.Time
	active bool
}

// fire delivers the timer without blocking; called with f.mu held.
func (t *fakeTimer) fire(now time.Time) {
	if t.fn != nil {
		go t.fn()
		return
	}
	select {
	case t.c <- now:
	default:
	}
}

func (t *fakeTimer) C() <-chan time.Time { return t.c }

// Stop and Reset follow time.Timer since Go 1.23: a fired value not yet
// received is discarded, so no receive after them sees a stale time, and
// they report true when they prevented a value from being delivered.
func (t *fakeTimer) Stop() bool {
	t.f.mu.Lock()
	defer t.f.mu.Unlock()
	was := t.active || t.drain()
	t.active = false
	return was
}

func (t *fakeTimer) Reset(d time.Duration) bool {
	t.f.mu.Lock()
	defer t.f.mu.Unlock()
	was := t.active || t.drain()
	t.when = t.f.now.Add(d)
	if d <= 0 {
		// Like a real timer, one reset to zero fires now, not at the next
		// Advance.
		t.active = false
		t.fire(t.f.now)
		return was
	}
	t.active = true
	if !slices.Contains(t.f.timers, t) {
		t.f.timers = append(t.f.timers, t)
	}
	return was
}

// drain empties the channel of a channel timer, reporting whether it held a
// value; called with f.mu held.
func (t *fakeTimer) drain() bool {
	if t.fn != nil {
		return false
	}
	select {
	case <-t.c:
		return true
	default:
		return false
	}
}
