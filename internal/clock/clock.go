// Package clock is the one source of time for spotwise.
//
// Everything that reads the time or waits takes a Clock: the real clock in
// production, a Scaled clock when the simulated cloud runs faster than real
// time (--sim-speed), and a Fake clock in tests, advanced by hand.
package clock

import (
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
	st.t = time.AfterFunc(s.wall(d), st.fire)
	return st
}

// AfterFunc calls f after d of simulated time.
func (s *Scaled) AfterFunc(d time.Duration, f func()) Timer {
	st := &scaledTimer{s: s}
	st.t = time.AfterFunc(s.wall(d), f)
	return st
}

type scaledTimer struct {
	s *Scaled
	t *time.Timer
	c chan time.Time
}

func (st *scaledTimer) fire() {
	select {
	case st.c <- st.s.Now():
	default:
	}
}

func (st *scaledTimer) C() <-chan time.Time        { return st.c }
func (st *scaledTimer) Stop() bool                 { return st.t.Stop() }
func (st *scaledTimer) Reset(d time.Duration) bool { return st.t.Reset(st.s.wall(d)) }

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
		now := f.now
		f.mu.Unlock()
		next.fire(now)
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
		now := f.now
		go ft.fire(now)
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

func (t *fakeTimer) Stop() bool {
	t.f.mu.Lock()
	defer t.f.mu.Unlock()
	was := t.active
	t.active = false
	return was
}

func (t *fakeTimer) Reset(d time.Duration) bool {
	t.f.mu.Lock()
	was := t.active
	t.when = t.f.now.Add(d)
	t.active = true
	found := false
	for _, x := range t.f.timers {
		if x == t {
			found = true
			break
		}
	}
	if !found {
		t.f.timers = append(t.f.timers, t)
	}
	t.f.mu.Unlock()
	return was
}
