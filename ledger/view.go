package ledger

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"math"
	"strings"
	"sync"
	"time"
	"unsafe"

	"go.uber.org/zap"

	"github.com/spotwise/spotwise/events"
	"github.com/spotwise/spotwise/money"
)

// View is every server's copy of the ledger, kept current by following its
// stream: the charges, compactly, for the cost reports, each team's spend
// per calendar month for its budget, and running totals for the metrics;
// each job's total only when asked for (KeepJobTotals: the server has no
// use for it, and with a million finished jobs it would cost tens of MB).
//
// A million finished jobs leave millions of charges, so the view does not
// keep them as structs: each is encoded once into an append-only arena of
// byte chunks (about eighty bytes a charge: its ID, the job and instance
// as parts of the ID where they are, times and money as varints, its
// dimensions as an index into the few distinct sets), and Each decodes
// them one at a time. With SpillTo, every full chunk is written to a file
// of the view's own and dropped from memory (the chunk being filled
// stays), and Each reads the chunks back one at a time: the charges cost
// disk, not memory.
type View struct {
	log *zap.Logger

	mu      sync.RWMutex
	chunks  [][]byte // nil once spilled
	rows    int
	spill   *spillFile
	dims    []*Dims
	dimsIx  map[*Dims]uint32
	months  map[teamMonth]money.Micros
	totals  map[SpendKey]money.Micros
	owed    map[SpendKey]money.Micros
	byJob   map[string]money.Micros // nil unless KeepJobTotals
	garbled int
	taken   seqSet // the sequences of the jobs' charges taken
	ready   chan struct{}
	scratch []byte
}

// Row is one entry as the view hands it out (its job's name, labels and
// interruption are not kept).
type Row struct {
	ID       string
	Reverses string
	Instance string
	Start    time.Time
	End      time.Time
	Price    money.Micros
	Cost     money.Micros
	ListCost money.Micros
	Quantity float64
	Attempt  int
	Recorded time.Time
	JobID    string
	*Dims
}

// Dims are the dimensions an entry is reported by, shared between the
// entries that have the same: there are as many sets as teams times the
// kinds of capacity they use, not one per job.
type Dims struct {
	Kind         Kind
	Category     string
	Unit         string
	Provider     string
	Region       string
	Zone         string
	InstanceType string
	Purchase     string
	GPU          string
	GPUs         int
	Reservation  string
	Team         string
}

// SpendKey is what the spend metric is labelled by.
type SpendKey struct{ Team, Provider, Purchase string }

type teamMonth struct {
	team  string
	month int64 // Unix seconds of the month's first instant, UTC
}

// NewView returns an empty view; Follow fills it.
func NewView(log *zap.Logger) *View {
	return &View{log: log, months: map[teamMonth]money.Micros{}, totals: map[SpendKey]money.Micros{}, owed: map[SpendKey]money.Micros{},
		dimsIx: map[*Dims]uint32{}, ready: make(chan struct{})}
}

// KeepJobTotals makes the view keep each job's total for JobTotal; call it
// before Follow or Add. It returns v.
func (v *View) KeepJobTotals() *View {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.byJob == nil {
		v.byJob = map[string]money.Micros{}
	}
	return v
}

// Follow reads the ledger into the view and keeps it current until stop;
// Ready is closed once what was stored when it started is in.
func (v *View) Follow(ctx context.Context, bus *events.Bus) (stop func(), err error) {
	var once sync.Once
	return bus.FollowLedger(ctx, v.take, func() { once.Do(func() { close(v.ready) }) })
}

// Ready is closed once the view holds the whole ledger as it was when
// Follow started.
func (v *View) Ready() <-chan struct{} { return v.ready }

// Garbled counts stored entries the view could not read.
func (v *View) Garbled() int {
	v.mu.RLock()
	defer v.mu.RUnlock()
	return v.garbled
}

// take reads one stored message into the view: a charge, or a seal of a
// job's charges. A charge is taken once by the sequence it was first
// stored at, whether the view saw it on the job's subject, sealed, or
// sealed twice (a crash between a seal and the purge that follows it).
func (v *View) take(m events.LedgerMsg) {
	if !events.IsLedgerSealed(m.Subject) {
		if events.LedgerJobID(m.Subject) != "" && !v.takeSeq(m.Seq) {
			return
		}
		v.takeEntry(m.Subject, m.Seq, m.Data)
		return
	}
	s, err := decodeSeal(m.Data, m.Seq)
	if err != nil {
		v.mu.Lock()
		v.garbled++
		v.mu.Unlock()
		v.log.Warn("skipping a garbled ledger seal", zap.String("subject", m.Subject), zap.Uint64("seq", m.Seq), zap.Error(err))
		return
	}
	for _, c := range s.Charges {
		if v.takeSeq(c.Seq) {
			v.takeEntry(m.Subject, c.Seq, c.Entry)
		}
	}
}

