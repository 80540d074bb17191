package ledger

import (
	"time"

	"github.com/spotwise/spotwise/money"
)

// t0 is when the fixtures' charges start: mid-month, so that only the
// entries meant to cross a month's end do.
var t0 = time.Date(2031, 3, 14, 9, 0, 0, 0, time.UTC)

// usage is an hour and a half of one p4d.24xlarge for job j-1's second
// attempt, at $5.680001/h; the options below change it.
func usage(opts ...func(*Entry)) Entry {
	e := Entry{
		ID: "j-1/a2/i-0abc/1", Kind: Usage,
		Start: t0, End: t0.Add(90 * time.Minute),
		PricePerHour: 5_680_001, Quantity: 1.5, Unit: "Hours",
		Cost: money.Micros(5_680_001).ForDuration(90 * time.Minute), ListCost: money.Micros(32_772_800).ForDuration(90 * time.Minute),
		Provider: "aws", Region: "us-east-2", Zone: "us-east-2c", InstanceType: "p4d.24xlarge",
		Purchase: "spot", GPU: "A100", GPUs: 8, Instance: "i-0abc",
		JobID: "j-1", JobName: "bert, large", Attempt: 2, Team: "vision",
		Labels:     map[string]string{"project": "llm", "cost-center": "4711"},
		RecordedAt: t0.Add(91 * time.Minute),
	}
	for _, o := range opts {
		o(&e)
	}
	return e
}

func onDemand(e *Entry) {
	e.ID, e.Purchase, e.PricePerHour = "j-1/a3/i-0def/1", "on-demand", 32_772_800
	e.Instance, e.Attempt = "i-0def", 3
	e.Cost = e.ListCost
}

func reservedUse(e *Entry) {
	e.ID, e.Purchase, e.Reservation, e.PricePerHour = "j-2/a1/i-0res/1", "reserved", "cr-0123", 19_663_680
	e.Instance, e.JobID, e.JobName, e.Attempt, e.Team = "i-0res", "j-2", "resnet", 1, "nlp"
	e.Cost = money.Micros(19_663_680).ForDuration(90 * time.Minute)
}

func interrupted(e *Entry) { e.Interrupted = true }

// orphan is an instance no job owns.
func orphan(e *Entry) {
	e.ID, e.Kind, e.Category = "orphan/i-0orp", Overhead, OverheadOrphan
	e.Instance, e.Purchase, e.PricePerHour = "i-0orp", "on-demand", 32_772_800
	e.JobID, e.JobName, e.Attempt, e.Team, e.Labels = "", "", 0, "", nil
	e.Cost = e.ListCost
}

// reservedIdle is a reservation's hours no job used.
func idle(e *Entry) {
	e.ID, e.Kind, e.Category = "reserved-idle/cr-0123/1", Overhead, OverheadReservedIdle
	e.Purchase, e.Reservation, e.Instance, e.PricePerHour = "reserved", "cr-0123", "", 19_663_680
	e.JobID, e.JobName, e.Attempt, e.Team, e.Labels = "", "", 0, "", nil
	e.Cost = money.Micros(19_663_680).ForDuration(90 * time.Minute)
}

// transfer is a checkpoint of 12.5 GB carried to another region, charged
// once.
func transfer(e *Entry) {
	e.ID, e.Kind, e.Category = "j-1/a3/transfer/1", Transfer, "checkpoint"
	e.End, e.PricePerHour, e.Quantity, e.Unit = e.Start, 0, 12.5, "GB"
	e.Instance, e.InstanceType, e.Purchase, e.GPU, e.GPUs, e.Zone = "", "", "", "", 0, ""
	e.Cost, e.ListCost = 250_000, 250_000
}

// dataset is job j-1's input data, 500 GB in us-east-1, read by its
// third attempt in another region: egress at $0.02/GB, charged once.
func dataset(e *Entry) {
	transfer(e)
	e.ID, e.Category, e.Attempt = "j-1/a3/dataset", CategoryDataset, 3
	e.Region, e.Quantity = "us-east-1", 500
	e.Cost, e.ListCost = 10_000_000, 10_000_000
}

func storage(e *Entry) {
	transfer(e)
	e.ID, e.Kind, e.Unit, e.Quantity = "j-1/storage/1", Storage, "GB-Month", 0.25
	e.End = e.Start.Add(24 * time.Hour)
	e.Cost, e.ListCost = 5_750, 5_750
}

// reversed takes the entry back, recorded at.
func reversed(at time.Time) func(*Entry) {
	return func(e *Entry) { *e = e.Reversal(at) }
}

// acrossMonth moves the entry to run from 23:00 on the last day of March
// to 01:30 on April 1st.
func acrossMonth(e *Entry) {
	e.Start = time.Date(2031, 3, 31, 23, 0, 0, 0, time.UTC)
	e.End = e.Start.Add(150 * time.Minute)
	e.Quantity = 2.5
	e.Cost = e.PricePerHour.ForDuration(150 * time.Minute)
	e.ListCost = money.Micros(32_772_800).ForDuration(150 * time.Minute)
	e.RecordedAt = e.End
}
