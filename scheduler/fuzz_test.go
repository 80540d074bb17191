package scheduler_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/spotwise/spotwise/events"
	"github.com/spotwise/spotwise/internal/testutil"
	"github.com/spotwise/spotwise/job"
	"github.com/spotwise/spotwise/providers"
	"github.com/spotwise/spotwise/scheduler"
)

// The fuzz target's jobs, one in each state the scheduler treats
// differently, and a job ID nobody holds.
const (
	roleRunning = iota
	roleNoticed // under notice: checkpointing, its replacement placed
	roleSucceeded
	roleCancelled
	roleQueued // no offer will do: too cheap
	rolePlacing
	roleUnknown
	numRoles
)

const (
	fuzzLong    = "name: run\ncommand: [x]\nresources: {gpus_per_node: 1, accelerators: [T4]}\nwork: 1000h on T4\npurchase: on-demand\n"
	fuzzSpot    = "name: spot\ncommand: [x]\nresources: {gpus_per_node: 1, accelerators: [T4]}\nwork: 1000h on T4\npurchase: spot\ncheckpoint: {duration: 30s}\n"
	fuzzShort   = "name: short\ncommand: [x]\nresources: {gpus_per_node: 1, accelerators: [T4]}\nwork: 1h on T4\npurchase: on-demand\n"
	fuzzTooDear = "name: dear\ncommand: [x]\nresources: {gpus_per_node: 8, accelerators: [H100]}\nwork: 10h on H100\nmax_price_per_hour: 0.01\n"
	// fuzzProbe is placed after every input, on capacity the real feed
	// sells: the scheduler still works.
	fuzzProbe = "name: probe\ncommand: [x]\nresources: {gpus_per_node: 1, accelerators: [T4]}\nwork: 1h on T4\npurchase: on-demand\nplacement: {providers: [aws], regions: [us-east-1]}\n"
)

// fuzzRig is a scheduler holding jobs in different states, for a fuzz
// target to throw events at through the real bus.
type fuzzRig struct {
	*rig
	jobs [numRoles]string
	// readings are what the scheduler consumes, as its bus lists them.
	readings []events.Reading
	nc       *nats.Conn
	js       jetstream.JetStream
	// dirty: a job changed (as it may, for a genuine event), and what a
	// reconciliation records of it is not known yet.
	dirty bool
}

func newFuzzRig(f *testing.F) *fuzzRig {
	// Warnings (every forged event is one) would pile up in the target's
	// log over thousands of runs: only errors are kept.
	r := newRig(f, rigOpt{arbitrage: scheduler.Arbitrage{Off: true}, log: zaptest.NewLogger(f, zaptest.Level(zap.ErrorLevel))})
	js, err := jetstream.New(r.bus.Conn())
	if err != nil {
		f.Fatal(err)
	}
	fr := &fuzzRig{rig: r, nc: r.bus.Conn(), js: js}
	fr.jobs[roleRunning] = r.runToRunning(f, fuzzLong).ID

	short := r.runToRunning(f, fuzzShort)
	if err := r.bus.Publish(r.ctx, events.AgentSubject(short.ID, 1), &events.AgentReport{JobID: short.ID, Attempt: 1,
		InstanceID: short.Status.Current.Instances[0], Kind: events.AgentExited, Progress: 1}); err != nil {
		f.Fatal(err)
	}
	testutil.CheckFor(f, 15*time.Second, 5*time.Millisecond, func() error {
		if got := r.get(f, short.ID); got.Status.State != job.Succeeded || got.Status.Current != nil {
			return fmt.Errorf("short job %s, attempt open %v", got.Status.State, got.Status.Current != nil)
		}
		return nil
	})
	fr.jobs[roleSucceeded] = short.ID

	noticed := r.runToRunning(f, fuzzSpot)
	in := r.instancesFor(f, noticed.ID)[0]
	if err := r.bus.Publish(r.ctx, events.InterruptionsSubject(in.Provider, in.Region), &events.Interruption{Kind: providers.EventSpotInterruption,
		Instance: in, Deadline: r.clk.Now().Add(2 * time.Minute)}); err != nil {
		f.Fatal(err)
	}
	testutil.CheckFor(f, 15*time.Second, 5*time.Millisecond, func() error {
		if got := r.get(f, noticed.ID); got.Status.Previous == nil || got.Status.Current == nil {
			return fmt.Errorf("noticed job %s: no replacement yet", got.Status.State)
		}
		return nil
	})
	fr.jobs[roleNoticed] = noticed.ID

	cancelled := r.submit(f, fuzzTooDear)
	r.lifecycle(f, cancelled.ID, job.Cancel{Message: "fuzz"})
	fr.jobs[roleCancelled] = cancelled.ID
	fr.jobs[roleQueued] = r.submit(f, fuzzTooDear).ID
	placing := r.submit(f, fuzzLong)
	r.waitState(f, placing.ID, job.Placing)
	testutil.CheckFor(f, 10*time.Second, 5*time.Millisecond, func() error {
		if len(r.instancesFor(f, placing.ID)) == 0 {
			return errors.New("not launched yet")
		}
		return nil
	})
	fr.jobs[rolePlacing] = placing.ID
	fr.jobs[roleUnknown] = "j-00000000000000000000000000"
	fr.reconciled(f)
	fr.readings = r.bus.Readings()
	if len(fr.readings) < 6 {
		f.Fatalf("the scheduler reads only %+v", fr.readings)
	}
	return fr
}