// takeSeq marks the charge first stored at seq as taken; false if it was.
func (v *View) takeSeq(seq uint64) bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.taken.set(seq)
}

func (v *View) takeEntry(subject string, seq uint64, data []byte) {
	var e Entry
	err := json.Unmarshal(data, &e)
	if err == nil {
		err = e.Check()
	}
	if err != nil {
		v.mu.Lock()
		v.garbled++
		v.mu.Unlock()
		v.log.Warn("skipping a garbled ledger entry", zap.String("subject", subject), zap.Uint64("seq", seq), zap.Error(err))
		return
	}
	v.Add(e)
}

// seqSet is a set of stream sequences, a bit each, in blocks of 65,536
// allocated as sequences reach them: ten million charges cost 1.2 MB.
// Every sequence added is one the stream has reached (a seal's charges
// come before the seal: decodeSeal).
type seqSet struct{ blocks []*[1024]uint64 }

// set adds seq and reports whether it was not in the set.
func (s *seqSet) set(seq uint64) bool {
	b, i := int(seq>>16), seq&0xffff
	if b >= len(s.blocks) {
		s.blocks = append(s.blocks, make([]*[1024]uint64, b+1-len(s.blocks))...)
	}
	if s.blocks[b] == nil {
		s.blocks[b] = new([1024]uint64)
	}
	w, bit := &s.blocks[b][i>>6], uint64(1)<<(i&63)
	if *w&bit != 0 {
		return false
	}
	*w |= bit
	return true
}

var dimsCache sync.Map // Dims -> *Dims

// DimsOf are an entry's dimensions: one copy of each set, shared by every
// row and report that has it.
func DimsOf(e *Entry) *Dims {
	d := Dims{Kind: e.Kind, Category: e.Category, Unit: e.Unit, Provider: e.Provider, Region: e.Region, Zone: e.Zone,
		InstanceType: e.InstanceType, Purchase: e.Purchase, GPU: e.GPU, GPUs: e.GPUs, Reservation: e.Reservation, Team: e.Team}
	if dp, ok := dimsCache.Load(d); ok {
		return dp.(*Dims)
	}
	// Kept, the strings are copied out of the entry they came from.
	for _, f := range []*string{&d.Category, &d.Unit, &d.Provider, &d.Region, &d.Zone, &d.InstanceType, &d.Purchase, &d.GPU, &d.Reservation, &d.Team} {
		*f = strings.Clone(*f)
	}
	d.Kind = Kind(strings.Clone(string(d.Kind)))
	dp, _ := dimsCache.LoadOrStore(d, &d)
	return dp.(*Dims)
}

// Add takes one entry into the view (Follow calls it for each stored one).
func (v *View) Add(e Entry) {
	dims := DimsOf(&e)
	start, end := e.Start.UTC(), e.End.UTC()
	v.mu.Lock()
	defer v.mu.Unlock()
	v.store(&e, dims)
	// The totals only grow: a reversal is owed, and taken from the next
	// charge of the same key (which a reversal's new version is).
	k := SpendKey{dims.Team, dims.Provider, dims.Purchase}
	if e.Cost < 0 {
		v.owed[k] -= e.Cost
	} else {
		pay := min(e.Cost, v.owed[k])
		v.owed[k] -= pay
		v.totals[k] += e.Cost - pay
	}
	if e.JobID != "" && v.byJob != nil {
		if _, ok := v.byJob[e.JobID]; !ok {
			e.JobID = strings.Clone(e.JobID)
		}
		v.byJob[e.JobID] += e.Cost
	}
	// The row's cost by calendar month, cut exactly at month edges.
	r := Row{Start: start, End: end, Price: e.PricePerHour, Cost: e.Cost}
	for lo := start; ; {
		ms := monthStart(lo)
		hi := ms.AddDate(0, 1, 0)
		v.months[teamMonth{dims.Team, ms.Unix()}] += r.CostUpTo(hi) - r.CostUpTo(lo)
		if !hi.Before(end) {
			break
		}
		lo = hi
	}
}

// chunkSize is the arena's unit: rows are never split between chunks.
const chunkSize = 1 << 20

// Row encoding flags.
const (
	jobInID        = 1 << iota // the job's ID is the entry ID's first part
	jobInline                  // the job's ID follows
	instanceInID               // the instance is a part of the entry ID
	instanceInline             // the instance follows
	reversesID                 // Reverses is the ID less its "~r"
	reversesInline             // Reverses follows
)

