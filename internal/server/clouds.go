package server

import (
	"context"
	"fmt"
	"os"
	"slices"
	"time"

	"github.com/spotwise/spotwise/agent"
	"github.com/spotwise/spotwise/bidding"
	"github.com/spotwise/spotwise/clock"
	"github.com/spotwise/spotwise/providers"
	"github.com/spotwise/spotwise/providers/aws"
	"github.com/spotwise/spotwise/providers/azure"
	"github.com/spotwise/spotwise/providers/catalog"
	"github.com/spotwise/spotwise/providers/sim"
)

// cloudSet is the providers a term (or a dry run) works with.
type cloudSet struct {
	// byName maps an offer's provider name to the Provider that sells it.
	byName map[string]providers.Provider
	// distinct lists each Provider once.
	distinct []providers.Provider
	// sim is the simulated cloud, if it runs.
	sim    *sim.Cloud
	closer []func()
}

func (c *cloudSet) close() {
	for i := len(c.closer) - 1; i >= 0; i-- {
		c.closer[i]()
	}
}

// feedSource names where a provider's prices come from in its events.
func (c *cloudSet) feedSource(p providers.Provider) string {
	if p == providers.Provider(c.sim) && c.sim != nil {
		return "sim"
	}
	return "live"
}

// source says, for the dry run, where a provider's prices in a region
// come from.
func (c *cloudSet) source(p providers.Provider) func(region string) string {
	if ps, ok := p.(interface{ PriceSource() map[string]string }); ok {
		m := ps.PriceSource()
		return func(region string) string {
			if s, ok := m[region]; ok {
				return s
			}
			return "catalog"
		}
	}
	return func(string) string { return c.feedSource(p) }
}

// Option adjusts how a server reaches the real clouds (tests point the
// SDKs at local fakes; embedders can pass their own credentials).
type Option func(*Server)

// WithAWSOptions passes options to the AWS provider.
func WithAWSOptions(opts ...aws.Option) Option {
	return func(s *Server) { s.awsOpts = append(s.awsOpts, opts...) }
}

// WithAzureOptions passes options to the Azure provider.
func WithAzureOptions(opts ...azure.Option) Option {
	return func(s *Server) { s.azureOpts = append(s.azureOpts, opts...) }
}

// cloudStatus says, per provider name, which cloud sells it and where its
// prices come from per region (while this server schedules).
func (s *Server) cloudStatus() map[string]any {
	t := s.term.Load()
	if t == nil {
		return nil
	}
	out := map[string]any{}
	for name, p := range t.clouds.byName {
		st := map[string]any{"cloud": p.Name()}
		if ps, ok := p.(interface{ PriceSource() map[string]string }); ok {
			st["prices"] = ps.PriceSource()
		}
		out[name] = st
	}
	return out
}

// regions lists, per provider name, the regions a real cloud is
// configured for (nil for the simulated cloud).
func (c *cloudSet) regions(p providers.Provider) map[string][]string {
	ps, ok := p.(interface{ PriceSource() map[string]string })
	if !ok {
		return nil
	}
	var rs []string
	for r := range ps.PriceSource() {
		rs = append(rs, r)
	}
	return map[string][]string{p.Name(): rs}
}