// reconciled waits for the system to settle and for a reconciliation to
// run from start to end after that: it records what the provider lists
// (when each attempt's instances were last seen alive), which a forged
// event that makes the scheduler look at the provider would otherwise be
// first to record. With the clock standing still, a later one records
// nothing new.
func (fr *fuzzRig) reconciled(t testing.TB) {
	fr.settle(t)
	n := fr.s.Stats().Reconciles
	testutil.CheckFor(t, 10*time.Second, 5*time.Millisecond, func() error {
		if fr.s.Stats().Reconciles < n+2 {
			return errors.New("no reconciliation since the system settled")
		}
		return nil
	})
	fr.settle(t)
	fr.dirty = false
}

// fuzzMsg is one message of an input, after its placeholders are filled.
type fuzzMsg struct {
	subject string
	data    []byte
}

// An input is up to 8 lines, each "<subject> <message>"; placeholders
// name the rig's jobs and their attempts (the job IDs differ from run to
// run): $J<n> the ID of role n, $A<n> its current attempt, $I<n> its
// current attempt's first instance, $P<n> its previous attempt's first
// instance, $K<n> its current launch key; $N and $D are now and two
// minutes on, in RFC 3339.
func (fr *fuzzRig) parse(t *testing.T, input []byte) []fuzzMsg {
	var repl []string
	for n, id := range fr.jobs {
		var rec *job.Record
		if n != roleUnknown {
			rec = fr.get(t, id)
		}
		attempt, inst, prev, key := "1", "i-00000000000000000", "i-00000000000000001", job.LaunchKey(id, 1)
		if rec != nil && rec.Status.Current != nil {
			a := rec.Status.Current
			attempt, key = strconv.Itoa(a.N), a.LaunchKey
			if len(a.Instances) > 0 {
				inst = a.Instances[0]
			}
		}
		if rec != nil && rec.Status.Previous != nil && len(rec.Status.Previous.Instances) > 0 {
			prev = rec.Status.Previous.Instances[0]
		}
		d := strconv.Itoa(n)
		repl = append(repl, "$J"+d, id, "$A"+d, attempt, "$I"+d, inst, "$P"+d, prev, "$K"+d, key)
	}
	now := fr.clk.Now()
	repl = append(repl, "$N", now.Format(time.RFC3339Nano), "$D", now.Add(2*time.Minute).Format(time.RFC3339Nano))
	fill := strings.NewReplacer(repl...)
	var out []fuzzMsg
	for line := range bytes.SplitSeq(input, []byte("\n")) {
		subject, data, ok := bytes.Cut(line, []byte(" "))
		if !ok || len(out) == 8 {
			continue
		}
		out = append(out, fuzzMsg{subject: fill.Replace(string(subject)), data: []byte(fill.Replace(string(data)))})
	}
	return out
}

