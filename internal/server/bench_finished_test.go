package server

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"reflect"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"slices"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"

	"github.com/spotwise/spotwise/api"
	"github.com/spotwise/spotwise/clock"
	"github.com/spotwise/spotwise/events"
	"github.com/spotwise/spotwise/job"
	"github.com/spotwise/spotwise/ledger"
)

// BenchmarkFinished1M is a server whose store holds 1,000,000 finished
// jobs (retention.finished_max_jobs' default), as the real system stores
// them: each job's record in the job-state bucket and its history in the
// jobs stream, cloned from a job that ran on the simulated cloud (its
// record and events, re-encoded with the real encoders for each clone's
// ID, name, team, end and times, spread over the last 20 days), its
// charges in the cost ledger, and the ledger writer's place past them;
// the charges and histories of the jobs that finished over an hour ago
// sealed (ledger.Sealer: their records name their histories' seals). The store
// is filled by publishing into JetStream directly, in asynchronous
// batches, then a server starts on it; the benchmark reports how long
// the start took (the API's index and the scheduler reading every record)
// and the highest RSS meanwhile, then 100 readers, each polling once a
// second from a random phase for SPOTWISE_BENCH_READ_SECONDS seconds
// (default 20), list 100 jobs per page: the newest, a team's (one of them
// small: a job in 20,000), a state's
// (finished ones, and running ones, which are few), and pages deep in the
// store through the cursor, alone and with those filters. It reports the
// list latency percentiles and the failed lists; then the same readers
// open the pages of jobs picked at random (GET one job), and it reports
// those, how long the API's copy of job pages took to catch up (a replay
// of every job's events, see api/pages.go) with the highest RSS until
// then, how long one cost report over every charge takes, and the
// process's RSS while serving: the highest while the readers ran, read
// from /proc with nothing forced, what ps shows (rss-MB; and at their end,
// serving-end-rss-MB), and then the
// floor, after a forced collection has handed every free page back
// (collected-rss-MB; with SPOTWISE_SETTLE_LONG, also once NATS has dropped
// what the start loaded: settled-rss-MB).
// SPOTWISE_BENCH_FINISHED sets the number of jobs (default 1,000,000);
// SPOTWISE_BENCH_NO_PAGE_COPY keeps no copy of job pages and
// SPOTWISE_BENCH_NO_LEDGER_COPY the ledger view's charges in memory (to
// compare); SPOTWISE_BENCH_UNSEALED fills a store from before sealing
// and reports how long the server took to seal it
// (sealed-all-s, from the start) and its RSS then. The targets are list p99 under 50 ms and RSS under 400 MB.
func BenchmarkFinished1M(b *testing.B) {
	if alone(b) {
		return
	}
	n := 1_000_000
	if v, err := strconv.Atoi(os.Getenv("SPOTWISE_BENCH_FINISHED")); err == nil && v > 0 {
		n = v
	}
	seconds := 20
	if v, err := strconv.Atoi(os.Getenv("SPOTWISE_BENCH_READ_SECONDS")); err == nil && v > 0 {
		seconds = v
	}
	rec, hist := finishedTemplate(b)
	dir := b.TempDir()
	filled := time.Now()
	sample := fillFinished(b, dir, n, rec, hist)
	b.Logf("store filled with %d finished jobs in %s", n, time.Since(filled).Round(time.Second))
	runtime.GC()
	debug.FreeOSMemory() // what the fill used is not the server's

	cfg := testConfig(dir)
	cfg.Sim.Speed = 1
	cfg.Scheduler.ReconcileInterval = job.Duration(15 * time.Second)
	if os.Getenv("SPOTWISE_BENCH_NO_PAGE_COPY") != "" {
		cfg.PageCopy.MaxBytes = 0 // to measure what the copy costs
	}
	if os.Getenv("SPOTWISE_BENCH_NO_LEDGER_COPY") != "" {
		cfg.PageCopy.LedgerMaxBytes = 0 // the ledger view's charges in memory
	}
	peak := watchRSS()
	started := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	s, err := Start(ctx, cfg, zap.NewNop())
	cancel()
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(s.Close)
	// Start returns once the API's index holds every job; the scheduler
	// reads the bucket too, and reconciles once it has.
	for deadline := time.Now().Add(5 * time.Minute); s.Stats().Reconciles == 0; {
		if time.Now().After(deadline) {
			b.Fatal("the scheduler did not load the store within 5 minutes")
		}
		time.Sleep(100 * time.Millisecond)
	}
	startTook := time.Since(started)
	startRSS := rssMB()
	// The API's copy of job pages replays every job's events meanwhile.
	for deadline := time.Now().Add(10 * time.Minute); cfg.PageCopy.MaxBytes > 0 && !s.api.PagesCopied(); {
		if _, err := s.api.PageCopy(); err != nil {
			b.Fatalf("the API's copy of job pages stopped: %v", err)
		}
		if time.Now().After(deadline) {
			b.Fatal("the API's copy of job pages did not catch up within 10 minutes")
		}
		time.Sleep(100 * time.Millisecond)
	}
	copiedTook := time.Since(started)
	copiedPeak := peak()
	copied, _ := s.api.PageCopy()
	b.Logf("the copy of job pages caught up %v after the start began: %d MB", copiedTook.Round(time.Second), copied>>20)
	l, err := clientOf(s).List(context.Background(), api.Query{Limit: 1})
	if err != nil || len(l.Jobs) == 0 {
		b.Fatalf("listing the filled store: %v", err)
	}

	hc := readerClient(100)
	teams := listTeams
	list := func(_ int, rng *rand.Rand) error {
		q := "/v1/jobs?limit=100"
		switch rng.IntN(7) {
		case 1:
			q += "&state=" + []string{"succeeded", "failed", "cancelled"}[rng.IntN(3)]
		case 2:
			q += "&state=running"
		case 3:
			q += "&team=" + teams[rng.IntN(len(teams))]
		case 4:
			q += "&after=" + sample[rng.IntN(len(sample))]
		case 5:
			q += "&team=" + teams[rng.IntN(len(teams))] + "&after=" + sample[rng.IntN(len(sample))]
		case 6:
			q += "&state=failed&after=" + sample[rng.IntN(len(sample))]
		}
		return fetchFrom(hc, s, q)
	}
	// Then each reader opens the page of a job picked at random from the
	// whole store (almost all of them first reads of long finished jobs).
	get := func(_ int, rng *rand.Rand) error {
		return fetchFrom(hc, s, "/v1/jobs/"+sample[rng.IntN(len(sample))])
	}
	b.ResetTimer()
	defer cpuProfile()()
	for i := 0; b.Loop(); i++ {
		if i > 0 {
			continue // one run, whatever -benchtime asks for
		}
		serving := watchRSS()
		lat, _, failed := poll(100, time.Duration(seconds)*time.Second, list)
		reportLatency(b, lat, "list-")
		b.ReportMetric(float64(failed), "list-failed")
		lat, _, failed = poll(100, time.Duration(seconds)*time.Second, get)
		reportLatency(b, lat, "get-")
		b.ReportMetric(float64(failed), "get-failed")
		// What ps shows while the readers run: nothing forced. The
		// highest, and at their end.
		b.ReportMetric(serving(), "rss-MB")
		b.ReportMetric(rssMB(), "serving-end-rss-MB")
		// Every page read shows the whole history, sealed or not: the
		// oldest jobs', the newest (not sealed yet), some between.
		for _, id := range []string{sample[0], sample[len(sample)/2], sample[len(sample)-1]} {
			v, err := s.api.Get(asOperator(context.Background()), id)
			if err != nil || len(v.Events) != len(hist) {
				r, _, rerr := s.Bus().Jobs().Get(context.Background(), id)
				var sealed []uint64
				if rerr == nil {
					sealed = r.SealedHistory()
				}
				stored, herr := s.Bus().JobHistory(context.Background(), id, sealed, 0)
				b.Fatalf("job %s's page: %d events (%v), want %d; the store holds %d (%v), its record (%v) names the seals %v", id, len(v.Events), err, len(hist), len(stored), herr, rerr, sealed)
			}
		}
		// One cost report over every charge (30 days by team, a day a
		// bucket): the ledger view's whole arena read once.
		began := time.Now()
		c, err := s.api.Costs(asOperator(context.Background()), api.CostQuery{GroupBy: "team", From: began.Add(-30 * 24 * time.Hour), To: began, Bucket: 24 * time.Hour})
		if err != nil || c.Jobs < n*9/10 {
			b.Fatalf("the cost report over the store: %v (%d jobs billed of %d)", err, c.Jobs, n)
		}
		b.ReportMetric(float64(time.Since(began).Milliseconds()), "costs-report-ms")
	}
	b.StopTimer()
	b.ReportMetric(startTook.Seconds(), "start-s")
	b.ReportMetric(startRSS, "start-rss-MB")
	b.ReportMetric(copiedTook.Seconds(), "copied-s")
	b.ReportMetric(copiedPeak, "copied-peak-rss-MB")
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	b.ReportMetric(float64(ms.HeapInuse)/(1<<20), "heap-MB")
	b.ReportMetric(float64(ms.HeapAlloc)/(1<<20), "live-MB")
	// The floor: a collection forced and every free page handed back.
	debug.FreeOSMemory()
	b.ReportMetric(rssMB(), "collected-rss-MB")
	b.Log(memBreakdown())
	if os.Getenv("SPOTWISE_BENCH_UNSEALED") != "" {
		// A store from before sealing: how long the server takes to seal
		// every job that finished over an hour ago.
		for deadline := time.Now().Add(time.Hour); ; time.Sleep(time.Second) {
			_, left, err := s.Bus().LedgerJobs(context.Background(), 0)
			if err != nil {
				b.Fatal(err)
			}
			_, hleft, err := s.Bus().JobHistories(context.Background(), 0)
			if err != nil {
				b.Fatal(err)
			}
			left = max(left, hleft)
			if left < n/400 { // about an hour's jobs of the 20 days'
				b.ReportMetric(time.Since(started).Seconds(), "sealed-all-s")
				runtime.GC()
				debug.FreeOSMemory()
				b.ReportMetric(rssMB(), "sealed-rss-MB")
				b.Log("sealed: " + memBreakdown())
				break
			}
			if time.Now().After(deadline) {
				b.Fatalf("%d jobs' charges or histories not sealed an hour after the start", left)
			}
		}
	}
	if os.Getenv("SPOTWISE_SETTLE_LONG") != "" {
		// A quiet server: NATS drops its blocks' per-subject state two
		// minutes after it last used them (the start's loads read every
		// block).
		time.Sleep(150 * time.Second)
		runtime.GC()
		debug.FreeOSMemory()
		b.ReportMetric(rssMB(), "settled-rss-MB")
		b.Log("settled: " + memBreakdown())
	}
	if path := os.Getenv("SPOTWISE_HEAP_PROFILE"); path != "" {
		if f, err := os.Create(path); err == nil {
			_ = pprof.WriteHeapProfile(f)
			f.Close()
		}
	}
}

