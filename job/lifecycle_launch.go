package job

import (
	"fmt"
	"slices"
	"time"

	"github.com/spotwise/spotwise/money"
)

// Instance is what a provider said of one instance.
type Instance struct {
	ID         string
	LaunchedAt time.Time
	// RunningAt is zero until it runs; EndedAt until it ended.
	RunningAt time.Time
	EndedAt   time.Time
	Reason    string
	// Price is what the provider charges for it per hour (zero: not
	// said; the placement's price is billed).
	Price money.Micros
	// Prices are the changes of that price since its launch, in time
	// order, as far as the provider has reported them.
	Prices []money.PriceChange
}

// Place is a scheduling decision: put the job's attempt Attempt (one past
// the last) on an offer.
type Place struct {
	Attempt          int
	Placement        Placement
	MaxPrice         money.Micros
	EstimatedRuntime time.Duration
	EstimatedCost    money.Micros
	// CheckpointRoot is where the server stores checkpoints by default;
	// the job's own location (its spec's checkpoint.uri) wins. Kept from
	// the first placement on.
	CheckpointRoot string
	// Baseline is the job's on-demand baseline (Status.BaselineCost),
	// kept from the first placement that carries one.
	Baseline money.Micros
	// Transfer is what carrying the job's checkpoint to the placement's
	// region costs (Attempt.Transfer).
	Transfer money.Micros
	// DataTransfer is what reading the job's input data into the
	// placement's region costs (Attempt.DataTransfer).
	DataTransfer money.Micros
}

// Launched is what a launch call returned (the provider's word).
type Launched struct {
	Attempt   int
	Key       string
	Instances []Instance
}

// LaunchRefused is a definite "no" to a launch: nothing was bought.
type LaunchRefused struct {
	Attempt int
	Key     string
	// Permanent refusals (a reason retrying will not change) exclude
	// Exclude (an offer or a scope of offers) for this job; others are a
	// lack of capacity the scheduler keeps track of.
	Permanent bool
	Exclude   string
	Code      string
	Reason    string
	// Account says the account's setup is at fault: operators must act.
	Account bool
}

// LaunchUnknown is a launch whose outcome is not known (a time-out, a 5xx):
// the provider may have started the instances. Below MaxTries the job
// waits for the launch to be asked again with the same key; at MaxTries it
// is given up and whatever it bought is terminated.
type LaunchUnknown struct {
	Attempt  int
	Key      string
	Err      string
	MaxTries int
}

// InstanceRunning reports an instance that reached running. Verified means
// the provider's own listing says so (not a message on the bus).
type InstanceRunning struct {
	Key      string
	Instance Instance
	Verified bool
}

// InstanceGone reports an instance that ended, with the end its provider
// reports.
type InstanceGone struct {
	Key      string
	Instance Instance
	Verified bool
}

// Observed is what a provider lists for one launch key (reconciliation):
// every instance it has for the key, live or ended, as of At. Instances
// the record knows and the listing does not have are gone, unless they
// were launched less than ListingGrace before At.
type Observed struct {
	Key       string
	Instances []Instance
	// At is when the listing was taken; zero: when it is applied. A
	// listing is applied some time after it was taken (reconciliation
	// lists every instance first, then goes job by job), and a launch
	// recorded in between is not in it.
	At time.Time
}

// ListingGrace is how long after its launch an instance missing from a
// provider's listing is still not taken for gone: the listing may have
// been taken before the launch (or lag behind it, as cloud APIs do).
const ListingGrace = time.Minute

// SeenEvery is how often a listing that finds an attempt's instances alive
// is written into its record (Attempt.SeenAt; its launch and its
// workload's start count as sightings, see lastAlive). Reconciliation lists every
// running job's instances every few seconds; writing each sighting made
// every running job's record change at that pace (with 15,000 running, a
// thousand writes a second, each decoded by every reader of the bucket,
// and a round that never finished). An instance that later vanishes
// without a trace is billed to the sighting written, at most SeenEvery
// short of the last one; an instance whose end is known is billed to it.
const SeenEvery = 5 * time.Minute

