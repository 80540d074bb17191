package sim

import (
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/spotwise/spotwise/providers"
)

// Trace is a measured spot availability series of one zone, in the format
// of ../shared/traces (Wu et al., NSDI '24). Time maps onto it from
// Options.TraceEpoch, one sample per Step, starting over at its end.
type Trace struct {
	// Step is the time between two samples.
	Step time.Duration
	// Values are the samples: 1 (available) or 0 in a 1-node series, how
	// many of Nodes instances were available in an N-node one.
	Values []int
	// Nodes is the N of an N-node series; 0 counts as 1. The zone has spot
	// capacity while the value is at least Nodes; below it, every spot
	// instance of the zone gets a notice and its spot offers show none.
	Nodes int
}

// traceIndex answers questions about one zone's trace in constant time.
type traceIndex struct {
	epoch time.Time
	step  time.Duration
	out   []bool  // no capacity at this sample
	toOut []int32 // samples from i to the next one without capacity (0 if i is one), -1 if none
	toIn  []int32 // samples from i to the next one with capacity, -1 if none
	// perHour is the trace's rate of outages (capacity to none), per hour.
	perHour float64
}

func newTraceIndex(zone string, t Trace, epoch time.Time) (*traceIndex, error) {
	switch {
	case t.Step <= 0:
		return nil, fmt.Errorf("sim: trace of %s: step %s is not positive", zone, t.Step)
	case len(t.Values) == 0:
		return nil, fmt.Errorf("sim: trace of %s has no samples", zone)
	case t.Nodes < 0:
		return nil, fmt.Errorf("sim: trace of %s: nodes %d is negative", zone, t.Nodes)
	case len(t.Values) > math.MaxInt32:
		return nil, fmt.Errorf("sim: trace of %s has too many samples", zone)
	}
	need := max(t.Nodes, 1)
	n := len(t.Values)
	x := &traceIndex{epoch: epoch, step: t.Step, out: make([]bool, n), toOut: make([]int32, n), toIn: make([]int32, n)}
	outages := 0
	for i, v := range t.Values {
		if v < 0 {
			return nil, fmt.Errorf("sim: trace of %s: sample %d is negative", zone, i)
		}
		x.out[i] = v < need
	}
	for i := range n {
		if x.out[i] && !x.out[(i+n-1)%n] {
			outages++
		}
	}
	x.perHour = float64(outages) / (float64(n) * t.Step.Hours())
	// Distances to the next sample of each kind, around the cycle.
	distOut, distIn := int32(-1), int32(-1)
	for k := 2*n - 1; k >= 0; k-- {
		i := k % n
		distOut, distIn = next(distOut, x.out[i]), next(distIn, !x.out[i])
		if k < n {
			x.toOut[i], x.toIn[i] = distOut, distIn
		}
	}
	return x, nil
}

// next steps a backward scan's distance to the nearest sample matching.
func next(dist int32, match bool) int32 {
	switch {
	case match:
		return 0
	case dist >= 0:
		return dist + 1
	default:
		return -1
	}
}

// sample is the number of the sample t falls in, counted from the epoch
// (not wrapped), and its index in the series.
func (x *traceIndex) sample(t time.Time) (abs int64, i int) {
	d, s := t.UnixNano()-x.epoch.UnixNano(), int64(x.step)
	abs = d / s
	if d%s < 0 {
		abs--
	}
	n := int64(len(x.out))
	return abs, int(((abs % n) + n) % n)
}

func (x *traceIndex) start(abs int64) time.Time { return x.epoch.Add(time.Duration(abs) * x.step) }

// outAt reports whether the zone has no spot capacity at t.
func (x *traceIndex) outAt(t time.Time) bool {
	_, i := x.sample(t)
	return x.out[i]
}

// firstOutage is the first time at or after from when the zone has no
// capacity.
func (x *traceIndex) firstOutage(from time.Time) (time.Time, bool) {
	abs, i := x.sample(from)
	switch d := x.toOut[i]; {
	case d == 0:
		return from, true
	case d > 0:
		return x.start(abs + int64(d)), true
	}
	return time.Time{}, false
}

// nextChange is when the zone's capacity next comes or goes after t.
func (x *traceIndex) nextChange(t time.Time) (time.Time, bool) {
	abs, i := x.sample(t)
	d := x.toOut[i]
	if x.out[i] {
		d = x.toIn[i]
	}
	if d < 0 {
		return time.Time{}, false
	}
	return x.start(abs + int64(d)), true
}

// traceFile is the JSON of one trace file.
type traceFile struct {
	Metadata struct {
		GapSeconds float64 `json:"gap_seconds"`
	} `json:"metadata"`
	Data []float64 `json:"data"`
}

