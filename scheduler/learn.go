package scheduler

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/spotwise/spotwise/bidding"
	"github.com/spotwise/spotwise/events"
	"github.com/spotwise/spotwise/job"
)

// experienceKey is where what the scheduler learnt is kept (meta bucket),
// so a restart or a new lease holder does not forget it.
const experienceKey = "experience"

// experience is what the scheduler learns from running jobs: how fast
// each GPU type really does each class of work compared with the
// throughput table, and how often each offer's capacity is really taken
// back. Both feed placement: the first through throughput(), the second
// through the interruption rate each offer is scored with.
type experience struct {
	mu      sync.Mutex
	Speed   map[string]*speedObs `json:"speed"`  // "gpu/class"
	Offers  map[string]*offerObs `json:"offers"` // offer ID
	changed bool
}

// speedObs is the measured speed over the table's, as a moving average.
type speedObs struct {
	Factor  float64 `json:"factor"`
	Samples int     `json:"samples"`
}

// offerObs counts instance-hours run on an offer and the interruptions
// seen there.
type offerObs struct {
	Hours         float64 `json:"hours"`
	Interruptions float64 `json:"interruptions"`
}

func newExperience() *experience {
	return &experience{Speed: map[string]*speedObs{}, Offers: map[string]*offerObs{}}
}

// speedWeight is how much one new measurement moves the average.
const speedWeight = 0.2

// observeSpeed records that an attempt did work on a GPU at factor times
// the speed the table predicts.
func (e *experience) observeSpeed(gpu, class string, factor float64) {
	if !(factor > 0.05 && factor < 20) {
		return // a measurement that far off is a broken report, not a fact
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	k := gpu + "/" + class
	o := e.Speed[k]
	if o == nil {
		o = &speedObs{Factor: 1}
		e.Speed[k] = o
	}
	o.Factor += speedWeight * (factor - o.Factor)
	o.Samples++
	e.changed = true
}

// observeRun records instance-hours on an offer, and whether the run ended
// with the capacity taken back.
func (e *experience) observeRun(offerID string, hours float64, interrupted bool) {
	if !(hours >= 0) {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	o := e.Offers[offerID]
	if o == nil {
		o = &offerObs{}
		e.Offers[offerID] = o
	}
	o.Hours += hours
	if interrupted {
		o.Interruptions++
	}
	e.changed = true
}

// rate blends a prior rate (the provider's, or the catalog prior) with
// what was observed on the offer.
func (e *experience) rate(offerID string, prior float64) float64 {
	e.mu.Lock()
	defer e.mu.Unlock()
	o := e.Offers[offerID]
	if o == nil {
		return prior
	}
	return bidding.BlendRate(prior, bidding.DefaultPriorHours, o.Interruptions, o.Hours)
}

// learned is the throughput table corrected by measured speeds.
type learned struct {
	base bidding.ThroughputTable
	exp  *experience
}

func (l learned) RelativeThroughput(gpu, class string) (float64, bool) {
	t, ok := l.base.RelativeThroughput(gpu, class)
	if !ok {
		return t, false
	}
	l.exp.mu.Lock()
	defer l.exp.mu.Unlock()
	if o := l.exp.Speed[gpu+"/"+class]; o != nil {
		t *= o.Factor
	}
	return t, true
}

// load reads what earlier terms learnt.
func (e *experience) load(ctx context.Context, kv *events.KV) error {
	b, _, err := kv.Get(ctx, experienceKey)
	if errors.Is(err, events.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	var stored experience
	if err := json.Unmarshal(b, &stored); err != nil {
		return nil // garbled: start over rather than stop scheduling
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if stored.Speed != nil {
		e.Speed = stored.Speed
	}
	if stored.Offers != nil {
		e.Offers = stored.Offers
	}
	return nil
}

// save writes what was learnt, if anything changed.
func (e *experience) save(ctx context.Context, kv *events.KV, log *zap.Logger) {
	e.mu.Lock()
	if !e.changed {
		e.mu.Unlock()
		return
	}
	b, err := json.Marshal(e)
	e.changed = false
	e.mu.Unlock()
	if err != nil {
		return
	}
	if _, err := kv.Put(ctx, experienceKey, b); err != nil {
		log.Warn("storing what the scheduler learnt", zap.Error(err))
	}
}

// learnFromProgress measures an attempt's speed from two points of its
// progress: where it started and where it is now.
func (s *Scheduler) learnFromProgress(r *job.Record, now time.Time) {
	a := r.Status.Current
	if a == nil || a.RunningAt.IsZero() || r.Status.State != job.Running {
		return
	}
	done := r.Status.Progress - a.StartProgress
	elapsed := now.Sub(a.RunningAt)
	if done < 0.05 || elapsed <= 0 {
		return
	}
	spec := &r.Spec
	if gpuMatches(spec.Work.ReferenceGPU, a.Placement.GPU) {
		// On the GPU the work was sized on, a difference says the job's
		// own estimate was off, not the table.
		return
	}
	expected, err := bidding.Runtime(s.o.Throughput, spec.Work.ReferenceDuration(spec.TotalGPUs()), spec.Work.ReferenceGPU, a.Placement.GPU, spec.Class())
	if err != nil || expected <= 0 {
		return
	}
	// Work per hour measured, over work per hour the table predicts.
	factor := (done / elapsed.Hours()) * expected.Hours()
	s.exp.observeSpeed(a.Placement.GPU, spec.Class(), factor)
}

// learnFromRun records an attempt's instance-hours on its offer.
func (s *Scheduler) learnFromRun(a *job.Attempt, end time.Time, interrupted bool) {
	if a == nil || a.RunningAt.IsZero() || !end.After(a.RunningAt) {
		return
	}
	hours := end.Sub(a.RunningAt).Hours() * float64(max(1, a.Placement.Nodes))
	s.exp.observeRun(a.Placement.OfferID, hours, interrupted)
}