func (Place) Name() string           { return "place" }
func (Launched) Name() string        { return "launched" }
func (LaunchRefused) Name() string   { return "launch-refused" }
func (LaunchUnknown) Name() string   { return "launch-unknown" }
func (InstanceRunning) Name() string { return "instance-running" }
func (InstanceGone) Name() string    { return "instance-gone" }
func (Observed) Name() string        { return "observed" }

func (t *tx) place(in Place) {
	r, s := t.r, &t.r.Status
	switch {
	case s.State.Terminal():
		t.stale("the job is " + string(s.State))
	case s.Current != nil && s.Current.N == in.Attempt:
		t.duplicate(fmt.Sprintf("attempt %d is placed already", in.Attempt))
	case !r.NeedsPlacement():
		t.stale(fmt.Sprintf("the job is %s and needs no placement", s.State))
	case in.Attempt != s.Attempt+1:
		t.stale(fmt.Sprintf("decided for attempt %d; the job is at attempt %d", in.Attempt, s.Attempt))
	}
	if t.res.Verdict != "" {
		return
	}
	s.Attempt = in.Attempt
	a := &Attempt{N: in.Attempt, LaunchKey: LaunchKey(r.ID, in.Attempt), Placement: in.Placement, PlacedAt: t.now,
		MaxPrice: in.MaxPrice, EstimatedRuntime: Duration(in.EstimatedRuntime), EstimatedCost: in.EstimatedCost, Transfer: in.Transfer,
		DataTransfer: in.DataTransfer}
	if s.BaselineCost == 0 && in.Baseline > 0 {
		s.BaselineCost = in.Baseline
	}
	if s.CheckpointRoot == "" {
		s.CheckpointRoot = in.CheckpointRoot
		if uri := r.Spec.Checkpoint.URI; uri != "" {
			s.CheckpointRoot = uri
		}
	}
	p := in.Placement
	msg := fmt.Sprintf("placing on %d x %s in %s (%s, %s/h)", max(1, p.Nodes), p.InstanceType, p.Zone, p.Purchase, p.PricePerHour.Human())
	switch prev := s.Previous; {
	case awaiting(prev):
		// A replacement: its workload starts once the attempt it replaces
		// has checkpointed, at the latest when that one's capacity goes.
		a.StartAfter = prev.Notice.Deadline
		s.Message = "replacement " + msg
	case s.State == Queued:
		t.moveTo(Placing, msg)
	default:
		s.Message = "replacement " + msg
	}
	s.Current = a
	t.do(Launch{Attempt: a.clone()})
	t.history(KindPlacing, a.N, &a.Placement, fmt.Sprintf("expected runtime %s, expected cost %s", humanDuration(in.EstimatedRuntime), in.EstimatedCost.Human()), a.LaunchKey+"-placing")
}

func (t *tx) launched(in Launched) {
	a, prev := t.attemptByKey(in.Key)
	if a == nil || a.N != in.Attempt {
		if c := t.closedByKey(in.Key); c != nil {
			t.lateInstances(c, in.Instances, time.Time{})
			return
		}
		t.stale(fmt.Sprintf("no attempt has key %s", in.Key))
		return
	}
	had := len(a.Instances)
	changed := false
	for _, inst := range in.Instances {
		changed = t.record(a, inst) || changed
	}
	if a.LaunchedAt.IsZero() {
		a.LaunchedAt = t.now
		changed = true
	}
	if !changed {
		t.duplicate("the launch is recorded already")
		return
	}
	t.noteLaunched(a, had)
	t.afterInstances(a, prev, "")
}

// noteLaunched puts an attempt's launch in the history when its first
// instances become known (it had had before), whether the launch's answer
// or a listing of the provider told first.
func (t *tx) noteLaunched(a *Attempt, had int) {
	if had == 0 && len(a.Instances) > 0 {
		t.history(KindLaunched, a.N, &a.Placement, "launched "+joinIDs(a.Instances), a.LaunchKey+"-launched")
	}
}