// nodeDir is a directory named for the node count of its traces.
var nodeDir = regexp.MustCompile(`^([0-9]+)-node$`)

// LoadTraces reads availability traces in the ../shared/traces JSON format
// from files and directories (every *.json file directly in them), keyed by
// zone: the part of the file name before the first "_" of
// "<zone>_<gpu>_<n>.json". A trace's Nodes comes from the nearest enclosing
// directory named "<N>-node", else from its largest sample. Two traces of
// one zone are an error: pass the files to use.
func LoadTraces(paths ...string) (map[string]Trace, error) {
	out := map[string]Trace{}
	from := map[string]string{}
	for _, p := range paths {
		files, err := traceFiles(p)
		if err != nil {
			return nil, err
		}
		for _, f := range files {
			zone, _, _ := strings.Cut(strings.TrimSuffix(filepath.Base(f), ".json"), "_")
			if zone == "" {
				return nil, fmt.Errorf("loading trace %s: no zone in the file name (want <zone>_<gpu>_<n>.json)", f)
			}
			if prev, dup := from[zone]; dup {
				return nil, fmt.Errorf("loading trace %s: zone %s has a trace already (%s); pass the files to use", f, zone, prev)
			}
			t, err := readTrace(f)
			if err != nil {
				return nil, err
			}
			out[zone], from[zone] = t, f
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("loading traces: none in %s", strings.Join(paths, ", "))
	}
	return out, nil
}

func traceFiles(p string) ([]string, error) {
	fi, err := os.Stat(p)
	if err != nil {
		return nil, fmt.Errorf("loading traces: %w", err)
	}
	if !fi.IsDir() {
		return []string{p}, nil
	}
	entries, err := os.ReadDir(p)
	if err != nil {
		return nil, fmt.Errorf("loading traces: %w", err)
	}
	var files []string
	for _, e := range entries {
		if !e.IsDir() && strings.HasSuffix(e.Name(), ".json") {
			files = append(files, filepath.Join(p, e.Name()))
		}
	}
	slices.Sort(files)
	return files, nil
}

func readTrace(f string) (Trace, error) {
	b, err := os.ReadFile(f)
	if err != nil {
		return Trace{}, fmt.Errorf("loading trace: %w", err)
	}
	var tf traceFile
	if err := json.Unmarshal(b, &tf); err != nil {
		return Trace{}, fmt.Errorf("loading trace %s: %w", f, err)
	}
	step := time.Duration(tf.Metadata.GapSeconds * float64(time.Second))
	if step <= 0 || len(tf.Data) == 0 {
		return Trace{}, fmt.Errorf("loading trace %s: want a positive metadata.gap_seconds and samples in data", f)
	}
	t := Trace{Step: step, Values: make([]int, len(tf.Data))}
	top := 1
	for i, v := range tf.Data {
		if v < 0 || v != math.Trunc(v) || v > math.MaxInt32 {
			return Trace{}, fmt.Errorf("loading trace %s: sample %d (%v) is not a count", f, i, v)
		}
		t.Values[i] = int(v)
		top = max(top, int(v))
	}
	t.Nodes = top
	if abs, err := filepath.Abs(f); err == nil {
		for dir := filepath.Dir(abs); dir != filepath.Dir(dir); dir = filepath.Dir(dir) {
			if m := nodeDir.FindStringSubmatch(filepath.Base(dir)); m != nil {
				if n, err := strconv.Atoi(m[1]); err == nil && n > 0 {
					t.Nodes = n
				}
				break
			}
		}
	}
	return t, nil
}

// indexTraces indexes the traces of the zones the cloud sells in.
func (c *Cloud) indexTraces(traces map[string]Trace, epochAt time.Time) error {
	if epochAt.IsZero() {
		epochAt = epoch
	}
	zones := slices.Sorted(maps.Keys(traces))
	for _, zone := range zones {
		if _, ok := c.byZone[zone]; !ok {
			c.log.Warn("trace of a zone the cloud does not sell in ignored", zap.String("zone", zone))
			continue
		}
		x, err := newTraceIndex(zone, traces[zone], epochAt)
		if err != nil {
			return err
		}
		c.traces[zone] = x
	}
	return nil
}

// refreshTracesLocked opens or closes the spot offers of traced zones
// whose capacity came or went.
func (c *Cloud) refreshTracesLocked(now time.Time) {
	for zone, x := range c.traces {
		out := x.outAt(now)
		if out == c.zoneOut[zone] {
			continue
		}
		c.zoneOut[zone] = out
		for _, o := range c.byZone[zone] {
			if o.static.Purchase == providers.Spot {
				o.outage = out
				c.dirty[o.region] = true
			}
		}
		c.log.Info("traced zone capacity changed", zap.String("zone", zone), zap.Bool("spot_capacity", !out))
	}
}
