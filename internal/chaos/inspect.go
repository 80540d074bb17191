package chaos

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/spotwise/spotwise/events"
	"github.com/spotwise/spotwise/internal/server"
	"github.com/spotwise/spotwise/job"
	costledger "github.com/spotwise/spotwise/ledger"
	"github.com/spotwise/spotwise/money"
	"github.com/spotwise/spotwise/providers"
	"github.com/spotwise/spotwise/scheduler"
)

// call sends one request to the server's HTTP API and decodes a 200's body
// into out.
func (r *run) call(ctx context.Context, method, path string, body, out any) error {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, r.client.Base+path, rd)
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+r.client.Token)
	resp, err := r.client.HTTP.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s %s: %s: %s", method, path, resp.Status, strings.TrimSpace(string(b)))
	}
	return json.Unmarshal(b, out)
}

// instances is the simulated cloud's listing of every instance it started
// (ended ones included, for a simulated week).
func (r *run) instances(ctx context.Context) ([]providers.Instance, error) {
	var body struct {
		Instances []providers.Instance `json:"instances"`
	}
	err := r.call(ctx, http.MethodGet, "/v1/instances", nil, &body)
	return body.Instances, err
}

// retry runs fn until it succeeds or d is over (the server may be
// restarting, or standing by for a moment).
func retry(ctx context.Context, d time.Duration, fn func() error) error {
	deadline := time.Now().Add(d)
	for {
		err := fn()
		if err == nil || time.Now().After(deadline) || ctx.Err() != nil {
			return err
		}
		select {
		case <-time.After(200 * time.Millisecond):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// storm sends every live spot instance of the busiest zone a notice at
// once.
func (r *run) storm(ctx context.Context) {
	s := Storm{At: time.Since(r.start)}
	var insts []providers.Instance
	err := retry(ctx, 10*time.Second, func() (err error) {
		insts, err = r.instances(ctx)
		return err
	})
	if err != nil {
		r.logf("storm skipped: listing instances: %v", err)
		r.res.Storms = append(r.res.Storms, s)
		return
	}
	zones := map[string]int{}
	for _, in := range insts {
		if !in.State.Ended() && in.Purchase == providers.Spot {
			zones[in.Zone]++
		}
	}
	for z, n := range zones {
		if n > zones[s.Zone] || (n == zones[s.Zone] && z < s.Zone) {
			s.Zone = z
		}
	}
	if s.Zone == "" {
		r.logf("storm skipped: no live spot instance")
		r.res.Storms = append(r.res.Storms, s)
		return
	}
	var reply server.SimReply
	err = retry(ctx, 10*time.Second, func() error {
		return r.call(ctx, http.MethodPost, "/v1/sim/preempt", server.SimRequest{Zone: s.Zone}, &reply)
	})
	if err != nil {
		r.logf("storm in %s failed: %v", s.Zone, err)
	}
	s.Notices = len(reply.Instances)
	r.res.Storms = append(r.res.Storms, s)
	r.logf("zone storm in %s: %d spot instances get a notice at once", s.Zone, s.Notices)
}

// settle waits, once every job has ended, until the cloud has no live
// instance and no record holds an attempt, then a few reconciliations
// more (an orphan's overhead is recorded once its end is seen), or until
// o.Settle is over.
func (r *run) settle(ctx context.Context) error {
	ids := r.ackedIDs()
	if ended, _ := r.ledger.settled(ids); !ended || len(ids) < len(r.plan.Jobs) {
		return nil // out of time: the figures are taken as things are
	}
	deadline := time.Now().Add(r.o.Settle)
	for {
		_, settled := r.ledger.settled(ids)
		insts, err := r.instances(ctx)
		live := 0
		for _, in := range insts {
			if !in.State.Ended() {
				live++
			}
		}
		if err == nil && settled && live == 0 {
			r.logf("every instance has ended and every attempt has closed")
			break
		}
		if time.Now().After(deadline) {
			r.logf("after %s: %d instances still live, every attempt closed: %v", r.o.Settle, live, settled)
			return nil
		}
		select {
		case <-time.After(500 * time.Millisecond):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	select {
	case <-time.After(3 * r.o.ReconcileEvery):
	case <-ctx.Done():
		return ctx.Err()
	}
	return nil
}

// collect pauses the simulated clock, so that every figure is taken at
// one simulated moment, and reads the job records and recorded overheads
// from the buckets, and the cloud's own instance records.
func (r *run) collect(ctx context.Context) (Final, error) {
	f := Final{Records: map[string]*job.Record{}, Why: map[string]string{}}
	var clk server.ClockReply
	if err := retry(ctx, 10*time.Second, func() error {
		return r.call(ctx, http.MethodPost, "/v1/sim/clock", server.ClockRequest{Paused: true}, &clk)
	}); err != nil {
		return f, err
	}
	// Let what is under way land.
	time.Sleep(max(time.Second, 2*r.o.ReconcileEvery))
	if err := r.call(ctx, http.MethodGet, "/v1/sim/clock", nil, &clk); err != nil {
		return f, err
	}
	f.Now = clk.Now
	bus := r.ledger.connected()
	if bus == nil {
		return f, fmt.Errorf("not connected to the server's NATS")
	}
	ids, err := bus.Jobs().Keys(ctx)
	if err != nil {
		return f, fmt.Errorf("listing jobs: %w", err)
	}
	for _, id := range ids {
		rec, _, err := bus.Jobs().Get(ctx, id)
		if err != nil {
			return f, fmt.Errorf("reading job %s: %w", id, err)
		}
		f.Records[id] = rec
	}
	// Jobs finished a day ago have their records in the archive.
	archived, err := bus.ArchivedRecords(ctx)
	if err != nil {
		return f, fmt.Errorf("reading archived jobs: %w", err)
	}
	for id, rec := range archived {
		if _, ok := f.Records[id]; !ok {
			f.Records[id] = rec
		}
	}
	keys, err := bus.Meta().Keys(ctx)
	if err != nil {
		return f, fmt.Errorf("listing overheads: %w", err)
	}
	for _, k := range keys {
		if !strings.HasPrefix(k, "overhead.") {
			continue
		}
		b, _, err := bus.Meta().Get(ctx, k)
		if err != nil {
			return f, fmt.Errorf("reading %s: %w", k, err)
		}
		var o scheduler.Overhead
		if err := json.Unmarshal(b, &o); err != nil {
			return f, fmt.Errorf("reading %s: %w", k, err)
		}
		f.Overheads = append(f.Overheads, o)
	}
	if f.Instances, err = r.instances(ctx); err != nil {
		return f, err
	}
	if f.Ledger, err = ledgerTotals(ctx, bus, f); err != nil {
		return f, err
	}
	r.mu.Lock()
	f.Acked = maps.Clone(r.acked)
	r.mu.Unlock()
	f.Backwards = r.ledger.wentBackwards()
	for _, id := range f.Acked {
		if rec := f.Records[id]; rec != nil && !rec.Status.State.Terminal() {
			f.Why[id] = r.why(ctx, rec)
		}
	}
	return f, nil
}

// why says what the API says of a job that has not ended.
func (r *run) why(ctx context.Context, rec *job.Record) string {
	s := fmt.Sprintf("%s at %.0f%%: %s", rec.Status.State, 100*rec.Status.Progress, rec.Status.Message)
	v, err := r.client.Get(ctx, rec.ID)
	if err != nil {
		return s
	}
	var reasons []string
	for _, p := range v.PendingReasons {
		reasons = append(reasons, fmt.Sprintf("%s (%d offers): %s", p.Code, p.Offers, p.Message))
	}
	if len(reasons) > 0 {
		s += "; pending: " + strings.Join(reasons, "; ")
	}
	for _, a := range []*job.Attempt{rec.Status.Previous, rec.Status.Current} {
		if a != nil {
			s += fmt.Sprintf("; attempt %d on %s (%d instances, %d running%s)", a.N, a.Placement.OfferID, len(a.Instances), len(a.Running),
				cmp.Or(map[bool]string{true: ", released"}[a.Released()], ""))
		}
	}
	return s
}

// ledgerTotals reads the cost ledger: what it holds per job ("" for
// overhead). The server's writer appends a job's last charges a moment
// after its record settles: a while is given for them to arrive.
func ledgerTotals(ctx context.Context, bus *events.Bus, f Final) (map[string]money.Micros, error) {
	v := costledger.NewView(zap.NewNop()).KeepJobTotals()
	stop, err := v.Follow(ctx, bus)
	if err != nil {
		return nil, fmt.Errorf("reading the cost ledger: %w", err)
	}
	defer stop()
	select {
	case <-v.Ready():
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		behind := false
		for id, rec := range f.Records {
			if rec.Status.Current == nil && rec.Status.Previous == nil && v.JobTotal(id) != rec.CostAt(f.Now) {
				behind = true
				break
			}
		}
		if !behind || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	out := map[string]money.Micros{}
	v.Each(time.Time{}, time.Date(3000, 1, 1, 0, 0, 0, 0, time.UTC), func(r *costledger.Row) bool {
		if _, ok := out[r.JobID]; !ok {
			out[strings.Clone(r.JobID)] = 0 // the row's strings are its own only for the call
		}
		out[r.JobID] += r.Cost
		return true
	})
	return out, nil
}