// lateInstances records instances that turned up for an attempt that has
// ended (a launch that came back late, an instance's end reported after the
// attempt closed): they are billed to it and terminated if still live.
// listedAt is when a provider listing said so (zero: not a listing).
func (t *tx) lateInstances(a *Attempt, insts []Instance, listedAt time.Time) {
	changed := false
	for _, inst := range insts {
		changed = t.record(a, inst) || changed
		if sp := spanOf(a, inst.ID); sp != nil && inst.EndedAt.IsZero() && !sp.To.IsZero() && listedAt.After(sp.To) {
			// A listing taken after its recorded end has it live, so the
			// end was wrongly inferred (an earlier listing missed it): it
			// still runs and costs. It is terminated, and billed to its
			// real end once that is known. (A listing, a launch's answer
			// or an event from before the end says nothing of it.)
			sp.To = time.Time{}
			changed = true
		}
	}
	if changed {
		t.r.rebill(a)
	} else {
		t.duplicate("the ended attempt knows these instances")
	}
	if live := liveInstances(a); len(live) > 0 {
		t.do(Terminate{Attempt: a.N, Key: a.LaunchKey, Instances: live, Provider: a.Placement.Provider, Why: "its attempt has ended"})
	}
}

// record adds what the provider says of an instance to an attempt.
func (t *tx) record(a *Attempt, inst Instance) bool {
	changed := false
	if !owns(a, inst.ID) {
		a.Instances = append(a.Instances, inst.ID)
		from := inst.LaunchedAt
		if from.IsZero() {
			from = t.now
		}
		a.Spans = append(a.Spans, Span{Instance: inst.ID, From: from, Price: inst.Price})
		if a.LaunchedAt.IsZero() || from.Before(a.LaunchedAt) {
			a.LaunchedAt = from
		}
		changed = true
	} else if sp := spanOf(a, inst.ID); sp != nil && sp.Price == 0 && inst.Price != 0 {
		sp.Price = inst.Price // known since: bill what the provider charges
		changed = true
	}
	if sp := spanOf(a, inst.ID); sp != nil {
		changed = repriced(sp, inst.Prices) || changed
	}
	if !inst.RunningAt.IsZero() && !slices.Contains(a.Running, inst.ID) {
		a.Running = append(a.Running, inst.ID)
		changed = true
	}
	if !inst.EndedAt.IsZero() {
		changed = t.gone(a, inst.ID, inst.EndedAt) || changed
	}
	return changed
}

// repriced records the price changes a provider reported for an
// instance that came after the last one the span knows: the span's only
// ever grow, so a report that knows fewer (an older listing, an event sent
// before the last change, a provider that lost what it had noted in a
// restart) takes nothing back.
func repriced(sp *Span, changes []money.PriceChange) bool {
	var last time.Time
	if n := len(sp.Prices); n > 0 {
		last = sp.Prices[n-1].At
	}
	added := false
	for _, c := range changes {
		if c.At.After(last) && c.At.After(sp.From) {
			sp.Prices = append(sp.Prices, c)
			last, added = c.At, true
		}
	}
	return added
}

// gone records an instance's end.
func (t *tx) gone(a *Attempt, id string, at time.Time) bool {
	for i := range a.Spans {
		sp := &a.Spans[i]
		if sp.Instance != id {
			continue
		}
		if !sp.To.IsZero() {
			return false
		}
		sp.To = at
		if sp.To.Before(sp.From) {
			sp.To = sp.From
		}
		return true
	}
	return false
}

// afterInstances works out what an attempt's instances now mean: a
// released attempt whose capacity is all gone closes; an instance lost
// under a live attempt is a loss; every node of a new attempt running makes
// the job run.
func (t *tx) afterInstances(a *Attempt, prev bool, reason string) {
	s := &t.r.Status
	slot := &s.Current
	if prev {
		slot = &s.Previous
	}
	switch {
	case a.Released():
		if ended(a) {
			t.closeReleased(slot)
		} else {
			t.do(Terminate{Attempt: a.N, Key: a.LaunchKey, Instances: liveInstances(a), Provider: a.Placement.Provider, Why: "released"})
		}
	case len(liveInstances(a)) < len(a.Instances):
		if reason == "" {
			reason = "instance ended"
		}
		if prev {
			t.reclaimed(reason)
		} else {
			t.lost(reason)
		}
	case !prev && s.State == Placing && len(a.Running) >= max(1, a.Placement.Nodes):
		// A first placement runs when its nodes do; a replacement when its
		// agent starts the workload (after the old attempt checkpointed).
		a.RunningAt, a.StartProgress = t.now, s.Progress
		t.moveTo(Running, "running")
		t.history(KindRunning, a.N, &a.Placement, "running on "+joinIDs(a.Instances), a.LaunchKey+"-running")
	case !prev && held(a) && len(a.Running) > 0 && !awaiting(s.Previous):
		// A replacement comes up after the checkpoint it waits for was
		// stored: it may start at once.
		t.do(StartWorkload{Attempt: a.N})
	}
}

