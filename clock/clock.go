// Package clock is the one source of time for spotwise.
//
// Everything that reads the time or waits takes a Clock: the real clock in
// production, a Scaled clock when the simulated cloud runs faster than real
// time (--sim-speed), and a Fake clock in tests, advanced by hand.
package clock

import (
	"slices"
	"sync"
	"sync/atomic"
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
//
// It can be paused and re-anchored (Pause, Resume, SetAnchor): its timers
// keep their deadlines in simulated time and are re-armed, so nothing on it
// fires while it is paused. A test drives simulated time this way instead
// of racing a fast-forwarded clock with the wall's.
type Scaled struct {
	a atomic.Pointer[Anchor]

	mu     sync.Mutex
	timers map[scaledArmed]struct{} // armed timers, re-armed on a change
}

// Anchor ties a Scaled clock to the wall: at Wall it reads Sim, and it runs
// Speed times faster than the wall unless Paused (then it reads Sim).
type Anchor struct {
	Wall   time.Time `json:"wall"`
	Sim    time.Time `json:"sim"`
	Speed  float64   `json:"speed"`
	Paused bool      `json:"paused,omitempty"`
}

// At is the simulated time at wall time w.
func (a Anchor) At(w time.Time) time.Time {
	if a.Paused {
		return a.Sim
	}
	return a.Sim.Add(time.Duration(float64(w.Sub(a.Wall)) * a.Speed))
}

// scaledArmed is a timer of a Scaled clock that can be re-armed.
type scaledArmed interface{ rearm() }

// NewScaled returns a clock that reads sim at wall and runs speed times faster
// than the wall clock. speed must be positive.
func NewScaled(wall, sim time.Time, speed float64) *Scaled {
	return NewScaledAt(Anchor{Wall: wall, Sim: sim, Speed: speed})
}

// NewScaledAt returns a clock on an anchor; its speed must be positive.
func NewScaledAt(a Anchor) *Scaled {
	if a.Speed <= 0 {
		panic("clock: speed must be positive")
	}
	s := &Scaled{timers: map[scaledArmed]struct{}{}}
	s.a.Store(&a)
	return s
}

// Speed is how many seconds of this clock pass per wall-clock second (while
// it is not paused).
func (s *Scaled) Speed() float64 { return s.a.Load().Speed }

// Anchor returns the wall and simulated instants the clock is anchored at.
func (s *Scaled) Anchor() (wall, sim time.Time) {
	a := s.a.Load()
	return a.Wall, a.Sim
}

// Current is the clock's anchor.
func (s *Scaled) Current() Anchor { return *s.a.Load() }

// Paused reports whether the clock stands still.
func (s *Scaled) Paused() bool { return s.a.Load().Paused }

// Now is the simulated time.
func (s *Scaled) Now() time.Time { return s.a.Load().At(time.Now()) }

// Pause stops the clock at its current time; it returns the new anchor.
func (s *Scaled) Pause() Anchor {
	now := time.Now()
	a := *s.a.Load()
	if a.Paused {
		return a
	}
	return s.SetAnchor(Anchor{Wall: now, Sim: a.At(now), Speed: a.Speed, Paused: true})
}

// Resume lets a paused clock run again from where it stood.
func (s *Scaled) Resume() Anchor {
	a := *s.a.Load()
	if !a.Paused {
		return a
	}
	return s.SetAnchor(Anchor{Wall: time.Now(), Sim: a.Sim, Speed: a.Speed})
}

// SetAnchor moves the clock onto a new anchor (another process paused or
// resumed the clock they share) and re-arms every timer for its deadline.
// Time never goes back: an anchor that would read earlier than now is moved
// to now.
func (s *Scaled) SetAnchor(a Anchor) Anchor {
	if a.Speed <= 0 {
		a.Speed = s.a.Load().Speed
	}
	now := time.Now()
	if cur := s.Now(); a.At(now).Before(cur) {
		a.Wall, a.Sim = now, cur
	}
	s.mu.Lock()
	s.a.Store(&a)
	armed := make([]scaledArmed, 0, len(s.timers))
	for t := range s.timers {
		armed = append(armed, t)
	}
	s.mu.Unlock()
	for _, t := range armed {
		t.rearm()
	}
	return a
}

// wallUntil is how long the wall waits until the clock reads at; ok is
// false while the clock is paused (it never reaches at then).
func (s *Scaled) wallUntil(at time.Time) (d time.Duration, ok bool) {
	a := s.a.Load()
	if a.Paused {
		return 0, a.Sim.After(at) || a.Sim.Equal(at)
	}
	return max(0, time.Duration(float64(at.Sub(a.At(time.Now())))/a.Speed)), true
}

func (s *Scaled) track(t scaledArmed, on bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if on {
		s.timers[t] = struct{}{}
	} else {
		delete(s.timers, t)
	}
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
	st := &scaledTimer{s: s, fn: f}
	st.mu.Lock()
	st.start(d)
	st.mu.Unlock()
	return st
}

// scaledTimer is a timer on a Scaled clock: a channel timer, or a function
// timer when fn is set. Like time.Timer since Go 1.23, Stop and Reset
// discard a fired value not yet received, so no receive after them sees a
// stale time; seq makes a callback already on its way when they run deliver
// nothing. Its deadline is in simulated time, so a pause or a new anchor
// re-arms it.
type scaledTimer struct {
	s  *Scaled
	c  chan time.Time
	fn func()

	mu   sync.Mutex
	t    *time.Timer
	when time.Time
	seq  uint64
	// done is set once the current arming has delivered its value or been
	// disarmed: nothing more will come of it.
	done bool
}

// start arms the timer for d from now; called with mu held.
func (st *scaledTimer) start(d time.Duration) {
	st.done = false
	st.when = st.s.Now().Add(d)
	st.s.track(st, true)
	st.armLocked()
}

// armLocked sets the wall timer for the deadline (none while the clock is
// paused before it); called with mu held.
func (st *scaledTimer) armLocked() {
	seq := st.seq
	wall, ok := st.s.wallUntil(st.when)
	if !ok {
		st.t = nil
		return
	}
	st.t = time.AfterFunc(wall, func() { st.fire(seq) })
}

func (st *scaledTimer) rearm() {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.done {
		return
	}
	if st.t != nil {
		st.t.Stop()
	}
	st.seq++
	st.armLocked()
}

func (st *scaledTimer) fire(seq uint64) {
	st.mu.Lock()
	if seq != st.seq || st.done {
		st.mu.Unlock()
		return
	}
	if now := st.s.Now(); now.Before(st.when) {
		// The wall timer rounds; or the clock was re-anchored on the way.
		st.seq++
		st.armLocked()
		st.mu.Unlock()
		return
	}
	st.done = true
	st.s.track(st, false)
	if st.fn != nil {
		st.mu.Unlock()
		go st.fn()
		return
	}
	defer st.mu.Unlock()
	select {
	case st.c <- st.s.Now():
	default:
	}
}

// disarm stops the timer and discards any undelivered or unreceived value,
// reporting whether a value was kept from the receiver; called with mu held.
func (st *scaledTimer) disarm() bool {
	pending := !st.done
	if st.t != nil {
		st.t.Stop()
	}
	st.seq++
	st.done = true
	st.s.track(st, false)
	if st.c != nil {
		select {
		case <-st.c:
			pending = true
		default:
		}
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

// Fake is a clock for tests: time stands still until Advance or Set moves it,
// and timers due by then fire in order of their deadlines.
type Fake struct {
	mu     sync.Mutex
	now    time.Time
	timers []*fakeTimer
	// calls counts AfterFunc callbacks started and not yet returned.
	calls int
	// fired counts timers fired, to tell that time made something happen.
	fired uint64
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

// Next reports when the earliest waiting timer falls due.
func (f *Fake) Next() (time.Time, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var next time.Time
	ok := false
	for _, t := range f.timers {
		if t.active && (!ok || t.when.Before(next)) {
			next, ok = t.when, true
		}
	}
	return next, ok
}

// Busy reports whether time has made something happen that is not over:
// an AfterFunc callback still runs, or a fired channel timer's value has
// not been received. Fired is how many timers have fired so far. Tests use
// both to let a system settle before moving time on.
func (f *Fake) Busy() (busy bool, fired uint64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.calls > 0 {
		return true, f.fired
	}
	for _, t := range f.timers {
		if t.fn == nil && !t.active && len(t.c) > 0 {
			return true, f.fired
		}
	}
	return false, f.fired
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
		if t.active || (t.fn == nil && len(t.c) > 0) { // Busy looks at unreceived values
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
	t.f.fired++
	if t.fn != nil {
		t.f.calls++
		go func() {
			defer func() {
				t.f.mu.Lock()
				t.f.calls--
				t.f.mu.Unlock()
			}()
			t.fn()
		}()
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