// deliver puts a message where the scheduler reads it: a stream subject
// through JetStream, any other as a core NATS request (the pending-reasons
// subject answers; others have no responders).
func (fr *fuzzRig) deliver(t *testing.T, m fuzzMsg) {
	if !publishable(m.subject) {
		return
	}
	if _, err := fr.js.StreamNameBySubject(fr.ctx, m.subject); err == nil {
		if err := fr.bus.PublishRaw(fr.ctx, m.subject, m.data); err != nil {
			t.Fatalf("publishing to %s: %v", m.subject, err)
		}
		return
	} else if !errors.Is(err, jetstream.ErrStreamNotFound) {
		t.Fatalf("the stream of %s: %v", m.subject, err)
	}
	reply, err := fr.nc.Request(m.subject, m.data, 10*time.Second)
	if errors.Is(err, nats.ErrNoResponders) {
		return
	}
	if err != nil {
		t.Fatalf("request on %s: %v", m.subject, err)
	}
	if m.subject == events.SubjectPendingReasons {
		var rep scheduler.PendingReply
		if err := json.Unmarshal(reply.Data, &rep); err != nil || rep.Reasons == nil {
			t.Fatalf("pending reasons for %q: %q (%v)", m.data, reply.Data, err)
		}
	}
}

// publishable: a subject NATS takes for a publish (no wildcards, no empty
// tokens, no white space), and not one of the server's own.
func publishable(s string) bool {
	if s == "" || len(s) > 256 || strings.HasPrefix(s, "$") || strings.HasPrefix(s, "_") {
		return false
	}
	for tok := range strings.SplitSeq(s, ".") {
		if tok == "" || tok == "*" || tok == ">" || strings.ContainsFunc(tok, func(r rune) bool { return r <= ' ' || r >= 0x7f }) {
			return false
		}
	}
	return true
}

// recordState is a record as stored, with its revision.
type recordState struct {
	rev  uint64
	json string
	rec  *job.Record
}

