package bidding

import (
	"math"
	"time"

	"github.com/spotwise/spotwise/money"
)

// DefaultCheckpointTime is assumed for a job that does not say how long
// its checkpoints take: the spec's job.DefaultCheckpointDuration.
const DefaultCheckpointTime = time.Minute

// Checkpointing is how a job saves its work, as far as cost is concerned.
type Checkpointing struct {
	// Disabled means the job cannot checkpoint: an interruption loses all
	// the work done on the offer.
	Disabled bool
	// Time is how long one checkpoint takes to write; the work pauses
	// meanwhile. Zero: DefaultCheckpointTime.
	Time time.Duration
	// Interval fixes the time between periodic checkpoints; zero takes the
	// Young/Daly optimum (CheckpointInterval) for the offer's rate.
	Interval time.Duration
	// SizeGB is the checkpoint's size: moved when a restart lands in
	// another region, and kept in storage while the job runs.
	SizeGB float64
	// StoragePerGBMonth is where the checkpoint is kept; zero:
	// ObjectStoragePerGBMonth.
	StoragePerGBMonth money.Micros
}

// RiskInput is a job on one offer, for ExpectedCost.
type RiskInput struct {
	Now time.Time
	// PricePerHour is the offer's price per instance-hour.
	PricePerHour money.Micros
	Nodes        int
	// Startup is billed time before the work runs (boot, image, moving a
	// checkpoint here); Runtime is the remaining work's wall time on this
	// offer without interruptions (Runtime()).
	Startup time.Duration
	Runtime time.Duration
	// Extra is paid once on top (moving a checkpoint here, say).
	Extra money.Micros
	// Egress is what the attempt on the offer pays to read the job's
	// input data into its region: paid once, and again by the restart
	// after each interruption (a new attempt reads the data again; the
	// restart is taken to pay what this one does).
	Egress money.Micros
	// InterruptionsPerHour is the offer's rate per instance-hour
	// (PriorRate, BlendRate, a provider's RiskReporter). Any one node's
	// interruption stops a multi-node job, so the job's rate is this times
	// Nodes.
	InterruptionsPerHour float64
	Checkpoint           Checkpointing
	// Changeover is the billed time an interruption costs before work
	// resumes: a replacement's boot and the restore. Zero: Startup.
	Changeover time.Duration
	// Provider and Region are where the offer is; RestartProvider and
	// RestartRegion where a restart is expected to land (empty: the same
	// region). A restart elsewhere moves the checkpoint (Transfer): its
	// time adds to the changeover and its price to the cost.
	Provider, Region               string
	RestartProvider, RestartRegion string
	// NoticeWindow is how long before taking the capacity back the
	// provider warns (2 minutes for AWS spot, 30 seconds for Azure and
	// GCP); zero: no warning. When the job's checkpoint fits in it, an
	// interruption loses no work, only the changeover: the checkpoint is
	// taken at the notice. When it does not fit, the work since the last
	// periodic checkpoint is lost.
	NoticeWindow time.Duration
}

// RiskEstimate is the expected cost and time to finish a job on an offer
// that may be taken away.
type RiskEstimate struct {
	// Estimate is the expectation: Runtime is the expected wall time of
	// the work (periodic checkpoints and work redone after interruptions
	// included), Cost the expected cost, Finish the expected finish.
	Estimate
	// Base is CostToFinish's estimate: no checkpoints, no interruptions.
	Base Estimate `json:"base"`
	// RiskCost is Cost - Base.Cost: what checkpoints, interruptions,
	// moved checkpoints and their storage are expected to add.
	RiskCost money.Micros `json:"risk_cost"`
	// Interval is the periodic checkpoint interval assumed (zero: the
	// job cannot checkpoint); Checkpoints how many periodic checkpoints
	// one uninterrupted run writes.
	Interval    time.Duration `json:"checkpoint_interval"`
	Checkpoints int           `json:"checkpoints"`
	// Rate is the job's interruption rate per hour (the offer's times the
	// nodes).
	Rate float64 `json:"interruptions_per_hour"`
	// Interruptions is the expected number of interruptions before the job
	// is done; PAny the probability of at least one.
	Interruptions float64 `json:"expected_interruptions"`
	PAny          float64 `json:"p_interruption"`
	// Loss is the expected billed time one interruption costs: work since
	// the last checkpoint, the changeover, the checkpoint's move.
	Loss time.Duration `json:"loss_per_interruption"`
	// SavedAtNotice: the checkpoint fits in the notice window, so an
	// interruption costs the changeover and no work. ShortNotice: the
	// offer warns, but less than the checkpoint takes, so an interruption
	// loses the work since the last periodic checkpoint.
	SavedAtNotice bool `json:"saved_at_notice"`
	ShortNotice   bool `json:"short_notice"`
	// Storage is the cost of keeping the checkpoint while the job runs;
	// Transfers the expected cost of moving it after interruptions.
	Storage   money.Micros `json:"storage"`
	Transfers money.Micros `json:"transfers"`
	// DataEgress is the expected cost of reading the job's input data:
	// RiskInput.Egress for the first attempt and for each restart.
	DataEgress money.Micros `json:"data_egress,omitempty"`
}

