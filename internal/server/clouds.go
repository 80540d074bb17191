package server

import (
	"context"
	"fmt"
	"os"

	"github.com/spotwise/spotwise/agent"
	"github.com/spotwise/spotwise/bidding"
	"github.com/spotwise/spotwise/providers"
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

// buildClouds brings up the providers: the simulated cloud (standing in
// for every catalog provider no real one is configured for). A dry run
// keeps the simulated cloud away from the stored instances and runs no
// workloads.
func (s *Server) buildClouds(ctx context.Context, cat *catalog.Catalog, dryRun bool) (*cloudSet, error) {
	cfg := s.cfg
	set := &cloudSet{byName: map[string]providers.Provider{}}
	if !cfg.Sim.Enabled {
		return nil, fmt.Errorf("no cloud: enable the simulated cloud (sim.enabled) or configure a provider")
	}
	var traces map[string]sim.Trace
	if len(cfg.Sim.Traces) > 0 {
		var err error
		if traces, err = sim.LoadTraces(cfg.Sim.Traces...); err != nil {
			return nil, fmt.Errorf("sim.traces: %w", err)
		}
	}
	model := cfg.Sim.Interruptions.model()
	opts := sim.Options{
		Catalog: cat, Clock: s.clock, Seed: cfg.Sim.Seed, Providers: cfg.Sim.Providers, Regions: cfg.Sim.Regions,
		PriceInterval: cfg.Sim.PriceInterval.D(), Log: s.log.Named("sim"), Interruptions: &model, Traces: traces,
	}
	if !dryRun {
		simWork := &agent.SimWorkload{Clock: s.clock, Reporter: s.bus, Throughput: cat, Log: s.log.Named("agent"),
			Checkpoints: s.checkpoints, Control: s.bus,
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
		return nil, fmt.Errorf("simulated cloud: %w", err)
	}
	set.sim = cloud
	set.closer = append(set.closer, cloud.Close)
	set.distinct = append(set.distinct, cloud)
	for _, p := range cat.Providers() {
		if set.byName[p] == nil {
			set.byName[p] = cloud
		}
	}
	return set, nil
}

// defaultPolicy is the deadline policy the scheduler uses.
func defaultPolicy() bidding.Policy { return bidding.Spotwise{} }