func (t *tx) launchRefused(in LaunchRefused) {
	s := &t.r.Status
	a := s.Current
	switch {
	case a == nil || a.LaunchKey != in.Key:
		t.stale(fmt.Sprintf("attempt %d is not the job's current one", in.Attempt))
		return
	case len(a.Instances) > 0:
		t.refuse(fmt.Sprintf("attempt %d has instances: its launch was not refused", in.Attempt))
		return
	}
	msg := "launch failed: " + in.Reason
	if in.Permanent && in.Exclude != "" && !slices.ContainsFunc(s.Excluded, func(x Exclusion) bool { return x.Key == in.Exclude }) {
		s.Excluded = append(s.Excluded, Exclusion{Key: in.Exclude, Code: in.Code, Reason: in.Reason})
	}
	if in.Account {
		t.alert(SeverityCritical, "account-setup", fmt.Sprintf("%s refused to launch job %s (%s): %s; fix the account's setup", a.Placement.Provider, t.r.Spec.Name, t.r.ID, in.Reason),
			map[string]string{"provider": a.Placement.Provider, "region": a.Placement.Region, "code": in.Code}, in.Code)
	}
	closed := t.close(&s.Current, OutcomeLaunchFailed)
	t.history(KindLaunchFailed, closed.N, &closed.Placement, msg, closed.LaunchKey+"-launch-failed")
	if s.State == Placing {
		t.moveTo(Queued, msg)
	} else if !s.State.Terminal() {
		s.Message = msg
	}
}

func (t *tx) launchUnknown(in LaunchUnknown) {
	s := &t.r.Status
	a := s.Current
	if a == nil || a.LaunchKey != in.Key || len(a.Instances) > 0 {
		t.stale(fmt.Sprintf("attempt %d is not launching", in.Attempt))
		return
	}
	a.LaunchTries++
	if a.LaunchTries < max(1, in.MaxTries) {
		s.Message = fmt.Sprintf("launch outcome unknown (try %d of %d): %s; asking again with the same key", a.LaunchTries, in.MaxTries, in.Err)
		return
	}
	// Whatever the provider may have started for the key is terminated
	// (and billed to this attempt if it turns up).
	msg := fmt.Sprintf("launch outcome still unknown after %d tries (%s): giving up on %s", a.LaunchTries, in.Err, a.Placement.OfferID)
	t.do(Terminate{Attempt: a.N, Key: a.LaunchKey, Provider: a.Placement.Provider, Why: "launch given up"})
	closed := t.close(&s.Current, OutcomeLaunchLost)
	t.history(KindLaunchFailed, closed.N, &closed.Placement, msg, closed.LaunchKey+"-launch-lost")
	if s.State == Placing {
		t.moveTo(Queued, msg)
	} else if !s.State.Terminal() {
		s.Message = msg
	}
}

func (t *tx) instanceRunning(in InstanceRunning) {
	a, prev := t.attemptByKey(in.Key)
	if a == nil {
		if c := t.closedByKey(in.Key); c != nil && (owns(c, in.Instance.ID) || in.Verified) {
			t.lateInstances(c, []Instance{in.Instance}, time.Time{})
			return
		}
		t.stale(fmt.Sprintf("no live attempt has key %s", in.Key))
		return
	}
	if !owns(a, in.Instance.ID) && !in.Verified {
		t.refuse(fmt.Sprintf("instance %s is not one of attempt %d's", in.Instance.ID, a.N))
		return
	}
	if in.Instance.RunningAt.IsZero() {
		in.Instance.RunningAt = t.now
	}
	had := len(a.Instances)
	if !t.record(a, in.Instance) {
		t.duplicate("the instance is running already")
		return
	}
	t.noteLaunched(a, had)
	t.afterInstances(a, prev, "")
}