// store appends e to the arena, under v.mu.
func (v *View) store(e *Entry, dims *Dims) {
	di, ok := v.dimsIx[dims]
	if !ok {
		di = uint32(len(v.dims))
		v.dims = append(v.dims, dims)
		v.dimsIx[dims] = di
	}
	var flags byte
	b := append(v.scratch[:0], 0)
	b = appendString(b, e.ID)
	switch {
	case e.JobID == "":
	case strings.HasPrefix(e.ID, e.JobID):
		flags |= jobInID
		b = binary.AppendUvarint(b, uint64(len(e.JobID)))
	default:
		flags |= jobInline
		b = appendString(b, e.JobID)
	}
	if e.Instance != "" {
		if i := strings.Index(e.ID, e.Instance); i >= 0 {
			flags |= instanceInID
			b = binary.AppendUvarint(b, uint64(i))
			b = binary.AppendUvarint(b, uint64(len(e.Instance)))
		} else {
			flags |= instanceInline
			b = appendString(b, e.Instance)
		}
	}
	switch {
	case e.Reverses == "":
	case e.ID == e.Reverses+"~r":
		flags |= reversesID
	default:
		flags |= reversesInline
		b = appendString(b, e.Reverses)
	}
	b[0] = flags
	b = appendTime(b, e.Start)
	b = binary.AppendUvarint(b, uint64(e.End.Sub(e.Start))) // Check: 0 <= End-Start <= 10 years
	b = appendTime(b, e.RecordedAt)
	b = binary.AppendVarint(b, int64(e.PricePerHour))
	b = binary.AppendVarint(b, int64(e.Cost))
	b = binary.AppendVarint(b, int64(e.ListCost))
	b = binary.LittleEndian.AppendUint64(b, math.Float64bits(e.Quantity))
	b = binary.AppendVarint(b, int64(e.Attempt))
	b = binary.AppendUvarint(b, uint64(di))
	v.scratch = b

	last := len(v.chunks) - 1
	if last < 0 || len(v.chunks[last])+len(b) > cap(v.chunks[last]) {
		if last >= 0 && v.spill != nil && !v.spill.stopped {
			v.spillChunk(last)
		}
		v.chunks = append(v.chunks, make([]byte, 0, max(chunkSize, len(b))))
		last++
	}
	v.chunks[last] = append(v.chunks[last], b...)
	v.rows++
}

func appendString(b []byte, s string) []byte {
	return append(binary.AppendUvarint(b, uint64(len(s))), s...)
}

func appendTime(b []byte, t time.Time) []byte {
	return binary.AppendUvarint(binary.AppendVarint(b, t.Unix()), uint64(t.Nanosecond()))
}

// decode reads the row that starts b into r and returns its length. The
// arena is v's own encoding: it is not checked again.
func (v *View) decode(b []byte, r *Row) int {
	at := 1
	uvarint := func() uint64 {
		x, n := binary.Uvarint(b[at:])
		at += n
		return x
	}
	varint := func() int64 {
		x, n := binary.Varint(b[at:])
		at += n
		return x
	}
	str := func(n int) string {
		s := unsafe.String(unsafe.SliceData(b[at:]), n)
		at += n
		return s
	}
	tm := func() time.Time {
		sec := varint()
		return time.Unix(sec, int64(uvarint())).UTC()
	}
	flags := b[0]
	r.ID = str(int(uvarint()))
	r.JobID, r.Instance, r.Reverses = "", "", ""
	switch {
	case flags&jobInID != 0:
		r.JobID = r.ID[:uvarint()]
	case flags&jobInline != 0:
		r.JobID = str(int(uvarint()))
	}
	switch {
	case flags&instanceInID != 0:
		i := uvarint()
		r.Instance = r.ID[i : i+uvarint()]
	case flags&instanceInline != 0:
		r.Instance = str(int(uvarint()))
	}
	switch {
	case flags&reversesID != 0:
		r.Reverses = r.ID[:len(r.ID)-len("~r")]
	case flags&reversesInline != 0:
		r.Reverses = str(int(uvarint()))
	}
	r.Start = tm()
	r.End = r.Start.Add(time.Duration(uvarint()))
	r.Recorded = tm()
	r.Price = money.Micros(varint())
	r.Cost = money.Micros(varint())
	r.ListCost = money.Micros(varint())
	r.Quantity = math.Float64frombits(binary.LittleEndian.Uint64(b[at:]))
	at += 8
	r.Attempt = int(varint())
	r.Dims = v.dims[uvarint()]
	return at
}

// CostUpTo is what the row bills from its start up to t: its price for
// the time up to t, capped by its cost, and all of its cost from its end.
// Cutting a row at edges by differences of CostUpTo telescopes to its cost
// exactly; a reversal cuts as what it reverses, negated.
func (r *Row) CostUpTo(t time.Time) money.Micros {
	switch {
	case !t.After(r.Start):
		return 0 // a one-off charge too: it counts from just after it
	case !t.Before(r.End):
		return r.Cost
	}
	c := r.Price.ForDuration(t.Sub(r.Start))
	if r.Cost < 0 {
		return -min(c, -r.Cost)
	}
	return min(c, r.Cost)
}

