package clock

import (
	"testing"
	"time"
)

var t0 = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

// within is how long a test waits for something that should happen at
// once; only a broken clock ever waits this long.
const within = 5 * time.Second

// received returns the value waiting on c, if any, without blocking.
func received(c <-chan time.Time) (time.Time, bool) {
	select {
	case v := <-c:
		return v, true
	default:
		return time.Time{}, false
	}
}

// waitFor fails the test unless done is closed in time.
func waitFor(t *testing.T, done <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-done:
	case <-time.After(within):
		t.Fatalf("%s did not happen", what)
	}
}

func TestFakeFiresInDeadlineOrder(t *testing.T) {
	f := NewFake(t0)
	delays := []time.Duration{3 * time.Second, time.Second, 2 * time.Second, 10 * time.Second, 2 * time.Second}
	timers := make([]Timer, len(delays))
	for i, d := range delays {
		timers[i] = f.NewTimer(d)
	}
	if f.Timers() != len(delays) {
		t.Fatalf("Timers() = %d, want %d", f.Timers(), len(delays))
	}
	f.Advance(5 * time.Second)
	if !f.Now().Equal(t0.Add(5 * time.Second)) {
		t.Errorf("Now() = %v after Advance(5s)", f.Now())
	}
	// Each timer reads the clock at its own deadline; had one fired before
	// an earlier one, the earlier one would read the later deadline.
	for i, d := range delays {
		v, ok := received(timers[i].C())
		switch {
		case d > 5*time.Second && ok:
			t.Errorf("timer %d (%v) fired early at %v", i, d, v)
		case d <= 5*time.Second && !ok:
			t.Errorf("timer %d (%v) did not fire", i, d)
		case ok && !v.Equal(t0.Add(d)):
			t.Errorf("timer %d (%v) fired reading %v, want %v", i, d, v, t0.Add(d))
		}
	}
	if f.Timers() != 1 {
		t.Errorf("Timers() = %d after firing 4 of 5, want 1", f.Timers())
	}
	f.Advance(5*time.Second - time.Nanosecond)
	if _, ok := received(timers[3].C()); ok {
		t.Error("10s timer fired a nanosecond early")
	}
	f.Advance(time.Nanosecond)
	if v, ok := received(timers[3].C()); !ok || !v.Equal(t0.Add(10*time.Second)) {
		t.Errorf("10s timer = %v, %v at its deadline", v, ok)
	}
}

func TestFakeAfterFunc(t *testing.T) {
	f := NewFake(t0)
	ran := make(chan struct{})
	var at time.Time
	f.AfterFunc(time.Minute, func() {
		at = f.Now()
		close(ran)
	})
	f.Advance(59 * time.Second)
	if f.Timers() != 1 {
		t.Fatalf("Timers() = %d before the deadline, want 1", f.Timers())
	}
	f.Advance(time.Second)
	waitFor(t, ran, "AfterFunc callback")
	if !at.Equal(t0.Add(time.Minute)) {
		t.Errorf("callback read %v, want %v", at, t0.Add(time.Minute))
	}
	if f.Timers() != 0 {
		t.Errorf("Timers() = %d after firing", f.Timers())
	}
}

func TestFakeZeroDelayFiresNow(t *testing.T) {
	f := NewFake(t0)
	for _, d := range []time.Duration{0, -time.Second} {
		tm := f.NewTimer(d)
		if v, ok := received(tm.C()); !ok || !v.Equal(t0) {
			t.Errorf("NewTimer(%v) = %v, %v without advancing; want %v", d, v, ok, t0)
		}
		ran := make(chan struct{})
		f.AfterFunc(d, func() { close(ran) })
		waitFor(t, ran, "AfterFunc with delay "+d.String())
	}
	if f.Timers() != 0 {
		t.Errorf("Timers() = %d, want 0", f.Timers())
	}
}

