package scheduler_test

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/spotwise/spotwise/events"
	"github.com/spotwise/spotwise/job"
	"github.com/spotwise/spotwise/providers"
)

// BenchmarkNotices is the preemption and scale issues' target: with 10,000
// running jobs (SPOTWISE_BENCH_RUNNING), 100 interruption notices at once. It measures (wall time, from the
// moment the cloud sends each notice) until the job's agent receives the
// request to checkpoint (target p99 < 100 ms), and until the replacement
// is decided and its launch requested (target p99 < 1 s). The cloud's
// events reach the bus as the server's feed publishes them (rigOpt.
// asyncFeed): the test rig's own feed waits for each to be stored, which
// puts the hundredth notice 100 acknowledgements behind the first. The
// scheduler reconciles every 15 s, the server's default (the rig's 100 ms
// has it listing the 10,000 instances most of the time).
func BenchmarkNotices(b *testing.B) {
	const notices = 100
	running := 10_000
	if v, err := strconv.Atoi(os.Getenv("SPOTWISE_BENCH_RUNNING")); err == nil && v >= notices {
		running = v
	}
	regions := []string{"us-east-1", "us-east-2", "us-west-2", "eu-west-1", "eu-central-1", "ap-northeast-1"}
	for b.Loop() {
		// Each round's rig (NATS server, cloud, an agent per job) is torn
		// down at the end of the round, so rounds do not compete.
		tb := &roundTB{TB: b}
		r := newRig(tb, rigOpt{workload: true, regions: regions, asyncFeed: true, reconcile: 15 * time.Second})
		spec := "name: b\ncommand: [x]\nresources: {gpus_per_node: 1}\nwork: 48h on T4\ncheckpoint: {duration: 30s}\n"
		ids := make([]string, running)
		for i := range ids {
			ids[i] = r.submit(b, spec).ID
		}
		// Place everything, boot it, and wait until every agent runs.
		waitAll := func(what string, ok func(*job.Record) bool) {
			deadline := time.Now().Add(10 * time.Minute)
			for {
				n := 0
				for _, id := range ids {
					if ok(r.get(b, id)) {
						n++
					}
				}
				if n == len(ids) {
					return
				}
				if time.Now().After(deadline) {
					b.Fatalf("%s: %d of %d", what, n, len(ids))
				}
				r.clk.Advance(time.Minute)
				time.Sleep(200 * time.Millisecond)
			}
		}
		waitAll("running", func(x *job.Record) bool { return x.Status.State == job.Running })
		// The notices come to a system at rest: what the last steps of
		// the clock set off (every agent's reports, their writes) is
		// done, as it is on a cloud whose clock runs at its own pace,
		// where 10,000 running jobs report a few a second, not 10,000 at
		// once.
		r.settle(b)

		var mu sync.Mutex
		requested := map[string]time.Time{}
		replaced := map[string]time.Time{}
		// Replaced means an attempt newer than the one the notice hit.
		before := map[string]int{}
		for _, id := range ids[:notices] {
			before[id] = r.get(b, id).Status.Current.N
		}
		sub, err := r.bus.Conn().Subscribe(events.AllAgentControls, func(m *nats.Msg) {
			_, p, err := events.Decode(m.Data)
			if err != nil {
				return
			}
			c := p.(*events.AgentControl)
			mu.Lock()
			if _, ok := requested[c.JobID]; !ok {
				requested[c.JobID] = time.Now()
			}
			mu.Unlock()
		})
		if err != nil {
			b.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		if _, err := r.bus.Jobs().Watch(ctx, func(c events.JobChange) {
			if c.Record == nil || c.Record.Status.Current == nil {
				return
			}
			mu.Lock()
			if n, hit := before[c.ID]; hit && c.Record.Status.Current.N > n {
				if _, ok := replaced[c.ID]; !ok {
					replaced[c.ID] = time.Now()
				}
			}
			mu.Unlock()
		}, nil); err != nil {
			b.Fatal(err)
		}
		var hit []providers.Instance
		for _, id := range ids[:notices] {
			hit = append(hit, r.instancesFor(b, id)[0])
		}
		sent := map[string]time.Time{}
		for _, in := range hit {
			sent[in.JobID] = time.Now()
			if err := r.cloud.Preempt(in.ID); err != nil {
				b.Fatal(err)
			}
		}
		deadline := time.Now().Add(30 * time.Second)
		for time.Now().Before(deadline) {
			mu.Lock()
			n, m := len(requested), len(replaced)
			mu.Unlock()
			if n >= notices && m >= notices {
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
		cancel()
		_ = sub.Unsubscribe()
		var toReq, toRepl []time.Duration
		mu.Lock()
		for id, t := range sent {
			if at, ok := requested[id]; ok {
				toReq = append(toReq, at.Sub(t))
			}
			if at, ok := replaced[id]; ok {
				toRepl = append(toRepl, at.Sub(t))
			}
		}
		mu.Unlock()
		for id := range sent {
			if _, ok := replaced[id]; !ok {
				x := r.get(b, id)
				reasons, _ := r.s.PendingReasons(id)
				b.Logf("job %s not replaced: %s (%s) %+v", id, x.Status.State, x.Status.Message, reasons)
			}
		}
		if len(toReq) < notices || len(toRepl) < notices {
			b.Fatalf("%d checkpoint requests and %d replacements of %d notices", len(toReq), len(toRepl), notices)
		}
		report(b, "ckpt-req", toReq)
		report(b, "replace", toRepl)
		tb.end()
	}
}

// roundTB runs the cleanups registered during one benchmark round at its
// end rather than the benchmark's.
type roundTB struct {
	testing.TB
	cleanups []func()
}

func (t *roundTB) Cleanup(f func()) { t.cleanups = append(t.cleanups, f) }

func (t *roundTB) end() {
	for i := len(t.cleanups) - 1; i >= 0; i-- {
		t.cleanups[i]()
	}
	t.cleanups = nil
}

func report(b *testing.B, name string, d []time.Duration) {
	slices.Sort(d)
	at := func(p float64) float64 { return float64(d[int(p*float64(len(d)-1))].Microseconds()) / 1000 }
	b.ReportMetric(at(0.5), name+"-p50-ms")
	b.ReportMetric(at(0.99), name+"-p99-ms")
	fmt.Printf("%s: p50 %.1f ms, p99 %.1f ms, max %.1f ms (%d)\n", name, at(0.5), at(0.99), float64(d[len(d)-1].Microseconds())/1000, len(d))
}