func monthStart(t time.Time) time.Time {
	t = t.UTC()
	return time.Date(t.Year(), t.Month(), 1, 0, 0, 0, 0, time.UTC)
}

// MonthSpend is what team's charges cost in the calendar month (UTC) that
// holds t.
func (v *View) MonthSpend(team string, t time.Time) money.Micros {
	v.mu.RLock()
	defer v.mu.RUnlock()
	return v.months[teamMonth{team, monthStart(t).Unix()}]
}

// Totals are the spend so far per team, provider and purchase option, as
// a counter: they never go down (a reversal is taken from the next charge
// of its key, its new version), so a reader never sees a dip between a
// reversal and the charge that replaces it.
func (v *View) Totals() map[SpendKey]money.Micros {
	v.mu.RLock()
	defer v.mu.RUnlock()
	out := make(map[SpendKey]money.Micros, len(v.totals))
	for k, c := range v.totals {
		out[k] = c
	}
	return out
}

// JobTotal is what the ledger bills a job so far: the sum of its entries.
// It panics unless the view keeps job totals (KeepJobTotals).
func (v *View) JobTotal(jobID string) money.Micros {
	v.mu.RLock()
	defer v.mu.RUnlock()
	if v.byJob == nil {
		panic("ledger: JobTotal of a view that does not keep job totals (KeepJobTotals)")
	}
	return v.byJob[jobID]
}

// Each calls fn, under the view's read lock, with every row that bills
// something in [from, to) (a one-off charge: made then), until fn returns
// false. The row and its strings are fn's only for the call: a spilled
// chunk is read into a buffer the next chunk overwrites, so fn clones
// what it keeps (Entry does).
func (v *View) Each(from, to time.Time, fn func(*Row) bool) {
	v.mu.RLock()
	defer v.mu.RUnlock()
	var r Row
	var buf []byte
	for i, c := range v.chunks {
		if c == nil {
			if buf == nil {
				buf = spillBuffers.Get().([]byte)
				defer spillBuffers.Put(buf)
			}
			var err error
			if c, err = v.spill.read(i, buf); err != nil {
				// The view's own file: the report goes on without the
				// chunk, said loudly.
				v.log.Error("reading the ledger view's spilled charges", zap.Int("chunk", i), zap.Error(err))
				continue
			}
		}
		for at := 0; at < len(c); {
			at += v.decode(c[at:], &r)
			if r.End.Equal(r.Start) {
				if r.Start.Before(from) || !r.Start.Before(to) {
					continue
				}
			} else if !r.End.After(from) || !r.Start.Before(to) {
				continue
			}
			if !fn(&r) {
				return
			}
		}
	}
}

// Len is how many rows the view holds.
func (v *View) Len() int {
	v.mu.RLock()
	defer v.mu.RUnlock()
	return v.rows
}

// Entry is the row as an entry (its job's name and labels are not kept).
func (r *Row) Entry() Entry {
	id := strings.Clone(r.ID)
	r = &Row{ID: id, Reverses: clonePart(id, r.ID, r.Reverses), Instance: clonePart(id, r.ID, r.Instance), JobID: clonePart(id, r.ID, r.JobID),
		Start: r.Start, End: r.End, Price: r.Price, Cost: r.Cost, ListCost: r.ListCost, Quantity: r.Quantity, Attempt: r.Attempt,
		Recorded: r.Recorded, Dims: r.Dims}
	return Entry{ID: r.ID, Kind: r.Kind, Category: r.Category, Reverses: r.Reverses, Start: r.Start, End: r.End,
		PricePerHour: r.Price, Quantity: r.Quantity, Unit: r.Unit, Cost: r.Cost, ListCost: r.ListCost,
		Provider: r.Provider, Region: r.Region, Zone: r.Zone, InstanceType: r.InstanceType, Purchase: r.Purchase,
		GPU: r.GPU, GPUs: r.GPUs, Instance: r.Instance, Reservation: r.Reservation, JobID: r.JobID, Attempt: r.Attempt, Team: r.Team,
		RecordedAt: r.Recorded}
}

// clonePart is part, a string of a row read from the arena, as a string
// that outlives the read: a substring of the row's ID (from, cloned as id)
// where it is one, else a copy.
func clonePart(id, from, part string) string {
	if part == "" {
		return ""
	}
	if i := strings.Index(from, part); i >= 0 {
		return id[i : i+len(part)]
	}
	return strings.Clone(part)
}