func TestFakeStop(t *testing.T) {
	tests := []struct {
		name string
		// before runs before Stop; want is Stop's result.
		before func(f *Fake, tm Timer)
		want   bool
	}{
		{"waiting timer", func(f *Fake, tm Timer) {}, true},
		{"already stopped", func(f *Fake, tm Timer) { tm.Stop() }, false},
		{"fired and received", func(f *Fake, tm Timer) { f.Advance(time.Hour); <-tm.C() }, false},
		// As with time.Timer since Go 1.23, a value not yet received is
		// taken back: nobody will read a stale time after Stop.
		{"fired, not received", func(f *Fake, tm Timer) { f.Advance(time.Hour) }, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := NewFake(t0)
			tm := f.NewTimer(time.Minute)
			tt.before(f, tm)
			if got := tm.Stop(); got != tt.want {
				t.Errorf("Stop() = %v, want %v", got, tt.want)
			}
			f.Advance(2 * time.Hour)
			if v, ok := received(tm.C()); ok {
				t.Errorf("stopped timer delivered %v", v)
			}
			if f.Timers() != 0 {
				t.Errorf("Timers() = %d after Stop", f.Timers())
			}
		})
	}
	t.Run("AfterFunc", func(t *testing.T) {
		f := NewFake(t0)
		ran := make(chan struct{}, 1)
		tm := f.AfterFunc(time.Minute, func() { ran <- struct{}{} })
		if !tm.Stop() {
			t.Error("Stop() = false for a waiting AfterFunc")
		}
		f.Advance(time.Hour)
		if f.Timers() != 0 {
			t.Errorf("Timers() = %d", f.Timers())
		}
		// The callback is started, if at all, inside Advance; a stopped
		// one never is, so Reset finds it inactive.
		if tm.Reset(time.Minute) {
			t.Error("Reset() = true: the stopped callback was still pending")
		}
		tm.Stop()
		select {
		case <-ran:
			t.Error("stopped AfterFunc ran")
		default:
		}
	})
}

func TestFakeReset(t *testing.T) {
	t.Run("moves the deadline from now", func(t *testing.T) {
		f := NewFake(t0)
		tm := f.NewTimer(time.Minute)
		f.Advance(30 * time.Second)
		if !tm.Reset(time.Minute) {
			t.Error("Reset of a waiting timer = false")
		}
		f.Advance(45 * time.Second) // past the old deadline
		if v, ok := received(tm.C()); ok {
			t.Fatalf("fired at the old deadline: %v", v)
		}
		f.Advance(15 * time.Second)
		if v, ok := received(tm.C()); !ok || !v.Equal(t0.Add(90*time.Second)) {
			t.Errorf("fired %v, %v; want %v", v, ok, t0.Add(90*time.Second))
		}
	})
	t.Run("re-arms a fired timer", func(t *testing.T) {
		f := NewFake(t0)
		tm := f.NewTimer(time.Minute)
		f.Advance(time.Minute)
		<-tm.C()
		if tm.Reset(time.Minute) {
			t.Error("Reset of a fired, received timer = true")
		}
		if f.Timers() != 1 {
			t.Errorf("Timers() = %d after Reset", f.Timers())
		}
		f.Advance(time.Minute)
		if v, ok := received(tm.C()); !ok || !v.Equal(t0.Add(2*time.Minute)) {
			t.Errorf("fired %v, %v; want %v", v, ok, t0.Add(2*time.Minute))
		}
	})
	t.Run("discards an unreceived value", func(t *testing.T) {
		f := NewFake(t0)
		tm := f.NewTimer(time.Minute)
		f.Advance(time.Minute) // fires; nobody receives
		if !tm.Reset(time.Hour) {
			t.Error("Reset of a fired, unreceived timer = false")
		}
		if v, ok := received(tm.C()); ok {
			t.Errorf("stale value %v after Reset", v)
		}
	})
	t.Run("to zero fires now", func(t *testing.T) {
		f := NewFake(t0)
		tm := f.NewTimer(time.Hour)
		tm.Reset(0)
		if v, ok := received(tm.C()); !ok || !v.Equal(t0) {
			t.Errorf("Reset(0) delivered %v, %v without advancing; want %v", v, ok, t0)
		}
		if f.Timers() != 0 {
			t.Errorf("Timers() = %d", f.Timers())
		}
		f.Advance(2 * time.Hour)
		if v, ok := received(tm.C()); ok {
			t.Errorf("timer fired again at %v", v)
		}
	})
	t.Run("AfterFunc to zero runs now", func(t *testing.T) {
		f := NewFake(t0)
		ran := make(chan struct{})
		tm := f.AfterFunc(time.Hour, func() { close(ran) })
		tm.Reset(-time.Second)
		waitFor(t, ran, "AfterFunc after Reset(-1s)")
	})
	t.Run("survives compaction", func(t *testing.T) {
		// A stopped timer is dropped from the clock's list once many
		// timers have come and gone; Reset must put it back.
		f := NewFake(t0)
		old := f.NewTimer(time.Second)
		old.Stop()
		for i := range 200 {
			f.NewTimer(time.Duration(i+1) * time.Millisecond)
		}
		f.Advance(time.Second)
		f.NewTimer(time.Hour) // triggers compaction
		old.Reset(time.Minute)
		if f.Timers() != 2 {
			t.Errorf("Timers() = %d, want 2", f.Timers())
		}
		f.Advance(time.Minute)
		if v, ok := received(old.C()); !ok || !v.Equal(t0.Add(time.Second+time.Minute)) {
			t.Errorf("reset timer = %v, %v", v, ok)
		}
	})
}