// finishedTeams are the teams the finished jobs belong to, round robin,
// but one job in rareEvery, which is rareTeam's: a small team whose first
// page spans the whole store (listTeams are the teams the readers list).
var (
	finishedTeams = []string{"vision", "speech", "ranking", "research", "platform", "ads", "search", "robotics"}
	listTeams     = append(slices.Clone(finishedTeams), rareTeam)
)

const (
	rareTeam  = "interns"
	rareEvery = 20_000
)

// finishedTeam is the team of the i-th finished job.
func finishedTeam(i int) string {
	if i%rareEvery == rareEvery-1 {
		return rareTeam
	}
	return finishedTeams[i%len(finishedTeams)]
}

// finishedTemplate runs one job to its end on a server of its own (the
// simulated cloud at 3,600x) and returns its record and history as the
// store holds them.
func finishedTemplate(b *testing.B) ([]byte, []events.HistoryEntry) {
	b.Helper()
	s := benchServer(b, 3600)
	defer s.Close()
	spec := []byte("name: nightly-train\nteam: vision\ncommand: [python, train.py, --epochs, '90']\nimage: ghcr.io/example/train:1.0\nresources: {gpus_per_node: 1}\nwork: 20m on T4\ncheckpoint: {duration: 10s}\n")
	ctx := context.Background()
	r, err := s.api.Submit(asOperator(ctx), spec, "", "bench")
	if err != nil {
		b.Fatal(err)
	}
	id := r.Job.ID
	var rec *job.Record
	for deadline := time.Now().Add(2 * time.Minute); ; {
		if rec, _, err = s.Bus().Jobs().Get(ctx, id); err != nil {
			b.Fatal(err)
		}
		// Settled: its capacity released and gone, as a job that
		// finished a while ago is (a record caught at its end would
		// still hold charges open).
		settled := rec.Status.State.Terminal() && rec.Status.Current == nil && rec.Status.Previous == nil
		if settled || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if rec.Status.State != job.Succeeded || rec.Status.Current != nil || rec.Status.Previous != nil {
		b.Fatalf("the template job is %s, not succeeded with its capacity gone", rec.Status.State)
	}
	hist, err := s.Bus().JobHistory(ctx, id, nil, 0)
	if err != nil || len(hist) == 0 {
		b.Fatalf("the template job's history: %d events, %v", len(hist), err)
	}
	raw, err := json.Marshal(rec)
	if err != nil {
		b.Fatal(err)
	}
	kinds := map[string]int{}
	for _, h := range hist {
		kinds[h.Event.Kind]++
	}
	b.Logf("each finished job: a record of %d bytes, a history of %d events %v", len(raw), len(hist), kinds)
	return raw, hist
}

// fillFinished stores n finished jobs cloned from a template in a new
// store in dir and returns a sample of their IDs (for cursors).
func fillFinished(b *testing.B, dir string, n int, tpl []byte, hist []events.HistoryEntry) []string {
	b.Helper()
	ctx := context.Background()
	bus, err := events.Open(ctx, events.Config{ConnName: "fill", Embedded: events.EmbeddedOptions{DataDir: dir, ServerName: "spotwise"}},
		"spotwise-server", clock.Real{}, zap.NewNop())
	if err != nil {
		b.Fatal(err)
	}
	defer bus.Close()
	var first job.Record
	if err := json.Unmarshal(tpl, &first); err != nil {
		b.Fatal(err)
	}
	tplv := reflect.ValueOf(first)
	// Job i was submitted at start + i*step: the newest a minute ago,
	// the oldest 20 days ago.
	end := time.Now().Add(-time.Minute)
	step := 20 * 24 * time.Hour / time.Duration(n)
	start := end.Add(-time.Duration(n) * step)
	ends := []job.State{job.Succeeded, job.Succeeded, job.Succeeded, job.Succeeded, job.Succeeded, job.Succeeded, job.Failed, job.Cancelled}
	names := []string{"nightly-train", "eval", "sweep-lr", "finetune", "distill", "embed-refresh", "ablation", "pretrain-shard"}
	sample := make([]string, 0, 10_000)
	var smu sync.Mutex
	var failed atomic.Int64
	var wg sync.WaitGroup
	const workers = 2
	// The jobs that finished over an hour ago have their charges sealed
	// (ledger.Sealer): stored on their own subjects, copied to the sealed
	// ones, and the job subjects purged; those of the last hour are on
	// their own subjects still.
	cutoff := sort.Search(n, func(i int) bool {
		return !start.Add(time.Duration(i) * step).Add(first.Status.FinishedAt.Sub(first.Status.SubmittedAt)).Before(end.Add(-ledger.SealAfter))
	})
	// Those that finished over a day ago have their records archived
	// (api.Service.Archive): stored on the archive's subject with the
	// bucket revision they were, and purged from the bucket.
	archived := sort.Search(n, func(i int) bool {
		return !start.Add(time.Duration(i) * step).Add(first.Status.FinishedAt.Sub(first.Status.SubmittedAt)).Before(end.Add(-api.ArchiveAfter))
	})
	if os.Getenv("SPOTWISE_BENCH_UNSEALED") != "" {
		cutoff, archived = 0, 0 // a store from before sealing: the server seals it
	}
	fill := func(lo, hi int, seal, archive bool) {
		for w := range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				js, err := jetstream.New(bus.Conn(), jetstream.WithPublishAsyncMaxPending(4096),
					jetstream.WithPublishAsyncErrHandler(func(jetstream.JetStream, *nats.Msg, error) { failed.Add(1) }))
				if err != nil {
					b.Error(err)
					return
				}
				jobsStream, err := js.Stream(ctx, events.StreamJobs)
				if err != nil {
					b.Error(err)
					return
				}
				// A publish the client holds back (too many unacknowledged)
				// waits for the acknowledgements and goes again.
				publish := func(subject string, data []byte) jetstream.PubAckFuture {
					for try := 0; ; try++ {
						f, err := js.PublishAsync(subject, data)
						if err == nil {
							return f
						}
						if try == 10 {
							failed.Add(1)
							return nil
						}
						<-js.PublishAsyncComplete()
					}
				}
				// The charges to seal once they are stored (a seal names
				// the sequence each was stored at).
				type stored struct {
					data  [][]byte
					acked []jetstream.PubAckFuture
				}
				// seqs are the sequences the messages were stored at.
				seqs := func(s stored) ([]uint64, bool) {
					out := make([]uint64, len(s.acked))
					for k, f := range s.acked {
						select {
						case ack := <-f.Ok():
							out[k] = ack.Sequence
						default:
							failed.Add(1)
							return nil, false
						}
					}
					return out, true
				}
				// A job to seal: its charges and history once they are
				// stored, then its record, which names the history's seal.
				type sealing struct {
					id               string
					rec              *job.Record
					bill             uint64
					charges, history stored
					seal, record     stored
				}
				var toSeal []*sealing
				flush := func() {
					<-js.PublishAsyncComplete()
					for _, c := range toSeal {
						at, ok := seqs(c.charges)
						if !ok {
							return
						}
						msgs := make([]events.LedgerMsg, len(at))
						for k := range at {
							msgs[k] = events.LedgerMsg{Seq: at[k], Data: c.charges.data[k]}
						}
						if len(msgs) > 0 {
							seals, err := ledger.SealMessages(c.id, msgs)
							if err != nil {
								b.Error(err)
								return
							}
							for _, m := range seals {
								publish(events.LedgerSealedSubject(c.id), m.Data)
							}
						}
						if at, ok = seqs(c.history); !ok {
							return
						}
						seals, _, err := events.HistorySealMessages(c.id, at, c.history.data)
						if err != nil {
							b.Error(err)
							return
						}
						for _, m := range seals {
							c.seal.acked = append(c.seal.acked, publish(events.JobsSealedSubject, m))
						}
						// Off its own subject at once: the stream's size is
						// bounded, and its oldest messages would go first.
						if err := jobsStream.Purge(ctx, jetstream.WithPurgeSubject(events.JobEventsSubject(c.id))); err != nil {
							b.Error(err)
							return
						}
					}
					<-js.PublishAsyncComplete()
					for _, c := range toSeal {
						at, ok := seqs(c.seal)
						if !ok {
							return
						}
						c.rec.Status.Sealed = &job.Sealed{History: at, Bill: c.bill}
						data, err := json.Marshal(c.rec)
						if err != nil {
							b.Error(err)
							return
						}
						c.record.acked = append(c.record.acked, publish("$KV."+events.BucketJobs+"."+c.id, data))
					}
					if archive {
						<-js.PublishAsyncComplete()
						for _, c := range toSeal {
							rev, ok := seqs(c.record)
							if !ok {
								return
							}
							data, err := events.ArchiveMessage(c.rec, rev[0])
							if err != nil {
								b.Error(err)
								return
							}
							publish(events.ArchiveSubject, data)
						}
					}
					toSeal = toSeal[:0]
					<-js.PublishAsyncComplete()
				}
				for i := lo + w; i < hi; i += workers {
					at := start.Add(time.Duration(i) * step)
					d := at.Sub(first.Status.SubmittedAt)
					r := cloneShifted(tplv, d).Interface().(job.Record)
					id := job.NewID(at)
					r.ID, r.Spec.Name, r.Spec.Team = id, names[i%len(names)], finishedTeam(i)
					r.Status.State = ends[i%len(ends)]
					for k := range r.Status.Attempts {
						r.Status.Attempts[k].LaunchKey = job.LaunchKey(id, r.Status.Attempts[k].N)
					}
					var c *sealing
					if seal {
						// Its record is stored once its history's seal is.
						c = &sealing{id: id, rec: &r}
						toSeal = append(toSeal, c)
					} else {
						data, err := json.Marshal(&r)
						if err != nil {
							b.Error(err)
							return
						}
						publish("$KV."+events.BucketJobs+"."+id, data)
					}
					for _, h := range hist {
						ev := *h.Event
						ev.JobID = id
						if ev.State.Terminal() {
							ev.State = r.Status.State
						}
						data, err := events.Encode(&ev, "", h.Envelope.Source, h.Envelope.Time.Add(d))
						if err != nil {
							b.Error(err)
							return
						}
						f := publish(events.JobEventsSubject(id), data)
						if c != nil {
							c.history.data, c.history.acked = append(c.history.data, data), append(c.history.acked, f)
						}
					}
					// Its charges, as the ledger's writer appends them once
					// the job has ended (without the de-duplication ID, which
					// only matters for two minutes).
					closed, _ := ledger.Charges(&r, r.Status.FinishedAt)
					for _, e := range closed {
						e.RecordedAt = r.Status.FinishedAt
						data, err := json.Marshal(&e)
						if err != nil {
							b.Error(err)
							return
						}
						f := publish(events.LedgerJobSubject(id), data)
						if c != nil {
							c.charges.data, c.charges.acked = append(c.charges.data, data), append(c.charges.acked, f)
						}
					}
					if c != nil {
						c.bill = ledger.BillPrint(closed)
					}
					if i%(n/cap(sample)+1) == 0 {
						smu.Lock()
						sample = append(sample, id)
						smu.Unlock()
					}
					if i%4096 < workers {
						flush()
					}
				}
				flush()
			}()
		}
		wg.Wait()
	}
	fill(0, archived, true, true)
	if archived > 0 {
		// Archived: off the bucket (which holds no other records yet).
		js, err := jetstream.New(bus.Conn())
		if err != nil {
			b.Fatal(err)
		}
		kv, err := js.Stream(ctx, "KV_"+events.BucketJobs)
		if err != nil {
			b.Fatal(err)
		}
		pctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
		err = kv.Purge(pctx)
		cancel()
		if err != nil {
			b.Fatalf("purging the archived records from the bucket: %v", err)
		}
	}
	fill(archived, cutoff, true, false)
	if cutoff > 0 {
		// Sealed: off their own subjects.
		st, err := jetstream.New(bus.Conn())
		if err != nil {
			b.Fatal(err)
		}
		ls, err := st.Stream(ctx, events.StreamLedger)
		if err != nil {
			b.Fatal(err)
		}
		// Millions of messages: longer than a request's default 5 s.
		pctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
		err = ls.Purge(pctx, jetstream.WithPurgeSubject(events.LedgerJobSubject("*")))
		cancel()
		if err != nil {
			b.Fatalf("purging the sealed jobs' subjects: %v", err)
		}
	}
	fill(cutoff, n, false, false)
	b.Logf("%d finished jobs' charges and histories sealed (%d of them archived), %d on their own subjects", cutoff, archived, n-cutoff)
	if js, err := jetstream.New(bus.Conn()); err == nil {
		if st, err := js.Stream(ctx, events.StreamJobs); err == nil {
			if info, err := st.Info(ctx); err == nil {
				b.Logf("the jobs stream holds %d messages, %d MB", info.State.Msgs, info.State.Bytes>>20)
			}
		}
	}
	if f := failed.Load(); f > 0 {
		b.Fatalf("%d publishes failed while filling the store", f)
	}
	// The ledger's writer has written the charges of every record
	// version up to the last: its place, as it keeps it in the meta
	// bucket (ledger's cursorKey).
	st, err := jetstream.New(bus.Conn())
	if err != nil {
		b.Fatal(err)
	}
	kv, err := st.Stream(ctx, "KV_"+events.BucketJobs)
	if err != nil {
		b.Fatal(err)
	}
	info, err := kv.Info(ctx)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := bus.Meta().Put(ctx, "ledger.cursor", []byte(strconv.FormatUint(info.State.LastSeq, 10))); err != nil {
		b.Fatal(err)
	}
	return sample
}

