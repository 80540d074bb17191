package server

import (
	"context"
	"runtime"
	"runtime/debug"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/spotwise/spotwise/events"
	"github.com/spotwise/spotwise/ledger"
)

// registry is what GET /metrics exports: the Go runtime and process, the
// scheduler's counters (shared by every term this server holds), the
// bus's drops, the build, and this server's role and readiness. The
// alert notifier adds its own.
func (s *Server) registry() (*prometheus.Registry, error) {
	reg := prometheus.NewRegistry()
	bus := s.bus
	for _, c := range []prometheus.Collector{
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Namespace: "spotwise", Name: "garbled_events_total", Help: "Events dropped because they could not be decoded."},
			func() float64 { return float64(bus.Garbled()) }),
		newDroppedEvents(bus),
		buildInfo(s.version),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: "spotwise", Subsystem: "scheduler", Name: "leader",
			Help: "1 while this server holds the scheduler lease and schedules, 0 on standby."},
			func() float64 { return b2f(s.role() == RoleLeader) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Namespace: "spotwise", Subsystem: "ledger", Name: "sealed_jobs_total",
			Help: "Jobs whose charges this server sealed: moved off their own ledger subject once their bill was final."},
			func() float64 { return float64(s.sealedJobs.Load()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Namespace: "spotwise", Subsystem: "jobs", Name: "sealed_histories_total",
			Help: "Jobs whose history this server sealed: moved off their own subject of the jobs stream, long after they finished."},
			func() float64 { return float64(s.sealedHistories.Load()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Namespace: "spotwise", Subsystem: "jobs", Name: "archived_total",
			Help: "Finished jobs whose records this server archived: moved off the job bucket to the archive stream, a day after they finished."},
			func() float64 { return float64(s.archivedJobs.Load()) }),
		&leaderGauge{leader: func() bool { return s.role() == RoleLeader }, value: func() (float64, bool) {
			n := s.unsealedHistories.Load()
			return float64(n), n >= 0
		}, desc: prometheus.NewDesc("spotwise_jobs_unsealed_histories",
			"Jobs whose history (some of it) is on their own subject of the jobs stream, as the scheduling server's last sealing round counted them; exported by that server.", nil, nil)},
		&leaderGauge{leader: func() bool { return s.role() == RoleLeader }, value: func() (float64, bool) {
			n := s.unsealedJobs.Load()
			return float64(n), n >= 0
		}, desc: prometheus.NewDesc("spotwise_ledger_unsealed_jobs",
			"Jobs whose charges are on their own ledger subject, not sealed yet, as the scheduling server's last sealing round counted them; exported by that server.", nil, nil)},
		&leaderGauge{leader: func() bool { return s.role() == RoleLeader }, value: func() (float64, bool) {
			if w := s.ledgerWriter.Load(); w != nil && w.Done() > 0 {
				return float64(w.Done()), true
			}
			return 0, false
		}, desc: prometheus.NewDesc("spotwise_ledger_writer_revision",
			"The job bucket revision whose charges the cost ledger's writer has appended, every one before it included; exported by the scheduling server.", nil, nil)},
		&leaderGauge{leader: func() bool { return s.role() == RoleLeader }, value: func() (float64, bool) {
			w := s.ledgerWriter.Load()
			if w == nil || w.Done() == 0 {
				return 0, false
			}
			last, err := bus.JobsLastRevision(context.Background())
			if err != nil {
				return 0, false
			}
			return float64(last - min(last, w.Done())), true
		}, desc: prometheus.NewDesc("spotwise_ledger_writer_behind_revisions",
			"Job record versions stored that the cost ledger's writer has not appended the charges of yet; exported by the scheduling server.", nil, nil)},
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: "spotwise", Name: "ready",
			Help: "1 when every readiness check of GET /readyz passes (NATS connected, the job bucket and streams answer, the scheduler role known), 0 otherwise."},
			func() float64 { return b2f(s.Readiness(context.Background()).Ready()) }),
	} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	if err := s.metrics.Register(reg); err != nil {
		return nil, err
	}
	if s.ledger != nil {
		if err := reg.Register(newSpend(s.ledger, func() bool { return s.role() == RoleLeader })); err != nil {
			return nil, err
		}
	}
	return reg, nil
}

