package ledger

import (
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
	f.Add([]byte(`not json`))
	f.Fuzz(func(t *testing.T, data []byte) {
		v := NewView(zap.NewNop())
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
