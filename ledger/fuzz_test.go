package ledger

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/spotwise/spotwise/events"
)

// Whatever is stored on the ledger's subjects (a garbled message, a forged
// entry), the view never panics: what does not read as an entry is skipped
// and counted, and what it keeps adds up: the month figures, the totals
// and the per-job figures all sum the same charges.
func FuzzLedgerEntry(f *testing.F) {
	f.Add([]byte(`{"id":"j/a1/i-1/0","kind":"usage","start":"2026-11-30T23:00:00Z","end":"2026-12-01T01:00:00Z","price_per_hour":6.01,"cost":12.02,"list_cost":30,"job_id":"j","team":"t","recorded_at":"2026-12-01T01:00:00Z"}`))
	f.Add([]byte(`{"id":"j/a1/i-1/0~r","kind":"usage","reverses":"j/a1/i-1/0","start":"2026-11-30T23:00:00Z","end":"2026-12-01T01:00:00Z","price_per_hour":6.01,"cost":-12.02,"job_id":"j","team":"t"}`))
	f.Add([]byte(`{"id":"overhead/i-2","kind":"overhead","category":"orphan","start":"2026-12-01T00:00:00Z","end":"2026-12-01T00:00:00Z","cost":1}`))
	f.Add([]byte(`{"id":"x","kind":"usage","start":"2026-12-01T02:00:00Z","end":"2026-12-01T01:00:00Z","cost":1}`))
	f.Add([]byte(`{"kind":"usage"}`))
	f.Add([]byte(`{"id":"j/a2/transfer","kind":"transfer","category":"checkpoint","start":"2026-12-01T00:00:00.123456789+02:00","end":"2026-12-01T00:00:00.123456789+02:00","quantity":50,"unit":"GB","cost":1,"list_cost":1,"job_id":"other","instance":"i-9","attempt":-3,"reverses":"elsewhere","recorded_at":"0001-01-01T00:00:00Z"}`))
	f.Add([]byte(`{"id":"j/a1/i-1/0","kind":"usage","start":"2999-12-31T23:00:00Z","end":"2999-12-31T23:59:59.999999999Z","price_per_hour":1,"cost":1,"job_id":"j","instance":"i-1","gpus":8,"gpu":"A100","recorded_at":"2026-12-01T01:00:00Z"}`))
	f.Add([]byte(`not json`))
	f.Fuzz(func(t *testing.T, data []byte) {
		v := NewView(zap.NewNop()).KeepJobTotals()
		v.take(events.LedgerMsg{Seq: 1, Subject: "spotwise.ledger.job.j", Data: data})
		v.take(events.LedgerMsg{Seq: 2, Subject: "spotwise.ledger.job.j", Data: data})
		rows := 0
		var all, months, jobs int64
		v.Each(time.Time{}, time.Date(3000, 1, 1, 0, 0, 0, 0, time.UTC), func(r *Row) bool {
			rows++
			all += int64(r.Cost)
			return true
		})
		if rows+v.Garbled() != 2 {
			t.Fatalf("%d rows and %d garbled of 2 messages", rows, v.Garbled())
		}
		// What the view kept reads back as the entry it was, but for what
		// it does not keep (the job's name and labels, the interruption).
		var want Entry
		if json.Unmarshal(data, &want) == nil && want.Check() == nil {
			want.JobName, want.Labels, want.Interrupted = "", nil, false
			want.Start, want.End, want.RecordedAt = want.Start.UTC(), want.End.UTC(), want.RecordedAt.UTC()
			v.Each(time.Time{}, time.Date(3000, 1, 1, 0, 0, 0, 0, time.UTC), func(r *Row) bool {
				if got := r.Entry(); !reflect.DeepEqual(got, want) {
					t.Fatalf("the view reads back\n%+v\nfor\n%+v", got, want)
				}
				return true
			})
		}
		for _, c := range v.months {
			months += int64(c)
		}
		for _, c := range v.byJob {
			jobs += int64(c)
		}
		if months != all {
			t.Fatalf("months add to %d, the rows to %d", months, all)
		}
		var noJob int64
		v.Each(time.Time{}, time.Date(3000, 1, 1, 0, 0, 0, 0, time.UTC), func(r *Row) bool {
			if r.JobID == "" {
				noJob += int64(r.Cost)
			}
			return true
		})
		if jobs+noJob != all {
			t.Fatalf("jobs add to %d and overhead %d, the rows to %d", jobs, noJob, all)
		}
	})
}

