package events

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/spotwise/spotwise/job"
	"github.com/spotwise/spotwise/money"
)

// The stored form of a record is what decoding its JSON gives, whatever
// its times carry (a monotonic reading, a zone) and however its lists are
// empty; a status it cannot stand for is refused, not guessed.
func TestStoredFormIsWhatDecodingGives(t *testing.T) {
	now := time.Now() // local, with a monotonic reading
	zone := time.FixedZone("UTC+5:30", 5*3600+1800)
	base := func() *job.Record {
		p := 100
		r := &job.Record{ID: job.NewID(now), Spec: job.Spec{APIVersion: job.APIVersion, Name: "t", Team: "a", Priority: &p}, Status: job.Status{State: job.Queued}}
		raw, _ := json.Marshal(r)
		d, err := DecodeRecord(raw) // the spec as a store read gives it
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	cases := []struct {
		name   string
		change func(r *job.Record)
		ok     bool
	}{
		{"times with a monotonic reading", func(r *job.Record) {
			r.Status.State, r.Status.SubmittedAt, r.Status.UpdatedAt = job.Running, now, now.Add(time.Second)
		}, true},
		{"times in UTC and in another zone", func(r *job.Record) {
			r.Status.State, r.Status.SubmittedAt, r.Status.StartedAt = job.Running, now.UTC(), now.In(zone)
		}, true},
		{"a zero time in a zone", func(r *job.Record) {
			r.Status.State, r.Status.FinishedAt = job.Queued, time.Time{}.In(zone)
		}, true},
		{"empty lists, left out or written", func(r *job.Record) {
			r.Status.State = job.Running
			r.Status.Excluded = []job.Exclusion{}
			r.Status.Current = &job.Attempt{N: 1, LaunchKey: "k", Instances: []string{}, Running: []string{},
				Spans: []job.Span{{Instance: "i-1", From: now, Prices: []money.PriceChange{}}}, PlacedAt: now,
				EstimatedRuntime: job.Duration(90*time.Minute + 7), Cost: money.Micros(1_234_567)}
			r.Status.Attempts = []job.Attempt{}
		}, true},
		{"an ended attempt with a notice", func(r *job.Record) {
			r.Status.State = job.Queued
			r.Status.Attempts = []job.Attempt{{N: 1, Notice: &job.Notice{Kind: "spot-interruption", At: now, Instance: "i-2"}, EndedAt: now.In(zone), Outcome: job.OutcomePreempted}}
			r.Status.Progress, r.Status.WorkLost = 0.1+0.2, job.Duration(time.Nanosecond)
		}, true},
		{"text that is not UTF-8", func(r *job.Record) {
			r.Status.State, r.Status.Message = job.Failed, "exit \xff\xfe"
		}, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := base()
			c.change(r)
			before := r.Clone()
			got, ok := storedForm(r)
			if ok != c.ok {
				t.Fatalf("ok = %v, want %v", ok, c.ok)
			}
			if !reflect.DeepEqual(r, before) {
				t.Fatal("storedForm changed the record it was given")
			}
			if !ok {
				return
			}
			raw, err := json.Marshal(r)
			if err != nil {
				t.Fatal(err)
			}
			want, err := DecodeRecord(raw)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("stored form\n %#v\nwant\n %#v", got.Status, want.Status)
			}
			checkStoredForm(got, raw) // the race builds' check agrees
		})
	}
}
