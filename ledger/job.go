package ledger

import (
	"fmt"
	"strings"
	"time"

	"github.com/spotwise/spotwise/job"
	"github.com/spotwise/spotwise/money"
)

// Charges cuts a job's bill, as its record has it at now, into entries:
// closed are the charges that have ended (an instance's price segment
// that a price change or the instance's end closed; everything of an
// attempt that has ended, billed as the record bills it), open the
// segments still running, billed up to now. Closed and open together sum
// to the record's CostAt(now), micro-dollar for micro-dollar.
//
// A closed entry's ID is its key: "<job>/a<attempt>/<instance>/<segment>",
// or "<job>/a<attempt>/nodes" for an attempt whose instances were never
// known (billed for its nodes from its launch). A key's charge can change
// (an instance's end known later than the attempt's): the writer then
// reverses what it wrote and writes the new charge.
func Charges(r *job.Record, now time.Time) (closed, open []Entry) {
	var finished time.Time
	if r.Status.State.Terminal() {
		finished = r.Status.FinishedAt
	}
	add := func(a *job.Attempt, live bool) {
		end := now
		if !live {
			end = a.EndedAt
		}
		if a.Released() && a.ReleasedAt.Before(end) {
			end = a.ReleasedAt
		}
		base := usageOf(r, a)
		bought := !a.LaunchedAt.IsZero() && !end.Before(a.LaunchedAt)
		if a.Transfer > 0 && bought {
			// The checkpoint carried to the attempt's region: charged once,
			// when its capacity was bought.
			e := base
			e.ID = fmt.Sprintf("%s/a%d/transfer", r.ID, a.N)
			e.Kind, e.Category, e.Unit = Transfer, CategoryCheckpoint, "GB"
			e.Start, e.End, e.Cost, e.Quantity = a.LaunchedAt, a.LaunchedAt, a.Transfer, checkpointGB(r)
			e.InstanceType, e.GPU, e.GPUs, e.Purchase = "", "", 0, ""
			closed = append(closed, e)
		}
		if a.DataTransfer > 0 && bought {
			closed = append(closed, datasetOf(r, a, base))
		}
		if len(a.Spans) == 0 {
			if a.LaunchedAt.IsZero() || !end.After(a.LaunchedAt) {
				return
			}
			e := base
			nodes := max(1, a.Placement.Nodes)
			e.ID = fmt.Sprintf("%s/a%d/nodes", r.ID, a.N)
			e.Start, e.End = a.LaunchedAt, end
			e.PricePerHour = a.Placement.HourlyCost()
			e.Cost = e.PricePerHour.ForDuration(end.Sub(a.LaunchedAt))
			e.ListCost = listPrice(a.Placement, a.Placement.PricePerHour).MulInt(nodes).ForDuration(end.Sub(a.LaunchedAt))
			e.Quantity = end.Sub(a.LaunchedAt).Hours() * float64(nodes)
			if live {
				open = append(open, e)
			} else {
				closed = append(closed, e)
			}
			return
		}
		for _, sp := range a.Spans {
			segs := sp.Segments(end, a.Placement.PricePerHour)
			for k, seg := range segs {
				e := base
				e.ID = fmt.Sprintf("%s/a%d/%s/%d", r.ID, a.N, sp.Instance, k)
				e.Instance = sp.Instance
				e.Start, e.End, e.PricePerHour = seg.From, seg.To, seg.Price
				e.Cost = seg.Cost()
				e.ListCost = listPrice(a.Placement, seg.Price).ForDuration(seg.To.Sub(seg.From))
				e.Quantity = seg.To.Sub(seg.From).Hours()
				switch {
				case live && sp.To.IsZero() && k == len(segs)-1:
					open = append(open, e)
				case finished.IsZero() || !seg.To.After(finished):
					closed = append(closed, e)
				default:
					closed = append(closed, teardown(e, seg, finished)...)
				}
			}
		}
	}
	for i := range r.Status.Attempts {
		add(&r.Status.Attempts[i], false)
	}
	for _, a := range []*job.Attempt{r.Status.Previous, r.Status.Current} {
		if a != nil {
			add(a, true)
		}
	}
	if e, ok := storageOf(r, now); ok {
		if r.Status.State.Terminal() {
			closed = append(closed, e)
		} else {
			open = append(open, e)
		}
	}
	return closed, open
}

// datasetOf is the egress of a job's input data to an attempt placed
// outside the data's region: charged once, when the attempt's capacity was
// bought, where the data leaves (the provider and region that bill it),
// at the published transfer rate (its list price).
func datasetOf(r *job.Record, a *job.Attempt, base Entry) Entry {
	e := base
	e.ID = fmt.Sprintf("%s/a%d/dataset", r.ID, a.N)
	e.Kind, e.Category, e.Unit = Transfer, CategoryDataset, "GB"
	e.Provider, e.Region, e.Zone = r.Spec.Data.Provider, r.Spec.Data.Region, ""
	e.Start, e.End, e.Quantity = a.LaunchedAt, a.LaunchedAt, r.Spec.Data.SizeGB
	e.Cost, e.ListCost = a.DataTransfer, a.DataTransfer
	e.InstanceType, e.GPU, e.GPUs, e.Purchase = "", "", 0, ""
	return e
}

