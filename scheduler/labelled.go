package scheduler

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/spotwise/spotwise/job"
	"github.com/spotwise/spotwise/providers"
)

// The labelled series. Labels are bounded: providers, regions, purchase
// options, reasons, states and teams, never a job or an instance.
// Durations are in the scheduler's clock: simulated time when the
// simulated cloud runs fast, as the jobs experienced them.

// vecs are the labelled counters and histograms.
type vecs struct {
	placements         *prometheus.CounterVec
	launchErrors       *prometheus.CounterVec
	moves              *prometheus.CounterVec
	queueToRunning     *prometheus.HistogramVec
	noticeToCheckpoint *prometheus.HistogramVec
}

// vecs makes the labelled series on first use (a zero Metrics is ready).
func (m *Metrics) vecs() *vecs {
	m.once.Do(func() {
		m.vec = &vecs{
			placements: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "spotwise_placements_total",
				Help: "Placements decided and recorded, by the chosen offer's provider, region and purchase option."},
				[]string{"provider", "region", "purchase"}),
			launchErrors: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "spotwise_launch_errors_total",
				Help: "Launches that did not buy capacity, by provider, region, purchase option and kind (capacity: none there now; refused: not for this job or account; unknown: no answer, asked again with the same key)."},
				[]string{"provider", "region", "purchase", "kind"}),
			moves: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "spotwise_moves_total",
				Help: "Attempts a job left for capacity elsewhere, by reason (preemption, maintenance, rebalance, lost, arbitrage, return-to-spot, deadline), counted when the attempt closes."},
				[]string{"reason"}),
			queueToRunning: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "spotwise_queue_to_running_seconds",
				Help:    "From a job's submission to its first running, by the purchase option it first ran on, in the scheduler's clock (simulated time when the simulated cloud runs fast).",
				Buckets: []float64{1, 5, 15, 30, 60, 120, 300, 600, 1800, 3600, 3 * 3600, 6 * 3600, 12 * 3600, 24 * 3600}},
				[]string{"purchase"}),
			noticeToCheckpoint: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "spotwise_notice_to_checkpoint_seconds",
				Help:    "From a provider's interruption notice to the job's checkpoint for it stored, by provider, in the scheduler's clock (simulated time when the simulated cloud runs fast). AWS gives 120 s, Azure and GCP 30 s.",
				Buckets: []float64{1, 2, 5, 10, 15, 20, 30, 45, 60, 90, 120, 180, 300}},
				[]string{"provider"}),
		}
	})
	return m.vec
}

// placed counts a placement.
func (m *Metrics) placed(p job.Placement) {
	m.placements.Add(1)
	m.vecs().placements.WithLabelValues(p.Provider, p.Region, p.Purchase).Inc()
}

// Kinds of launch errors, as spotwise_launch_errors_total labels them.
const (
	launchCapacity = "capacity"
	launchRefused  = "refused"
	launchUnknown  = "unknown"
)

// launchFailed counts a launch that bought nothing (or may not have).
func (m *Metrics) launchFailed(p job.Placement, kind string) {
	m.launchErrors.Add(1)
	m.vecs().launchErrors.WithLabelValues(p.Provider, p.Region, p.Purchase, kind).Inc()
}

// moveReason is why a closed attempt sent its job elsewhere, "" if it
// did not (it finished, failed, was cancelled or never launched).
func moveReason(a *job.Attempt) string {
	switch a.Outcome {
	case job.OutcomeLost:
		return "lost"
	case job.OutcomePreempted, job.OutcomeMoved:
	default:
		return ""
	}
	if a.Notice == nil {
		return "preemption"
	}
	switch a.Notice.Kind {
	case job.NoticeSpot:
		return "preemption"
	case job.NoticeCheaper:
		return "arbitrage"
	case job.NoticeMaintenance, job.NoticeRebalance, job.NoticeReturnToSpot, job.NoticeDeadline:
		return a.Notice.Kind
	}
	return "other"
}

// instanceKey is what instances are counted by.
type instanceKey struct {
	provider string
	state    providers.InstanceState
}

// startView begins a term's view of jobs and instances (empty: the term
// loads its jobs from the bucket).
func (m *Metrics) startView() {
	m.viewMu.Lock()
	defer m.viewMu.Unlock()
	m.jobStates, m.instances = map[job.State]int{}, map[instanceKey]int{}
}

// endView ends a term's view: a server on standby exports none.
func (m *Metrics) endView() {
	m.viewMu.Lock()
	defer m.viewMu.Unlock()
	m.jobStates, m.instances = nil, nil
}

// jobMoved counts a job of the index leaving state from (none: "") for
// state to (none: "").
func (m *Metrics) jobMoved(from, to job.State) {
	if from == to {
		return
	}
	m.viewMu.Lock()
	defer m.viewMu.Unlock()
	if m.jobStates == nil {
		return
	}
	if from != "" {
		m.jobStates[from]--
	}
	if to != "" {
		m.jobStates[to]++
	}
}

// listed replaces the count of instances with a full listing's.
func (m *Metrics) listed(insts []providers.Instance) {
	counts := map[instanceKey]int{}
	for _, in := range insts {
		counts[instanceKey{in.Provider, in.State}]++
	}
	m.viewMu.Lock()
	defer m.viewMu.Unlock()
	if m.instances == nil {
		return
	}
	// A provider and state seen once stays exported (at 0 when none
	// are left), so a series does not vanish when it empties.
	for k := range m.instances {
		m.instances[k] = 0
	}
	for k, n := range counts {
		m.instances[k] = n
	}
}

var (
	jobsDesc = prometheus.NewDesc("spotwise_jobs",
		"Jobs not yet ended, by state, as the scheduler holding the lease sees them (only that server exports it).",
		[]string{"state"}, nil)
	instancesDesc = prometheus.NewDesc("spotwise_instances",
		"Instances the clouds list for spotwise, by provider and state, at the last reconciliation (only the server holding the scheduler lease exports it).",
		[]string{"provider", "state"}, nil)
)

// viewCollector exports the term's view of jobs and instances.
type viewCollector struct{ m *Metrics }

func (c viewCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- jobsDesc
	ch <- instancesDesc
}

func (c viewCollector) Collect(ch chan<- prometheus.Metric) {
	c.m.viewMu.Lock()
	defer c.m.viewMu.Unlock()
	if c.m.jobStates == nil {
		return
	}
	for _, st := range job.States {
		if !st.Terminal() {
			ch <- prometheus.MustNewConstMetric(jobsDesc, prometheus.GaugeValue, float64(c.m.jobStates[st]), string(st))
		}
	}
	for k, n := range c.m.instances {
		ch <- prometheus.MustNewConstMetric(instancesDesc, prometheus.GaugeValue, float64(n), k.provider, string(k.state))
	}
}