func (fr *fuzzRig) snapshot(t *testing.T) map[string]recordState {
	out := map[string]recordState{}
	for n, id := range fr.jobs {
		if n == roleUnknown {
			if _, _, err := fr.bus.Jobs().Get(fr.ctx, id); !errors.Is(err, events.ErrNotFound) {
				t.Fatalf("the job nobody submitted exists: %v", err)
			}
			continue
		}
		rec, rev, err := fr.bus.Jobs().Get(fr.ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := json.Marshal(rec)
		out[id] = recordState{rev, string(b), rec}
	}
	return out
}

// genuine lists the jobs a message may change because it carries what only
// the real sender has: an instance of the job's own open attempts (the
// provider's word, or the agent's with the right attempt), or a price
// update (the feed's word, which may let a waiting job be placed). Every
// other message is forged, or names nothing real, and must change no job.
// It also says whether a price update was taken.
func genuine(msgs []fuzzMsg, before map[string]recordState) (may map[string]bool, offers bool) {
	may = map[string]bool{}
	owns := func(id, inst string, attempt int) bool {
		st, ok := before[id]
		if !ok {
			return false
		}
		for _, a := range []*job.Attempt{st.rec.Status.Current, st.rec.Status.Previous} {
			if a != nil && (attempt == 0 || attempt == a.N) && slices.Contains(a.Instances, inst) {
				return true
			}
		}
		return false
	}
	for _, m := range msgs {
		_, p, err := events.Decode(m.data)
		if err != nil {
			continue
		}
		switch p := p.(type) {
		case *events.OffersUpdated:
			offers = true
			for id, st := range before {
				if st.rec.NeedsPlacement() {
					may[id] = true
				}
			}
		case *events.InstanceChanged:
			if owns(p.Instance.JobID, p.Instance.ID, 0) {
				may[p.Instance.JobID] = true
			}
		case *events.Interruption:
			if owns(p.Instance.JobID, p.Instance.ID, 0) {
				may[p.Instance.JobID] = true
			}
		case *events.AgentReport:
			if owns(p.JobID, p.InstanceID, p.Attempt) {
				may[p.JobID] = true
			}
		}
	}
	return may, offers
}

// run delivers one input and holds the scheduler to it: nothing panics
// (a handler's panic would be a drop: none is allowed), no forged message
// changes a job, and a job submitted afterwards is placed.
func (fr *fuzzRig) run(t *testing.T, input []byte) {
	msgs := fr.parse(t, input)
	fr.settle(t)
	if fr.dirty {
		fr.reconciled(t)
	}
	before := fr.snapshot(t)
	dropsBefore := fr.bus.Dropped()
	for _, m := range msgs {
		fr.deliver(t, m)
	}
	fr.settle(t)
	after := fr.snapshot(t)
	may, offers := genuine(msgs, before)
	for id, b := range before {
		a := after[id]
		if a.rev != b.rev {
			fr.dirty = true
		}
		if !may[id] && (a.rev != b.rev || a.json != b.json) {
			t.Fatalf("forged events changed job %s (%s), rev %d to %d:\n%s", id, b.rec.Status.State, b.rev, a.rev, statusDiff(b.rec, a.rec))
		}
	}
	for k, n := range fr.bus.Dropped() {
		if strings.Contains(k.Reason, "panic") || n > dropsBefore[k] && k.Reason == "gave-up" {
			t.Fatalf("dropped %v: %d", k, n)
		}
	}
	if offers {
		// The feed's next update puts the real book back.
		fr.republishOffers(t)
	}
	probe := fr.submit(t, fuzzProbe)
	testutil.CheckFor(t, 15*time.Second, 2*time.Millisecond, func() error {
		if got := fr.get(t, probe.ID); got.Status.Current == nil {
			return fmt.Errorf("a job submitted after the input is still %s: %s", got.Status.State, got.Status.Message)
		}
		return nil
	})
	fr.lifecycle(t, probe.ID, job.Cancel{Message: "probe"})
}

func (fr *fuzzRig) republishOffers(t *testing.T) {
	offers, err := fr.cloud.Offers(fr.ctx)
	if err != nil {
		t.Fatal(err)
	}
	byRegion := map[[2]string][]providers.Offer{}
	for _, o := range offers {
		k := [2]string{o.Provider, o.Region}
		byRegion[k] = append(byRegion[k], o)
	}
	for k, os := range byRegion {
		if err := fr.bus.Publish(fr.ctx, events.PricesSubject(k[0], k[1]), &events.OffersUpdated{Provider: k[0], Region: k[1], Offers: os, Source: "sim"}); err != nil {
			t.Fatal(err)
		}
	}
}

// envelope is an event of type typ with data, as text with placeholders.
func envelope(typ, data string) string {
	return `{"v":1,"id":"fz-` + typ + `","type":"` + typ + `","time":"$N","source":"fuzz","data":` + data + `}`
}

// fuzzPayloads are payloads of every type, naming role n's job: each
// forged, or naming nothing real.
func fuzzPayloads(n int) map[string][]string {
	d := strconv.Itoa(n)
	inst := func(id, key string) string {
		return `{"id":"` + id + `","provider":"aws","region":"us-east-1","zone":"us-east-1a","instance_type":"g4dn.xlarge","purchase":"spot","price_per_hour":0.5,"state":"running","job_id":"$J` + d + `","attempt":$A` + d + `,"idempotency_key":"` + key + `","launched_at":"$N"}`
	}
	return map[string][]string{
		events.TypeJobSubmitted: {`{"job_id":"$J` + d + `","name":"x","submitted_at":"$N","via":"nats","priority":99999999999}`},
		events.TypeJobEvent:     {`{"job_id":"$J` + d + `","kind":"succeeded","state":"succeeded","attempt":$A` + d + `}`},
		events.TypeOffers: {
			`{"provider":"aws","region":"nowhere-1","offers":[{"provider":"aws","region":"nowhere-1","zone":"z","instance_type":"p5.48xlarge","gpu":"H100","gpus":8,"purchase":"spot","price_per_hour":"0.000001","available":-1,"launch_latency":-9223372036854775808}]}`,
			`{"provider":"aws","region":"us-east-1","offers":[],"source":"fuzz"}`,
		},
		events.TypeInstance: {
			`{"kind":"instance-terminated","instance":` + inst("i-0forged0000000000", "$K"+d) + `,"reason":"forged"}`,
			`{"kind":"instance-running","instance":` + inst("$I"+d, "$J"+d+"-a99999") + `}`,
			`{"kind":"instance-failed","instance":` + inst("i-0forged0000000001", "$J"+d+"-a-1") + `}`,
		},
		events.TypeInterruption: {
			`{"kind":"spot-interruption","instance":` + inst("i-0forged0000000002", "$K"+d) + `,"deadline":"$D"}`,
			`{"kind":"maintenance","instance":` + inst("i-0forged0000000003", "$J"+d+"-a1") + `,"deadline":"0001-01-01T00:00:01Z"}`,
			`{"kind":"rebalance","instance":` + inst("i-0forged0000000004", "nobody") + `}`,
		},
		events.TypeAgentReport: {
			`{"job_id":"$J` + d + `","attempt":$A` + d + `,"instance_id":"i-0forged0000000005","kind":"exited","exit_code":0,"progress":1}`,
			`{"job_id":"$J` + d + `","attempt":9223372036854775807,"instance_id":"$I` + d + `","kind":"exited","exit_code":-9223372036854775808}`,
			`{"job_id":"$J` + d + `","attempt":$A` + d + `,"instance_id":"$P` + d + `","kind":"checkpoint","progress":0.99,"checkpoint":{"attempt":$A` + d + `,"step":9223372036854775807,"progress":0.99,"sha256":"x","size":-1,"location":"s3://elsewhere/$J` + d + `/x","at":"9999-12-31T23:59:59Z"}}`,
			`{"job_id":"$J` + d + `","attempt":1,"instance_id":"i-0forged0000000006","kind":"started","progress":0.9,"checkpoint":{"attempt":0,"step":-1,"progress":1,"location":"file:///","at":"0001-01-01T00:00:00Z"}}`,
			`{"job_id":"$J` + d + `","attempt":2,"instance_id":"i-0forged0000000007","kind":"checkpoint-failed","message":"` + strings.Repeat("x", 2000) + `"}`,
		},
		events.TypeAgentControl: {`{"job_id":"$J` + d + `","attempt":$A` + d + `,"kind":"stop"}`},
		events.TypeAlert:        {`{"severity":"critical","kind":"forged","job_id":"$J` + d + `","summary":"x"}`},
	}
}

// fuzzSubjects makes concrete subjects of what the scheduler reads: each
// job's agent subject for a one-token wildcard, the simulated region (and
// one nobody sells in) for a tail wildcard.
func fuzzSubjects(readings []events.Reading) []string {
	var out []string
	for _, r := range readings {
		for _, filter := range r.Subjects {
			switch {
			case strings.HasSuffix(filter, ".*"):
				for n := range numRoles {
					out = append(out, strings.TrimSuffix(filter, "*")+"$J"+strconv.Itoa(n))
				}
			case strings.HasSuffix(filter, ".>"):
				out = append(out, strings.TrimSuffix(filter, ">")+"aws.us-east-1", strings.TrimSuffix(filter, ">")+"gcp.x")
			default:
				out = append(out, filter)
			}
		}
	}
	return out
}

// FuzzSchedulerConsumers throws random, mutated and forged events of
// every type, on every subject the scheduler reads, at a running scheduler
// holding jobs in every state: nothing panics, no forged event changes a
// job, and a job submitted afterwards is still placed.
//
//	go test -run '^$' -fuzz FuzzSchedulerConsumers -fuzztime 1m -fuzzminimizetime 10x ./scheduler/
//
// (Each run is a few milliseconds of real NATS: the default minute of
// minimizing each new input would take the whole run.)
func FuzzSchedulerConsumers(f *testing.F) {
	fr := newFuzzRig(f)
	subjects := fuzzSubjects(fr.readings)
	// Every type on every subject the scheduler reads (the wrong ones are
	// poison), eight to an input.
	var lines []string
	for i, subject := range subjects {
		for _, typ := range slices.Sorted(maps.Keys(fuzzPayloads(0))) {
			datas := fuzzPayloads(i % roleUnknown)[typ]
			lines = append(lines, subject+" "+envelope(typ, datas[i%len(datas)]))
		}
	}
	for chunk := range slices.Chunk(lines, 8) {
		f.Add([]byte(strings.Join(chunk, "\n")))
	}
	// Every forgery of every type, for every job, on its own subject.
	for n := range numRoles {
		var lines []string
		for _, typ := range []string{events.TypeInstance, events.TypeInterruption, events.TypeAgentReport} {
			subject := map[string]string{events.TypeInstance: events.InstancesSubject("aws", "us-east-1"),
				events.TypeInterruption: events.InterruptionsSubject("aws", "us-east-1"), events.TypeAgentReport: "spotwise.agent.$J" + strconv.Itoa(n)}[typ]
			for _, data := range fuzzPayloads(n)[typ] {
				lines = append(lines, subject+" "+envelope(typ, data))
			}
		}
		for chunk := range slices.Chunk(lines, 8) {
			f.Add([]byte(strings.Join(chunk, "\n")))
		}
	}
	for _, s := range []string{
		// Issue 9's poison message, garbage, and a pending-reasons request
		// of every shape.
		`spotwise.agent.$J0 {"v":1,"id":"a","type":"agent.report","time":"2026-01-01T00:00:00Z","source":"x","data":{"job_id":"j-00000000000000000000000000","attempt":1,"kind":"heartbeat"}}`,
		"spotwise.instances.aws.us-east-1 {\nspotwise.agent.$J1 \x00\xff\nspotwise.prices.aws.us-east-1 null\nspotwise.interruptions.aws.us-east-1 []",
		"spotwise.scheduler.pending {\"id\":\"$J4\"}\nspotwise.scheduler.pending {\"id\":7}\nspotwise.scheduler.pending \xff\nspotwise.scheduler.pending {\"id\":\"$J0\"}",
		// Times nobody meant, on real jobs' attempts but not their instances.
		`spotwise.agent.$J0 ` + envelope(events.TypeAgentReport, `{"job_id":"$J0","attempt":$A0,"instance_id":"i-0forged","kind":"progress","progress":0.5}`),
		`spotwise.interruptions.aws.us-east-1 {"v":1,"id":"t","type":"interruption.notice","time":"0000-01-01T00:00:00Z","source":"x","data":{"kind":"spot-interruption","instance":{"id":"i-0forged","provider":"aws","job_id":"$J1","idempotency_key":"$K1"},"deadline":"9999-12-31T23:59:59Z"}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(fr.run)
}

// statusDiff shows what changed in a record's status, field by field.
func statusDiff(before, after *job.Record) string {
	var b, a map[string]any
	bb, _ := json.Marshal(before.Status)
	ab, _ := json.Marshal(after.Status)
	_ = json.Unmarshal(bb, &b)
	_ = json.Unmarshal(ab, &a)
	var out strings.Builder
	diffJSON(&out, "status", b, a)
	return out.String()
}

func diffJSON(out *strings.Builder, path string, b, a any) {
	bm, bok := b.(map[string]any)
	am, aok := a.(map[string]any)
	if !bok || !aok {
		if x, y := fmt.Sprint(b), fmt.Sprint(a); x != y {
			fmt.Fprintf(out, "  %s: %s -> %s\n", path, x, y)
		}
		return
	}
	keys := slices.Sorted(maps.Keys(am))
	for k := range bm {
		if _, ok := am[k]; !ok {
			keys = append(keys, k)
		}
	}
	for _, k := range keys {
		diffJSON(out, path+"."+k, bm[k], am[k])
	}
}