// storageOf is the charge for keeping a job's checkpoint (Record.StorageAt),
// from its first checkpoint to its end, where its last attempt ran: one
// entry, closed when the job ends.
func storageOf(r *job.Record, now time.Time) (Entry, bool) {
	s := &r.Status
	if s.CheckpointSince.IsZero() || s.Checkpoint == nil {
		return Entry{}, false
	}
	end := now
	if s.State.Terminal() && !s.FinishedAt.IsZero() {
		end = s.FinishedAt
	}
	if end.Before(s.CheckpointSince) {
		end = s.CheckpointSince
	}
	gb := float64(s.Checkpoint.Size) / 1e9
	e := Entry{ID: r.ID + "/storage", Kind: Storage, Category: CategoryCheckpoint, Unit: "GB-Month",
		Start: s.CheckpointSince, End: end, Cost: r.StorageAt(end),
		PricePerHour: money.StorageCost(money.ObjectStoragePerGBMonth, gb, time.Hour),
		Quantity:     gb * end.Sub(s.CheckpointSince).Hours() / money.HoursPerMonth,
		JobID:        r.ID, JobName: r.Spec.Name, Team: r.Spec.Team, Labels: r.Spec.Labels}
	if a := lastAttempt(r); a != nil {
		e.Provider, e.Region, e.Attempt = a.Placement.Provider, a.Placement.Region, a.N
	}
	e.ListCost = e.Cost
	return e, true
}

// lastAttempt is the job's newest attempt, live or ended.
func lastAttempt(r *job.Record) *job.Attempt {
	if r.Status.Current != nil {
		return r.Status.Current
	}
	if r.Status.Previous != nil {
		return r.Status.Previous
	}
	if n := len(r.Status.Attempts); n > 0 {
		return &r.Status.Attempts[n-1]
	}
	return nil
}

// usageOf is the part of a usage entry an attempt decides.
func usageOf(r *job.Record, a *job.Attempt) Entry {
	p := a.Placement
	return Entry{
		Kind: Usage, Unit: "Hours",
		Provider: p.Provider, Region: p.Region, Zone: p.Zone, InstanceType: p.InstanceType,
		Purchase: p.Purchase, GPU: p.GPU, GPUs: p.GPUs,
		JobID: r.ID, JobName: r.Spec.Name, Attempt: a.N, Team: r.Spec.Team, Labels: r.Spec.Labels,
	}
}

// teardown cuts a closed segment at the job's end: what its instance cost
// after the job had ended (shutting down) is the job's, and overhead
// (category teardown, the entry's ID followed by "/teardown"); the part
// before stays usage. The two add up to the segment's cost exactly.
func teardown(e Entry, seg money.Segment, finished time.Time) []Entry {
	td := e
	td.ID += "/teardown"
	td.Kind, td.Category = Overhead, OverheadTeardown
	if !finished.After(seg.From) {
		return []Entry{td}
	}
	e.End = finished
	e.Cost = money.Segment{From: seg.From, To: finished, Price: seg.Price}.Cost()
	e.ListCost = e.ListCost.Scale(int64(finished.Sub(seg.From)), int64(seg.To.Sub(seg.From)))
	e.Quantity = finished.Sub(seg.From).Hours()
	td.Start = finished
	td.Cost -= e.Cost
	td.ListCost -= e.ListCost
	td.Quantity -= e.Quantity
	return []Entry{e, td}
}

// checkpointGB is the size of the checkpoint a job carries between
// regions: as its spec declares it, else as stored.
func checkpointGB(r *job.Record) float64 {
	if gb := r.Spec.Checkpoint.SizeGB; gb > 0 {
		return gb
	}
	if ck := r.Status.Checkpoint; ck != nil {
		return float64(ck.Size) / 1e9
	}
	return 0
}

// listPrice is what the placement's capacity lists at on demand: its
// recorded on-demand price, else (a record from before it was recorded)
// the price paid when it was bought on demand, else unknown (0).
func listPrice(p job.Placement, paid money.Micros) money.Micros {
	switch {
	case p.OnDemandPrice > 0:
		return p.OnDemandPrice
	case p.Purchase == "on-demand":
		return paid
	}
	return 0
}

// Key is the charge an entry is a version or a reversal of: its ID up to
// the first "~".
func Key(id string) string {
	k, _, _ := strings.Cut(id, "~")
	return k
}

// attemptOf reads the attempt number from a usage key ("<job>/a<n>/..."),
// 0 when it has none.
func attemptOf(key string) int {
	_, rest, ok := strings.Cut(key, "/a")
	if !ok {
		return 0
	}
	n := 0
	for _, c := range rest {
		if c < '0' || c > '9' {
			break
		}
		n = n*10 + int(c-'0')
	}
	return n
}

// sameCharge reports whether two versions of a charge bill the same: the
// period, the price and the cost (who it is billed to cannot change).
func sameCharge(a, b *Entry) bool {
	return a.Start.Equal(b.Start) && a.End.Equal(b.End) && a.PricePerHour == b.PricePerHour && a.Cost == b.Cost && a.ListCost == b.ListCost
}

// forever stands for "now" when the open charges' ends are not wanted.
var forever = time.Date(3000, 1, 1, 0, 0, 0, 0, time.UTC)

// Running are a job's open charges (see Charges) as they stand, without a
// now: End is zero for one still running, else the release that capped
// it; Cost is what it bills up to a time, Entry.CostAt.
func Running(r *job.Record) []Entry {
	_, open := Charges(r, forever)
	for i := range open {
		if open[i].End.Equal(forever) {
			open[i].End = time.Time{}
		}
		open[i].Cost, open[i].ListCost, open[i].Quantity = 0, 0, 0
	}
	return open
}