func TestFakeSet(t *testing.T) {
	f := NewFake(t0)
	tm := f.NewTimer(time.Hour)
	f.Set(t0.Add(-time.Hour))
	if !f.Now().Equal(t0) {
		t.Errorf("Set to the past moved the clock to %v", f.Now())
	}
	f.Set(t0.Add(2 * time.Hour))
	if !f.Now().Equal(t0.Add(2 * time.Hour)) {
		t.Errorf("Now() = %v after Set", f.Now())
	}
	if v, ok := received(tm.C()); !ok || !v.Equal(t0.Add(time.Hour)) {
		t.Errorf("timer = %v, %v; want it fired at its deadline %v", v, ok, t0.Add(time.Hour))
	}
	f.Set(t0)
	if !f.Now().Equal(t0.Add(2 * time.Hour)) {
		t.Errorf("Set went backwards to %v", f.Now())
	}
	f.Advance(-time.Minute)
	if !f.Now().Equal(t0.Add(2 * time.Hour)) {
		t.Errorf("Advance(-1m) went backwards to %v", f.Now())
	}
	if got := Since(f, t0); got != 2*time.Hour {
		t.Errorf("Since = %v, want 2h", got)
	}
}

func TestFakeTimerSetByCallback(t *testing.T) {
	// A component that re-arms itself from its callback: Timers() tells
	// the test when it has gone back to sleep.
	f := NewFake(t0)
	ticks := make(chan time.Time, 10)
	var tick func()
	tick = func() {
		ticks <- f.Now()
		f.AfterFunc(time.Minute, tick)
	}
	f.AfterFunc(time.Minute, tick)
	for i := 1; i <= 3; i++ {
		f.Advance(time.Minute)
		select {
		case v := <-ticks:
			if !v.Equal(t0.Add(time.Duration(i) * time.Minute)) {
				t.Errorf("tick %d at %v", i, v)
			}
		case <-time.After(within):
			t.Fatalf("tick %d did not run", i)
		}
		deadline := time.Now().Add(within)
		for f.Timers() != 1 {
			if time.Now().After(deadline) {
				t.Fatalf("callback %d did not re-arm", i)
			}
			time.Sleep(time.Millisecond) // polling, not timing
		}
	}
}

func TestReal(t *testing.T) {
	var c Clock = Real{}
	before := time.Now()
	now := c.Now()
	if now.Before(before) || now.After(time.Now()) {
		t.Errorf("Now() = %v, not between the wall readings around it", now)
	}
	tm := c.NewTimer(time.Millisecond)
	select {
	case <-tm.C():
	case <-time.After(within):
		t.Fatal("1ms timer did not fire")
	}
	ran := make(chan struct{})
	c.AfterFunc(time.Millisecond, func() { close(ran) })
	waitFor(t, ran, "Real AfterFunc")
	long := c.NewTimer(time.Hour)
	if !long.Stop() {
		t.Error("Stop of a waiting real timer = false")
	}
	if long.Reset(time.Hour) {
		t.Error("Reset of a stopped real timer = true")
	}
	long.Stop()
}

func TestScaledNow(t *testing.T) {
	const speed = 1000
	wall := time.Now()
	c := NewScaled(wall, t0, speed)
	if c.Speed() != speed {
		t.Errorf("Speed() = %v", c.Speed())
	}
	if w, s := c.Anchor(); !w.Equal(wall) || !s.Equal(t0) {
		t.Errorf("Anchor() = %v, %v", w, s)
	}
	// Let some wall time pass, then bracket a reading between two wall
	// readings: the simulated time must lie between their images.
	done := time.NewTimer(20 * time.Millisecond)
	<-done.C
	before := time.Now()
	got := c.Now()
	after := time.Now()
	lo := t0.Add(before.Sub(wall) * speed)
	hi := t0.Add(after.Sub(wall) * speed)
	if got.Before(lo) || got.After(hi) {
		t.Errorf("Now() = %v, want between %v and %v", got, lo, hi)
	}
	if elapsed := got.Sub(t0); elapsed < 20*time.Second {
		t.Errorf("%v of wall time read as %v at %dx", after.Sub(wall), elapsed, speed)
	}
	if got := Since(c, t0); got < 20*time.Second {
		t.Errorf("Since = %v", got)
	}
}