// Whatever a seal message holds (garbled, forged, a charge the view has,
// the same charge twice, a sequence past the seal's own), the view never
// panics, takes each sequence at most once, and a seal seen again adds
// nothing.
func FuzzLedgerSeal(f *testing.F) {
	entry := `{"id":"j/a1/i-1/0","kind":"usage","start":"2026-11-30T23:00:00Z","end":"2026-12-01T01:00:00Z","price_per_hour":6.01,"cost":12.02,"list_cost":30,"job_id":"j","team":"t","recorded_at":"2026-12-01T01:00:00Z"}`
	other := `{"id":"j/a1/i-2/0","kind":"usage","start":"2026-11-30T23:00:00Z","end":"2026-12-01T00:00:00Z","price_per_hour":2,"cost":2,"job_id":"j","team":"t"}`
	f.Add([]byte(`{"job":"j","charges":[{"seq":1,"entry":` + entry + `},{"seq":2,"entry":` + other + `}]}`))
	f.Add([]byte(`{"job":"j","charges":[{"seq":2,"entry":` + other + `},{"seq":2,"entry":` + other + `},{"seq":3,"entry":` + entry + `}]}`))
	f.Add([]byte(`{"job":"j","charges":[{"seq":100,"entry":` + other + `}]}`))
	f.Add([]byte(`{"job":"j","charges":[{"seq":0,"entry":` + other + `}]}`))
	f.Add([]byte(`{"job":"","charges":[{"seq":2,"entry":` + other + `}]}`))
	f.Add([]byte(`{"job":"j","charges":[{"seq":2,"entry":"not an entry"}]}`))
	f.Add([]byte(`{"job":"j","charges":[{"seq":18446744073709551615,"entry":{}}]}`))
	f.Add([]byte(`not json`))
	f.Fuzz(func(t *testing.T, data []byte) {
		v := NewView(zap.NewNop())
		v.take(events.LedgerMsg{Seq: 1, Subject: "spotwise.ledger.job.j", Data: []byte(entry)})
		v.take(events.LedgerMsg{Seq: 100, Subject: events.LedgerSealedSubject("j"), Data: data})
		rows, garbled := v.Len(), v.Garbled()
		distinct := map[uint64]bool{1: true}
		s, err := decodeSeal(data, 100)
		if err == nil {
			for _, c := range s.Charges {
				distinct[c.Seq] = true
			}
		}
		if rows > len(distinct) {
			t.Fatalf("%d rows from %d distinct charges", rows, len(distinct))
		}
		v.take(events.LedgerMsg{Seq: 101, Subject: events.LedgerSealedSubject("j"), Data: data})
		// (A seal refused at 100 for a charge at 100 reads at 101.)
		if err == nil && v.Len() != rows || v.Garbled() > 2*garbled {
			t.Fatalf("the seal seen again: %d rows (was %d), %d garbled (was %d)", v.Len(), rows, v.Garbled(), garbled)
		}
		var all, months int64
		v.Each(time.Time{}, time.Date(3000, 1, 1, 0, 0, 0, 0, time.UTC), func(r *Row) bool {
			all += int64(r.Cost)
			return true
		})
		for _, c := range v.months {
			months += int64(c)
		}
		if months != all {
			t.Fatalf("months add to %d, the rows to %d", months, all)
		}
	})
}