var timeType = reflect.TypeFor[time.Time]()

// cloneShifted is a deep copy of v (a record: structs, pointers and
// slices; maps are shared) with every time set in it moved by d.
func cloneShifted(v reflect.Value, d time.Duration) reflect.Value {
	switch v.Kind() {
	case reflect.Struct:
		if v.Type() == timeType {
			if t := v.Interface().(time.Time); !t.IsZero() {
				return reflect.ValueOf(t.Add(d))
			}
			return v
		}
		out := reflect.New(v.Type()).Elem()
		out.Set(v)
		for i := range v.NumField() {
			switch f := out.Field(i); f.Kind() {
			case reflect.Struct, reflect.Pointer, reflect.Slice:
				if f.CanSet() {
					f.Set(cloneShifted(v.Field(i), d))
				}
			}
		}
		return out
	case reflect.Pointer:
		if v.IsNil() {
			return v
		}
		p := reflect.New(v.Type().Elem())
		p.Elem().Set(cloneShifted(v.Elem(), d))
		return p
	case reflect.Slice:
		if v.IsNil() {
			return v
		}
		out := reflect.MakeSlice(v.Type(), v.Len(), v.Len())
		for i := range v.Len() {
			out.Index(i).Set(cloneShifted(v.Index(i), d))
		}
		return out
	}
	return v
}

// watchRSS samples the process's RSS every 100 ms until the returned
// function is called, which returns the highest seen (and the same again
// when called again).
func watchRSS() func() float64 {
	var top atomic.Int64
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		for {
			if v := int64(rssMB()); v > top.Load() {
				top.Store(v)
			}
			select {
			case <-stop:
				return
			case <-t.C:
			}
		}
	}()
	var once sync.Once
	return func() float64 {
		once.Do(func() { close(stop) })
		<-done
		return float64(top.Load())
	}
}

// readerClient is an HTTP client with a connection for each of readers.
func readerClient(readers int) *http.Client {
	return &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: readers, MaxConnsPerHost: readers}}
}

// fetchFrom GETs path from s as the operator and reads the answer
// without decoding it (the readers share the server's two cores).
func fetchFrom(hc *http.Client, s *Server, path string) error {
	req, err := http.NewRequest(http.MethodGet, "http://"+s.HTTPAddr()+path, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+s.OperatorToken())
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", path, resp.Status)
	}
	return nil
}