// spend exports the cost ledger's totals as spotwise_spend_usd_total, by
// team (empty for overhead, which belongs to no job), provider and
// purchase option: from the server that schedules only, so that summing
// over servers counts each dollar once. Every price segment counts when it
// closes; a correction down is taken from the next charge of its series
// (a counter never goes down).
type spend struct {
	v      *ledger.View
	leader func() bool
	desc   *prometheus.Desc
}

func newSpend(v *ledger.View, leader func() bool) *spend {
	return &spend{v: v, leader: leader, desc: prometheus.NewDesc("spotwise_spend_usd_total",
		"Spend recorded in the cost ledger, in US dollars, by team (empty: overhead no job owns), provider and purchase option; exported by the scheduling server.",
		[]string{"team", "provider", "purchase"}, nil)}
}

func (s *spend) Describe(ch chan<- *prometheus.Desc) { ch <- s.desc }

func (s *spend) Collect(ch chan<- prometheus.Metric) {
	if !s.leader() {
		return
	}
	for k, c := range s.v.Totals() {
		ch <- prometheus.MustNewConstMetric(s.desc, prometheus.CounterValue, c.Dollars(), k.Team, k.Provider, k.Purchase)
	}
}

// leaderGauge is a gauge only the scheduling server exports, once it
// has a value.
type leaderGauge struct {
	leader func() bool
	value  func() (float64, bool)
	desc   *prometheus.Desc
}

func (g *leaderGauge) Describe(ch chan<- *prometheus.Desc) { ch <- g.desc }

func (g *leaderGauge) Collect(ch chan<- prometheus.Metric) {
	if v, ok := g.value(); ok && g.leader() {
		ch <- prometheus.MustNewConstMetric(g.desc, prometheus.GaugeValue, v)
	}
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// buildInfo is spotwise_build_info: 1, labelled with the binary's
// version (the one it was built with, else the module's), the Go version
// and the VCS revision it was built from.
func buildInfo(version string) prometheus.Collector {
	revision := "unknown"
	if bi, ok := debug.ReadBuildInfo(); ok {
		if version == "" {
			version = bi.Main.Version
		}
		for _, st := range bi.Settings {
			if st.Key == "vcs.revision" {
				revision = st.Value
			}
		}
	}
	if version == "" {
		version = "unknown"
	}
	g := prometheus.NewGauge(prometheus.GaugeOpts{Namespace: "spotwise", Name: "build_info",
		Help:        "1, labelled with the build: spotwise's version, the Go version and the VCS revision.",
		ConstLabels: prometheus.Labels{"version": version, "goversion": runtime.Version(), "revision": revision}})
	g.Set(1)
	return g
}

// droppedEvents exports the bus's count of messages its consumers ended
// for good, one series per consumer and reason (garbled, refused,
// gave-up), as spotwise_events_dropped_total.
type droppedEvents struct {
	bus  *events.Bus
	desc *prometheus.Desc
}

func newDroppedEvents(bus *events.Bus) *droppedEvents {
	return &droppedEvents{bus: bus, desc: prometheus.NewDesc("spotwise_events_dropped_total",
		"Events consumers dropped for good (terminated, never redelivered), by consumer and reason.",
		[]string{"consumer", "reason"}, nil)}
}

func (d *droppedEvents) Describe(ch chan<- *prometheus.Desc) { ch <- d.desc }

func (d *droppedEvents) Collect(ch chan<- prometheus.Metric) {
	for k, n := range d.bus.Dropped() {
		ch <- prometheus.MustNewConstMetric(d.desc, prometheus.CounterValue, float64(n), k.Consumer, k.Reason)
	}
}