// ExpectedCost is the expected cost and time to finish a job on an offer,
// counting the risk of interruptions. The work is split into segments of
// Interval, each followed by a checkpoint write; an interruption loses the
// segment in progress and costs the changeover (and the checkpoint's move
// when the restart lands elsewhere). With interruptions a Poisson process
// of rate λ (the job's), a segment of length s is expected to take
// (1/λ + changeover) x (e^(λs) - 1) and to be interrupted e^(λs) - 1 times:
// the exact expectation of that model, which for small λs is the familiar
// λ x runtime interruptions each losing about half an interval plus the
// changeover. A rate of zero gives CostToFinish's estimate plus periodic
// checkpoint writes.
func ExpectedCost(in RiskInput) RiskEstimate {
	nodes := max(1, in.Nodes)
	base := CostToFinish(in.Now, in.PricePerHour, nodes, in.Startup, in.Runtime)
	rate := in.InterruptionsPerHour
	if !(rate > 0) {
		rate = 0
	}
	rate *= float64(nodes)
	ck := in.Checkpoint
	if ck.Time <= 0 {
		ck.Time = DefaultCheckpointTime
	}

	// Segments: k-1 full ones of interval + a write, then the rest.
	work := max(in.Runtime, 0)
	interval, write := work, time.Duration(0)
	if !ck.Disabled {
		interval = ck.Interval
		if interval <= 0 {
			interval = CheckpointInterval(ck.Time, rate)
		}
		write = ck.Time
	}
	k := int64(1)
	if work > 0 && interval < work {
		k = int64((work + interval - 1) / interval)
	}
	full := time.Duration(k-1) * interval
	last := work - full
	steady := addSat(addSat(full, durTimes(write, int(k-1))), last) // one uninterrupted run

	changeover := in.Changeover
	if changeover <= 0 {
		changeover = in.Startup
	}
	var moveCost money.Micros
	if to, toRegion := in.RestartProvider, in.RestartRegion; to != "" || toRegion != "" {
		if to == "" {
			to = in.Provider
		}
		var moveTime time.Duration
		moveTime, moveCost = Transfer(in.Provider, in.Region, to, toRegion, ck.SizeGB)
		changeover = addSat(changeover, moveTime)
	}

	out := RiskEstimate{Base: base, Rate: rate, Checkpoints: int(k - 1)}
	if !ck.Disabled {
		out.Interval = interval
	}
	expected := steady
	saved := !ck.Disabled && in.NoticeWindow > 0 && in.NoticeWindow >= ck.Time
	out.SavedAtNotice = saved
	out.ShortNotice = !ck.Disabled && in.NoticeWindow > 0 && !saved
	switch {
	case saved && rate > 0 && work > 0:
		// Checkpointed at each notice: no work is redone; each
		// interruption costs the checkpoint written in the window and
		// the changeover.
		out.Interruptions = rate * steady.Hours()
		out.PAny = -math.Expm1(-rate * steady.Hours())
		out.Loss = addSat(write, changeover)
		expected = addSat(steady, hoursDuration(out.Interruptions*out.Loss.Hours()))
		out.Transfers = scaleByFloat(moveCost, out.Interruptions)
	case rate > 0 && work > 0:
		// Hours as floats: these are expectations, rounded up to the
		// second once.
		d := changeover.Hours()
		seg := func(s time.Duration) (hours, fails float64) {
			f := math.Expm1(rate * s.Hours())
			return (1/rate + d) * f, f
		}
		h1, f1 := seg(interval + write)
		h2, f2 := seg(last)
		hours := float64(k-1)*h1 + h2
		out.Interruptions = float64(k-1)*f1 + f2
		out.PAny = -math.Expm1(-rate * steady.Hours())
		expected = hoursDuration(hours)
		if out.Interruptions > 0 {
			out.Loss = hoursDuration((hours - steady.Hours()) / out.Interruptions)
		}
		out.Transfers = scaleByFloat(moveCost, out.Interruptions)
	}
	out.DataEgress = addMicros(in.Egress, scaleByFloat(in.Egress, out.Interruptions))
	billed := addSat(in.Startup, expected)
	if !ck.Disabled {
		price := ck.StoragePerGBMonth
		if price == 0 {
			price = ObjectStoragePerGBMonth
		}
		out.Storage = StorageCost(price, ck.SizeGB, billed)
	}
	out.Estimate = Estimate{
		Startup: in.Startup,
		Runtime: expected,
		Cost:    addMicros(addMicros(addMicros(addMicros(in.PricePerHour.MulInt(nodes).ForDuration(billed), out.Transfers), out.Storage), in.Extra), out.DataEgress),
		Finish:  in.Now.Add(billed),
	}
	out.RiskCost = out.Cost - base.Cost - in.Extra - in.Egress
	return out
}

// hoursDuration turns expected hours into a duration rounded up to the
// second, saturating; NaN and infinity read as forever.
func hoursDuration(h float64) time.Duration {
	if math.IsNaN(h) || h >= float64(math.MaxInt64)/float64(time.Hour) {
		return math.MaxInt64
	}
	return ScaleDuration(time.Hour, max(h, 0))
}

// scaleByFloat multiplies an amount by an expectation (a count, not money),
// at a millionth's resolution, saturating.
func scaleByFloat(m money.Micros, f float64) money.Micros {
	if m == 0 || !(f > 0) {
		return 0
	}
	if f >= float64(math.MaxInt64)/float64(Whole) {
		return math.MaxInt64
	}
	return m.Scale(int64(math.Round(f*float64(Whole))), int64(Whole))
}

// addMicros adds two amounts, saturating.
func addMicros(a, b money.Micros) money.Micros {
	switch {
	case b > 0 && a > math.MaxInt64-b:
		return math.MaxInt64
	case b < 0 && a < math.MinInt64-b:
		return math.MinInt64
	}
	return a + b
}
