package scheduler

import (
	"strings"
	"testing"

	"github.com/spotwise/spotwise/money"
	"github.com/spotwise/spotwise/providers"
)

func (b *jobB) team(name string) *jobB        { b.q.Team, b.spec.Team = name, name; return b }
func (b *jobB) maxCost(c string) *jobB        { b.spec.MaxCost = money.MustParse(c); return b }
func (b *jobB) costSoFar(c string) *jobB      { b.q.CostSoFar = money.MustParse(c); return b }
func (b *jobB) moving() *jobB                 { b.q.Moving = true; return b }
func (b *jobB) holds(gpu string, n int) *jobB { b.q.Running = &Running{GPU: gpu, GPUs: n}; return b }

// Team quotas and budgets in one cycle: a team past a quota or its hard
// budget waits with reason quota or budget, saying what it holds or
// spent and what the job asks; other teams' jobs are placed as before,
// and a team's placements in one cycle count together.
func TestDecideTeamLimits(t *testing.T) {
	v100 := offer("aws", "us-east-1", "p3.2xlarge", "V100", 1, "1.00").get()
	v100x8 := offer("aws", "us-east-1", "p3.16xlarge", "V100", 8, "4.00").get()
	a100 := offer("aws", "us-east-1", "p4d-1", "A100-40GB", 1, "0.90").get()
	quota := func(q Quota) map[string]TeamState {
		return map[string]TeamState{"nlp": {Limits: TeamLimits{Quota: q}, ByType: map[string]int{}}}
	}
	budget := func(hard bool, monthly, spent, committed string) map[string]TeamState {
		return map[string]TeamState{"nlp": {Limits: TeamLimits{Budget: Budget{Monthly: money.MustParse(monthly), Hard: hard}},
			Spent: money.MustParse(spent), Committed: money.MustParse(committed), Month: monthStart(t0)}}
	}
	type want struct {
		placed  map[string]string // job -> instance type
		pending map[string]string // job -> reason code
		says    []string          // in the first pending job's messages
	}
	cases := []struct {
		name   string
		jobs   []*QueuedJob
		offers []providers.Offer
		teams  map[string]TeamState
		want   want
	}{{
		name:   "two jobs of a team in one cycle count together; another team is not held back",
		jobs:   []*QueuedJob{queued("j-1", "1h on V100").team("nlp").get(), queued("j-2", "1h on V100").team("nlp").get(), queued("j-3", "1h on V100").team("nlp").get(), queued("j-cv", "1h on V100").team("cv").get()},
		offers: []providers.Offer{v100},
		teams:  quota(Quota{GPUs: 2}),
		want: want{placed: map[string]string{"j-1": "p3.2xlarge", "j-2": "p3.2xlarge", "j-cv": "p3.2xlarge"}, pending: map[string]string{"j-3": "quota"},
			says: []string{"team nlp holds 2 of its 2 GPUs (quota.gpus); the job asks 1 GPU"}},
	}, {
		name:   "the jobs quota",
		jobs:   []*QueuedJob{queued("j-1", "1h on V100").team("nlp").get()},
		offers: []providers.Offer{v100},
		teams:  map[string]TeamState{"nlp": {Limits: TeamLimits{Quota: Quota{Jobs: 3}}, Jobs: 3}},
		want:   want{pending: map[string]string{"j-1": "quota"}, says: []string{"team nlp has 3 of its 3 jobs holding capacity (quota.jobs)"}},
	}, {
		name:   "a job that asks more than the quota says it can never fit",
		jobs:   []*QueuedJob{queued("j-1", "1h on V100").team("nlp").gpus(8).get()},
		offers: []providers.Offer{v100x8},
		teams:  quota(Quota{GPUs: 4}),
		want:   want{pending: map[string]string{"j-1": "quota"}, says: []string{"the job asks 8 GPUs, more than team nlp's quota of 4 (quota.gpus): it cannot be placed while that quota stands"}},
	}, {
		name:   "an instance with more GPUs than asked counts them all",
		jobs:   []*QueuedJob{queued("j-1", "1h on V100").team("nlp").get()},
		offers: []providers.Offer{v100x8, offer("aws", "us-east-1", "p3.2xlarge", "V100", 1, "9.00").get()},
		teams:  quota(Quota{GPUs: 4}),
		want:   want{placed: map[string]string{"j-1": "p3.2xlarge"}},
	}, {
		name:   "a GPU type over its quota leaves the others",
		jobs:   []*QueuedJob{queued("j-1", "1h on V100").team("nlp").get()},
		offers: []providers.Offer{v100, a100},
		teams:  map[string]TeamState{"nlp": {Limits: TeamLimits{Quota: Quota{GPUsByType: map[string]int{"A100": 8}}}, GPUs: 8, ByType: map[string]int{"A100-40GB": 8}}},
		want:   want{placed: map[string]string{"j-1": "p3.2xlarge"}},
	}, {
		name:   "only that GPU type: the job waits",
		jobs:   []*QueuedJob{queued("j-1", "1h on V100").team("nlp").accel("A100").get()},
		offers: []providers.Offer{v100, a100},
		teams:  map[string]TeamState{"nlp": {Limits: TeamLimits{Quota: Quota{GPUsByType: map[string]int{"A100": 8}}}, GPUs: 8, ByType: map[string]int{"A100-40GB": 8}}},
		want: want{pending: map[string]string{"j-1": "quota"},
			says: []string{"1 offer would take team nlp past its GPU quota: team nlp holds 8 of its 8 A100 GPUs (quota.gpus_by_type.A100); the job asks 1 GPU"}},
	}, {
		name:   "a job that asks more of a type than its quota says it can never fit there",
		jobs:   []*QueuedJob{queued("j-1", "1h on V100").team("nlp").accel("A100").gpus(8).get()},
		offers: []providers.Offer{offer("aws", "us-east-1", "p4d", "A100-40GB", 8, "9.00").get()},
		teams:  quota(Quota{GPUsByType: map[string]int{"A100": 4}}),
		want: want{pending: map[string]string{"j-1": "quota"},
			says: []string{"team nlp holds 0 of its 4 A100 GPUs (quota.gpus_by_type.A100); the job asks 8 GPUs, more than its A100 quota allows at all"}},
	}, {
		name:   "a running job moving within its type gives back what it holds",
		jobs:   []*QueuedJob{queued("j-1", "1h on V100").team("nlp").holds("A100-40GB", 1).get()},
		offers: []providers.Offer{a100},
		teams:  map[string]TeamState{"nlp": {Limits: TeamLimits{Quota: Quota{GPUs: 1, Jobs: 1, GPUsByType: map[string]int{"A100": 1}}}, GPUs: 1, Jobs: 1, ByType: map[string]int{"A100-40GB": 1}}},
		want:   want{placed: map[string]string{"j-1": "p4d-1"}},
	}, {
		name:   "over the hard budget: the job waits, saying what was spent and committed",
		jobs:   []*QueuedJob{queued("j-1", "1h on V100").team("nlp").get(), queued("j-cv", "1h on V100").team("cv").get()},
		offers: []providers.Offer{v100},
		teams:  budget(true, "100", "90", "9.50"),
		want: want{placed: map[string]string{"j-cv": "p3.2xlarge"}, pending: map[string]string{"j-1": "budget"},
			says: []string{"team nlp's budget of $100.00 for November 2026 has $0.50 left: $90.00 spent so far and $9.50 committed to its running jobs; this job is expected to cost $1.03"}},
	}, {
		name:   "the budget's committed spend grows with the cycle's placements",
		jobs:   []*QueuedJob{queued("j-1", "1h on V100").team("nlp").get(), queued("j-2", "1h on V100").team("nlp").get()},
		offers: []providers.Offer{v100},
		teams:  budget(true, "100", "97", "1.50"),
		want:   want{placed: map[string]string{"j-1": "p3.2xlarge"}, pending: map[string]string{"j-2": "budget"}, says: []string{"$2.53 committed"}},
	}, {
		name:   "a soft budget never holds a job back",
		jobs:   []*QueuedJob{queued("j-1", "1h on V100").team("nlp").get()},
		offers: []providers.Offer{v100},
		teams:  budget(false, "100", "150", "0"),
		want:   want{placed: map[string]string{"j-1": "p3.2xlarge"}},
	}, {
		name:   "a job moving off capacity it ran on carries on past the budget",
		jobs:   []*QueuedJob{queued("j-1", "1h on V100").team("nlp").moving().get()},
		offers: []providers.Offer{v100},
		teams:  budget(true, "100", "150", "0"),
		want:   want{placed: map[string]string{"j-1": "p3.2xlarge"}},
	}, {
		name:   "max_cost_usd within reach: placed",
		jobs:   []*QueuedJob{queued("j-1", "1h on V100").maxCost("1.10").get()},
		offers: []providers.Offer{v100},
		want:   want{placed: map[string]string{"j-1": "p3.2xlarge"}},
	}, {
		name:   "max_cost_usd out of reach with what it cost so far: the job waits",
		jobs:   []*QueuedJob{queued("j-1", "1h on V100").maxCost("5").costSoFar("4.90").get()},
		offers: []providers.Offer{v100, a100},
		want: want{pending: map[string]string{"j-1": "max-cost"},
			says: []string{"2 offers would take the job past its max_cost_usd of $5.00 ($4.90 spent so far; the cheapest of them is expected to cost $0.33 to finish)"}},
	}}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			plan := Decide(Snapshot{Now: t0, Jobs: c.jobs, Offers: c.offers, Throughput: testTP, Geography: geo, Rates: noRisk(c.offers), Teams: c.teams})
			placed := map[string]string{}
			for _, p := range plan.Placements {
				placed[p.JobID] = p.Offer.InstanceType
			}
			for id, it := range c.want.placed {
				if placed[id] != it {
					t.Errorf("%s placed on %q, want %s", id, placed[id], it)
				}
			}
			if len(placed) != len(c.want.placed) {
				t.Errorf("placed %v, want %v", placed, c.want.placed)
			}
			first := true
			for _, p := range plan.Pending {
				code, ok := c.want.pending[p.JobID]
				if !ok {
					t.Errorf("%s pending: %+v", p.JobID, p.Reasons)
					continue
				}
				var msgs []string
				found := false
				for _, r := range p.Reasons {
					msgs = append(msgs, r.Message)
					found = found || r.Code == code
				}
				if !found {
					t.Errorf("%s pending for %+v, want %s", p.JobID, p.Reasons, code)
				}
				if first {
					first = false
					for _, w := range c.want.says {
						if !strings.Contains(strings.Join(msgs, " | "), w) {
							t.Errorf("%s's reasons %q do not say %q", p.JobID, msgs, w)
						}
					}
				}
			}
			if len(plan.Pending) != len(c.want.pending) {
				t.Errorf("pending %+v, want %v", plan.Pending, c.want.pending)
			}
		})
	}
}
