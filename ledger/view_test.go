package ledger

import (
	"fmt"
	"reflect"
	"runtime"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/spotwise/spotwise/money"
)

// viewEntry is the i-th of a run of usage charges, a job's in every
// third, each on its own instance: what a store of finished jobs holds.
func viewEntry(i int) Entry {
	start := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(i) * time.Minute)
	job := fmt.Sprintf("job-%08d", i/3)
	inst := fmt.Sprintf("i-%012x", i)
	return Entry{ID: fmt.Sprintf("%s/a%d/%s/%d", job, 1+i%3, inst, i%2), Kind: Usage, Start: start, End: start.Add(90 * time.Minute),
		PricePerHour: 6_010_000, Quantity: 1.5, Unit: "Hours", Cost: 9_015_000 + money.Micros(i), ListCost: 32_770_000,
		Provider: "aws", Region: "us-east-2", Zone: "us-east-2c", InstanceType: "p4d.24xlarge", Purchase: "spot", GPU: "A100", GPUs: 8,
		Instance: inst, JobID: job, Attempt: 1 + i%3, Team: fmt.Sprintf("team-%d", i%7), RecordedAt: start.Add(91 * time.Minute)}
}

// Rows across many of the arena's chunks read back as they were added,
// in order, and the per-job and per-team figures sum them.
func TestViewKeepsEveryRowAcrossChunks(t *testing.T) {
	v := NewView(zap.NewNop()).KeepJobTotals()
	const n = 40_000 // several chunks
	var want money.Micros
	for i := range n {
		v.Add(viewEntry(i))
		want += viewEntry(i).Cost
	}
	if len(v.chunks) < 2 {
		t.Fatalf("%d rows fit in %d chunk: the test does not cross chunks", n, len(v.chunks))
	}
	i := 0
	var got money.Micros
	v.Each(time.Time{}, time.Date(3000, 1, 1, 0, 0, 0, 0, time.UTC), func(r *Row) bool {
		e := viewEntry(i)
		if !reflect.DeepEqual(r.Entry(), e.withoutLabels()) {
			t.Fatalf("row %d reads back as\n%+v\nnot\n%+v", i, r.Entry(), e)
		}
		got += r.Cost
		i++
		return true
	})
	if i != n || v.Len() != n || got != want {
		t.Fatalf("read %d rows (Len %d) costing %s; added %d costing %s", i, v.Len(), got, n, want)
	}
	if c := v.JobTotal("job-00000001"); c != viewEntry(3).Cost+viewEntry(4).Cost+viewEntry(5).Cost {
		t.Fatalf("job-00000001 totals %s", c)
	}
	// A server's view keeps no total per job.
	plain := NewView(zap.NewNop())
	for i := range 100 {
		plain.Add(viewEntry(i))
	}
	if plain.byJob != nil || plain.Len() != 100 {
		t.Fatalf("a view not asked to keep job totals holds %d of them (and %d rows)", len(plain.byJob), plain.Len())
	}
	var teams money.Micros
	for k, c := range v.Totals() {
		if k.Provider != "aws" || k.Purchase != "spot" {
			t.Fatalf("a total under %+v", k)
		}
		teams += c
	}
	if teams != want {
		t.Fatalf("the teams' totals add to %s, the rows to %s", teams, want)
	}
	// A window keeps the rows that bill in it: those that started less
	// than 90 minutes before its end... and end after its start.
	from, to := viewEntry(1000).Start, viewEntry(2000).Start
	in := 0
	v.Each(from, to, func(r *Row) bool { in++; return true })
	if in != 1000+89 {
		t.Fatalf("%d rows bill in [row 1000's start, row 2000's), want 1089", in)
	}
}

// A view that spills keeps only the chunk it fills in memory and reads
// every row back as it was added, in order, also past its file's bound
// (where chunks stay in memory) and with entries kept from earlier reads
// unchanged by later ones.
func TestViewSpillsFullChunksToItsFile(t *testing.T) {
	const n = 40_000 // several chunks
	for _, tc := range []struct {
		name     string
		max      int64
		inMemory func(chunks int) int
	}{
		{"unbounded", 1 << 40, func(int) int { return 1 }},
		{"bounded to one chunk", chunkSize + chunkSize/2, func(chunks int) int { return chunks - 1 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := NewView(zap.NewNop()).KeepJobTotals()
			if err := v.SpillTo(t.TempDir(), tc.max); err != nil {
				t.Fatal(err)
			}
			defer v.Close()
			for i := range n {
				v.Add(viewEntry(i))
			}
			bytes, inMemory := v.Spilled()
			if len(v.chunks) < 3 || inMemory != tc.inMemory(len(v.chunks)) || bytes == 0 || bytes > tc.max {
				t.Fatalf("%d chunks: %d in memory, %d bytes in the file (bound %d)", len(v.chunks), inMemory, bytes, tc.max)
			}
			var kept []Entry
			i := 0
			v.Each(time.Time{}, time.Date(3000, 1, 1, 0, 0, 0, 0, time.UTC), func(r *Row) bool {
				e := viewEntry(i)
				if !reflect.DeepEqual(r.Entry(), e.withoutLabels()) {
					t.Fatalf("row %d reads back as\n%+v\nnot\n%+v", i, r.Entry(), e)
				}
				if i%997 == 0 {
					kept = append(kept, r.Entry())
				}
				i++
				return true
			})
			if i != n {
				t.Fatalf("read %d rows of %d", i, n)
			}
			// Read again: the buffers are reused; what was kept is not.
			v.Each(time.Time{}, time.Date(3000, 1, 1, 0, 0, 0, 0, time.UTC), func(*Row) bool { return true })
			for k, e := range kept {
				if want := viewEntry(k * 997).withoutLabels(); !reflect.DeepEqual(e, want) {
					t.Fatalf("an entry kept from a read is now\n%+v\nnot\n%+v", e, want)
				}
			}
			if c := v.JobTotal("job-00000001"); c != viewEntry(3).Cost+viewEntry(4).Cost+viewEntry(5).Cost {
				t.Fatalf("job-00000001 totals %s", c)
			}
		})
	}
}

func (e Entry) withoutLabels() Entry {
	e.JobName, e.Labels, e.Interrupted = "", nil, false
	return e
}

// BenchmarkViewRows reports the heap one charge takes in the view, a
// million of them held (three per job: a store of 333,333 finished jobs).
func BenchmarkViewRows(b *testing.B) {
	const n = 1_000_000
	entries := make([]Entry, 10_000)
	for i := range entries {
		entries[i] = viewEntry(i)
	}
	for b.Loop() {
		runtime.GC()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		v := NewView(zap.NewNop())
		for i := range n {
			e := entries[i%len(entries)]
			// Each job's ID and the entry's are its own strings, as decoded.
			e.JobID = fmt.Sprintf("job-%08d", i/3)
			e.ID = fmt.Sprintf("%s/a%d/%s/%d", e.JobID, e.Attempt, e.Instance, i%2)
			v.Add(e)
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/n, "heap-B/row")
		runtime.KeepAlive(v)
	}
}
