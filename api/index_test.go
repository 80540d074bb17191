package api_test

import (
	"errors"
	"fmt"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/spotwise/spotwise/api"
	"github.com/spotwise/spotwise/events"
	"github.com/spotwise/spotwise/internal/testutil"
	"github.com/spotwise/spotwise/job"
)

// jobsBucket is the job-state bucket as any NATS client sees it, for
// writes the JobStore would refuse to make.
func (e *env) jobsBucket() jetstream.KeyValue {
	e.t.Helper()
	js, err := jetstream.New(e.bus.Conn())
	if err != nil {
		e.t.Fatal(err)
	}
	kv, err := js.KeyValue(e.t.Context(), events.BucketJobs)
	if err != nil {
		e.t.Fatal(err)
	}
	return kv
}

// record is a stored job as another writer (the scheduler, another server)
// would write it.
func record(at time.Time, name string, state job.State) *job.Record {
	p := 100
	return &job.Record{
		ID:     job.NewID(at),
		Spec:   job.Spec{APIVersion: job.APIVersion, Name: name, Team: "ops", Priority: &p, Command: []string{"x"}},
		Status: job.Status{State: state, SubmittedAt: at, UpdatedAt: at},
	}
}

func waitListed(t *testing.T, e *env, want []string) {
	t.Helper()
	testutil.CheckFor(t, 5*time.Second, 5*time.Millisecond, func() error {
		if got := ids(e.list(api.Query{}).Jobs); !slices.Equal(got, want) {
			return fmt.Errorf("listing %v, want %v", got, want)
		}
		return nil
	})
}

func TestIndexFollowsTheBucket(t *testing.T) {
	e := newEnv(t)
	ctx := t.Context()
	mine := e.submit(spec())
	r := record(t0.Add(time.Minute), "written-elsewhere", job.Running)
	if _, err := e.bus.Jobs().Create(ctx, r); err != nil {
		t.Fatal(err)
	}
	waitListed(t, e, []string{r.ID, mine})
	if l := e.list(api.Query{States: []job.State{job.Running}}); len(l.Jobs) != 1 || l.Jobs[0].Name != "written-elsewhere" {
		t.Errorf("running jobs %+v, want the one written elsewhere", l.Jobs)
	}

	e.setRecord(r.ID, func(r *job.Record) { r.Status.State = job.Succeeded })
	testutil.CheckFor(t, 5*time.Second, 5*time.Millisecond, func() error {
		if l := e.list(api.Query{States: []job.State{job.Succeeded}}); len(l.Jobs) != 1 {
			return errors.New("the update is not listed")
		}
		return nil
	})

	if err := e.jobsBucket().Delete(ctx, r.ID); err != nil {
		t.Fatal(err)
	}
	waitListed(t, e, []string{mine})
	if _, err := e.svc.Get(asOp(ctx), r.ID); !isCode(err, api.CodeNotFound) {
		t.Errorf("Get of a deleted job: %v, want %s", err, api.CodeNotFound)
	}
}

func TestIndexSkipsGarbledRecords(t *testing.T) {
	e := newEnv(t)
	ctx := t.Context()
	kv := e.jobsBucket()
	good := e.submit(spec().Name("good"))
	garbled := map[string][]byte{
		job.NewID(t0.Add(1 * time.Second)): []byte("{not json"),
		job.NewID(t0.Add(2 * time.Second)): []byte(`{"id": "j-0", "status": {"state": "exploded"}}`),
		job.NewID(t0.Add(3 * time.Second)): []byte(`{"id": "NOT-AN-ID", "status": {"state": "queued"}}`),
		job.NewID(t0.Add(4 * time.Second)): []byte(`null`),
	}
	for k, v := range garbled {
		if _, err := kv.Put(ctx, k, v); err != nil {
			t.Fatal(err)
		}
	}
	// A good record written after the garbage shows the watch went on.
	later := record(t0.Add(time.Hour), "later", job.Queued)
	if _, err := e.bus.Jobs().Create(ctx, later); err != nil {
		t.Fatal(err)
	}
	waitListed(t, e, []string{later.ID, good})

	for id := range garbled {
		t.Run("get "+id, func(t *testing.T) {
			_, err := e.svc.Get(asOp(ctx), id)
			var ae *api.Error
			if !errors.As(err, &ae) || ae.Code == api.CodeNotFound {
				t.Fatalf("Get of a garbled job: %v, want an error other than not found", err)
			}
			if ae.Code != api.CodeInternal || ae.Status != http.StatusInternalServerError {
				t.Errorf("Get of a garbled job: %+v, want %s (retrying will not help)", ae, api.CodeInternal)
			}
			if _, err := e.svc.Cancel(asOp(ctx), id, ""); !isCode(err, api.CodeInternal) {
				t.Errorf("Cancel of a garbled job: %v, want %s", err, api.CodeInternal)
			}
			r := e.do(http.MethodGet, "/v1/jobs/"+id, nil, nil)
			if r.status != http.StatusInternalServerError || r.apiError(t).Code != api.CodeInternal {
				t.Errorf("GET of a garbled job: %d %s", r.status, r.body)
			}
		})
	}
	if v, err := e.svc.Get(asOp(ctx), good); err != nil || v.Name != "good" {
		t.Errorf("Get of a good job beside garbled ones: %+v, %v", v, err)
	}

	// A service started over a bucket holding garbage still starts, with
	// every good job listed.
	other := startService(t, e.bus, e.clk)
	l, err := other.List(asOp(ctx), api.Query{})
	if err != nil || !slices.Equal(ids(l.Jobs), []string{later.ID, good}) {
		t.Errorf("a new service lists %v, %v; want the two good jobs", ids(l.Jobs), err)
	}

	// A good record overwritten with garbage cannot be read any more.
	if _, err := kv.Put(ctx, good, []byte("garbage")); err != nil {
		t.Fatal(err)
	}
	if _, err := e.svc.Get(asOp(ctx), good); !isCode(err, api.CodeInternal) {
		t.Errorf("Get of a job overwritten with garbage: %v", err)
	}
}

// Start returns once every stored job is indexed, so the first listing of
// a restarted server is complete.
func TestStartIndexesStoredJobs(t *testing.T) {
	e := newEnv(t)
	var want []string
	for i := range 50 {
		r := record(t0.Add(time.Duration(i)*time.Second), fmt.Sprintf("j%d", i), job.Queued)
		if _, err := e.bus.Jobs().Create(t.Context(), r); err != nil {
			t.Fatal(err)
		}
		want = append([]string{r.ID}, want...)
	}
	svc := startService(t, e.bus, e.clk)
	l, err := svc.List(asOp(t.Context()), api.Query{Limit: 1000})
	if err != nil || !slices.Equal(ids(l.Jobs), want) {
		t.Fatalf("first listing after Start: %d jobs, %v; want all %d", len(l.Jobs), err, len(want))
	}
}

func isCode(err error, code string) bool {
	var ae *api.Error
	return errors.As(err, &ae) && ae.Code == code
}