func TestScaledTimer(t *testing.T) {
	const speed = 1000
	c := NewScaled(time.Now(), t0, speed)
	start, simStart := time.Now(), c.Now()
	tm := c.NewTimer(10 * time.Second) // 10ms of wall time
	var v time.Time
	select {
	case v = <-tm.C():
	case <-time.After(within):
		t.Fatal("10s timer at 1000x did not fire")
	}
	wall := time.Since(start)
	if wall < 10*time.Millisecond {
		t.Errorf("fired after %v of wall time, before its 10ms", wall)
	}
	if v.Sub(simStart) < 10*time.Second {
		t.Errorf("fired reading %v, %v after it was set; want at least 10s", v, v.Sub(simStart))
	}
	if tm.Stop() {
		t.Error("Stop of a fired, received timer = true")
	}

	t.Run("AfterFunc", func(t *testing.T) {
		ran := make(chan struct{})
		c.AfterFunc(10*time.Second, func() { close(ran) })
		waitFor(t, ran, "Scaled AfterFunc")
	})
	t.Run("Stop prevents firing", func(t *testing.T) {
		tm := c.NewTimer(10 * time.Second)
		if !tm.Stop() {
			t.Error("Stop of a waiting timer = false")
		}
		guard := time.NewTimer(50 * time.Millisecond) // five times the timer's wall delay
		defer guard.Stop()
		select {
		case v := <-tm.C():
			t.Errorf("stopped timer fired at %v", v)
		case <-guard.C:
		}
	})
	t.Run("Reset discards a stale value", func(t *testing.T) {
		tm := c.NewTimer(time.Second) // 1ms of wall time
		deadline := time.Now().Add(within)
		for len(tm.C()) == 0 { // fired, not received
			if time.Now().After(deadline) {
				t.Fatal("1s timer at 1000x did not fire")
			}
			time.Sleep(time.Millisecond) // polling, not timing
		}
		if !tm.Reset(time.Hour) {
			t.Error("Reset of a fired, unreceived timer = false")
		}
		if v, ok := received(tm.C()); ok {
			t.Errorf("stale value %v after Reset", v)
		}
		if !tm.Stop() {
			t.Error("Stop after Reset(1h) = false")
		}
		if tm.Stop() {
			t.Error("second Stop = true")
		}
	})
	t.Run("Reset re-arms", func(t *testing.T) {
		tm := c.NewTimer(time.Hour)
		before := c.Now()
		tm.Reset(10 * time.Second)
		select {
		case v := <-tm.C():
			if v.Sub(before) < 10*time.Second {
				t.Errorf("fired %v after Reset(10s)", v.Sub(before))
			}
		case <-time.After(within):
			t.Fatal("reset timer did not fire")
		}
	})
}

func TestNewScaledRefusesBadSpeed(t *testing.T) {
	for _, speed := range []float64{0, -1} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("NewScaled with speed %v did not panic", speed)
				}
			}()
			NewScaled(time.Now(), t0, speed)
		}()
	}
}

// A paused clock stands still and fires nothing until it is resumed, then
// its timers fire at their deadlines in simulated time.
func TestScaledPauseHoldsTimers(t *testing.T) {
	const speed = 1000
	c := NewScaled(time.Now(), t0, speed)
	tm := c.NewTimer(10 * time.Second) // 10ms of wall time
	ran := make(chan struct{})
	c.AfterFunc(10*time.Second, func() { close(ran) })
	a := c.Pause()
	if !a.Paused || !c.Paused() {
		t.Fatal("Pause did not pause")
	}
	stood := c.Now()
	guard := time.NewTimer(60 * time.Millisecond) // six times the timers' wall delay
	select {
	case v := <-tm.C():
		t.Fatalf("a timer fired at %v while the clock was paused", v)
	case <-ran:
		t.Fatal("an AfterFunc ran while the clock was paused")
	case <-guard.C:
	}
	if !c.Now().Equal(stood) {
		t.Fatalf("a paused clock moved from %v to %v", stood, c.Now())
	}
	c.Resume()
	select {
	case v := <-tm.C():
		if v.Sub(t0) < 10*time.Second {
			t.Errorf("fired reading %v, before its deadline", v)
		}
	case <-time.After(within):
		t.Fatal("the timer did not fire after Resume")
	}
	waitFor(t, ran, "AfterFunc after Resume")
}

// A clock following another process's anchor (a shared simulated clock)
// takes its pauses and never goes back in time.
func TestScaledSetAnchor(t *testing.T) {
	c := NewScaled(time.Now(), t0, 1000)
	leader := NewScaled(time.Now(), t0, 1000)
	time.Sleep(5 * time.Millisecond)
	a := leader.Pause()
	c.SetAnchor(a)
	if !c.Paused() {
		t.Fatal("the follower did not pause")
	}
	// An anchor that would read earlier than now is moved up to now.
	before := c.Now()
	c.SetAnchor(Anchor{Wall: time.Now(), Sim: t0, Speed: 1000, Paused: true})
	if c.Now().Before(before) {
		t.Fatalf("the clock went back from %v to %v", before, c.Now())
	}
	c.SetAnchor(leader.Resume())
	if c.Paused() {
		t.Fatal("the follower did not resume")
	}
}