// buildClouds brings up the providers: the real clouds configured, and
// the simulated cloud standing in for every other catalog provider. A dry
// run keeps the simulated cloud away from the stored instances and runs
// no workloads.
func (s *Server) buildClouds(ctx context.Context, cat *catalog.Catalog, dryRun bool) (*cloudSet, error) {
	cfg := s.cfg
	reserved, err := cfg.reservations()
	if err != nil {
		return nil, err
	}
	simReserved, awsReserved, azureReserved := cfg.reservationsBy(reserved)
	cfg.Providers = cfg.Providers.withReservations(awsReserved, azureReserved)
	set := &cloudSet{byName: map[string]providers.Provider{}}
	add := func(p providers.Provider, names ...string) {
		set.distinct = append(set.distinct, p)
		for _, n := range names {
			set.byName[n] = p
		}
	}
	if c := cfg.Providers.AWS; c != nil {
		p, err := aws.New(ctx, *c, append([]aws.Option{aws.WithClock(s.clock), aws.WithLogger(s.log.Named("aws")), aws.WithCatalog(cat)}, s.awsOpts...)...)
		if err != nil {
			set.close()
			return nil, fmt.Errorf("providers.aws: %w", err)
		}
		add(p, p.Name())
	}
	if c := cfg.Providers.Azure; c != nil {
		p, err := azure.New(ctx, *c, append([]azure.Option{azure.WithClock(s.clock), azure.WithLogger(s.log.Named("azure")), azure.WithCatalog(cat)}, s.azureOpts...)...)
		if err != nil {
			set.close()
			return nil, fmt.Errorf("providers.azure: %w", err)
		}
		add(p, p.Name())
	}
	simulated := simulatedProviders(cat, cfg)
	if !cfg.Sim.Enabled || len(simulated) == 0 {
		if len(set.distinct) == 0 {
			return nil, fmt.Errorf("no cloud: enable the simulated cloud (sim.enabled) or configure a provider")
		}
		return set, nil
	}
	var traces map[string]sim.Trace
	if len(cfg.Sim.Traces) > 0 {
		var err error
		if traces, err = sim.LoadTraces(cfg.Sim.Traces...); err != nil {
			set.close()
			return nil, fmt.Errorf("sim.traces: %w", err)
		}
	}
	model := cfg.Sim.Interruptions.model()
	opts := sim.Options{
		Catalog: cat, Clock: s.clock, Seed: cfg.Sim.Seed, Providers: simulated, Regions: cfg.Sim.Regions,
		PriceInterval: cfg.Sim.PriceInterval.D(), Log: s.log.Named("sim"), Interruptions: &model, Traces: traces,
		Faults: cfg.Sim.Faults.model(), Reservations: simReserved,
	}
	if !dryRun {
		links, err := newAgentLinks(s.bus, simAgentConns)
		if err != nil {
			set.close()
			return nil, fmt.Errorf("simulated agents: %w", err)
		}
		set.closer = append(set.closer, links.close) // after the cloud's agents have stopped
		simWork := &agent.SimWorkload{Clock: s.clock, Reporter: links, Throughput: cat, Log: s.log.Named("agent"),
			Checkpoints: s.checkpoints, Control: links,
			// The simulated agents share the server's cores: each ships its
			// output once a second rather than five times.
			Logs: agent.LogShipOptions{FlushEvery: time.Second},
			GPUOf: func(provider, itype string) (string, bool) {
				it, ok := cat.InstanceType(provider, itype)
				return it.GPU, ok
			}}
		exe, _ := os.Executable()
		opts.Store = s.bus.SimStore()
		opts.Runner = &agent.Dispatch{Commands: cfg.Sim.RunCommands, Sim: simWork, Real: &agent.Local{
			Sim: simWork, Reporter: s.bus, Control: s.bus, Checkpoints: s.checkpoints, Clock: s.clock, ClockSpeed: cfg.Sim.Speed,
			Root: s.workRoot(), Executable: exe, Log: s.log.Named("agent"),
			Subprocess: cfg.Sim.Agent == "subprocess", NATSURL: s.natsURLForAgents(), StoreURI: s.checkpoints.URI(),
		}}
	}
	cloud, err := sim.New(ctx, opts)
	if err != nil {
		set.close()
		return nil, fmt.Errorf("simulated cloud: %w", err)
	}
	set.sim = cloud
	set.closer = append(set.closer, cloud.Close)
	add(cloud, simulated...)
	return set, nil
}

// simulatedProviders lists the catalog providers the simulated cloud
// sells: those sim.providers names (all when empty), less the real clouds.
func simulatedProviders(cat *catalog.Catalog, cfg Config) []string {
	want := cfg.Sim.Providers
	if len(want) == 0 {
		want = cat.Providers()
	}
	real := cfg.Providers.real()
	var out []string
	for _, p := range want {
		if !slices.Contains(real, p) {
			out = append(out, p)
		}
	}
	return out
}

// defaultPolicy is the deadline policy the scheduler uses.
func defaultPolicy() bidding.Policy { return bidding.Spotwise{} }

// WithWallClock sets the clock tokens expire by and alerts are dated by
// (tests; default the real clock: tokens expire, and Alertmanager's
// alerts start and end, in real time, not in the simulated cloud's).
func WithWallClock(c clock.Clock) Option {
	return func(s *Server) { s.wallClock = c }
}

// wall is the wall clock (tokens' expiry, alert times), whatever the
// simulated cloud's speed.
func (s *Server) wall() clock.Clock {
	if s.wallClock == nil {
		return clock.Real{}
	}
	return s.wallClock
}

// WithVersion sets the version spotwise_build_info reports (the
// binary's; default the module's, from the build information).
func WithVersion(v string) Option {
	return func(s *Server) { s.version = v }
}