func (t *tx) instanceGone(in InstanceGone) {
	at := in.Instance.EndedAt
	if at.IsZero() {
		at = t.now
	}
	in.Instance.EndedAt = at
	a, prev := t.attemptByKey(in.Key)
	if a == nil {
		if c := t.closedByKey(in.Key); c != nil && (owns(c, in.Instance.ID) || in.Verified) {
			t.lateInstances(c, []Instance{in.Instance}, time.Time{})
			return
		}
		t.stale(fmt.Sprintf("no attempt has key %s", in.Key))
		return
	}
	if !owns(a, in.Instance.ID) && !in.Verified {
		t.refuse(fmt.Sprintf("instance %s is not one of attempt %d's", in.Instance.ID, a.N))
		return
	}
	had := len(a.Instances)
	if !t.record(a, in.Instance) {
		t.duplicate("the instance's end is known already")
		return
	}
	t.noteLaunched(a, had)
	reason := in.Instance.Reason
	if reason == "" {
		reason = "instance ended"
	}
	t.afterInstances(a, prev, fmt.Sprintf("instance %s: %s", in.Instance.ID, reason))
}

// observed reconciles an attempt with what its provider lists for its key.
func (t *tx) observed(in Observed) {
	a, prev := t.attemptByKey(in.Key)
	if a == nil {
		if c := t.closedByKey(in.Key); c != nil && len(in.Instances) > 0 {
			at := in.At
			if at.IsZero() {
				at = t.now
			}
			t.lateInstances(c, in.Instances, at)
			return
		}
		t.stale(fmt.Sprintf("no attempt has key %s", in.Key))
		return
	}
	had := len(a.Instances)
	changed := false
	listed := map[string]bool{}
	alive := false
	for _, inst := range in.Instances {
		listed[inst.ID] = true
		changed = t.record(a, inst) || changed
		if inst.EndedAt.IsZero() {
			alive = true
		}
	}
	listedAt := in.At
	if listedAt.IsZero() {
		listedAt = t.now
	}
	// Known instances the provider no longer lists at all ended, at the
	// latest when they were last seen; those launched just before the
	// listing was taken, or after, may simply not be in it yet.
	for _, id := range liveInstances(a) {
		if sp := spanOf(a, id); !listed[id] && sp != nil && !listedAt.Before(sp.From.Add(ListingGrace)) {
			at := lastAlive(a)
			if at.IsZero() {
				at = t.now
			}
			changed = t.gone(a, id, at) || changed
		}
	}
	if alive && !listedAt.Before(lastAlive(a).Add(SeenEvery)) {
		a.SeenAt = listedAt
		changed = true
	}
	if changed {
		t.noteLaunched(a, had)
		reason := "not found at the provider"
		for _, inst := range in.Instances {
			if !inst.EndedAt.IsZero() && inst.Reason != "" {
				reason = inst.Reason
			}
		}
		t.afterInstances(a, prev, reason)
	}
	// What changed may have closed the attempt or moved it on.
	if a, prev := t.attemptByKey(in.Key); a != nil && t.repeat(a, prev, len(in.Instances)) {
		changed = true
	}
	if !changed {
		t.set(Duplicate, "nothing new")
	}
}

// lastAlive is the last moment the record knows the attempt's instances
// were alive: the last sighting written, its workload's start (its agent
// ran on them) or its launch (the provider answered with them), whichever
// is latest. A sighting within SeenEvery of it is not written: with jobs
// of a few minutes, the first sighting was a write of every job's record
// that said nothing the record did not know.
func lastAlive(a *Attempt) time.Time {
	return latest(latest(a.SeenAt, a.RunningAt), a.LaunchedAt)
}

func latest(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// repeat asks again for what an attempt is waiting on, in case the first
// ask was lost (a crash, a dropped message): its launch, its termination,
// its checkpoint, its start. A move whose checkpoint has not come in
// MoveTimeout is given up; repeat reports whether that changed the job.
func (t *tx) repeat(a *Attempt, prev bool, listed int) bool {
	s := &t.r.Status
	switch {
	case a.Released():
		if live := liveInstances(a); len(live) > 0 {
			t.do(Terminate{Attempt: a.N, Key: a.LaunchKey, Instances: live, Provider: a.Placement.Provider, Why: "released"})
		}
	case !prev && a.RunningAt.IsZero() && listed < max(1, a.Placement.Nodes) && len(liveInstances(a)) == len(a.Instances):
		// Not launched, or only some of its nodes (a crash inside the
		// provider's launch): asking again with the key completes it and
		// buys nothing twice.
		t.do(Launch{Attempt: a.clone()})
	case prev && awaiting(a) && a.Notice.Deadline.After(t.now):
		t.do(RequestCheckpoint{Attempt: a.N, Deadline: a.Notice.Deadline, Reason: "repeat: " + a.Notice.Kind})
	case !prev && voluntary(a.Notice) && s.State == Checkpointing:
		if t.now.Sub(a.Notice.At) >= MoveTimeout {
			t.giveUp(a, fmt.Sprintf("no checkpoint for the move (%s) in %s: staying", a.Notice.Kind, humanDuration(MoveTimeout)))
			return true
		}
		t.do(RequestCheckpoint{Attempt: a.N, Reason: "repeat: " + a.Notice.Kind})
	case !prev && held(a) && len(a.Running) > 0 && !awaiting(s.Previous):
		t.do(StartWorkload{Attempt: a.N})
	}
	return false
}

// close ends a live attempt now with an outcome and reports it.
func (t *tx) close(slot **Attempt, outcome Outcome) *Attempt {
	a := t.r.closeAttempt(slot, t.now, outcome)
	t.do(AttemptClosed{Attempt: a.clone()})
	return a
}

// closeReleased closes a released attempt whose capacity is all gone, at
// the last end its provider reported.
func (t *tx) closeReleased(slot **Attempt) {
	a := *slot
	end := t.now
	if last := lastEnd(a); !last.IsZero() {
		end = last
	}
	outcome := a.Closing
	if outcome == "" {
		outcome = OutcomeCancelled
	}
	closed := t.r.closeAttempt(slot, end, outcome)
	t.do(AttemptClosed{Attempt: closed.clone()})
	switch {
	case outcome == OutcomePreempted && len(closed.Instances) > 0:
		t.historyCost(KindPreempted, closed, "capacity reclaimed", closed.LaunchKey+"-preempted")
	case len(closed.Instances) > 0:
		t.historyCost(KindTerminated, closed, "terminated "+joinIDs(closed.Instances), closed.LaunchKey+"-terminated")
	}
}

// release lets an attempt's capacity go: its instances are terminated and
// it closes with outcome once they are all gone (at once if none is live).
func (t *tx) release(slot **Attempt, outcome Outcome, why string) {
	a := *slot
	if a == nil {
		return
	}
	if !a.Released() {
		a.ReleasedAt = t.now
		a.Closing = outcome
	}
	if ended(a) {
		t.closeReleased(slot)
		return
	}
	t.do(Terminate{Attempt: a.N, Key: a.LaunchKey, Instances: liveInstances(a), Provider: a.Placement.Provider, Why: why})
}

// leave moves the current attempt into the Previous slot, the one the job
// is leaving. A released attempt there (waiting only for its provider to
// confirm that its capacity is gone) is closed now: its instances' ends,
// when they come, still correct its bill. It reports false when the slot
// holds an attempt still under its notice: then the current attempt (a
// replacement that never ran) is released and closed instead.
func (t *tx) leave() bool {
	s := &t.r.Status
	if p := s.Previous; p != nil {
		if awaiting(p) {
			return false
		}
		t.closeReleased(&s.Previous)
	}
	s.Previous, s.Current = s.Current, nil
	return true
}
